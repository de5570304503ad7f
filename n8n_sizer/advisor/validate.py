"""Leave-one-out accuracy: refit without each held-out measurement, predict it, compare; as it goes.

Four kinds of held-out evidence, each predicted by a fit that never saw it:
- capacity points (`points.py` says which measurements measure capacity and why the others do not), one at a time;
- per-role CPU rows, one step's rows together (they share that step's window and noise);
- the lab's topologies (answer/lab_points.py), each without its own run's rows;
- workflows priced from their nodes (workflow_price/validation.py), against their measured ratio to light.

One full fit is made once; every held-out fit starts at its optimum (fit.py `FullFit.without`, lsq.py), so the
whole check takes seconds per hundred refits. `validate_model(..., on_line=print)` reports one line per held-out
item as it is computed; `quick=True` leaves out the per-role steps (the largest part), for the test suite.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from n8n_sizer.advisor.answer.lab_points import lab_model, sitting_speed
from n8n_sizer.advisor.fit import FullFit, host_of, predict_demand, profile_of, setup_of
from n8n_sizer.advisor.measurements import Measurement, describe_setup, load_lab_points
from n8n_sizer.advisor.points import Excluded

# The targets `advise --validate` is held to (issue 36), printed beside each summary.
TARGETS = {
    "throughput": (8.0, 20.0),  # median, max |error| %
    "demand": (15.0, 40.0),
    "lab": (15.0, 25.0),
    "coverage": 0.85,  # share of held-out capacity points inside their 90% interval
}


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

    def line(self) -> str:
        return (
            f"  {self.id:<42} {self.workflow:<10} {self.setup:<30} {self.host:<26} measured {self.measured_per_s:7.2f}/s"
            f"  predicted {self.predicted_per_s:7.2f}/s ({self.low_per_s:.1f}-{self.high_per_s:.1f})"
            f"  {self.error_pct:+6.1f}%{'' if self.inside_interval else '  outside'}"
        )


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

    def line(self) -> str:
        return (
            f"  {self.id:<62} {self.role:<14} measured {self.measured_ms:8.2f} ms  predicted {self.predicted_ms:8.2f} ms"
            f"  {self.error_pct:+7.1f}%"
        )


def _summary(errors: list[float]) -> tuple[float, float]:
    return (statistics.median(errors), max(errors)) if errors else (float("nan"), float("nan"))


@dataclass(frozen=True)
class Validation:
    points: list[HeldOut]
    excluded: list[Excluded]
    latency: list[LatencyCheck]
    demand: list[HeldOutDemand] = field(default_factory=list)
    lab: list = field(default_factory=list)  # answer/lab_points.py HeldOutLab
    prices: object | None = None  # workflow_price/validation.py PriceValidation
    quick: bool = False
    lines: tuple[str, ...] = ()  # what validate_model said as it went, line by line

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

    def lab_summary(self) -> tuple[float, float] | None:
        return _summary(_abs_errors(self.lab)) if self.lab else None


def _host_text(m: Measurement) -> str:
    hw = m.hardware
    return f"{hw.provider}{' ' + hw.size if hw.provider == 'hetzner' else ''} {hw.vcpu:g} vCPU {hw.arch}"


def throughput_summary(v: Validation) -> str:
    med, top = TARGETS["throughput"]
    return (
        f"throughput rows: median |error| {v.median_abs_pct_error:.1f}%, max |error| {v.max_abs_pct_error:.1f}%, "
        f"measured value inside the 90% interval for {v.interval_coverage:.0%} of points "
        f"({len(v.points)} capacity points; targets {med:g}% / {top:g}%, {TARGETS['coverage']:.0%})"
    )


def demand_summary(v: Validation) -> str:
    med, top = TARGETS["demand"]
    return (
        f"per-role demand rows: median |error| {v.demand_median_abs_pct_error:.1f}%, max |error| "
        f"{v.demand_max_abs_pct_error:.1f}% ({len(v.demand)} rows; targets {med:g}% / {top:g}%)"
    )


def lab_summary(v: Validation) -> str:
    med, top = v.lab_summary()
    tmed, ttop = TARGETS["lab"]
    return (
        f"{len(v.lab)} lab topologies: median |error| {med:.1f}%, max |error| {top:.1f}%, order right (within each "
        f"campaign): {'yes' if lab_order_right(v.lab) else 'no'} (targets {tmed:g}% / {ttop:g}%, order right)"
    )


def validate_model(
    measurements: list[Measurement] | tuple[Measurement, ...],
    quick: bool = False,
    on_line: Callable[[str], None] | None = None,
    lab: bool = True,
    prices: bool = True,
) -> Validation:
    """Every held-out kind above, reported line by line through `on_line` as each is computed."""
    said: list[str] = []

    def say(line: str) -> None:
        said.append(line)
        if on_line is not None:
            on_line(line)

    full = FullFit(measurements)
    say("leave-one-out: each capacity point predicted by a fit without it")
    points = []
    for point in full.fitted.points:
        m = point.measurement
        fitted = full.without(lambda _rid, mid, m=m: mid == m.id)
        low, mid, high = fitted.throughput_interval(profile_of(m), setup_of(m), host_of(m))
        held = HeldOut(m.id, m.workflow, describe_setup(m), _host_text(m), point.throughput_per_s, mid, low, high)
        points.append(held)
        say(held.line())
    v = Validation(points=points, excluded=full.fitted.excluded, latency=latency_checks(full.fitted, measurements))
    say(throughput_summary(v))
    demand = []
    if not quick:
        say("")
        say("leave-one-out: each step's per-role CPU rows predicted by a fit without that step")
        for step in sorted({row.measurement.id for row in full.fitted.demand_rows}):
            fitted = full.without(lambda _rid, mid, step=step: mid == step)
            for row in (r for r in full.fitted.demand_rows if r.measurement.id == step):
                held = HeldOutDemand(
                    id=row.id,
                    role=row.role,
                    setup=describe_setup(row.measurement),
                    measured_ms=1000.0 * row.cpu_s,
                    predicted_ms=1000.0 * (predict_demand(fitted.model, row) or 0.0),
                )
                demand.append(held)
                say(held.line())
    v = Validation(points, v.excluded, v.latency, demand, quick=quick)
    if demand:
        say(demand_summary(v))
    if lab:
        say("")
        say("lab topologies (each host its own CPU budget): each predicted by a fit without its own run's rows")
        v = Validation(
            points, v.excluded, v.latency, demand, lab_checks(measurements, full=full, on_line=say), quick=quick
        )
        if v.lab:
            say(lab_summary(v))
    price_validation = None
    if prices:
        from n8n_sizer.advisor.workflow_price.validation import validate_prices

        price_validation = validate_prices()
    return Validation(points, v.excluded, v.latency, demand, v.lab, price_validation, quick, tuple(said))


def leave_one_out(measurements: list[Measurement] | tuple[Measurement, ...], roles: bool = True) -> Validation:
    """Capacity points and (with `roles`) per-role steps, each predicted by a fit without it (no lab, no prices)."""
    return validate_model(measurements, quick=not roles, lab=False, prices=False)


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


def _table(rows: list[list[str]], head: list[str]) -> list[str]:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def line(r: list[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()

    return [line(head), "  ".join("-" * w for w in widths)] + [line(r) for r in rows]


def closing_lines(v: Validation) -> list[str]:
    """What `advise --validate` prints after the held-out lines: the latency check, the workflow prices and the
    measurements not used, each with its reason."""
    out = [
        "",
        "latency check (not a target): p95 below capacity, constant-rate arrivals, plus the reported network RTT",
    ]
    out += _table(
        [
            [c.id, c.setup, f"{c.offered_per_s:g}", f"{c.measured_p95_ms:,.0f} ms", f"{c.predicted_p95_ms:,.0f} ms"]
            + [f"{c.error_pct:+.0f}%"]
            for c in v.latency
        ],
        ["measurement", "setup", "offered/s", "measured p95", "predicted p95", "error"],
    )
    p = v.prices
    if p is not None:
        out += [
            "",
            "workflows priced from their nodes (advise --workflow) against their measured ratio to light "
            f"(regular mode; {', '.join(p.campaigns)})",
        ]
        out += _table(
            [
                [x.key, str(x.items), f"{x.predicted:.2f}", f"{x.low:.2f}-{x.high:.2f}", f"{x.measured_rate_ratio:.2f}"]
                + [f"{x.error_pct:+.1f}%", f"{x.measured_cpu_ratio:.2f}", f"{x.cpu_error_pct:+.1f}%"]
                for x in p.points
            ],
            ["workflow", "items", "priced", "90% interval", "measured rate", "error", "measured CPU", "error"],
        )
        out.append(
            f"workflow prices: median |error| {p.median_abs_pct_error:.1f}%, max |error| {p.max_abs_pct_error:.1f}% by "
            f"rate ({p.cpu_median_abs_pct_error:.1f}% / {p.cpu_max_abs_pct_error:.1f}% by CPU), measured inside the "
            f"90% interval for {p.inside_interval:.0%} ({len(p.points)} workflows)"
        )
    out += ["", "not used, and why:"] + [f"  {e.measurement.id}: {e.reason}" for e in v.excluded]
    if v.quick:
        out += ["", "--quick: the per-role steps were not held out; run `advise --validate` for them"]
    return out


def validation_json(v: Validation) -> dict:
    """`advise --validate --json`: every held-out item with its error, and the summaries."""
    return {
        "median_abs_pct_error": v.median_abs_pct_error,
        "max_abs_pct_error": v.max_abs_pct_error,
        "interval_coverage": v.interval_coverage,
        "targets": TARGETS,
        "quick": v.quick,
        "points": [
            {
                "id": p.id,
                "workflow": p.workflow,
                "setup": p.setup,
                "host": p.host,
                "measured_per_s": p.measured_per_s,
                "predicted_per_s": p.predicted_per_s,
                "low_per_s": p.low_per_s,
                "high_per_s": p.high_per_s,
                "error_pct": p.error_pct,
            }
            for p in v.points
        ],
        "excluded": [{"id": e.measurement.id, "reason": e.reason} for e in v.excluded],
        "latency_points": [
            {
                "id": c.id,
                "setup": c.setup,
                "offered_per_s": c.offered_per_s,
                "measured_p95_ms": c.measured_p95_ms,
                "predicted_p95_ms": c.predicted_p95_ms,
                "error_pct": c.error_pct,
            }
            for c in v.latency
        ],
        "demand_rows": {
            "median_abs_pct_error": v.demand_median_abs_pct_error,
            "max_abs_pct_error": v.demand_max_abs_pct_error,
            "rows": [
                {
                    "id": d.id,
                    "role": d.role,
                    "setup": d.setup,
                    "measured_ms": d.measured_ms,
                    "predicted_ms": d.predicted_ms,
                    "error_pct": d.error_pct,
                }
                for d in v.demand
            ],
        },
        "workflow_price_points": v.prices.model_dump(mode="json") if v.prices is not None else None,
        "lab_shape": {
            "order_right": lab_order_right(v.lab),
            "median_abs_pct_error": v.lab_summary()[0] if v.lab else None,
            "max_abs_pct_error": v.lab_summary()[1] if v.lab else None,
            "points": [
                {
                    "id": x.id,
                    "topology": x.label,
                    "campaign": x.campaign,
                    "measured_per_s": x.measured_per_s,
                    "predicted_per_s": x.predicted_per_s,
                    "bound": x.bound,
                    "lost": x.lost,
                    "accepted": x.accepted,
                    "error_pct": x.error_pct,
                }
                for x in v.lab
            ],
        },
    }


# --- the lab's topologies, each predicted by a fit without its own run ------------------------------------------
@dataclass(frozen=True)
class HeldOutLab:
    """A lab topology (lab_points.py) predicted by a fit without its own run's per-role rows."""

    id: str
    label: str
    measured_per_s: float
    predicted_per_s: float
    bound: str
    lost: int
    accepted: int
    campaign: str = ""  # its host class: the campaign it was measured in (advisor/measurements.py sitting_class)

    @property
    def error_pct(self) -> float:
        return pct_error(self.predicted_per_s, self.measured_per_s)


def lab_order_right(checks: list[HeldOutLab]) -> bool | None:
    """Whether the predictions rank the lab topologies as the measurements do, within each campaign: topologies are
    ranked against the others measured in the same sitting (a campaign of another day's machine state measured the
    same 4 worker hosts at 9.0/s and at 13.6/s), never across campaigns."""
    pairs = [(a, b) for i, a in enumerate(checks) for b in checks[i + 1 :] if a.campaign == b.campaign]
    if not pairs:
        return None
    return all((a.predicted_per_s - b.predicted_per_s) * (a.measured_per_s - b.measured_per_s) >= 0 for a, b in pairs)


def lab_checks(measurements, full=None, on_line=None) -> list[HeldOutLab]:
    """Each embedded lab topology predicted by a fit without its own run's rows (leave one topology out), from
    `full` (a FullFit of `measurements`, made here when not given); `on_line` hears one line per topology."""
    full = full or FullFit(measurements)
    points = load_lab_points()
    out = []
    for point in points:
        fitted = full.without(lambda _rid, mid, point=point: point.owns(mid))
        tm = lab_model(fitted.model, point)
        b = tm.binding()
        peers = [p.speed_probe_ms for p in points if p.id != point.id and p.host_class == point.host_class]
        held = HeldOutLab(
            id=point.id,
            label=point.label,
            measured_per_s=point.measured_per_s,
            predicted_per_s=tm.capacity_per_s() * sitting_speed(point.speed_probe_ms, peers),
            bound=f"{b.name} {b.host}".strip(),
            lost=point.lost,
            accepted=point.accepted,
            campaign=point.host_class,
        )
        out.append(held)
        if on_line is not None:
            on_line(
                f"  {held.label:<40} {held.campaign:<28} measured {held.measured_per_s:6.2f}/s  predicted "
                f"{held.predicted_per_s:6.2f}/s  bound {held.bound:<18} lost {held.lost} of {held.accepted}"
                f"  {held.error_pct:+6.1f}%"
            )
    return out
