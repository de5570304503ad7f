"""A calibration: per-node execution times of one workflow, read from n8n's own execution data.

`n8n-sizer calibrate FILE` (n8n_sizer/bench/calibrate.py) runs the workflow a few dozen times at a low rate on the
local stack, next to a reference workflow with one trivial Code node, and reads
`data.resultData.runData[node][i].executionTime` of every execution. At a low rate on an idle machine a node's
execution time is its CPU plus whatever it waited for; a Code node's JavaScript is its median time less the trivial
Code node's (the runner round trip, which the cost table prices apart): summed over the Code nodes, `code_time_ms`.
On a busy machine a time also holds the wait for a core, so when the task runner's CPU per execution was read
(for the workflow and for the reference), `code_cpu_ms` is that instead: the workflow's runner CPU less the
reference's once per Code node. `code_cpu_ms` is what `advise --workflow FILE --calibration F` uses.
"""

from __future__ import annotations

import statistics
from typing import Any

from pydantic import Field, ValidationError

from n8n_sizer.errors import InputError
from n8n_sizer.safety.frozen import Frozen

CODE = "n8n-nodes-base.code"


# Bounds on what a calibration file may say: the same as --cpu-ms (safety/numbers.py CPU_MS) for CPU figures, an
# hour for a node's time; a file outside them is refused in one line (calibration_from_json), never computed with.
MAX_MS = 600_000.0
MAX_TIME_MS = 3_600_000.0


class NodeTiming(Frozen):
    name: str = Field(max_length=200)
    type: str = Field(max_length=200)
    median_ms: float = Field(ge=0, le=MAX_TIME_MS, allow_inf_nan=False)
    p90_ms: float = Field(ge=0, le=MAX_TIME_MS, allow_inf_nan=False)
    samples: int = Field(ge=1, le=1_000_000)


class Calibration(Frozen):
    workflow: str = Field(max_length=500)
    n8n_version: str | None = Field(None, max_length=40)
    measured_at: str = Field(max_length=40)
    executions: int = Field(ge=1, le=1_000_000)  # successful executions read
    # the reference's trivial Code node, median execution time
    code_round_trip_ms: float = Field(ge=0, le=MAX_TIME_MS, allow_inf_nan=False)
    nodes: tuple[NodeTiming, ...] = Field(max_length=2000)
    # the Code nodes' own JavaScript per execution (see `summarize`)
    code_cpu_ms: float = Field(ge=0, le=MAX_MS, allow_inf_nan=False)
    # the same from execution times alone (wall: it includes waiting for a core)
    code_time_ms: float = Field(ge=0, le=MAX_TIME_MS, allow_inf_nan=False)
    # the task runner's CPU per execution of the workflow, and of the reference (one trivial Code node)
    runner_cpu_ms: float | None = Field(None, ge=0, le=MAX_TIME_MS, allow_inf_nan=False)
    reference_runner_cpu_ms: float | None = Field(None, ge=0, le=MAX_TIME_MS, allow_inf_nan=False)

    def timing(self, name: str) -> NodeTiming | None:
        return next((n for n in self.nodes if n.name == name), None)


def node_times(execution: dict[str, Any]) -> dict[str, list[float]]:
    """{node name: [executionTime ms per run of the node]} from one execution fetched with includeData=true."""
    try:
        run_data = execution["data"]["resultData"]["runData"]
    except (KeyError, TypeError):
        return {}
    times: dict[str, list[float]] = {}
    if not isinstance(run_data, dict):
        return {}
    for name, runs in run_data.items():
        if not isinstance(runs, list):
            continue
        for run in runs:
            value = run.get("executionTime") if isinstance(run, dict) else None
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
                times.setdefault(str(name), []).append(float(value))
    return times


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]


def summarize(
    workflow: str,
    types: dict[str, str],
    executions: list[dict[str, Any]],
    reference: list[dict[str, Any]],
    reference_node: str,
    measured_at: str,
    n8n_version: str | None,
    runner_cpu_ms: float | None = None,
    reference_runner_cpu_ms: float | None = None,
) -> Calibration:
    """Medians per node over `executions`; the Code round trip from `reference`'s trivial Code node `reference_node`.
    Each execution's node times are summed per node (a node that ran several times in one execution counts
    once per execution, with its total)."""
    per_node: dict[str, list[float]] = {}
    for execution in executions:
        for name, values in node_times(execution).items():
            per_node.setdefault(name, []).append(sum(values))
    trips = [sum(v) for ex in reference for name, v in node_times(ex).items() if name == reference_node]
    if not per_node or not trips:
        raise InputError(
            f"calibration of {workflow}: no node execution times in n8n's execution data; check that "
            "the executions succeed and that n8n saves their data (EXECUTIONS_DATA_SAVE_ON_SUCCESS)"
        )
    trip = statistics.median(trips)
    nodes = tuple(
        NodeTiming(
            name=name,
            type=types.get(name, "unknown"),
            median_ms=round(statistics.median(v), 3),
            p90_ms=round(_p90(v), 3),
            samples=len(v),
        )
        for name, v in per_node.items()
    )
    code_nodes = [n for n in nodes if n.type == CODE]
    by_time = sum(max(0.0, n.median_ms - trip) for n in code_nodes)
    code = by_time
    if runner_cpu_ms is not None and reference_runner_cpu_ms is not None:
        # The runner's CPU less one trivial Code node's per Code node: steady when the machine is busy.
        code = max(0.0, runner_cpu_ms - reference_runner_cpu_ms * len(code_nodes))
    return Calibration(
        workflow=workflow,
        n8n_version=n8n_version,
        measured_at=measured_at,
        executions=len(executions),
        code_round_trip_ms=round(trip, 3),
        nodes=nodes,
        code_cpu_ms=round(code, 3),
        code_time_ms=round(by_time, 3),
        runner_cpu_ms=None if runner_cpu_ms is None else round(runner_cpu_ms, 3),
        reference_runner_cpu_ms=None if reference_runner_cpu_ms is None else round(reference_runner_cpu_ms, 3),
    )


def calibration_from_json(doc: Any, source: str = "--calibration") -> Calibration:
    """A calibration file's parsed JSON, or one InputError line naming the file's problem and the fix."""
    try:
        return Calibration.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))[:80] or "the file"
        raise InputError(
            f"{source}: not a calibration ({where}: {str(first.get('msg'))[:120]}); write one with "
            "`n8n-sizer calibrate FILE --out calibration.json`"
        ) from None
