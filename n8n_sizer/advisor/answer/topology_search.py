"""Search multi-host topologies over host options for the cheapest that carries a rate with headroom.

Shapes (all queue mode with webhook processors behind a load balancer; main 1 in the whole topology):
- `app + workers`: one host with main, the load balancer, webhook processors, Postgres and Redis; N worker hosts;
- `data + ingest + workers`: Postgres and Redis on their own host, main + load balancer + webhook processors
  on another, N worker hosts;
- `data + ingest + webhook x M + workers`: as above with M more hosts of webhook processors.

Per host the process counts are fixed first (the count that gives that host size the most capacity for its
role), so the search only chooses sizes and host counts. Every candidate is scored by the full topology
model (layout.py); the list of candidates does not depend on the requested rate, so a higher rate never
gets an answer with less capacity (a candidate that carried the old rate and still carries the new one stays
the cheapest). Fast: a few thousand arithmetic evaluations, no numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from n8n_sizer.advisor import ram
from n8n_sizer.advisor.answer.layout import (
    COMFORT_UTILISATION,
    Group,
    Layout,
    PoolPlan,
    TopologyModel,
    plan_pools,
    worker_settings,
)
from n8n_sizer.advisor.capacity import RUNNER_CORES, SOFTMIN_K, CapacityModel, HostShape, softmin
from n8n_sizer.advisor.pools import (
    MAX_CONNECTIONS_STEP,
    RAM_MIB_PER_VCPU_ASSUMED,
    connection_budget,
    required_max_connections,
)
from n8n_sizer.advisor.profiles import WorkflowProfile
from n8n_sizer.advisor.roles import role_demands
from n8n_sizer.advisor.setup import DEFAULT_RUNNER_CONCURRENCY, most_workers

MAX_HOSTS_DEFAULT = 40
MAX_WEBHOOK_HOSTS = 12


@dataclass(frozen=True)
class HostOption:
    """A host the search may use: a catalog size, or `--vcpu V` hosts of the reference speed."""

    shape: HostShape
    provider: str | None
    size: str | None
    vcpu: int
    monthly_eur: float | None
    ram_mib: int | None


@dataclass(frozen=True)
class Scored:
    layout: Layout
    capacity_per_s: float
    cost: tuple  # (monthly EUR or inf, hosts): what "cheapest" compares
    pools: PoolPlan
    # Set by `most_capacity`: the most capacity any candidate within max_hosts reaches (this one is within
    # PLATEAU_MARGIN of it, or carries the rate asked).
    most_reachable_per_s: float | None = None

    @property
    def hosts(self) -> int:
        return self.layout.hosts


# A gain smaller than this share of capacity is no gain: far inside the model's own noise (seed 000's repeat runs
# moved 25%), so more processes or hosts are not bought for it.
NEGLIGIBLE_GAIN = 0.005
# Near a single process's ceiling (one Redis, one main) the capacity of a topology flattens as hosts are added:
# the last few percent of the most capacity reachable cost many hosts (issue 25: 40 hosts for 485/s where 6 carried
# 451/s). When nothing carries the rate comfortably, the answer is the cheapest topology within this share of the
# most capacity reachable (or one that carries the rate, if only the top ones do), and it says so. 3% is a quarter
# of the model's own noise per point (fit.NOISE_FLOOR, 11%): a difference the evidence cannot tell apart.
PLATEAU_MARGIN = 0.03


def _best_count(values: list[float]) -> int:
    """1-based index of the first value within NEGLIGIBLE_GAIN of the largest: the fewest processes that give
    (all but a negligible part of) the most capacity."""
    top = max(values)
    return next(i for i, v in enumerate(values) if v >= (1.0 - NEGLIGIBLE_GAIN) * top) + 1


def workers_per_host(model: CapacityModel, profile: WorkflowProfile, opt: HostOption) -> int:
    """Workers that give one worker host the most capacity: more than its cores' worth adds idle CPU only, and no
    more than its memory holds (ram.py: each worker at its --concurrency with its runner); 0 when not one fits."""
    d = role_demands(model, profile, True)
    v = model.usable_cores(opt.shape)
    pc = model.process_cores_on(opt.shape.vcpu)
    caps = []
    for k in range(1, most_workers(opt.vcpu, shared=False) + 1):
        h = model.host_factor(opt.shape) * model.crowding(opt.shape, k)
        per_exec = h * (d.worker_s + d.rest_worker_s + d.runner_s)
        bounds = [max(v - model.idle_of(opt.shape, workers=k), 1e-9) / per_exec, k * pc / (h * d.worker_s)]
        if d.runner_s > 0:
            bounds.append(k * RUNNER_CORES / (h * d.runner_s))
        caps.append(softmin(bounds))
    return min(_best_count(caps), _most_by_memory(model, profile, opt, workers=1))


def _most_by_memory(model: CapacityModel, profile: WorkflowProfile, opt: HostOption, **one: int) -> int:
    """How many of one role (`workers=1` or `webhook=1`) the host's usable memory holds (ram.py), alone on it."""
    concurrency, _ = worker_settings(model, profile, opt.shape, 1)
    need = ram.cluster_host_limits_mib(
        **one,
        concurrency=concurrency,
        runner_concurrency=DEFAULT_RUNNER_CONCURRENCY,
        held=profile.held_mb,
    )
    return ram.usable_mib(_ram_mib(opt)) // need


def _ram_mib(opt: HostOption) -> int:
    return opt.ram_mib or RAM_MIB_PER_VCPU_ASSUMED * opt.vcpu


def webhooks_per_host(model: CapacityModel, profile: WorkflowProfile, opt: HostOption) -> int:
    """Webhook processors that give one ingest host the most capacity."""
    d = role_demands(model, profile, True)
    v = model.usable_cores(opt.shape)
    pc = model.process_cores_on(opt.shape.vcpu)
    caps = []
    for k in range(1, 2 * opt.vcpu + 2):
        h = model.host_factor(opt.shape) * model.crowding(opt.shape, k)
        per_exec = h * (d.ingest_s + d.rest_ingest_s + d.load_balancer_s)
        caps.append(
            softmin([max(v - model.idle_of(opt.shape, main=1, webhook=k), 1e-9) / per_exec, k * pc / (h * d.ingest_s)])
        )
    return max(1, min(_best_count(caps), _most_by_memory(model, profile, opt, webhook=1) - 1))


def _group(name: str, opt: HostOption, count: int = 1, **roles: int) -> Group:
    return Group(
        name=name,
        host=opt.shape,
        count=count,
        provider=opt.provider,
        size=opt.size,
        monthly_eur=opt.monthly_eur,
        **roles,
    )


@dataclass(frozen=True)
class _Front:
    """A front end (every non-worker host) with what the search needs of it, computed once."""

    groups: tuple[Group, ...]
    inv_k: float  # sum of bound^-k over its bounds: the soft minimum's sum, see capacity.softmin
    eur: float | None
    hosts: int
    connections: int  # its own processes' connections (main pool + 1, webhook processors' pools)
    max_connections: int  # what its data host's RAM carries (pools.connection_budget)
    provider: str | None  # every host of a cluster is of one provider


@dataclass(frozen=True)
class _Workers:
    """A worker host option: its bounds at one host (each grows n-fold with n hosts) and connections."""

    option: HostOption
    inv_k: float
    connections_per_host: int
    k: int  # workers per host


def _capacity(front: _Front, workers: _Workers, n: int) -> float:
    """softmin(front bounds + n x worker bounds) = (F + n^-k W)^(-1/k), O(1) (capacity.softmin, k = SOFTMIN_K)."""
    return (front.inv_k + n**-SOFTMIN_K * workers.inv_k) ** (-1.0 / SOFTMIN_K)


def _inv_k(values: list[float]) -> float:
    return sum(v**-SOFTMIN_K for v in values if math.isfinite(v))


class TopologySearch:
    """Candidates over host options for one profile; `carrying(rate)` and `most_capacity()` answer."""

    def __init__(self, model: CapacityModel, profile: WorkflowProfile, options: list[HostOption], max_hosts: int):
        self.model, self.profile, self.max_hosts = model, profile, max_hosts
        self.options = [o for o in options]
        self.kw = {o: workers_per_host(model, profile, o) for o in self.options}
        self.kh = {o: webhooks_per_host(model, profile, o) for o in self.options}
        self._worker_parts: dict[tuple, _Workers] = {}
        self._settings: dict[tuple, tuple[int, int]] = {}
        self._cached: tuple[list[_Front], list[_Workers]] | None = None
        self._concurrency: dict[HostShape, int] = {}  # worker --concurrency per host shape (layout.worker_settings)

    def layout(self, front: tuple[Group, ...], worker: HostOption, n: int, k: int | None = None) -> Layout:
        k = self.kw[worker] if k is None else k
        key = (worker.shape, k)
        if key not in self._settings:
            self._settings[key] = worker_settings(self.model, self.profile, worker.shape, k)
        concurrency, pool = self._settings[key]
        return Layout(front + (_group("worker", worker, n, workers=k),), concurrency=concurrency, worker_pool=pool)

    def front_ends(self) -> list[tuple[Group, ...]]:
        """Every non-worker part: app host; or data host + ingest host (+ M webhook hosts of its size)."""
        out = []
        for o in self.options:
            out.append((_group("app", o, main=1, webhook=self.kh[o], postgres=1, redis=1, load_balancer=1),))
        for data in self.options:
            for o in self.options:
                if o.provider != data.provider:  # one cluster lives in one provider's private network
                    continue
                k = self.kh[o]
                base = (
                    _group("data", data, postgres=1, redis=1),
                    _group("ingest", o, main=1, webhook=k, load_balancer=1),
                )
                for m in range(0, min(MAX_WEBHOOK_HOSTS, self.max_hosts - 3) + 1):
                    out.append(base + ((_group("webhook", o, m, webhook=k),) if m else ()))
        return [f for f in out if sum(g.count for g in f) < self.max_hosts]

    def _parts(self) -> tuple[list[_Front], list[_Workers]]:
        """Fronts and worker options evaluated once each: a worker-side bound does not depend on the front
        (same arch, so the same host speed on the execution's path) and a front's bounds not on the workers."""
        if self._cached is None:
            fronts_groups = self.front_ends()
            host_ram = {(o.shape, o.size): _ram_mib(o) for o in self.options}
            able = [o for o in self.options if self.kw[o] >= 1]  # worker hosts whose memory holds a worker
            if not able:
                self._cached = ([], [])
                return self._cached
            ref_w = able[0]
            fronts = []
            for groups in fronts_groups:
                if not all(self._front_fits(g) for g in groups):
                    continue  # a host of this front cannot hold its containers (ram.py): never chosen
                data = next(g for g in groups if g.postgres)
                tm = TopologyModel(self.model, self.profile, self.layout(groups, ref_w, 1))
                bounds = tm.bounds()
                pools = plan_pools(tm, tm.capacity_per_s())
                own = [b.per_s for b in bounds if not (b.host == "worker" or b.name == "slots")]
                eur = [g.monthly_eur for g in groups]
                fronts.append(
                    _Front(
                        groups,
                        _inv_k(own),
                        None if None in eur else sum(g.count * g.monthly_eur for g in groups),
                        sum(g.count for g in groups),
                        pools.postgres_connections - self.kw[ref_w] * tm.layout.worker_pool,
                        min(connection_budget(host_ram[(data.host, data.size)]), self._postgres_room(data)),
                        data.provider,
                    )
                )
            self._cached = (fronts, [self._workers(o, self.kw[o]) for o in self.options if self.kw[o] >= 1])
        return self._cached

    def _limits(self, g: Group, postgres_connections: int | None) -> int:
        if g.host not in self._concurrency:
            self._concurrency[g.host] = worker_settings(self.model, self.profile, g.host, 1)[0]
        concurrency = self._concurrency[g.host]
        return ram.cluster_host_limits_mib(
            main=g.main,
            webhook=g.webhook,
            redis=g.redis,
            postgres_connections=postgres_connections,
            concurrency=concurrency,
            runner_concurrency=DEFAULT_RUNNER_CONCURRENCY,
            held=self.profile.held_mb,
        )

    def _usable(self, g: Group) -> int:
        return ram.usable_mib(next(_ram_mib(o) for o in self.options if (o.shape, o.size) == (g.host, g.size)))

    def _front_fits(self, g: Group) -> bool:
        """Its n8n processes, runners and Redis (and Postgres at its smallest) within the host's usable memory."""
        return self._limits(g, MAX_CONNECTIONS_STEP if g.postgres else None) <= self._usable(g)

    def _postgres_room(self, g: Group) -> int:
        """The most max_connections Postgres' memory holds on its host, beside that host's other containers."""
        return ram.postgres_most_connections(self._usable(g) - self._limits(g, None))

    def _workers(self, o: HostOption, k: int) -> _Workers:
        key = (o, k)
        if key not in self._worker_parts:
            groups = (_group("app", o, main=1, webhook=1, postgres=1, redis=1, load_balancer=1),)
            tm = TopologyModel(self.model, self.profile, self.layout(groups, o, 1, k))
            unit = [b.per_s for b in tm.bounds() if b.host == "worker" or b.name == "slots"]
            self._worker_parts[key] = _Workers(o, _inv_k(unit), k * tm.layout.worker_pool, k)
        return self._worker_parts[key]

    def _room(self, f: _Front, w: _Workers) -> int:
        """Worker hosts allowed: within max_hosts, and few enough that every pool, with the operators'
        headroom, fits the max_connections its data host's RAM carries (connections grow with the workers).
        None of another provider than the front's: one cluster lives in one private network."""
        if w.option.provider != f.provider:
            return 0
        by_conn = (f.max_connections - required_max_connections(f.connections)) // w.connections_per_host
        return min(self.max_hosts - f.hosts, by_conn)

    @staticmethod
    def _cost(f: _Front, w: _Workers, n: int) -> tuple:
        eur = None if f.eur is None or w.option.monthly_eur is None else f.eur + n * w.option.monthly_eur
        return (eur if eur is not None else math.inf, f.hosts + n)

    def _scored(self, f: _Front, w: _Workers, n: int) -> Scored:
        lay = self.layout(f.groups, w.option, n, w.k)
        tm = TopologyModel(self.model, self.profile, lay)
        cap = tm.capacity_per_s()
        return Scored(lay, cap, self._cost(f, w, n), plan_pools(tm, cap))

    def carrying(self, rate: float, p95_target_ms: float | None = None) -> Scored | None:
        """The cheapest candidate whose capacity carries `rate` comfortably (and meets the p95 target)."""
        need = rate / COMFORT_UTILISATION
        fronts, workers = self._parts()
        if p95_target_ms is not None and fronts:
            # No queueing at all still leaves the wait and the CPU path (the same on every candidate of one arch).
            tm = TopologyModel(self.model, self.profile, self.layout(fronts[0].groups, workers[0].option, 1))
            if 1000.0 * (tm.d.wait_s + tm.path_s()) > p95_target_ms:
                return None
        best: tuple | None = None
        for f in fronts:
            for w in workers:
                room = self._room(f, w)
                if room < 1 or _capacity(f, w, room) < need:
                    continue
                lo, hi = 1, room  # the fewest worker hosts that carry it: capacity grows with n
                while lo < hi:
                    mid = (lo + hi) // 2
                    lo, hi = (lo, mid) if _capacity(f, w, mid) >= need else (mid + 1, hi)
                n = lo
                if best is not None and self._cost(f, w, n) >= best[0]:
                    continue
                if p95_target_ms is not None:
                    # p95 falls as worker hosts are added: none meets the target if the most hosts do not.
                    def meets(k: int, f=f, w=w) -> bool:
                        lay = self.layout(f.groups, w.option, k, w.k)
                        return TopologyModel(self.model, self.profile, lay).p95_ms(rate) <= p95_target_ms

                    if not meets(room):
                        continue
                    hi = room
                    while n < hi:
                        mid = (n + hi) // 2
                        n, hi = (n, mid) if meets(mid) else (mid + 1, hi)
                if best is None or self._cost(f, w, n) < best[0]:
                    best = (self._cost(f, w, n), f, w, n)
        return None if best is None else self._scored(*best[1:])

    def most_capacity(self, rate: float | None = None) -> Scored | None:
        """The cheapest candidate within PLATEAU_MARGIN of the most capacity reachable within max_hosts (then the
        fewest hosts), carrying `rate` if the most capacity does (to within NEGLIGIBLE_GAIN). Here the workers per
        host may be fewer than the usual count: where Postgres connections cap the worker total, fewer per host on
        more hosts can hold more of them (and bigger hosts can always repeat what smaller ones did, so the most
        capacity never falls as the hosts grow)."""
        fronts, workers = self._parts()
        options = [self._workers(w.option, k) for w in workers for k in range(1, w.k + 1)]
        pairs = [(f, w, room) for f in fronts for w in options for room in [self._room(f, w)] if room >= 1]
        if not pairs:
            return None
        top = max(_capacity(f, w, room) for f, w, room in pairs)
        floor = plateau_floor(top, rate)
        found = []
        for f, w, room in pairs:
            if _capacity(f, w, room) < floor:
                continue
            lo, hi = 1, room  # the fewest worker hosts within the margin: capacity grows with n
            while lo < hi:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if _capacity(f, w, mid) >= floor else (mid + 1, hi)
            found.append((self._cost(f, w, lo), f, w, lo))
        best = min(found, key=lambda t: t[0])
        scored = self._scored(*best[1:])
        return Scored(scored.layout, scored.capacity_per_s, scored.cost, scored.pools, top)


def plateau_floor(top: float, rate: float | None) -> float:
    """The capacity a most-capacity answer must reach: within PLATEAU_MARGIN of `top`, and the rate asked where
    the top carries it (never above `top` less NEGLIGIBLE_GAIN)."""
    floor = (1.0 - PLATEAU_MARGIN) * top
    if rate is not None:
        floor = max(floor, min(rate * (1.0 + 1e-6), (1.0 - NEGLIGIBLE_GAIN) * top))
    return floor
