"""The recommendation's output models (`advise --json` keeps today's keys and adds the topology contract)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from n8n_sizer.advisor.answer.contract import HostGroup, PoolSizes
from n8n_sizer.advisor.capacity import Bound, CapacityModel
from n8n_sizer.advisor.fit import FittedModel
from n8n_sizer.advisor.measurements import Measurement
from n8n_sizer.advisor.profiles import WorkflowProfile
from n8n_sizer.advisor.ram import MemoryPlan, RamModel
from n8n_sizer.advisor.setup import Setup
from n8n_sizer.safety.frozen import Frozen

RecommendedMode = Literal["regular", "regular-limit", "queue"]
# The topology contract's render step (docs/advise-topology.md): `advise --json > advice.json` first.
RENDER_TOPOLOGY = "n8n-sizer render --topology advice.json --out cluster/"
# Several hosts are called from outside: their webhooks' address is the load balancer's public URL (yours).
RENDER_CLUSTER = RENDER_TOPOLOGY + " --public-url http://n8n.example.com:5678/"


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


def request_echo(req: Request) -> dict:
    """The request as the answer repeats it (the inputs it was based on, PGTune style)."""
    p = req.profile
    return {
        "rps": req.rps,
        "vcpu": req.vcpu,
        "arch": req.arch,
        "provider": req.provider,
        "workload": p.name,
        "cpu_ms": p.code_cpu_ms,
        "wait_ms": p.wait_ms,
        "p95_ms": req.p95_ms,
        "max_hosts": req.max_hosts,
    }


@dataclass(frozen=True)
class Basis:
    """What every answer rests on, handed to the builders (single.py, multi.py, given.py) as typed input: the fit,
    the RAM model, the model's notes per (workflow, vCPU, arch) and the longest shared-core soak (the latency floor
    of burstable sizes)."""

    fitted: FittedModel
    ram: RamModel
    notes: dict[tuple, str]
    soak: Measurement | None

    def notes_about(self, workflow: str, vcpu: float, arch: str) -> list[str]:
        """The model's notes about this workflow on this host shape only: an answer says nothing of others."""
        note = self.notes.get((workflow, float(vcpu), arch))
        return [note] if note else []

    @property
    def model(self) -> CapacityModel:
        return self.fitted.model


@dataclass(frozen=True)
class Candidate:
    """One setup on one host with its capacity and what binds it (settings sized at its own comfortable rate)."""

    mode: str
    setup: Setup
    mid: float
    bound: Bound
    # Where the host's memory capped the executions at once (production limit or --concurrency): what Little's law
    # asked for, and the most the host's memory holds (ram.slots_that_fit); None where it did not cap.
    slots_asked: int | None = None
    slots_memory_cap: int | None = None


@dataclass(frozen=True)
class SingleChoice:
    """A single-host answer: where (a HostOption), the setup, and its p95 at the rate."""

    option: object  # topology_search.HostOption (kept untyped here: that module imports this one)
    shared_core: bool
    cand: Candidate
    p95: float | None


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
    carries: bool  # rate below capacity (and the p95 target met)
    comfortable: bool = False  # and at or below COMFORT_UTILISATION of capacity: the rule the verdict uses


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
    comfortable: bool = False  # carries it at or below COMFORT_UTILISATION of capacity (and within the p95 target)
    concurrency_setting: str = ""  # the concurrency setting in words, per vCPU, every mode
    memory: MemoryPlan | None = None  # one host's containers: their memory limits and the host's room (ram.py)
    held_mb: float | None = None  # what one execution in flight holds (the workload's; None: the light figure)
    one_host: OneHost | None = None  # with --vcpu N: the best setup on one N-vCPU host, what it carries
    alternatives: list[Alternative] = []  # the ways past it, each priced, with the command that answers it first
    # monthly_eur rests on a server the catalog does not hold, priced from its provider's rates (catalog.price_rate)
    price_estimated: bool = False


class OneHost(Frozen):
    """The best setup on one host of the size asked (`--vcpu N`), and what it carries."""

    vcpu: int
    arch: str
    provider: str | None
    size: str | None
    monthly_eur: float | None
    mode: RecommendedMode
    workers: int
    concurrency: int | None
    production_limit: int | None
    runner_concurrency: int
    concurrency_per_vcpu: float | None
    db_pool_size: PoolSizes
    capacity_per_s: Interval
    carries: bool
    comfortable: bool
    bound: BindingBound
    price_estimated: bool = False  # monthly_eur from the provider's rates: no catalog size has this many vCPU


class Alternative(Frozen):
    """One priced way to carry the rate (or to come closest), as `advise --json` would answer it first."""

    what: str  # e.g. "the cheapest single host that carries 40/s"
    monthly_eur: float | None
    hosts: int
    capacity_per_s: Interval
    carries: bool
    comfortable: bool
    mode: RecommendedMode
    workers: int
    webhook_processors: int
    concurrency: int | None
    production_limit: int | None
    runner_concurrency: int
    db_pool_size: PoolSizes
    max_connections: int
    topology: list[HostGroup]
    advise_command: str  # ask this, with --json > advice.json, then render_command
    render_command: str
    price_estimated: bool = False  # monthly_eur from the provider's rates (Recommendation.price_estimated)


Recommendation.model_rebuild()
