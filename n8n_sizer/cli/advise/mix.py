"""`advise --history FILE` and `advise --from-n8n URL`: the instance's mix of workflows, sized as one.

The history (a file, or read from the instance now) becomes a mix of profiles at their own rates
(history/mix_input.py); the advisor blends them (advisor/mix.py) and answers for the blend at the total rate, the
same answer as for one workflow (one host of --vcpu first, then the ways past it). The instance's busiest minute
becomes the answer's burst (`--burst` for 60 s) unless `--burst` is given. `--scale 3` and `--scale NAME=5` ask
what if the load grew. The text opens with the table of workflows and their share of the load.
"""

from __future__ import annotations

import dataclasses

from n8n_sizer.errors import InputError

BURST_MIN_MULTIPLE = 1.05  # a busiest minute within 5% of the mean is no burst


def check_history_options(o) -> None:
    """--history and --from-n8n replace the rate and the workload; the flags they replace are refused."""
    given = o.history is not None or o.from_n8n is not None
    if not given:
        extra = [f for f, v in (("--scale", o.scale), ("--since", o.since), ("--until", o.until)) if v]
        extra += ["--api-key-file"] if o.api_key_file is not None else []
        if extra:
            raise InputError(
                f"{', '.join(extra)} belong to a history; pass --history FILE or --from-n8n URL with them, or drop them"
            )
        return
    if o.history is not None and o.from_n8n is not None:
        raise InputError("--history FILE and --from-n8n URL are two sources of the same history; keep one")
    source = "--history" if o.history is not None else "--from-n8n"
    if o.history is not None and (o.since or o.until or o.api_key_file is not None):
        raise InputError(
            "--since, --until and --api-key-file read an instance (--from-n8n URL); a --history file has its window"
        )
    clash = [
        f
        for f, v in (
            ("--rps", o.rps),
            ("--workload", o.workload),
            ("--cpu-ms", o.cpu_ms),
            ("--wait-ms", o.wait_ms),
            ("--workflow", o.workflow),
            ("--topology", o.topology),
        )
        if v is not None
    ] + (["--validate"] if o.validate else [])
    if clash:
        raise InputError(
            f"{source} gives the rates and the workflows, so {', '.join(clash)} would be ignored; drop "
            f"{'it' if len(clash) == 1 else 'them'} (ask what-if with --scale 3 or --scale NAME=5)"
        )


def mix_options(o):
    """(options with the history's total rate and burst filled in, the `MixInput`, the `History`)."""
    from n8n_sizer.history.mix_input import mix_entries

    check_history_options(o)
    if o.history is not None:
        from n8n_sizer.history.file import load_history

        history = load_history(o.history)
    else:
        from n8n_sizer.cli.history import read_instance

        history = read_instance(o.from_n8n, o.api_key_file, o.since, o.until, flag="--from-n8n")
    mix_in = mix_entries(history, o.scale)
    rate = sum(e.rate_per_s for e in mix_in.entries)
    if rate <= 0:
        raise InputError(
            f"{'--history ' + str(o.history) if o.history else '--from-n8n ' + o.from_n8n}: no execution in the "
            "history's window, so nothing to size; read a window with executions (--since 14d)"
        )
    changes: dict = {"rps": float(f"{rate:.4g}")}  # four figures: what the history can tell apart
    multiple = mix_in.burst_per_s / rate
    if o.burst is None and o.burst_seconds is None and multiple >= BURST_MIN_MULTIPLE:
        changes.update(burst=round(multiple, 3), burst_seconds=60.0)
    return dataclasses.replace(o, **changes), mix_in, history


def size_history_mix(mix_in, advisor):
    """The advisor's sizing of the mix (`MixSizing`): its blended profile is what the answer is asked for."""
    from n8n_sizer.advisor.mix import size_mix

    return size_mix(
        list(mix_in.entries),
        advisor.model,
        advisor.ram.held_mb_per_execution,
        mix_in.burst_per_s,
        mix_in.p99_second_per_s,
    )


def requeued(history, o, advisor):
    """The mix priced from the queue-mode figures (for a queue-mode answer, as `--workflow` does)."""
    from n8n_sizer.history.mix_input import mix_entries

    return size_history_mix(mix_entries(history, o.scale, mode="queue"), advisor)


def mix_json(mix, mix_in, history, source: str) -> dict:
    r = history.read
    return {
        "source": source,
        "window": {"start_s": r.window_start_s, "end_s": r.window_end_s, "seconds": r.window_end_s - r.window_start_s},
        "anonymised": history.anonymised,
        **mix.model_dump(mode="json", exclude={"profile"}),
        "blend": mix.profile.model_dump(mode="json"),
        "notes": [*history.notes, *mix_in.notes],
    }


def print_mix(mix, mix_in, history, source: str) -> None:
    from n8n_sizer.cli.text import table
    from n8n_sizer.history.window import span_text

    r = history.read
    print(
        f"# the mix: {mix.workflows} workflow(s) from {source}, over {span_text(r.window_end_s - r.window_start_s)}"
        + (" (anonymised)" if history.anonymised else "")
    )
    rows = [
        [
            row.name[:44],
            row.trigger[:28],
            f"{row.rate_per_s:.3g}",
            f"{row.burst_per_s:.3g}",
            f"{row.cpu_ms:,.0f}",
            f"{row.wait_ms:,.0f}",
            f"{row.in_flight:.2f}",
            f"{row.cpu_share:.0%}",
        ]
        for row in mix.rows
    ]
    head = ["workflow", "trigger", "rate/s", "busiest min/s", "CPU ms", "wait ms", "in flight", "CPU share"]
    for line in table(rows, head):
        print("  " + line)
    print(
        f"  total: {mix.rate_per_s:.3g}/s on average, busiest minute {mix.burst_per_s:.3g}/s, 99th-percentile "
        f"second {mix.p99_second_per_s:.3g}/s; {mix.in_flight:.2f} in flight (Little's law), about "
        f"{mix.memory_mb:,.0f} MB held by them; the blend: {mix.cpu_ms:,.0f} ms CPU and "
        f"{mix.profile.wait_ms:,.0f} ms waiting per execution"
    )
    for note in [*history.notes, *mix_in.notes][:8]:
        print(f"  note: {note}")
    print()
