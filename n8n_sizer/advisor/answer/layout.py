"""A multi-host n8n deployment as host groups with roles, and its capacity by the operational laws.

n8n's own way past one process is queue mode across processes and hosts: webhook processors (`n8n webhook`)
take production webhooks behind a load balancer, main keeps the editor, API and timers, workers execute
(each with its task runner), Redis and Postgres are shared. Multi-main needs an n8n licence: out of scope,
so main is 0/1 in a whole topology. Bounds, each in executions per second (utilisation law, X = U / D):

- per host: its free cores (vCPU less each process's idle CPU) / the CPU per execution of the roles on it,
  each role charged its share of the executions (a webhook processor takes 1/W_h of them, a worker 1/W);
- per process: `process_cores` / its demand for main, each webhook processor and each worker (all of one
  role share the load, so the role bound is count x cores / demand); each task runner 1 core;
- Redis: one core (single-threaded) / its demand; Postgres: its host's cores (multi-process), and its
  connections (pools.py) must fit under `max_connections` (a topology that cannot is not offered);
- the load balancer: its host's cores (a multi-threaded proxy);
- the slots: workers x `--concurrency` / residence time (Little's law).

Capacity is the soft minimum of the bounds, as for one host (capacity.py). Demands by role: roles.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from n8n_sizer.advisor.answer.contract import ROLE_NAMES, Roles
from n8n_sizer.advisor.capacity import (
    P95_OF_EXPONENTIAL,
    RUNNER_CORES,
    SERVICE_CV2,
    CapacityModel,
    HostShape,
    sakasegawa_wait_factor,
    softmin,
)
from n8n_sizer.advisor.profiles import WorkflowProfile
from n8n_sizer.advisor.roles import RoleDemands, role_demands
from n8n_sizer.advisor.settings import BURST_FACTOR
from n8n_sizer.advisor.setup import DEFAULT_WORKER_CONCURRENCY, MAX_CONCURRENCY

COMFORT_UTILISATION = 0.7  # as recommend.py: a 1.4x burst still fits


@dataclass(frozen=True, kw_only=True)
class RoleCounts:
    """Process counts per host, as the contract's `Roles`: a plain dataclass, so that the search's Group (built
    thousands of times) inherits them without validation."""

    main: int = 0
    webhook: int = 0
    workers: int = 0
    postgres: int = 0
    redis: int = 0
    load_balancer: int = 0

    def counts(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in ROLE_NAMES}


@dataclass(frozen=True)
class Group(RoleCounts):
    """`count` identical hosts, each running these role counts (per host; keyword-only, from RoleCounts)."""

    name: str
    host: HostShape
    count: int = 1
    provider: str | None = None
    size: str | None = None
    monthly_eur: float | None = None  # per host

    @property
    def processes(self) -> int:
        return self.main + self.webhook + self.workers

    def roles(self) -> Roles:
        return Roles(**self.counts())


@dataclass(frozen=True)
class Layout:
    groups: tuple[Group, ...]
    concurrency: int = DEFAULT_WORKER_CONCURRENCY  # `worker --concurrency`, every worker
    worker_pool: int = DEFAULT_WORKER_CONCURRENCY + 1  # DB_POSTGRESDB_POOL_SIZE of every worker

    # Cached: the search asks these thousands of times (functools.cached_property writes the instance's
    # __dict__ directly, which a frozen dataclass allows).
    @cached_property
    def webhooks(self) -> int:
        return sum(g.count * g.webhook for g in self.groups)

    @cached_property
    def workers(self) -> int:
        return sum(g.count * g.workers for g in self.groups)

    @cached_property
    def hosts(self) -> int:
        return sum(g.count for g in self.groups)

    @property
    def monthly_eur(self) -> float | None:
        prices = [g.monthly_eur for g in self.groups]
        return None if any(p is None for p in prices) else round(sum(g.count * g.monthly_eur for g in self.groups), 2)

    def group_with(self, role: str) -> Group:
        return next(g for g in self.groups if getattr(g, role) > 0)


@dataclass(frozen=True)
class TopologyBound:
    name: str  # host | main | webhook | workers | runners | redis | slots
    role: str  # the role that binds: main, webhook, worker, postgres, redis, load_balancer, or several
    host: str | None  # the host group it binds on, None for the whole topology (slots)
    per_s: float
    why: str


class TopologyModel:
    """Questions about one layout for one workflow profile; demands computed once."""

    def __init__(self, model: CapacityModel, profile: WorkflowProfile, layout: Layout):
        self.model, self.profile, self.layout = model, profile, layout
        self.d: RoleDemands = role_demands(model, profile, layout.webhooks > 0)
        # each host its speed, and its crowding by the n8n processes on it (capacity.py)
        self._factors = {g.name: model.host_factor(g.host) * model.crowding(g.host, g.processes) for g in layout.groups}
        self._bounds = self._resource_bounds()
        self._ceiling = min(b.per_s for b in self._bounds)

    def _h(self, g: Group) -> float:
        return self._factors[g.name]

    def _host_cpu_s(self, g: Group) -> float:
        """CPU seconds one host of the group spends per execution of the whole topology."""
        d, lay = self.d, self.layout
        ingest = g.webhook / lay.webhooks if lay.webhooks else g.main
        work = g.workers / lay.workers
        return self._h(g) * (
            ingest * (d.ingest_s + d.rest_ingest_s)
            + g.main * d.main_residual_s
            + work * (d.worker_s + d.rest_worker_s + d.runner_s)
            + g.postgres * d.postgres_s
            + g.redis * d.redis_s
            + g.load_balancer * d.load_balancer_s
        )

    def _resource_bounds(self) -> list[TopologyBound]:
        d, lay = self.d, self.layout
        pcs = {g.name: self.model.process_cores_on(g.host.vcpu) for g in lay.groups}
        out = []
        for g in lay.groups:
            cpu = self._host_cpu_s(g)
            if cpu > 0:
                free = max(
                    self.model.usable_cores(g.host) - self.model.idle_of(g.host, g.main, g.webhook, g.workers), 1e-9
                )
                roles = "+".join(r for r, n in g.counts().items() if n)
                out.append(
                    TopologyBound(
                        "host",
                        roles,
                        g.name,
                        free / cpu,
                        f"{g.host.vcpu:g} vCPU / {cpu * 1000:.1f} ms CPU per execution of its roles",
                    )
                )
        main_g = lay.group_with("main")
        main_s = (d.main_residual_s if lay.webhooks else d.ingest_s) * self._h(main_g)
        pc = pcs[main_g.name]
        out.append(
            TopologyBound(
                "main", "main", main_g.name, pc / main_s, f"main: {pc:.2f} cores / {main_s * 1000:.1f} ms per execution"
            )
        )
        for g in lay.groups:
            h, pc = self._h(g), pcs[g.name]
            if g.webhook:
                out.append(
                    TopologyBound(
                        "webhook",
                        "webhook",
                        g.name,
                        lay.webhooks * pc / (h * d.ingest_s),
                        f"{lay.webhooks} webhook processor(s) x {pc:.2f} cores / {h * d.ingest_s * 1000:.1f} ms",
                    )
                )
            if g.workers:
                out.append(
                    TopologyBound(
                        "workers",
                        "worker",
                        g.name,
                        lay.workers * pc / (h * d.worker_s),
                        f"{lay.workers} worker(s) x {pc:.2f} cores / {h * d.worker_s * 1000:.1f} ms",
                    )
                )
                if d.runner_s > 0:
                    out.append(
                        TopologyBound(
                            "runners",
                            "worker",
                            g.name,
                            lay.workers * RUNNER_CORES / (h * d.runner_s),
                            f"{lay.workers} task runner(s) x 1 core / {h * d.runner_s * 1000:.0f} ms of Code node CPU",
                        )
                    )
            if g.redis:
                out.append(
                    TopologyBound(
                        "redis",
                        "redis",
                        g.name,
                        1.0 / (h * d.redis_s),
                        f"Redis: 1 core (single-threaded) / {h * d.redis_s * 1000:.2f} ms per execution",
                    )
                )
        return out

    # --- questions -----------------------------------------------------------------------------
    @cached_property
    def _path_s(self) -> float:
        ingest_g = self.layout.group_with("webhook" if self.layout.webhooks else "main")
        worker_g = self.layout.group_with("workers")
        return self._h(ingest_g) * self.d.ingest_s + self._h(worker_g) * (self.d.worker_s + self.d.runner_s)

    def path_s(self) -> float:
        """CPU seconds on one execution's critical path: its ingest process, its worker and its runner."""
        return self._path_s

    def residence_s(self, x: float) -> float:
        """One execution's time in flight at throughput x: its wait, its CPU path, stretched by the worker
        hosts' CPU queue (Sakasegawa, as capacity.py)."""
        worker_g = self.layout.group_with("workers")
        host_bound = next(b.per_s for b in self._bounds if b.name == "host" and b.host == worker_g.name)
        stretch = 1.0 + sakasegawa_wait_factor(x / host_bound, worker_g.host.vcpu)
        return self.d.wait_s + self.path_s() * stretch

    def bounds(self) -> list[TopologyBound]:
        """Resource bounds plus the slots: W x concurrency / (wait + CPU path), Little's law at the shortest
        residence an execution can have. Sized by `worker_settings`, the slots sit above the CPU bounds."""
        lay = self.layout
        slots = lay.workers * lay.concurrency
        out = self._bounds + [
            TopologyBound(
                "slots",
                "worker",
                None,
                slots / (self.d.wait_s + self.path_s()),
                f"{slots} execution slots / {1000 * (self.d.wait_s + self.path_s()):.0f} ms "
                "per execution (Little's law)",
            )
        ]
        return sorted(out, key=lambda b: b.per_s)

    def capacity_per_s(self) -> float:
        return softmin([b.per_s for b in self.bounds()])

    def binding(self) -> TopologyBound:
        """As capacity.py: Little's bound rides on the next resource; within 10% name that one."""
        ordered = self.bounds()
        if ordered[0].name == "slots" and len(ordered) > 1 and ordered[1].per_s <= 1.1 * ordered[0].per_s:
            return ordered[1]
        return ordered[0]

    def in_flight_per_worker(self, x: float) -> float:
        return x * self.residence_s(x) / self.layout.workers

    def p95_ms(self, rate: float) -> float:
        """Server-side p95 at an offered rate (Poisson arrivals), as capacity.p95_ms_at."""
        cap = self.capacity_per_s()
        rho = rate / cap
        if rho >= 1.0:
            return math.inf
        b = self.binding()
        lay = self.layout
        servers = {"workers": lay.workers, "runners": lay.workers, "webhook": lay.webhooks}.get(b.name, 1)
        if b.name == "host":
            servers = next(g.host.vcpu for g in lay.groups if g.name == b.host)
        wq = sakasegawa_wait_factor(rho, servers) * (1.0 + SERVICE_CV2) / 2.0 * servers / cap
        return 1000.0 * (self.d.wait_s + self.path_s() + P95_OF_EXPONENTIAL * wq)


def worker_settings(
    model: CapacityModel, profile: WorkflowProfile, host: HostShape, workers_per_host: int
) -> tuple[int, int]:
    """(`worker --concurrency`, worker DB pool) for one worker, from the worker process alone: the most it
    can run (its own `process_cores` ceiling, or its runner's one core) at COMFORT_UTILISATION, through
    Little's law (in flight = rate x time in flight) x the burst factor. The time in flight is the wait plus
    the CPU path stretched as an M/M/1 queue at that utilisation (the worst a busy core does). Neither depends
    on the host's size or the requested rate, so a bigger host or a higher rate never changes them.
    Concurrency never below n8n's default of 10 (seed 000: lower costs throughput); the pool counts only
    executions using CPU, not those waiting (a Wait node holds no connection), plus one for bookkeeping
    (pools.worker_pool_size)."""
    from n8n_sizer.advisor.pools import worker_pool_size

    d = role_demands(model, profile, True)
    h = model.host_factor(host)
    ceilings = [model.process_cores_on(host.vcpu) / (h * d.worker_s)]
    if d.runner_s > 0:
        ceilings.append(RUNNER_CORES / (h * d.runner_s))
    x = COMFORT_UTILISATION * min(ceilings)
    busy = h * (d.ingest_s + d.worker_s + d.runner_s) * (1.0 + sakasegawa_wait_factor(COMFORT_UTILISATION, 1.0))
    # a recommendation, never a refusal: at most what a Setup holds (setup.py MAX_CONCURRENCY)
    concurrency = min(MAX_CONCURRENCY, max(DEFAULT_WORKER_CONCURRENCY, math.ceil(BURST_FACTOR * x * (d.wait_s + busy))))
    return concurrency, worker_pool_size(concurrency, x * busy)


@dataclass(frozen=True)
class PoolPlan:
    main: int
    webhook: int | None  # None without webhook processors
    worker: int
    postgres_connections: int
    max_connections: int
    connection_ram_mib: float


def plan_pools(tm: TopologyModel, capacity_per_s: float) -> PoolPlan:
    """Pools per role (pools.py; the workers' from `worker_settings`), the connections they open, and
    max_connections with the RAM it costs. Main and webhook pools at the comfortable rate."""
    from n8n_sizer.advisor import pools

    lay = tm.layout
    x = COMFORT_UTILISATION * capacity_per_s
    worker = lay.worker_pool
    if lay.webhooks:
        main, webhook = pools.DEFAULT_DB_POOL_SIZE, pools.ingest_pool_size(x / lay.webhooks)
    else:
        main, webhook = pools.ingest_pool_size(x), None
    conns = pools.connections(main, webhook or 0, lay.webhooks, worker, lay.workers)
    maxc = pools.recommended_max_connections(conns)
    return PoolPlan(
        main=main,
        webhook=webhook,
        worker=worker,
        postgres_connections=conns,
        max_connections=maxc,
        connection_ram_mib=pools.connection_ram_mib(maxc),
    )
