"""`bench --history FILE --local`: check the flags, replay the history's mix (bench/history_replay.py), print
each step beside what `advise` predicts for this setup on this machine."""

from __future__ import annotations

import json
import os
from pathlib import Path

from n8n_sizer.errors import InputError

MAX_SCALES = 12


def parse_scales(text: str) -> list[float]:
    from n8n_sizer.safety.numbers import Range, check_number

    scales = []
    for item in (text or "").split(","):
        try:
            value = float(item)
        except ValueError:
            raise InputError(f"--scales {text!r}: {item!r} is not a number; try --scales 1,2,4") from None
        scales.append(check_number("--scales", value, Range(0, 1000, low_open=True, example="1,2,4")))
    if not scales or len(scales) > MAX_SCALES:
        raise InputError(f"--scales takes 1 to {MAX_SCALES} factors of the measured rates, e.g. --scales 1,2,4")
    return scales


def refuse_others(local: bool, given: dict[str, bool]) -> None:
    """--history replays a mix on this machine: the flags of another kind of run are refused, one line."""
    if not local:
        raise InputError("--history replays the mix on this machine: add --local (a fleet replay is not built yet)")
    clash = [flag for flag, on in given.items() if on]
    if clash:
        raise InputError(
            f"--history replays the history's own workflows at their own rates, so {', '.join(clash)} would be "
            "ignored; drop it (--scales multiplies the rates)"
        )


def run_history_replay(
    history_path: Path,
    setup,
    scales_text: str,
    step_s: float,
    out: Path,
    json_out: bool,
    timeout_s: float,
    max_in_flight: int,
) -> None:
    from n8n_sizer.bench.history_replay import run_history_bench
    from n8n_sizer.cli.bench_view import bench_progress
    from n8n_sizer.history.file import load_history
    from n8n_sizer.safety.numbers import Range, check_number

    scales = parse_scales(scales_text)
    check_number("--step-seconds", step_s, Range(5, 3600, example="60"))
    history = load_history(history_path)
    with bench_progress(enabled=not json_out) as progress:
        say = (lambda what, done: progress("history", what, done)) if progress is not None else None
        summary = run_history_bench(
            history,
            setup,
            scales,
            step_s,
            out,
            timeout_s=timeout_s,
            max_in_flight=max_in_flight,
            progress=say,
            source=str(history_path),
        )
    predicted = predicted_capacity(history, setup)
    if json_out:
        print(json.dumps({**summary.model_dump(mode="json"), "predicted": predicted}, indent=2))
        return
    print(
        f"run {summary.run_id} in {summary.folder}: the mix of {history_path} on {setup.mode} "
        f"{'' if setup.mode == 'regular' else f'{setup.workers} worker(s) '}on this machine"
    )
    from n8n_sizer.cli.text import table

    rows = [
        [
            f"x{s.scale:g}",
            f"{s.offered_per_s:.2f}",
            f"{s.answered_per_s:.2f}",
            "-" if s.finished_per_s is None else f"{s.finished_per_s:.2f}",
            str(s.ok),
            str(s.failed),
            "-" if s.p95_ms is None else f"{s.p95_ms:,.0f}",
        ]
        for s in summary.steps
    ]
    for line in table(rows, ["scale", "offered/s", "answered/s", "n8n finished/s", "ok", "failed", "p95 ms"]):
        print("  " + line)
    print(
        f"  advise predicts {predicted['capacity_per_s']:.1f}/s for this mix on this setup with {predicted['vcpu']} "
        f"vCPU at the reference speed (bound: {predicted['bound']}); this machine's speed differs, compare ratios "
        "(benchmarks/history_mix.py)"
    )


def predicted_capacity(history, setup) -> dict:
    """What the model says of this mix on this setup, on this machine's cores at the reference host's speed."""
    from n8n_sizer.advisor.capacity import HostShape
    from n8n_sizer.advisor.engine import build_advisor
    from n8n_sizer.advisor.mix import size_mix
    from n8n_sizer.history.mix_input import mix_entries

    advisor = build_advisor(None)
    mix_in = mix_entries(history, mode=setup.mode)
    mix = size_mix(
        list(mix_in.entries),
        advisor.model,
        advisor.ram.held_mb_per_execution,
        mix_in.burst_per_s,
        mix_in.p99_second_per_s,
    )
    host = HostShape(vcpu=float(os.cpu_count() or 1), arch="x86", host_class=advisor.model.reference_class)
    return {
        "capacity_per_s": advisor.model.throughput_at(mix.profile, setup, host),
        "bound": advisor.model.binding_bound(mix.profile, setup, host).name,
        "vcpu": host.vcpu,
        "rate_per_s": mix.rate_per_s,
    }
