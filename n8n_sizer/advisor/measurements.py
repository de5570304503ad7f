"""Embedded measurements: every figure the seeds published, one row per measurement, with provenance.

The data file is `n8n_sizer/data/measurements.json`. Values are exactly as published (units in field
names: `answered_per_min`, `p95_ms`, `peak_ram_mb` where the source wrote MB/GB, `..._mib` where it
wrote MiB). A figure the source did not publish is absent (None), never 0.
"""

from __future__ import annotations

import json
import time
from functools import lru_cache
from importlib import resources
from typing import Literal

from pydantic import Field

from n8n_sizer.safety.frozen import Frozen


def sitting_class(base: str, start_s: float) -> str:
    """The host class of rows this project measured on its own machine in one campaign that began at `start_s`:
    `base` (the environment: a quota-bound lab host, the local stack, quiet or shared) and the campaign's start
    (UTC, to the minute). A campaign is what one speed factor holds over: this shared machine ran the same lab
    topologies with 36% more CPU per execution at 03:43 on 2026-12-02, while other work shared it at times, than at
    20:36 the day before, and 4 worker hosts carried 13.6/s at 06:47 with nothing else running against 9.0/s at
    03:43 (docs/findings/role-costs-measured.md)."""
    return f"{base}-{time.strftime('%Y%m%dT%H%M', time.gmtime(start_s))}"


# The namespace lab's quota-bound hosts (lab/cpu.py), one n8n process each: an environment of its own.
LAB_ENVIRONMENT = "cgroup-lab"


def environment_of(host_class: str) -> str:
    """The environment of a host class: a sitting class without its campaign's start (`cgroup-lab` of
    `cgroup-lab-20261202T0343`), any other class itself. What an idle process costs depends on the environment
    (a quota-bound lab host, the local stack), not on the sitting."""
    base, _, stamp = host_class.rpartition("-")
    return base if base and len(stamp) == 13 and stamp[8] == "T" and stamp.replace("T", "").isdigit() else host_class


class Hardware(Frozen):
    provider: str
    size: str | None
    vcpu: float = Field(gt=0)
    arch: Literal["x86", "arm"]
    ram_mib: int | None
    shared_core: bool = False
    # The host's speed when it measured (lab/speed.py: CPU ms of a fixed JavaScript workload on n8n's Node.js); the
    # fit relates host classes by it (advisor/fit.py, probe rows). None where it was not probed.
    speed_probe_ms: float | None = Field(None, gt=0, le=100_000)
    # Measurements on one class of host share one CPU speed factor in the fit.
    host_class: str


class MeasuredSetup(Frozen):
    mode: Literal["regular", "queue"]
    workers: int = 0
    concurrency: int | None = None
    runner_concurrency: int | None = None
    production_limit: int | None = None
    db: Literal["sqlite", "postgres"] = "postgres"
    db_pool_size: int | None = None
    webhook_processors: int = 0  # `n8n webhook` processes (queue mode), behind a load balancer


class Load(Frozen):
    kind: Literal["open", "closed", "idle", "set", "single"]
    offered_rps: float | None = None
    concurrency: int | None = None
    duration_s: float | None = None
    client_timeout_s: float | None = None
    max_in_flight: int | None = None
    generator: str | None = None
    network_rtt_ms: float | None = None  # round trip between load generator and server, inside every latency
    # The machine's 1-minute load average over the measurement (its own processes and anything else), and whether
    # other work shared the machine while it measured, as recorded when the rows were embedded.
    machine_load_avg: float | None = Field(None, ge=0)
    machine_shared: bool = False
    note: str | None = None


class Results(Frozen):
    answered_per_min: float | None = None
    executions_per_s: float | None = None
    errors: int | None = None
    errors_by_type: dict[str, int] | None = None
    p50_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None
    peak_ram_mb: float | None = None
    idle_ram_mb: float | None = None
    main_ram_mb: list[float] | None = None
    editor_p95_ms: list[float] | None = None
    pg_connections_peak: int | None = None
    pg_connections_max_seen: int | None = None
    redis_used_mb: list[float] | None = None
    cpu_cores_used: list[float] | None = None
    code_cpu_ms: float | None = None
    execution_kb: list[float] | None = None
    n8n_idle_ram_mib: list[float] | None = None
    n8n_peak_ram_mib: list[float] | None = None
    postgres_idle_ram_mib: list[float] | None = None
    sysbench_single_thread_events_per_s: float | None = None
    sysbench_all_threads_events_per_s: float | None = None
    # Per-role CPU per execution, one process of the role (utilisation law: busy CPU / executions).
    worker_cpu_ms: float | None = None
    main_cpu_ms: float | None = None
    webhook_cpu_ms: float | None = None
    runner_cpu_ms: float | None = None
    postgres_cpu_ms: float | None = None
    redis_cpu_ms: float | None = None
    load_balancer_cpu_ms: float | None = None
    # Executions per second over the window the `<role>_cpu_ms` figures come from: the utilisation law charges
    # each process's idle CPU to them too, and the fit adds that share back to its prediction (fit.py).
    demand_executions_per_s: float | None = None
    # Operations per execution over the same window (issue 25): they transfer across hardware better than
    # milliseconds do. Redis: INFO commandstats calls; Postgres: pg_stat_database xact_commit + xact_rollback.
    redis_commands_per_execution: float | None = None
    postgres_transactions_per_execution: float | None = None
    # With no load (`bench --rest-seconds`): CPU cores one process of each n8n role keeps busy, the kernel's counts
    # over the window divided by the role's processes. Each process's idle CPU, measured instead of inferred.
    idle_cores: dict[str, float] | None = None
    fired: int | None = None
    accepted: int | None = None
    refused: int | None = None
    accepted_then_lost: int | None = None
    undelivered: int | None = None
    requests: int | None = None
    worst_ms: float | None = None
    cpu_user_pct: float | None = None
    cpu_iowait_pct: float | None = None
    cpu_idle_pct: float | None = None
    dirty_kb: float | None = None

    @property
    def throughput_per_s(self) -> float | None:
        """Executions per second, from whichever of the two the source published."""
        if self.executions_per_s is not None:
            return self.executions_per_s
        if self.answered_per_min is not None:
            return self.answered_per_min / 60.0
        return None


class Measurement(Frozen):
    id: str
    source: str  # file under shared/ (seeds/..., notes/...) or results/<run-id> for the user's runs
    table: str
    n8n_version: str | None
    hardware: Hardware
    workflow: str  # light | code-heavy | webhook-http | a user's workflow name
    setup: MeasuredSetup
    load: Load
    results: Results
    note: str | None = None


def describe_setup(m: Measurement) -> str:
    s = m.setup
    if s.mode == "regular":
        text = "regular" + (f", limit {s.production_limit}" if s.production_limit else "") + f", {s.db}"
    else:
        text = f"queue, {s.workers} worker(s)"
        if s.webhook_processors:
            text += f", {s.webhook_processors} webhook"
        if s.concurrency is not None:
            text += f", --concurrency {s.concurrency}"
        if s.runner_concurrency is not None:
            text += f", runner {s.runner_concurrency}"
    return text


class MeasurementSet(Frozen):
    schema_: int = Field(alias="schema")
    about: str
    measurements: tuple[Measurement, ...]


@lru_cache(maxsize=1)
def load_embedded() -> tuple[Measurement, ...]:
    """The measurements shipped in the package."""
    text = resources.files("n8n_sizer").joinpath("data/measurements.json").read_text(encoding="utf-8")
    return MeasurementSet.model_validate(json.loads(text)).measurements


def by_id(measurements: tuple[Measurement, ...] | list[Measurement]) -> dict[str, Measurement]:
    return {m.id: m for m in measurements}


# The namespace lab's topologies (benchmarks/lab_shape.py --embed writes data/lab_shape.json): what each carried, on
# hosts of which budgets and roles. answer/lab_points.py predicts them; the fit reads their speed probes and sizes.
class LabHost(Frozen):
    name: str
    roles: dict[str, int]
    cores: float = Field(gt=0)  # the host's CPU budget here (vcpu x scale)
    vcpu: int = Field(gt=0)


class LabPoint(Frozen):
    id: str
    label: str
    hosts: list[LabHost]
    concurrency: int = Field(gt=0)
    worker_pool: int = Field(gt=0)
    usable: float = Field(gt=0, le=1)
    outside_cores: float = Field(ge=0)
    measured_per_s: float = Field(gt=0)
    accepted: int = Field(ge=0)
    lost: int = Field(ge=0)
    row_tag: str  # the run's tag in the ids of its embedded per-role rows (`-<tag>-`)
    host_class: str
    machine_load_avg: list[float]
    source: str
    # this machine's speed in the point's sitting (lab/speed.py: CPU ms of a fixed JavaScript workload, before and
    # after it); None for the campaigns measured before the probe existed
    speed_probe_ms: float | None = Field(default=None, gt=0)

    def owns(self, measurement_id: str) -> bool:
        return f"-{self.row_tag}-" in measurement_id


@lru_cache(maxsize=1)
def load_lab_points() -> tuple[LabPoint, ...]:
    try:
        text = resources.files("n8n_sizer").joinpath("data/lab_shape.json").read_text(encoding="utf-8")
    except FileNotFoundError:
        return ()
    return tuple(LabPoint.model_validate(p) for p in json.loads(text)["points"])
