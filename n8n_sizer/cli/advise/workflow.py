"""`advise --workflow FILE`: a workflow export priced from its nodes (advisor/workflow_price), as a profile.

The export is read through the one reader; the price is the per-node cost table's (n8n 2.41.1, measured here,
docs/workflow-price.md); the profile carries the price as n8n's overhead relative to the light workflow's fitted
one, with the price's uncertainty, so every answer (one host first, topologies, the ways past it) is the same as
for a packaged workload. `--cpu-ms` is then the Code nodes' own JavaScript (else a `calibrate` file's), `--wait-ms`
each HTTP Request call's wait.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from n8n_sizer.advisor.profiles import WorkflowProfile
from n8n_sizer.errors import InputError

Z90 = 1.6449
MAX_EXPORT_BYTES = 8 << 20


def _read_json(path: Path, what: str, fix: str):
    from n8n_sizer.safety.files import read_user_text
    from n8n_sizer.safety.jsondoc import load_json

    return load_json(read_user_text(path, what, fix=fix, max_bytes=MAX_EXPORT_BYTES), what, fix)


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
):
    """(profile, price) of the workflow export at `path`; `price` is the pricer's `WorkflowPrice`. `mode` picks the
    table's figures (queue: the worker's side); `results` (bench runs) refine them first (`refined_table`)."""
    from n8n_sizer.advisor.workflow_price import load_node_costs, price_workflow
    from n8n_sizer.advisor.workflow_price.calibration import calibration_from_json

    fix = "export the workflow from n8n's editor (Download) and pass that file"
    export = _read_json(path, "--workflow", fix)
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
            export, table, items=items or 1, code_cpu_ms=code_cpu, wait_ms_per_call=wait_ms, engine=engine, mode=mode
        )
    except InputError as exc:  # name the input: the pricer speaks of "workflow export"
        raise InputError(f"--workflow {path}: {str(exc).removeprefix('workflow export: ')}") from None
    mid, low, high = price.overhead_ratio_to_light
    sd = math.log(max(high, 1e-9) / max(low, 1e-9)) / (2 * Z90) if low > 0 else 1.0
    name = re.sub(r"[^a-z0-9-]+", "-", (price.name or path.stem).lower()).strip("-")[:40] or "workflow"
    code_nodes = sum(1 for line in price.lines if line.type == "n8n-nodes-base.code" and line.row_id != "none")
    profile = WorkflowProfile(
        name=f"priced:{name}",
        code_cpu_ms=price.code_cpu_ms,
        wait_ms=price.wait_ms,
        overhead_key="light",
        measured=False,
        overhead_ratio=max(mid, 1e-3),
        ratio_sd_log=min(sd, 5.0),
        code_nodes=code_nodes,
    )
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
    """What the answer says of the price: unknown node types, and the expression engine as a lever."""
    out = []
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
