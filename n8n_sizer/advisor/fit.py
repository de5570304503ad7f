"""Fit the capacity model's demands to measurements, with uncertainty.

Least squares on log throughput (errors are relative, as the seeds' repeat-run spread is), over the
parameters in log space with bounds, so every demand and factor stays positive. Parameters that no
measurement pins down are held by weak priors, each with its source; the data override them where they
speak. The user's own bench results (sources under `results/`) weigh USER_WEIGHT times an embedded
point, and their host becomes the reference host, so their data come first where the two disagree.

Uncertainty: the covariance of the log parameters from the Jacobian at the optimum (data rows scaled by
the residual standard deviation, prior rows in their own units), plus the residual noise for a new
observation, gives a 90% interval on every prediction.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from importlib import resources

from n8n_sizer.advisor.capacity import CapacityModel, HostShape
from n8n_sizer.advisor.measurements import LAB_ENVIRONMENT, Measurement, environment_of, load_lab_points
from n8n_sizer.advisor.points import (
    IDLE_SUFFIX,
    CapacityPoint,
    DemandRow,
    Excluded,
    excluded_demand,
    idle_roles,
    select_capacity_points,
    select_demand_rows,
    select_lone_rows,
)
from n8n_sizer.advisor.profiles import BUILTIN, WorkflowProfile, user_profile
from n8n_sizer.advisor.setup import Setup

USER_WEIGHT = 3.0
EMBEDDED_REFERENCE_CLASS = "seed-002"  # Hetzner CX/CAX, seed 002: the catalog's own servers
Z90 = 1.6449  # two-sided 90% normal quantile
# Seed 000: "cells moved by up to 25%" between repeat runs; read as +-2 sigma, the noise floor is ~11% (log).
NOISE_FLOOR = math.log(1.25) / 2.0
# Log sd per doubling away from what was measured (vCPU, workers, hosts): held out, the two ARM servers of seed 002,
# one vCPU doubling from each other, were predicted 21-24% off, which is about 1.6 x 0.12 with the fit's own spread.
EXTRAPOLATION_SD = 0.12
# The speed probe (lab/speed.py) is JavaScript of the kind n8n runs, not n8n: a class's probe is taken to track its
# CPU time per execution within 15% (log sd), so probe rows relate host classes that share no workflow (a user's own
# workflow measured on their host only, and the catalog's servers measured with light only).
PROBE_SD = 0.15


@dataclass(frozen=True)
class ParamSpec:
    name: str
    lo: float
    hi: float
    prior: float
    prior_sd_log: float
    why: str


def _base_specs() -> tuple[ParamSpec, ...]:
    """The base parameters, their bounds and priors, each with its source: a table, so it lives as data
    (data/priors.json) beside the measurements it is fitted to."""
    text = resources.files("n8n_sizer").joinpath("data/priors.json").read_text(encoding="utf-8")
    return tuple(ParamSpec(**row) for row in json.loads(text)["params"])


BASE_SPECS: tuple[ParamSpec, ...] = _base_specs()


def _role_prior_specs() -> tuple[ParamSpec, ...]:
    """The role priors (roles.py) as parameters: held at their prior until per-role rows speak, and their
    uncertainty (a factor of two, log sd 0.7) widens a topology's interval honestly meanwhile."""
    from n8n_sizer.advisor.roles import PRIORS

    # Bounds a factor of 100 either way: wide enough that no measurement is censored by them (Redis measured 20x
    # its prior of before); the prior itself holds only where no row speaks.
    return tuple(ParamSpec(p.name, p.value / 100.0, p.value * 100.0, p.value, 0.7, p.why) for p in PRIORS)


BASE_SPECS = BASE_SPECS + _role_prior_specs()

PROBE_SPEC = ParamSpec(
    "probe_ms",
    10.0,
    2000.0,
    115.0,
    1.0,
    "the speed probe's CPU ms on the reference host (lab/speed.py; 113-121 ms on this project's 2-core machine)",
)


def predict_demand(model: CapacityModel, row: DemandRow) -> float | None:
    from n8n_sizer.advisor.roles import predicted_role_cpu_s

    m = row.measurement
    host = host_of(m)
    if row.idle:  # a rest window: one process's idle cores, as the capacity bound subtracts them
        return model.idle_cores_on(host, row.role.removesuffix(IDLE_SUFFIX))
    busy = predicted_role_cpu_s(
        model, profile_of(m), m.setup.mode, m.setup.webhook_processors, host, row.role, m.setup.db, processes_sharing(m)
    )
    rate = m.results.demand_executions_per_s
    if busy is None or not rate:
        return busy
    # A role's idle CPU (each n8n process's idle cores in its environment, as the capacity bound subtracts) is in
    # the measured figure too, spread over the window's executions: rows of one setup at several rates pin it.
    processes = {"main": 1, "webhook": m.setup.webhook_processors, "worker": m.setup.workers}.get(row.role, 0)
    return busy + model.idle_cores_on(host, row.role) * processes / rate


def _lone_spec(key: str) -> ParamSpec:
    return ParamSpec(
        key,
        1.0,
        10_000.0,
        100.0,
        3.0,
        "one execution's median time alone on the reference host, for the setup in its name",
    )


def _idle_spec(host_class: str) -> ParamSpec:
    # An idle process's CPU is timers and polls (Bull's stalled-job checks, the database ping, the runner's
    # heartbeats): what it costs depends on the environment (a CFS quota's accounting, the kernel's timer
    # slack), not on the host's speed per execution. Each class whose per-role rows measured it gets its own
    # factor on `idle_cores`, loose around 1, so `idle_cores` itself is the figure between the environments
    # measured, which an environment without rows (the catalog's servers) is given.
    return ParamSpec(
        f"idle:{host_class}",
        0.05,
        20.0,
        1.0,
        1.0,
        f"an idle n8n process's CPU on {host_class} hosts relative to idle_cores",
    )


def _idle_role_spec(key: str) -> ParamSpec:
    # Rest windows measure each role's idle CPU apart (an idle main polls, an idle worker waits on Redis): a role's
    # factor relative to main (`worker`), and each environment's on it (`worker@<class>`: lab 0.1-0.5, local 0.3-0.55)
    return ParamSpec(f"idle_role:{key}", 0.01, 20.0, 1.0, 0.5 if "@" in key else 1.0, f"an idle {key} vs an idle main")


def idle_classes(points, demand_rows) -> list[str]:
    """The environments whose evidence measures an idle process's CPU: per-role rows (a role's CPU at several rates)
    or capacity points of one host class with two or more n8n process counts (each process's idle CPU is taken
    from the same cores)."""
    counts: dict[str, set] = {}
    for p in points:
        counts.setdefault(p.measurement.hardware.host_class, set()).add(setup_of(p.measurement).n8n_processes)
    return sorted(
        {r.measurement.hardware.host_class for r in demand_rows} | {c for c, n in counts.items() if len(n) >= 2}
    )


def _overhead_spec(key: str) -> ParamSpec:
    return ParamSpec(
        f"overhead:{key}",
        0.003,
        5.0,
        0.1,
        3.0,
        f"n8n's CPU per execution of the {key} workflow outside Code nodes (all processes)",
    )


def _speed_spec(host_class: str) -> ParamSpec:
    # Seed 000's host (4 shared x86 vCPU) sells the same kind of slice as Hetzner CX: prior 1.0, tight.
    sd = 0.3 if host_class == "seed-000" else 1.0
    return ParamSpec(
        f"speed:{host_class}", 0.1, 10.0, 1.0, sd, f"CPU time on {host_class} hosts relative to the reference host"
    )


def setup_of(m: Measurement) -> Setup:
    s = m.setup
    kwargs: dict = {"mode": s.mode, "workers": s.workers, "db": s.db, "production_limit": s.production_limit}
    for name in ("concurrency", "runner_concurrency", "db_pool_size"):
        value = getattr(s, name)
        if value is not None:
            kwargs[name] = value
    return Setup(**kwargs)


def largest_lab_topology() -> int:
    """Hosts of the largest topology the lab measured (answer/lab_points.py), 1 without any."""
    return max((len(p.hosts) for p in load_lab_points()), default=1)


def processes_sharing(m: Measurement) -> int:
    """The n8n processes that shared the cores of the host a row's figures come from (CapacityModel.crowding): on
    one host all of them (main, workers, webhook processors); on the namespace lab each has a host of its own."""
    if environment_of(m.hardware.host_class) == LAB_ENVIRONMENT:
        return 1
    return 1 + m.setup.workers + m.setup.webhook_processors


def host_of(m: Measurement) -> HostShape:
    return HostShape(vcpu=float(m.hardware.vcpu), arch=m.hardware.arch, host_class=m.hardware.host_class)


def profile_of(m: Measurement) -> WorkflowProfile:
    return BUILTIN.get(m.workflow) or user_profile(m.workflow)


def is_user_point(m: Measurement) -> bool:
    return m.source.startswith("results/")


@dataclass
class FittedModel:
    """A CapacityModel with the evidence and covariance it came from."""

    model: CapacityModel
    specs: list[ParamSpec]
    log_cov: list[list[float]]  # plain lists: predictions need no numpy, so `advise` starts fast
    resid_sd_log: float
    points: list[CapacityPoint]
    excluded: list[Excluded]
    residuals: dict[str, float] = field(default_factory=dict)  # point id -> log error (pred/meas)
    demand_rows: list[DemandRow] = field(default_factory=list)

    @property
    def params(self) -> dict[str, float]:
        return self.model.params

    def knows(self, profile: WorkflowProfile) -> bool:
        """Whether a measurement pins this workflow's own overhead (a capacity point or a per-role CPU row);
        otherwise its overhead would be the prior alone, and no answer should rest on that."""
        if profile.name in BUILTIN or not profile.measured:
            return True
        rows = [*self.points, *(r for r in self.demand_rows if not r.idle)]  # idle CPU prices no execution
        return any(profile_of(x.measurement).overhead_key == profile.overhead_key for x in rows)

    def throughput_interval(
        self, profile: WorkflowProfile, setup: Setup, host: HostShape
    ) -> tuple[float, float, float]:
        """(low, mid, high) executions per second, a 90% interval, wider the further the setup lies from what was
        measured (`extrapolation_sd`)."""
        far = self.extrapolation_sd(host.vcpu, host.arch, setup.workers, hosts=1)
        return self.interval_of(
            lambda model: model.throughput_at(profile, setup, host), math.hypot(profile.ratio_sd_log, far)
        )

    def extrapolation_sd(self, vcpu: float, arch: str, workers: int, hosts: int = 1) -> float:
        """Log sd a prediction gains for being away from every capacity point: EXTRAPOLATION_SD per doubling of
        vCPU from the nearest measured host of its architecture (and one doubling for an architecture never
        measured), per doubling of workers past the most measured, and per doubling of hosts past the largest lab
        topology measured (answer/lab_points.py). A measured condition adds nothing."""
        seen = [(float(p.measurement.hardware.vcpu), p.measurement.hardware.arch) for p in self.points]
        same = [v for v, a in seen if a == arch]
        doublings = min((abs(math.log2(vcpu / v)) for v in same), default=1.0) if vcpu > 0 else 0.0
        most_workers = max((p.measurement.setup.workers for p in self.points), default=1)
        doublings += max(0.0, math.log2(max(workers, 1) / max(most_workers, 1)))
        doublings += max(0.0, math.log2(max(hosts, 1) / largest_lab_topology()))
        return EXTRAPOLATION_SD * doublings

    def interval_of(self, capacity, extra_sd_log: float = 0.0) -> tuple[float, float, float]:
        """(low, mid, high) of `capacity(model)`, a 90% interval: the delta method on the log parameters'
        covariance, plus the residual noise of a new observation, plus `extra_sd_log` (a workflow priced from
        its nodes: its price's own uncertainty, taken as moving capacity one for one, the most it can)."""
        mid = capacity(self.model)
        grad = [0.0] * len(self.specs)
        base = dict(self.model.params)
        for i, spec in enumerate(self.specs):
            step = 1e-4
            bumped = dict(base)
            bumped[spec.name] = base[spec.name] * math.exp(step)
            other = capacity(CapacityModel(bumped, self.model.reference_class))
            grad[i] = (math.log(other) - math.log(mid)) / step
        cov = self.log_cov
        var = sum(grad[i] * cov[i][j] * grad[j] for i in range(len(grad)) for j in range(len(grad)))
        var += self.resid_sd_log**2 + extra_sd_log**2
        half = Z90 * math.sqrt(max(var, 0.0))
        return mid * math.exp(-half), mid, mid * math.exp(half)


class TooFewPoints(ValueError):
    pass


@dataclass(frozen=True)
class _Rows:
    """What one fit reads, in the order of its residuals: capacity points, per-role CPU rows, lone-execution rows."""

    points: list[CapacityPoint]
    demand: list[DemandRow]
    lone: list
    excluded: list[Excluded]
    probes: list[tuple[str, str, float]] = field(default_factory=list)  # (host class, arch, median probe ms)
    busy: list[tuple[Measurement, float, float]] = field(default_factory=list)  # (row, executions/s, busy cores)

    def ids(self) -> list[tuple[str, str]]:
        """(row id, measurement id) of every data row, in residual order."""
        return (
            [(p.measurement.id, p.measurement.id) for p in self.points]
            + [(r.id, r.measurement.id) for r in self.demand]
            + [(r.id, r.measurement.id) for r in self.lone]
            + [(f"probe:{c}", f"probe:{c}") for c, _, _ in self.probes]
            + [(m.id, m.id) for m, _, _ in self.busy]
        )


def _select(measurements) -> _Rows:
    workflows = set(BUILTIN) | {m.workflow for m in measurements if is_user_point(m)}
    points, excluded = select_capacity_points(measurements, workflows)
    excluded = excluded + excluded_demand(measurements)
    demand = [r for r in select_demand_rows(measurements) if r.measurement.workflow in workflows]
    return _Rows(
        points,
        demand,
        list(select_lone_rows(measurements)),
        excluded,
        probe_rows(points, demand),
        busy_rows(measurements, workflows),
    )


def busy_rows(measurements, workflows) -> list[tuple[Measurement, float, float]]:
    """Host CPU at a measured throughput: a row with `cpu_cores_used` (the whole stack's busy cores, as a source
    published it) beside the throughput the same source, host, setup and offered rate answered. The fit predicts the
    busy cores as throughput x CPU per execution + the processes' idle CPU: it pins what an execution costs in all,
    and with the capacity points how many of a host's cores a stack at its ceiling can use (`cpu_usable`)."""
    answered = {}
    for m in measurements:
        x = m.results.throughput_per_s
        if x is not None and m.load.offered_rps is not None:
            answered.setdefault(_busy_key(m), x)
    out = []
    for m in measurements:
        used = m.results.cpu_cores_used
        if used and m.workflow in workflows and (x := answered.get(_busy_key(m))) is not None:
            out.append((m, x, statistics.fmean(used)))
    return out


def _busy_key(m: Measurement) -> tuple:
    s = m.setup
    return (
        m.source,
        m.hardware,
        m.workflow,
        s.mode,
        s.workers,
        s.concurrency,
        s.runner_concurrency,
        m.load.offered_rps,
    )


def probe_rows(points, demand) -> list[tuple[str, str, float]]:
    """Every host class whose rows were speed-probed (lab/speed.py), with its median probe: the user's runs
    (bench --local probes its host) and the lab's sittings (data/lab_shape.json)."""
    seen: dict[tuple[str, str], list[float]] = {}
    for r in [*points, *demand]:
        hw = r.measurement.hardware
        if hw.speed_probe_ms:
            seen.setdefault((hw.host_class, hw.arch), []).append(hw.speed_probe_ms)
    classes = {r.measurement.hardware.host_class for r in [*points, *demand]}
    for p in load_lab_points():
        if p.speed_probe_ms and p.host_class in classes:
            seen.setdefault((p.host_class, "x86"), []).append(p.speed_probe_ms)
    return [(c, arch, statistics.median(ms)) for (c, arch), ms in sorted(seen.items())]


def _reference(rows: _Rows) -> str:
    """The host class every other is measured against: the user's, whenever their results hold any row (a first
    run whose steps never saturated measured CPU per execution on that host all the same), else seed 002's. The
    answer for a host of the user's vCPU is then the user's own host, at its own speed and idle CPU: a first run's
    rows pin the product of the host's speed and the workflow's overhead, never either alone, so scoring another
    class's speed with that overhead answered six times what the host carried (issue 36)."""
    mine = {r.measurement.hardware.host_class for r in [*rows.points, *rows.demand] if is_user_point(r.measurement)}
    return sorted(mine)[0] if mine else EMBEDDED_REFERENCE_CLASS


def _specs(rows: _Rows, reference: str) -> list[ParamSpec]:
    # Every workflow the data speak of gets its own overhead: capacity points pin it, and so do per-role CPU
    # rows alone (a first run whose steps never saturated still measured CPU per execution by role).
    overhead_keys = sorted(
        {profile_of(p.measurement).overhead_key for p in rows.points}
        | {profile_of(r.measurement).overhead_key for r in rows.demand}
        | {"light", "code-heavy"}
    )
    # Demand rows of a host class without capacity points (a machine shared with other work, whose CPU time
    # per operation runs high) get a speed factor of their own: they then pin how CPU splits between roles.
    classes = sorted(
        (
            {p.measurement.hardware.host_class for p in rows.points}
            | {r.measurement.hardware.host_class for r in rows.demand}
            | {r.measurement.hardware.host_class for r in rows.lone}
        )
        - {reference}
    )
    return (
        list(BASE_SPECS)
        + [_overhead_spec(k) for k in overhead_keys]
        + [_speed_spec(c) for c in classes]
        + [_lone_spec(k) for k in sorted({r.key for r in rows.lone})]
        + [_idle_spec(c) for c in idle_classes(rows.points, rows.demand)]
        + [_idle_role_spec(r) for r in idle_roles(rows.demand)]
        + ([PROBE_SPEC] if rows.probes else [])
    )


def _problem(rows: _Rows, specs: list[ParamSpec], reference: str):
    """The least-squares problem of `rows` (lsq.py): every data residual in units of the expected run-to-run noise,
    so priors and data weigh as they should."""
    import numpy as np  # imported here: only fitting needs numpy and scipy

    from n8n_sizer.advisor.lsq import PRED_FLOOR, Block, LsqProblem
    from n8n_sizer.advisor.roles import predicted_role_cpu_s

    weights = np.array([USER_WEIGHT if is_user_point(p.measurement) else 1.0 for p in rows.points])
    measured = np.log([p.throughput_per_s for p in rows.points]) if rows.points else np.zeros(0)
    shapes = [(profile_of(p.measurement), setup_of(p.measurement), host_of(p.measurement)) for p in rows.points]
    points = Block(
        keys=list(range(len(shapes))),
        evaluate=lambda model, i: model.throughput_at(*shapes[i]),
        assemble=lambda vals: (np.log(vals) - measured) * weights / NOISE_FLOOR,
    )
    # Per-role rows: a distinct busy figure per (workflow, setup, host, role) and a distinct idle figure per (host,
    # role); each row is busy + idle x its processes / its rate (predict_demand), or the idle figure for a rest window.
    busy_keys: dict[tuple, int] = {}
    idle_keys: dict[tuple, int] = {}
    plan = []
    for r in rows.demand:
        m = r.measurement
        host = host_of(m)
        base_role = r.role.removesuffix(IDLE_SUFFIX)
        idle_at = idle_keys.setdefault(("idle", host, base_role), len(idle_keys))
        if r.idle:
            plan.append((None, idle_at, 0.0))
            continue
        key = (
            "busy",
            profile_of(m),
            m.setup.mode,
            m.setup.webhook_processors,
            host,
            r.role,
            m.setup.db,
            processes_sharing(m),
        )
        busy_at = busy_keys.setdefault(key, len(busy_keys))
        rate = m.results.demand_executions_per_s
        processes = {"main": 1, "webhook": m.setup.webhook_processors, "worker": m.setup.workers}.get(r.role, 0)
        plan.append((busy_at, idle_at, processes / rate if rate else None))
    keys = list(busy_keys) + list(idle_keys)
    nb = len(busy_keys)
    cpu = np.array([r.cpu_s for r in rows.demand])

    def evaluate_demand(model: CapacityModel, key: tuple):
        if key[0] == "idle":
            return model.idle_cores_on(key[1], key[2])
        _, profile, mode, wp, host, role, db, processes = key
        return predicted_role_cpu_s(model, profile, mode, wp, host, role, db, processes)

    busy_at = np.array([b if b is not None else 0 for b, _, _ in plan], dtype=int)
    idle_at = np.array([nb + i for _, i, _ in plan], dtype=int)
    is_idle = np.array([b is None for b, _, _ in plan], dtype=bool)
    per = np.array([p if p is not None else np.nan for _, _, p in plan], dtype=float)

    def assemble_demand(vals: list) -> np.ndarray:
        v = np.array([np.nan if x is None else x for x in vals], dtype=float)
        busy, idle = v[busy_at], v[idle_at]
        # no rate: the busy figure alone; no busy figure (the role does not run in that setup): floored below
        pred = np.where(is_idle, idle, np.where(np.isnan(per), busy, busy + idle * per))
        pred = np.where(np.isnan(pred) | (pred <= PRED_FLOOR), PRED_FLOOR, pred)
        return np.log(pred / cpu) / NOISE_FLOOR

    demand = Block(keys=keys, evaluate=evaluate_demand, assemble=assemble_demand)
    lone_ms = np.array([r.ms for r in rows.lone])
    lone_hosts = [(r.key, host_of(r.measurement)) for r in rows.lone]
    lone = Block(
        keys=list(range(len(lone_hosts))),
        evaluate=lambda model, i: model.params[lone_hosts[i][0]] * model.host_factor(lone_hosts[i][1]),
        assemble=lambda vals: np.log(np.array(vals, dtype=float) / lone_ms) / NOISE_FLOOR,
    )
    probes = [(HostShape(vcpu=1.0, arch=arch, host_class=c), ms) for c, arch, ms in rows.probes]
    probe_ms = np.array([ms for _, ms in probes])
    probe = Block(
        keys=list(range(len(probes))),
        evaluate=lambda model, i: model.params[PROBE_SPEC.name] * model.host_factor(probes[i][0]),
        assemble=lambda vals: np.log(np.array(vals, dtype=float) / probe_ms) / PROBE_SD,
    )
    busy_shapes = [(profile_of(m), setup_of(m), host_of(m), x) for m, x, _ in rows.busy]
    busy_cores = np.array([b for _, _, b in rows.busy])

    def predicted_busy(model: CapacityModel, i: int) -> float:
        profile, setup, host, x = busy_shapes[i]
        idle = model.idle_of(host, main=1, workers=setup.workers)
        return x * model.demands(profile, setup, host).total_s + idle

    busy = Block(
        keys=list(range(len(busy_shapes))),
        evaluate=predicted_busy,
        assemble=lambda vals: np.log(np.array(vals, dtype=float) / busy_cores) / NOISE_FLOOR,
    )
    return LsqProblem(
        names=[s.name for s in specs],
        prior=np.log([s.prior for s in specs]),
        prior_sd=np.array([s.prior_sd_log for s in specs]),
        lo=np.log([s.lo for s in specs]),
        hi=np.log([s.hi for s in specs]),
        blocks=[points, demand, lone, probe, busy],
        reference=reference,
    )


def _fitted(rows: _Rows, specs, problem, z, jac, keep) -> FittedModel:
    """The FittedModel at z over the kept data rows (`keep`, a mask over rows.ids()): residual noise from the
    capacity points (at least the noise floor), covariance from the kept rows' Jacobian and the priors."""
    import numpy as np

    n_points, n_demand = len(rows.points), len(rows.demand)
    res = problem.residuals(z)
    nd = len(keep)
    kept_points = keep[:n_points]
    data_res = res[:n_points][kept_points] * NOISE_FLOOR
    weights = np.array([USER_WEIGHT if is_user_point(p.measurement) else 1.0 for p in rows.points])[kept_points]
    dof = max(1, int(kept_points.sum()) - len(BASE_SPECS) + len(_role_prior_specs()))
    resid_sd = max(math.sqrt(float(np.sum(data_res**2)) / dof), NOISE_FLOOR)
    jac_data = jac[:nd][keep] * NOISE_FLOOR  # back to log units
    jac_prior = jac[nd:]
    fisher = jac_data.T @ jac_data / resid_sd**2 + jac_prior.T @ jac_prior
    log_cov = np.linalg.pinv(fisher).tolist()
    points = [p for p, k in zip(rows.points, kept_points, strict=True) if k]
    demand_keep = keep[n_points : n_points + n_demand]
    n_lone = len(rows.lone)
    lone_keep = keep[n_points + n_demand : n_points + n_demand + n_lone]
    residuals = {p.measurement.id: float(r) for p, r in zip(points, data_res / weights, strict=True)}
    for r, v, k in zip(rows.demand, res[n_points : n_points + n_demand] * NOISE_FLOOR, demand_keep, strict=True):
        if k:
            residuals[r.id] = float(v)
    for r, v, k in zip(
        rows.lone, res[n_points + n_demand : n_points + n_demand + n_lone] * NOISE_FLOOR, lone_keep, strict=True
    ):
        if k:
            residuals[r.id] = float(v)
    n_probe = n_points + n_demand + n_lone + len(rows.probes)
    for (c, _, _), v in zip(rows.probes, res[n_points + n_demand + n_lone : n_probe] * PROBE_SD, strict=True):
        residuals[f"probe:{c}"] = float(v)
    for (m, _, _), v, k in zip(rows.busy, res[n_probe:nd] * NOISE_FLOOR, keep[n_probe:nd], strict=True):
        if k:
            residuals[f"{m.id}:busy"] = float(v)
    return FittedModel(
        model=problem.model_for(z),
        specs=list(specs),
        log_cov=log_cov,
        resid_sd_log=resid_sd,
        points=points,
        excluded=rows.excluded,
        residuals=residuals,
        demand_rows=[r for r, k in zip(rows.demand, demand_keep, strict=True) if k],
    )


class FullFit:
    """One fit of every row, kept with its Jacobian so that held-out refits start at its optimum (lsq.py's
    `refine`): `advise --validate` refits once per held-out point and per held-out step in seconds."""

    def __init__(self, measurements, start: dict[str, float] | None = None):
        import numpy as np

        self.rows = _select(measurements)
        if not self.rows.points:
            raise TooFewPoints(
                "no capacity measurements to fit: run `n8n-sizer bench` with rates above what the "
                "setup can answer (e.g. --rates 5,20,50) so at least one step saturates"
            )
        self.reference = _reference(self.rows)
        self.specs = _specs(self.rows, self.reference)
        self.problem = _problem(self.rows, self.specs, self.reference)
        prior = self.problem.prior
        first = prior if not start else np.array([math.log(start.get(sp.name, sp.prior)) for sp in self.specs])
        self.z, self.jac = self.problem.solve(first)
        self._ids = self.rows.ids()
        self.fitted = _fitted(self.rows, self.specs, self.problem, self.z, self.jac, np.ones(len(self._ids), bool))

    def without(self, drop) -> FittedModel:
        """The fit without the data rows for which `drop(row id, measurement id)` is true."""
        import numpy as np

        keep = np.array([not drop(rid, mid) for rid, mid in self._ids], dtype=bool)
        if keep.all():
            return self.fitted
        if not keep[: len(self.rows.points)].any():
            raise TooFewPoints("no capacity point is left to fit once the held-out rows are dropped")
        z, jac = self.problem.refine(self.z, self.jac, keep)
        return _fitted(self.rows, self.specs, self.problem, z, jac, keep)


def fit_capacity(
    measurements: list[Measurement] | tuple[Measurement, ...],
    leave_out: str | None = None,
    start: dict[str, float] | None = None,
) -> FittedModel:
    """Fit demands to every capacity point and per-role demand row (but `leave_out`, a point's or a demand
    row's id, or a measurement's id for all its rows, for leave-one-out validation). `start`: parameters to
    start from (a fit of nearly the same data): the same optimum, reached in fewer steps. Many held-out fits of
    one data set: `FullFit(measurements).without(...)`."""
    if leave_out is None:
        return FullFit(measurements, start).fitted
    rows = _select(measurements)
    drop = {leave_out}
    rows = _Rows(
        [p for p in rows.points if p.measurement.id not in drop],
        [r for r in rows.demand if r.id not in drop and r.measurement.id not in drop],
        [r for r in rows.lone if r.id not in drop],
        rows.excluded,
        rows.probes,
        [b for b in rows.busy if b[0].id not in drop],
    )
    if not rows.points:
        raise TooFewPoints("no capacity point is left to fit once the held-out rows are dropped")
    import numpy as np

    reference = _reference(rows)
    specs = _specs(rows, reference)
    problem = _problem(rows, specs, reference)
    first = problem.prior if not start else np.array([math.log(start.get(sp.name, sp.prior)) for sp in specs])
    z, jac = problem.solve(first)
    return _fitted(rows, specs, problem, z, jac, np.ones(len(rows.ids()), bool))


def fitted_to_dict(fitted: FittedModel, measurements_sha256: str) -> dict:
    """The fitted state to ship with the package, so `advise` starts without refitting (see engine.py)."""
    return {
        "measurements_sha256": measurements_sha256,
        "reference_class": fitted.model.reference_class,
        "params": fitted.params,
        "spec_names": [s.name for s in fitted.specs],
        "log_cov": fitted.log_cov,
        "resid_sd_log": fitted.resid_sd_log,
        "residuals": fitted.residuals,
    }


def fitted_from_dict(data: dict, measurements: list[Measurement] | tuple[Measurement, ...]) -> FittedModel:
    """Rebuild a FittedModel from `fitted_to_dict` output and the same measurements it was fitted on."""
    points, excluded = select_capacity_points(measurements, set(BUILTIN))
    excluded = excluded + excluded_demand(measurements)
    known = {s.name: s for s in (*BASE_SPECS, PROBE_SPEC)}
    specs = [
        known.get(n)
        or (
            _overhead_spec(n.split(":", 1)[1])
            if n.startswith("overhead:")
            else _lone_spec(n)
            if n.startswith("lone_ms:")
            else _idle_spec(n.split(":", 1)[1])
            if n.startswith("idle:")
            else _idle_role_spec(n.split(":", 1)[1])
            if n.startswith("idle_role:")
            else _speed_spec(n.split(":", 1)[1])
        )
        for n in data["spec_names"]
    ]
    return FittedModel(
        model=CapacityModel(data["params"], data["reference_class"]),
        specs=specs,
        log_cov=data["log_cov"],
        resid_sd_log=data["resid_sd_log"],
        points=points,
        excluded=excluded,
        residuals=data["residuals"],
        demand_rows=[r for r in select_demand_rows(measurements) if r.measurement.workflow in BUILTIN],
    )
