"""Per-node times and time in flight, from executions read with their run data; durations from the rest. Pure.

For each sampled execution: its duration D (stopped - started), its nodes' runs (start, time). A run inside
another node's run (an AI agent's model and tools run within the agent's own run) is counted in the outer run,
not twice. What no run covers, D minus the runs, is n8n's own work between nodes; when that gap is longer than a
minute, the execution was parked in the database by a Wait (n8n parks any wait over 65 s, `waitTill`), and the
parked time is not running: the time in flight is D less the parked part (the gap less the median gap of the
executions that did not park). Each node's time per execution is then split into CPU and waiting by its family
(`split.split_node_time`).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence

from n8n_sizer.advisor.workflow_price import NodeCostTable
from n8n_sizer.history.record import DurationSummary, NodeTime
from n8n_sizer.history.split import WAIT_TYPES, split_node_time
from n8n_sizer.history.trigger_seen import is_trigger
from n8n_sizer.n8n.history_api import ExecutionItem

PARK_GAP_MS = 60_000.0  # n8n parks a Wait over 65 s; time no run covers beyond a minute is parked time
MAX_NESTING_RUNS = 500  # per execution: above it, nesting is not looked for (quadratic)
FINISHED = ("success", "error", "crashed", "canceled")


def quantile(values: Sequence[float], q: float) -> float | None:
    """The q-quantile by nearest rank (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def durations(items: Sequence[float]) -> DurationSummary:
    """Summary of durations in ms."""
    if not items:
        return DurationSummary(executions=0)
    return DurationSummary(
        executions=len(items),
        mean_ms=statistics.fmean(items),
        p50_ms=quantile(items, 0.50),
        p95_ms=quantile(items, 0.95),
        p99_ms=quantile(items, 0.99),
        max_ms=max(items),
    )


def _outer_of(runs: list[tuple[str, float, float]], skip: set[str]) -> dict[int, str]:
    """For runs (node, start, end): index -> the node of the shortest other, longer run that holds it: it starts
    within that run (at its start or after, before its end) and ends by its end. Times are whole milliseconds, so a
    node that starts as the one before it ends is next to it, not inside it. Nodes in `skip` (triggers) are neither."""
    out: dict[int, str] = {}
    if len(runs) > MAX_NESTING_RUNS:
        return out
    for i, (node, start, end) in enumerate(runs):
        if node in skip:
            continue
        best = None
        for j, (other, s2, e2) in enumerate(runs):
            if j == i or other == node or other in skip or e2 - s2 <= end - start:
                continue
            if s2 <= start < e2 and end <= e2 and (best is None or e2 - s2 < best[1]):
                best = (other, e2 - s2)
        if best is not None:
            out[i] = best[0]
    return out


class SampleTimings:
    """What the sampled executions of one workflow say (`node_timings`, `running_ms`, `parked_ms`)."""

    def __init__(self, sample: Sequence[ExecutionItem], node_types: dict[str, str], table: NodeCostTable) -> None:
        self.notes: list[str] = []
        per_node_time: dict[str, float] = defaultdict(float)
        per_node_runs: dict[str, list[float]] = defaultdict(list)
        parked_runs: dict[str, int] = defaultdict(int)
        inside: dict[str, str] = {}
        types = dict(node_types)
        gaps: list[float] = []
        spans: list[tuple[float, float, float]] = []  # (D, gap, parked Wait runs) per execution
        used = 0
        for e in sample:
            if not e.runs or e.started_s is None or e.stopped_s is None or e.status not in FINISHED:
                continue
            used += 1
            types.update(e.node_types or {})
            runs = [
                (r.node, r.start_ms, r.start_ms + r.execution_ms)
                for r in e.runs
                if r.start_ms is not None and r.execution_ms is not None
            ]
            outer = _outer_of(runs, {n for n, t in types.items() if is_trigger(t)})
            top = parked_here = 0.0
            for i, r in enumerate(e.runs):
                took = r.execution_ms or 0.0
                per_node_runs[r.node].append(took)
                if r.status == "waiting" or (types.get(r.node) in WAIT_TYPES and took > PARK_GAP_MS):
                    parked_runs[r.node] += 1  # a Wait that parked: its time is not running
                    parked_here += took
                    continue
                if i in outer:
                    inside[r.node] = outer[i]
                    continue
                per_node_time[r.node] += took
                top += took
            duration = max((e.stopped_s - e.started_s) * 1000.0, 0.0)
            gap = max(duration - top - parked_here, 0.0)
            spans.append((duration, gap, parked_here))
            if gap <= PARK_GAP_MS:
                gaps.append(gap)
        self.sampled = used
        usual_gap = statistics.median(gaps) if gaps else 0.0
        running, parked = [], []
        for duration, gap, parked_here in spans:
            away = parked_here + (gap - usual_gap if gap > PARK_GAP_MS else 0.0)
            running.append(max(duration - away, 0.0))
            parked.append(away)
        self.running_ms = statistics.fmean(running) if running else None
        self.parked_ms = statistics.fmean(parked) if parked else None
        if parked and max(parked) > 0:
            self.notes.append(
                f"{sum(1 for p in parked if p > 0)} of {used} sampled executions were parked in the database by a "
                f"Wait (mean {self.parked_ms / 1000:.0f} s per execution): not running, not counted in flight"
            )
        timings = []
        for node, times in per_node_runs.items():
            node_type = types.get(node, "unknown")
            per_exec = per_node_time.get(node, 0.0) / used if used else 0.0
            runs_per_exec = len(times) / used if used else 0.0
            family, cpu, wait = split_node_time(node_type, per_exec, runs_per_exec, table)
            timings.append(
                NodeTime(
                    name=node,
                    type=node_type,
                    family=family,
                    runs_per_execution=runs_per_exec,
                    per_run_p50_ms=quantile(times, 0.5),
                    per_run_p95_ms=quantile(times, 0.95),
                    per_execution_ms=per_exec,
                    cpu_ms=cpu,
                    wait_ms=wait,
                    parked_runs=parked_runs.get(node, 0),
                    inside=inside.get(node),
                )
            )
        order = {name: i for i, name in enumerate(node_types)}
        self.node_timings = tuple(sorted(timings, key=lambda t: (order.get(t.name, len(order)), t.name)))
