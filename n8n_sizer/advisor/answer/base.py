"""The recommendation's output models (`advise --json` keeps today's keys and adds the topology contract)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

from pydantic import Field

from n8n_sizer.advisor.profiles import WorkflowProfile
from n8n_sizer.advisor.setup import Setup
from n8n_sizer.safety.frozen import Frozen

RecommendedMode = Literal["regular", "regular-limit", "queue"]
# The topology contract's render step (docs/advise-topology.md): `advise --json > advice.json` first.
RENDER_TOPOLOGY = "n8n-sizer render --topology advice.json --out cluster/"


class Request(Frozen):
    rps: float = Field(gt=0)
    vcpu: int | None = Field(None, gt=0)
    arch: Literal["x86", "arm"] = "x86"
    provider: Literal["hetzner", "gcp"] | None = None
    profile: WorkflowProfile
    p95_ms: float | None = Field(None, gt=0)
    # 1 is the single-server question (what the library's callers, e.g. the bench report, ask by default);
    # `advise` passes its own default so the CLI also searches multi-host topologies.
    max_hosts: int = Field(1, ge=1, le=200)
    # A topology the user gave (`advise --topology`): scored, not searched, so its warnings speak of it alone.
    given: bool = False


class Interval(Frozen):
    low: float
    mid: float
    high: float


class ServerChoice(Frozen):
    provider: str | None
    size: str | None
    vcpu: float
    arch: str
    monthly_eur: float | None
    shared_core: bool = False


class SizeFit(Frozen):
    provider: str
    size: str
    vcpu: int
    arch: str
    monthly_eur: float
    mode: RecommendedMode
    workers: int
    capacity_per_s: float
    carries: bool


@dataclass(frozen=True, kw_only=True)
class Roles:
    """Process counts per host (main, postgres, redis, load_balancer 0/1): a host group's `roles` in the advise
    JSON, and the role part of the topology search's `Group`, which inherits them. A plain dataclass, not a
    model, so that the search's Group (built thousands of times) can inherit it without validation; pydantic
    dumps it inside HostGroup to the same JSON object."""

    main: int = 0
    webhook: int = 0
    workers: int = 0
    postgres: int = 0
    redis: int = 0
    load_balancer: int = 0

    def counts(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(Roles)}


class HostGroup(Frozen):
    name: str
    provider: str | None
    size: str | None
    vcpu: int
    count: int = Field(ge=1)
    roles: Roles
    monthly_eur: float | None  # per host, None off the catalog (`--vcpu` without a matching size)


class PoolSizes(Frozen):
    """DB_POSTGRESDB_POOL_SIZE per n8n role; None where the role does not run."""

    main: int
    webhook: int | None
    worker: int | None


class BindingBound(Frozen):
    name: str  # host | cpu | main | webhook | workers | runners | redis | slots | latency
    role: str  # main | webhook | worker | postgres | redis | load_balancer | several joined by +
    host: str | None  # the host group's name
    why: str


class Recommendation(Frozen):
    request: dict
    mode: RecommendedMode
    workers: int  # total over the topology
    concurrency: int | None
    concurrency_per_vcpu: float | None  # execution slots (workers x --concurrency) per worker-host vCPU
    runner_concurrency: int
    production_limit: int | None
    db_pool_size: PoolSizes
    postgres_connections: int
    max_connections: int
    max_connections_ram_mib: float  # what Postgres may need for that many backends (pools.py, a prior)
    redis: list[str]
    queue_keep_last: int | None = None  # N8N_EXECUTIONS_QUEUE_KEEP_LAST_COMPLETED and _FAILED, queue mode only
    capacity_per_s: Interval
    headroom: float  # capacity mid / rate - 1
    feasible: bool
    cpu_utilisation: float | None  # of the busiest host's cores
    p95_ms: float | None
    bound: BindingBound
    ram_idle_mb: float | None
    ram_peak_mb: float | None
    server: ServerChoice  # the single host, or the worker hosts' size of a topology
    topology: list[HostGroup]
    webhook_processors: int
    hosts: int
    monthly_eur: float | None  # the whole topology
    render_command: str
    fits: list[SizeFit]
    warnings: list[str]
    evidence: list[str]
    notes: list[str]
    extrapolated: bool
    setup: Setup  # the n8n setup of one host (single-host answers; a topology's worker hosts otherwise)
