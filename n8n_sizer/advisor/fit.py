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
from dataclasses import dataclass, field
from importlib import resources

from n8n_sizer.advisor.capacity import CapacityModel, HostShape
from n8n_sizer.advisor.measurements import Measurement
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


def predict_demand(model: CapacityModel, row: DemandRow) -> float | None:
    from n8n_sizer.advisor.roles import predicted_role_cpu_s

    m = row.measurement
    host = host_of(m)
    if row.idle:  # a rest window: one process's idle cores, as the capacity bound subtracts them
        return model.idle_cores_on(host, row.role.removesuffix(IDLE_SUFFIX))
    busy = predicted_role_cpu_s(
        model, profile_of(m), m.setup.mode, m.setup.webhook_processors, host, row.role, m.setup.db
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
        """(low, mid, high) executions per second, a 90% interval."""
        return self.interval_of(lambda model: model.throughput_at(profile, setup, host), profile.ratio_sd_log)

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


def fit_capacity(
    measurements: list[Measurement] | tuple[Measurement, ...],
    leave_out: str | None = None,
    start: dict[str, float] | None = None,
) -> FittedModel:
    """Fit demands to every capacity point and per-role demand row (but `leave_out`, a point's or a demand
    row's id, or a measurement's id for all its rows, for leave-one-out validation). `start`: parameters to
    start from (a fit of nearly the same data, e.g. the full fit for a leave-one-out one): the same optimum,
    reached in fewer steps."""
    import numpy as np  # imported here: only fitting needs numpy and scipy
    from scipy.optimize import least_squares

    workflows = set(BUILTIN) | {m.workflow for m in measurements if is_user_point(m)}
    points, excluded = select_capacity_points(measurements, workflows)
    excluded = excluded + excluded_demand(measurements)
    demand_rows = [
        r
        for r in select_demand_rows(measurements)
        if r.measurement.workflow in workflows and leave_out not in (r.id, r.measurement.id)
    ]
    lone_rows = [r for r in select_lone_rows(measurements) if r.id != leave_out]
    if leave_out is not None:
        points = [p for p in points if p.measurement.id != leave_out]
    if not points:
        raise TooFewPoints(
            "no capacity measurements to fit: run `n8n-sizer bench` with rates above what the "
            "setup can answer (e.g. --rates 5,20,50) so at least one step saturates"
        )
    user_classes = sorted({p.measurement.hardware.host_class for p in points if is_user_point(p.measurement)})
    reference = user_classes[0] if user_classes else EMBEDDED_REFERENCE_CLASS
    # Every workflow the data speak of gets its own overhead: capacity points pin it, and so do per-role CPU
    # rows alone (a first run whose steps never saturated still measured CPU per execution by role).
    overhead_keys = sorted(
        {profile_of(p.measurement).overhead_key for p in points}
        | {profile_of(r.measurement).overhead_key for r in demand_rows}
        | {"light", "code-heavy"}
    )
    # Demand rows of a host class without capacity points (a machine shared with other work, whose CPU time
    # per operation runs high) get a speed factor of their own: they then pin how CPU splits between roles.
    classes = sorted(
        (
            {p.measurement.hardware.host_class for p in points}
            | {r.measurement.hardware.host_class for r in demand_rows}
            | {r.measurement.hardware.host_class for r in lone_rows}
        )
        - {reference}
    )
    specs = (
        list(BASE_SPECS)
        + [_overhead_spec(k) for k in overhead_keys]
        + [_speed_spec(c) for c in classes]
        + [_lone_spec(k) for k in sorted({r.key for r in lone_rows})]
        + [_idle_spec(c) for c in idle_classes(points, demand_rows)]
        + [_idle_role_spec(r) for r in idle_roles(demand_rows)]
    )
    lo = np.log([s.lo for s in specs])
    hi = np.log([s.hi for s in specs])
    prior = np.log([s.prior for s in specs])
    prior_sd = np.array([s.prior_sd_log for s in specs])
    weights = np.array([USER_WEIGHT if is_user_point(p.measurement) else 1.0 for p in points])
    measured = np.log([p.throughput_per_s for p in points])
    shapes = [(profile_of(p.measurement), setup_of(p.measurement), host_of(p.measurement)) for p in points]

    def model_for(z: np.ndarray) -> CapacityModel:
        return CapacityModel({s.name: float(math.exp(v)) for s, v in zip(specs, z, strict=True)}, reference)

    def data_residuals(z: np.ndarray) -> np.ndarray:
        model = model_for(z)
        pred = np.log([model.throughput_at(*shape) for shape in shapes])
        return (pred - measured) * weights

    def demand_residuals(z: np.ndarray) -> np.ndarray:
        model = model_for(z)
        return np.array([math.log(max(predict_demand(model, r) or 1e-9, 1e-9) / r.cpu_s) for r in demand_rows])

    def lone_residuals(z: np.ndarray) -> np.ndarray:
        model = model_for(z)
        return np.array(
            [math.log(model.params[r.key] * model.host_factor(host_of(r.measurement)) / r.ms) for r in lone_rows]
        )

    def residuals(z: np.ndarray) -> np.ndarray:
        # Data rows in units of the expected run-to-run noise, so priors and data weigh as they should.
        return np.concatenate(
            [
                data_residuals(z) / NOISE_FLOOR,
                demand_residuals(z) / NOISE_FLOOR,
                lone_residuals(z) / NOISE_FLOOR,
                (z - prior) / prior_sd,
            ]
        )

    first = prior if not start else np.array([math.log(start.get(sp.name, sp.prior)) for sp in specs])
    z0 = np.clip(first, lo + 1e-9, hi - 1e-9)
    result = least_squares(residuals, z0, bounds=(lo, hi), method="trf", x_scale=1.0, xtol=1e-10, ftol=1e-10)
    z = result.x
    data_res = data_residuals(z)
    n = len(points)
    dof = max(1, n - len(BASE_SPECS) + len(_role_prior_specs()))
    resid_sd = max(math.sqrt(float(np.sum(data_res**2)) / dof), NOISE_FLOOR)
    nd = n + len(demand_rows) + len(lone_rows)
    jac_data = result.jac[:nd] * NOISE_FLOOR  # back to log units
    fisher = jac_data.T @ jac_data / resid_sd**2 + result.jac[nd:].T @ result.jac[nd:]
    log_cov = np.linalg.pinv(fisher).tolist()

    model = model_for(z)
    res = {p.measurement.id: float(r / w) for p, r, w in zip(points, data_res, weights, strict=True)}
    res.update({r.id: float(v) for r, v in zip(demand_rows, demand_residuals(z), strict=True)})
    res.update({r.id: float(v) for r, v in zip(lone_rows, lone_residuals(z), strict=True)})
    return FittedModel(
        model=model,
        specs=specs,
        log_cov=log_cov,
        resid_sd_log=resid_sd,
        points=points,
        excluded=excluded,
        residuals=res,
        demand_rows=demand_rows,
    )


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
    known = {s.name: s for s in BASE_SPECS}
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
