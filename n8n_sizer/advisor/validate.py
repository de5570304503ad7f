"""Leave-one-out accuracy: refit without each capacity point, predict it, compare.

Capacity points (see `points.py` for which measurements are capacity points and why the others are not;
the report lists the excluded ones with their reasons) and, reported apart, per-role CPU rows (one step's rows
held out together). The lab's topologies are checked apart (answer/lab_points.py, one topology's run held out).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from n8n_sizer.advisor.fit import fit_capacity, host_of, predict_demand, profile_of, setup_of
from n8n_sizer.advisor.measurements import Measurement
from n8n_sizer.advisor.points import Excluded


def pct_error(predicted: float, measured: float) -> float:
    """A prediction's signed error, in percent of what was measured."""
    return 100.0 * (predicted - measured) / measured


def _abs_errors(rows) -> list[float]:
    return [abs(r.error_pct) for r in rows]


@dataclass(frozen=True)
class HeldOut:
    id: str
    workflow: str
    setup: str
    host: str
    measured_per_s: float
    predicted_per_s: float
    low_per_s: float
    high_per_s: float

    @property
    def error_pct(self) -> float:
        return pct_error(self.predicted_per_s, self.measured_per_s)

    @property
    def inside_interval(self) -> bool:
        return self.low_per_s <= self.measured_per_s <= self.high_per_s


@dataclass(frozen=True)
class LatencyCheck:
    id: str
    setup: str
    offered_per_s: float
    measured_p95_ms: float
    predicted_p95_ms: float

    @property
    def error_pct(self) -> float:
        return pct_error(self.predicted_p95_ms, self.measured_p95_ms)


@dataclass(frozen=True)
class HeldOutDemand:
    """A per-role CPU row (`<role>_cpu_ms`) predicted by a fit without it."""

    id: str
    role: str
    setup: str
    measured_ms: float
    predicted_ms: float

    @property
    def error_pct(self) -> float:
        return pct_error(self.predicted_ms, self.measured_ms)


@dataclass(frozen=True)
class Validation:
    points: list[HeldOut]
    excluded: list[Excluded]
    latency: list[LatencyCheck]
    demand: list[HeldOutDemand] = field(default_factory=list)

    @property
    def demand_median_abs_pct_error(self) -> float | None:
        return statistics.median(_abs_errors(self.demand)) if self.demand else None

    @property
    def demand_max_abs_pct_error(self) -> float | None:
        return max(_abs_errors(self.demand)) if self.demand else None

    @property
    def median_abs_pct_error(self) -> float:
        return statistics.median(_abs_errors(self.points))

    @property
    def max_abs_pct_error(self) -> float:
        return max(_abs_errors(self.points))

    @property
    def interval_coverage(self) -> float:
        return sum(p.inside_interval for p in self.points) / len(self.points)


def describe_setup(m: Measurement) -> str:
    s = m.setup
    if s.mode == "regular":
        text = "regular" + (f", limit {s.production_limit}" if s.production_limit else "") + f", {s.db}"
    else:
        text = f"queue, {s.workers} worker(s)"
        if s.concurrency is not None:
            text += f", --concurrency {s.concurrency}"
        if s.runner_concurrency is not None:
            text += f", runner {s.runner_concurrency}"
    return text


def leave_one_out(measurements: list[Measurement] | tuple[Measurement, ...], roles: bool = True) -> Validation:
    """Every capacity point, and (with `roles`) every step's per-role rows, predicted by a fit without it."""
    full = fit_capacity(measurements)
    held: list[HeldOut] = []
    for point in full.points:
        m = point.measurement
        fitted = fit_capacity(measurements, leave_out=m.id, start=full.params)
        low, mid, high = fitted.throughput_interval(profile_of(m), setup_of(m), host_of(m))
        hw = m.hardware
        held.append(
            HeldOut(
                id=m.id,
                workflow=m.workflow,
                setup=describe_setup(m),
                host=f"{hw.provider}{' ' + hw.size if hw.provider == 'hetzner' else ''} {hw.vcpu:g} vCPU {hw.arch}",
                measured_per_s=point.throughput_per_s,
                predicted_per_s=mid,
                low_per_s=low,
                high_per_s=high,
            )
        )
    demand = []
    # One step's rows (every role it counted) are held out together: they share that step's window and noise.
    for mid_ in sorted({row.measurement.id for row in full.demand_rows}) if roles else ():
        fitted = fit_capacity(measurements, leave_out=mid_, start=full.params)
        for row in (r for r in full.demand_rows if r.measurement.id == mid_):
            demand.append(
                HeldOutDemand(
                    id=row.id,
                    role=row.role,
                    setup=describe_setup(row.measurement),
                    measured_ms=1000.0 * row.cpu_s,
                    predicted_ms=1000.0 * (predict_demand(fitted.model, row) or 0.0),
                )
            )
    return Validation(points=held, excluded=full.excluded, latency=latency_checks(full, measurements), demand=demand)


def latency_checks(fitted, measurements) -> list[LatencyCheck]:
    """p95 predicted for open-load points below capacity (constant arrival rate, so ca^2 = 0), plus the
    network round trip the source reported; not part of the accuracy targets, which are about capacity."""
    out = []
    for m in measurements:
        r, load = m.results, m.load
        if load.kind != "open" or r.p95_ms is None or load.network_rtt_ms is None or load.offered_rps is None:
            continue
        profile, setup, host = profile_of(m), setup_of(m), host_of(m)
        if load.offered_rps >= fitted.model.throughput_at(profile, setup, host):
            continue
        pred = fitted.model.p95_ms_at(profile, setup, host, load.offered_rps, arrival_cv2=0.0) + load.network_rtt_ms
        out.append(
            LatencyCheck(
                id=m.id,
                setup=describe_setup(m),
                offered_per_s=load.offered_rps,
                measured_p95_ms=r.p95_ms,
                predicted_p95_ms=pred,
            )
        )
    return out
