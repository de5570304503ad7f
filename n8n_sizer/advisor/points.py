"""Which measurements measure capacity, and why the others do not.

A throughput figure measures capacity only when the load exceeded what the setup could do and the figure
was limited by the setup, not by the load generator or its timeouts:

- open load (constant arrival rate): saturated (offered >= 1.05 x answered) and errors at most a tenth of
  the answered requests. Past that the answered count measures the failures: seed 000's single-runner
  setups fell from ~5.3/s at 20 req/s to ~1.9/s at 50 req/s once 1,000 waiting requests (the generator's
  cap) waited longer than the 120 s client timeout.
- closed load (N requests in flight): the best figure at N >= 10 (or the source's documented peak); at N = 1
  it measures one request's latency.
- a setting the model does not represent (N8N_EXPRESSION_ENGINE=legacy) or a workflow without a profile
  keeps a point out of the fit, and the reason says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from n8n_sizer.advisor.measurements import Measurement

SATURATION_RATIO = 1.05
MAX_ERROR_SHARE = 0.10
MIN_CLOSED_CONCURRENCY = 10


@dataclass(frozen=True)
class CapacityPoint:
    measurement: Measurement
    throughput_per_s: float


@dataclass(frozen=True)
class Excluded:
    measurement: Measurement
    reason: str


def _open_reason(m: Measurement, x: float) -> str | None:
    offered = m.load.offered_rps
    if offered is None:
        return "no offered rate recorded"
    if offered < SATURATION_RATIO * x:
        return f"offered {offered:g}/s stayed below what it answered ({x:.2f}/s): a latency point, not a capacity point"
    errors = m.results.errors
    if errors is not None and m.load.duration_s:
        answered = x * m.load.duration_s
        if errors > MAX_ERROR_SHARE * answered:
            return (
                f"{errors} errors against ~{answered:.0f} answered (> {MAX_ERROR_SHARE:.0%}): past capacity, "
                "timeouts and failures shaped the answered count"
            )
    return None


def select_capacity_points(
    measurements: list[Measurement] | tuple[Measurement, ...], profiles: set[str]
) -> tuple[list[CapacityPoint], list[Excluded]]:
    """Split throughput measurements into capacity points and excluded ones (each with its reason)."""
    points: list[CapacityPoint] = []
    excluded: list[Excluded] = []
    closed_groups: dict[tuple, list[tuple[Measurement, float]]] = {}
    for m in measurements:
        x = m.results.throughput_per_s
        if x is None or m.load.kind not in ("open", "closed"):
            continue
        if m.workflow not in profiles:
            excluded.append(Excluded(m, f"workflow {m.workflow!r} has no profile in the model"))
            continue
        if m.note and "N8N_EXPRESSION_ENGINE" in m.note:
            excluded.append(Excluded(m, f"{m.note}: a setting the model does not represent"))
            continue
        if m.load.kind == "open":
            reason = _open_reason(m, x)
            if reason is None:
                points.append(CapacityPoint(m, x))
            else:
                excluded.append(Excluded(m, reason))
            continue
        c = m.load.concurrency
        if c is not None and c < MIN_CLOSED_CONCURRENCY:
            excluded.append(Excluded(m, f"closed load at {c} in flight measures latency, not capacity"))
            continue
        key = (m.source, m.hardware, m.setup, m.workflow)
        closed_groups.setdefault(key, []).append((m, x))
    for rows in closed_groups.values():
        # A documented peak (concurrency None) wins; otherwise the best of N >= 10.
        peak_rows = [r for r in rows if r[0].load.concurrency is None]
        best = max(peak_rows or rows, key=lambda r: r[1])
        points.append(CapacityPoint(best[0], best[1]))
        for m, x in rows:
            if m is not best[0]:
                excluded.append(Excluded(m, f"same setup as {best[0].id}, whose figure is used as its peak"))
    points.sort(key=lambda p: p.measurement.id)
    return points, excluded
