"""`advise --workflow FILE`: a workflow export priced from its nodes (advisor/workflow_price), as a profile.

The export is read through the one reader; the price is the per-node cost table's (n8n 2.41.1, measured here,
docs/workflow-price.md); the profile carries the price as n8n's overhead relative to the light workflow's fitted
one, with the price's uncertainty, so every answer (one host first, topologies, the ways past it) is the same as
for a packaged workload. `--cpu-ms` is then the Code nodes' own JavaScript (else a `calibrate` file's), `--wait-ms`
every call out's wait that `--wait NODE=MS` does not set, `--branch NODE=SHARE` the mix of exclusive branches.
The trigger decides the rate: without `--rps`, a schedule's own rate (`workflow_rate`).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from n8n_sizer.advisor.profiles import WorkflowProfile
from n8n_sizer.errors import InputError

Z90 = 1.6449
MAX_EXPORT_BYTES = 8 << 20


def _read_json(path: Path, what: str, fix: str, seen_twice: list[str] | None = None):
    from n8n_sizer.safety.files import read_user_text
    from n8n_sizer.safety.jsondoc import load_json

    text = read_user_text(path, what, fix=fix, max_bytes=MAX_EXPORT_BYTES)
    return load_json(text, what, fix, seen_twice=seen_twice)


def _read_export(path: Path, fix: str) -> tuple[object, str]:
    """The export as n8n reads it (of a key given twice in one object, the last), and a note naming such keys."""
    from n8n_sizer.advisor.workflow_price.export import printable

    twice: list[str] = []
    export = _read_json(path, "--workflow", fix, seen_twice=twice)
    if not twice:
        return export, ""
    keys = ", ".join(repr(printable(k, 40)) for k in dict.fromkeys(twice))
    return export, (
        f"the file gives a key twice in one object ({keys}; n8n's editor never writes that): read as n8n reads "
        "it, the last one"
    )


def workflow_rate(path: Path) -> float:
    """The rate the export's own trigger implies (a schedule, a poll), for `advise --workflow FILE` without --rps;
    one InputError line when it implies none (a webhook: its rate is the user's to give)."""
    from n8n_sizer.advisor.workflow_price.export import parse_export
    from n8n_sizer.advisor.workflow_price.triggers import describe, sized_trigger, triggers_in

    fix = "export the workflow from n8n's editor (Download) and pass that file"
    try:
        parsed = parse_export(_read_export(path, fix)[0])
    except InputError as exc:
        raise InputError(f"--workflow {path}: {str(exc).removeprefix('workflow export: ')}") from None
    trigger = sized_trigger(triggers_in(parsed.nodes))
    if trigger is None or trigger.rate_per_s is None:
        said = describe(trigger, None).split(";")[0]
        raise InputError(f"--rps is required: {said}, and the export does not say its rate; e.g. --rps 10")
    return trigger.rate_per_s


def advise_args(
    path: Path,
    items: int | None,
    cpu_ms: float | None,
    wait_ms: float | None,
    calibration: Path | None,
    engine: str,
    waits: tuple[str, ...],
    branches: tuple[str, ...],
) -> tuple[str, ...]:
    """The options that ask about the same priced workflow again (an alternative's `advise` command)."""
    words = ["--workflow", str(path)]
    for flag, value in (("--items", items), ("--cpu-ms", cpu_ms), ("--wait-ms", wait_ms)):
        if value is not None:
            words += [flag, f"{value:g}"]
    if calibration is not None:
        words += ["--calibration", str(calibration)]
    if engine != "default":
        words += ["--expression-engine", engine]
    for pair in waits:
        words += ["--wait", pair]
    for pair in branches:
        words += ["--branch", pair]
    return tuple(words)


def priced_profile(
    path: Path,
    *,
    items: int | None,
    cpu_ms: float | None,
    wait_ms: float | None,
    calibration: Path | None,
    engine: str,
    mode: str = "regular",
    results: Path | None = None,
    waits: tuple[str, ...] = (),
    branches: tuple[str, ...] = (),
    rps: float | None = None,
):
    """(profile, price) of the workflow export at `path`; `price` is the pricer's `WorkflowPrice`. `mode` picks the
    table's figures (queue: the worker's side); `results` (bench runs) refine them first (`refined_table`);
    `waits` and `branches` are --wait and --branch as given; `rps` the rate asked for (for the trigger's note)."""
    from n8n_sizer.advisor.workflow_price import load_node_costs, price_workflow
    from n8n_sizer.advisor.workflow_price.calibration import calibration_from_json
    from n8n_sizer.cli.advise.inputs import parse_branches

    fix = "export the workflow from n8n's editor (Download) and pass that file"
    export, twice_note = _read_export(path, fix)
    code_cpu = cpu_ms
    if calibration is not None:
        calib = calibration_from_json(
            _read_json(
                calibration, "--calibration", "write one with `n8n-sizer calibrate FILE --out calibration.json`"
            ),
            f"--calibration {calibration}",
        )
        if cpu_ms is not None:
            raise InputError("--cpu-ms and --calibration both give the Code nodes' CPU; keep one of them")
        code_cpu = calib.code_cpu_ms
    try:
        table = load_node_costs().for_mode(mode)
        if results is not None:
            table, _ = refined_table(table, results, path.stem, items or 1, code_cpu or 0.0)
        price = price_workflow(
            export,
            table,
            items=items or 1,
            code_cpu_ms=code_cpu,
            wait_ms_per_call=wait_ms,
            engine=engine,
            mode=mode,
            waits=waits,
            branches=parse_branches(branches),
            rps=rps,
        )
    except InputError as exc:  # name the input: the pricer speaks of "workflow export"
        raise InputError(f"--workflow {path}: {str(exc).removeprefix('workflow export: ')}") from None
    mid, low, high = price.overhead_ratio_to_light
    sd = math.log(max(high, 1e-9) / max(low, 1e-9)) / (2 * Z90) if low > 0 else 1.0
    name = re.sub(r"[^a-z0-9-]+", "-", (price.name or path.stem).lower()).strip("-")[:40] or "workflow"
    code_nodes = math.ceil(price.code_nodes - 1e-9)
    profile = WorkflowProfile(
        name=f"priced:{name}",
        code_cpu_ms=price.code_cpu_ms,
        wait_ms=price.wait_ms,
        overhead_key="light",
        measured=False,
        overhead_ratio=max(mid, 1e-3),
        ratio_sd_log=min(sd, 5.0),
        code_nodes=min(code_nodes, 10_000),
        held_mb=price.held_mb,
        advise_args=advise_args(path, items, cpu_ms, wait_ms, calibration, engine, waits, branches),
    )
    if twice_note:
        price = price.model_copy(update={"notes": (twice_note, *price.notes)})
    return profile, price


def refined_table(table, results: Path, name: str, items: int, code_cpu_ms: float):
    """The table (for one mode) refined by the bench runs at `results` of that mode: (table, RefitReport). The
    runs of workflow `name` (bench names a run by its file's stem) are the export's: `items`, `code_cpu_ms`."""
    from n8n_sizer.advisor.workflow_price.refit import refine_table
    from n8n_sizer.runs.price_points import observations_from_results

    observations, skipped = observations_from_results(results, name, items, code_cpu_ms)
    refined, report = refine_table(table, [ob for ob in observations if ob.mode == table.mode])
    return refined, report.model_copy(update={"skipped": (*report.skipped, *skipped)})


def price_warnings(price, engine: str, other_capacity: float | None, capacity: float) -> list[str]:
    """What the answer says of the price: the pricing notes that change the answer (the trigger and the rate,
    waits assumed, parked waits, branches, unpriced nodes, nodes priced by family), and the expression engine as
    a lever."""
    out = [f"workflow price: {note}" for note in price.notes if not note.startswith("Code nodes' own")]
    if price.family_priced:
        shown = sorted(price.family_priced.items(), key=lambda kv: -kv[1])
        out.append(
            f"workflow price: {sum(price.family_priced.values())} node(s) priced by their family, having no row of "
            "their own (an app node as the app nodes measured here, an HTTP call plus its mapping): "
            + ", ".join(f"{t.rsplit('.', 1)[-1]} x{n}" for t, n in shown[:6])
            + (" ..." if len(shown) > 6 else "")
        )
    if price.held_mb is not None:
        out.append(
            f"workflow price: an in-flight execution of this workflow holds about {price.held_mb:.0f} MB in the "
            "process that runs it (measured for AI workflows on n8n here); the limits below are sized with it"
        )
    if price.unknown_types:
        out.append(
            f"priced from its nodes; not in the cost table (priced as a median node, the interval widened): "
            f"{', '.join(sorted(price.unknown_types))}; measure it with `n8n-sizer bench --local --workflow "
            "FILE` to be sure"
        )
    if engine == "default":
        gain = (
            f"the same server would carry about {other_capacity:.1f}/s instead of {capacity:.1f}/s"
            if other_capacity is not None
            else "it would need fewer hosts"
        )
        out.append(
            f"N8N_EXPRESSION_ENGINE=legacy is the largest lever measured here: {gain} (the isolated engine costs "
            "~42 ms per execution, legacy ~0.1 ms per expression; light ran 2.9x as fast). The trade-off: "
            "expressions no longer run isolated from the n8n process, so only for workflows whose expressions "
            "you trust; ask with --expression-engine legacy (never switched for you)"
        )
    elif engine == "legacy":
        out.append(
            "priced with N8N_EXPRESSION_ENGINE=legacy, which you asked for: expressions run in the n8n process, "
            "not isolated; set it on every n8n process yourself (render does not change the engine)"
        )
    return out
