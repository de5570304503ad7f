"""Which measurements the fit reads, as what, and why the others are left out.

Three kinds of rows: capacity points (below), per-role CPU rows (`DemandRow`: a role's CPU per execution as
the kernel counted it, left out only where other work shared the machine) and lone-execution rows (`LoneRow`:
one execution alone, read as the relative speed of hosts measured by one source).

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

from n8n_sizer.advisor.measurements import Measurement, environment_of

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
        for m, _ in rows:
            if m is not best[0]:
                excluded.append(Excluded(m, f"same setup as {best[0].id}, whose figure is used as its peak"))
    points.sort(key=lambda p: p.measurement.id)
    return points, excluded


IDLE_SUFFIX = "-idle"  # a DemandRow of a rest window: `<role>-idle`, CPU cores of one idle process of the role


@dataclass(frozen=True)
class DemandRow:
    """A measured per-role CPU figure: `role`'s CPU seconds per execution in one process, or, for `<role>-idle`
    (a `bench --rest-seconds` window), the CPU cores one process of the role keeps busy with no load."""

    measurement: Measurement
    role: str
    cpu_s: float

    @property
    def id(self) -> str:
        return f"{self.measurement.id}:{self.role}"

    @property
    def idle(self) -> bool:
        return self.role.endswith(IDLE_SUFFIX)


def idle_roles(demand_rows) -> list[str]:
    """The roles besides main whose idle CPU a rest window measured (`<role>-idle` rows), and each such role in each
    environment that measured it (`<role>@<host class>`)."""
    idle = {
        (r.role.removesuffix(IDLE_SUFFIX), environment_of(r.measurement.hardware.host_class))
        for r in demand_rows
        if r.idle
    }
    return sorted({role for role, _ in idle if role != "main"} | {f"{role}@{c}" for role, c in idle if role != "main"})


def shared_machine(m: Measurement) -> str | None:
    """Why `m`'s per-role figures are left out, or None. A machine that other work shared while it measured (as
    recorded when its rows were embedded) gives every process a CPU time per operation that moves with what else
    ran (caches, SMT siblings, migrations): noise about the roles. The rule looks at how a row was measured,
    never at its figure."""
    if m.load.machine_shared:
        load = f" (load average {m.load.machine_load_avg:g})" if m.load.machine_load_avg is not None else ""
        return f"measured while other work shared the machine{load}: its per-role CPU is noise, not fitted"
    return None


def select_demand_rows(measurements) -> list[DemandRow]:
    """Every `<role>_cpu_ms` figure of a built-in or user workflow (see roles.MEASURED_ROLES) and every idle figure
    of a rest window (`idle_cores`), but those of a shared machine (`shared_machine`)."""
    from n8n_sizer.advisor.roles import MEASURED_ROLES

    out = []
    for m in measurements:
        if shared_machine(m):
            continue
        for role in MEASURED_ROLES:
            v = getattr(m.results, f"{role}_cpu_ms")
            if v is not None and v > 0:
                out.append(DemandRow(m, role, v / 1000.0))
        for role, cores in (m.results.idle_cores or {}).items():
            if cores > 0:
                out.append(DemandRow(m, f"{role}{IDLE_SUFFIX}", cores))
    return sorted(out, key=lambda r: r.id)


def excluded_demand(measurements) -> list[Excluded]:
    """The measurements with per-role figures left out by `shared_machine`, each with its reason."""
    from n8n_sizer.advisor.roles import MEASURED_ROLES

    return [
        Excluded(m, why)
        for m in measurements
        if (why := shared_machine(m)) and any(getattr(m.results, f"{role}_cpu_ms") for role in MEASURED_ROLES)
    ]


@dataclass(frozen=True)
class LoneRow:
    """One execution alone (a closed load of 1 in flight): its median time. Beside the same workflow's on hosts
    of another CPU, measured by the same source with the same setup, it measures their relative speed per core
    (seed 002: 104 ms on its Skylake CX23, 72 and 78 ms on its EPYC-Rome CX33 and CX43, 113 ms on its ARM CAX11).
    The fit reads it as `lone_ms x` the host's CPU-time factor, one `lone_ms` per source and setup."""

    measurement: Measurement
    ms: float

    @property
    def id(self) -> str:
        return self.measurement.id

    @property
    def key(self) -> str:
        m = self.measurement
        return f"lone_ms:{m.source.rsplit('/', 1)[-1].split('_', 1)[0]}:{m.workflow}:{m.setup.mode}:{m.setup.db}"


def select_lone_rows(measurements) -> list[LoneRow]:
    """Lone-execution medians of sources that measured one setup on hosts of two or more speeds (CPU class or
    architecture); rows of one speed say nothing about speed and are left out, whatever they measured."""
    rows = [
        LoneRow(m, m.results.p50_ms)
        for m in measurements
        if m.load.kind == "closed" and m.load.concurrency == 1 and m.results.p50_ms
    ]
    speeds: dict[str, set] = {}
    for r in rows:
        speeds.setdefault(r.key, set()).add((r.measurement.hardware.host_class, r.measurement.hardware.arch))
    return sorted((r for r in rows if len(speeds[r.key]) >= 2), key=lambda r: r.id)
