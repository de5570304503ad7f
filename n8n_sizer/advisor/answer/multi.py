"""Build the recommendation for a multi-host answer (the topology contract, docs/advise-topology.md)."""

from __future__ import annotations

import math

from n8n_sizer.advisor import settings
from n8n_sizer.advisor.answer import explain as explain
from n8n_sizer.advisor.answer.base import (
    RENDER_CLUSTER,
    RENDER_TOPOLOGY,
    Basis,
    BindingBound,
    Interval,
    Recommendation,
    Request,
    ServerChoice,
    SizeFit,
    request_echo,
)
from n8n_sizer.advisor.answer.contract import HostGroup, PoolSizes
from n8n_sizer.advisor.answer.layout import COMFORT_UTILISATION, TopologyModel
from n8n_sizer.advisor.answer.topology_search import Scored
from n8n_sizer.advisor.pools import (
    MANY_CONNECTIONS,
    RAM_MIB_PER_VCPU_ASSUMED,
    connection_budget,
    required_max_connections,
)
from n8n_sizer.advisor.setup import Setup


def build_topology(basis: Basis, req: Request, s: Scored, carries: bool, fits: list[SizeFit]) -> Recommendation:
    profile, lay = req.profile, s.layout
    tm = TopologyModel(basis.model, profile, lay)
    # how far from what was measured: its largest host, the most workers sharing one host, its host count
    far = basis.fitted.extrapolation_sd(
        max(g.host.vcpu for g in lay.groups),
        lay.groups[0].host.arch,
        max(g.workers for g in lay.groups),
        hosts=lay.hosts,
    )
    low, mid, high = basis.fitted.interval_of(
        lambda model: TopologyModel(model, profile, lay).capacity_per_s(), math.hypot(profile.ratio_sd_log, far)
    )
    b = tm.binding()
    bound = BindingBound(name=b.name, role=b.role, host=b.host, why=b.why)
    worker_g = lay.group_with("workers")
    where = ", ".join(f"{g.count} x {g.size or f'{g.host.vcpu:g}-vCPU'} {g.name}" for g in lay.groups)
    choice_text = explain.describe_choice("queue", lay.workers, lay.webhooks, lay.hosts, where)
    p95 = tm.p95_ms(req.rps)
    p95 = None if p95 == float("inf") else p95
    # The search stops adding worker hosts where the pools reach what the data host's RAM carries.
    data_g = lay.group_with("postgres")
    budget = connection_budget(data_ram_mib(req, data_g))
    by_conn = (
        lay.hosts < req.max_hosts
        and required_max_connections(s.pools.postgres_connections + worker_g.workers * lay.worker_pool) > budget
    )
    warnings = explain.common_warnings(basis, req, carries, low, mid, p95, choice_text, bound, fits, True, by_conn)
    if s.most_reachable_per_s is not None:
        top = max(s.most_reachable_per_s, mid)
        warnings.insert(0, explain.plateau_warning(req.rps, top, mid, lay.hosts, req.max_hosts, bound))
    extrapolated = explain.extrapolated(
        basis.fitted, profile, Setup(mode="queue", workers=worker_g.workers), worker_g.host, warnings, True
    )
    warnings.append(
        "one main only: multi-main needs an n8n licence and is out of scope; main keeps the editor, API "
        "and timers with production webhooks off (the load balancer routes /webhook/*, /webhook-waiting/*, "
        "/form/*, /form-waiting/* to the webhook processors)"
    )
    warnings.append(
        "keep N8N_CONCURRENCY_PRODUCTION_LIMIT unset (-1) in queue mode: when set, each worker takes its "
        "limit from it instead of --concurrency (per worker, not a total)"
    )
    need_mib = s.pools.connection_ram_mib
    if s.pools.max_connections > MANY_CONNECTIONS:
        warnings.append(
            f"max_connections {s.pools.max_connections}: ~{need_mib:,.0f} MiB of Postgres backends on "
            f"{data_g.name}; above {MANY_CONNECTIONS} a connection pooler (PgBouncer) is the usual step, "
            "which this tool does not set up"
        )
    # vcpu is the contract's whole vCPU; a lab host's budget (a fraction of a core) is in the host shape only
    groups = [
        HostGroup(
            name=g.name,
            provider=g.provider,
            size=g.size,
            vcpu=max(1, round(g.host.vcpu)),
            arch=g.host.arch,
            count=g.count,
            roles=g.roles(),
            monthly_eur=g.monthly_eur,
        )
        for g in lay.groups
    ]
    worker_vcpu = sum(g.count * g.host.vcpu for g in lay.groups if g.workers)
    host_bounds = [x for x in tm.bounds() if x.name == "host"]
    util = max(min(req.rps, mid) / x.per_s for x in host_bounds)
    setup = Setup(
        mode="queue", workers=min(worker_g.workers, 64), concurrency=lay.concurrency, db_pool_size=lay.worker_pool
    )
    # One worker host's share of the comfortable rate sizes its runners (settings.runner_concurrency's rule).
    per_host = COMFORT_UTILISATION * mid * worker_g.workers / lay.workers
    setup = setup.model_copy(
        update={"runner_concurrency": settings.runner_concurrency(basis.model, profile, setup, worker_g.host, per_host)}
    )
    return Recommendation(
        request=request_echo(req),
        mode="queue",
        workers=lay.workers,
        concurrency=lay.concurrency,
        concurrency_per_vcpu=round(lay.workers * lay.concurrency / worker_vcpu, 2),
        runner_concurrency=setup.runner_concurrency,
        production_limit=None,
        db_pool_size=PoolSizes(main=s.pools.main, webhook=s.pools.webhook, worker=s.pools.worker),
        postgres_connections=s.pools.postgres_connections,
        max_connections=s.pools.max_connections,
        max_connections_ram_mib=need_mib,
        redis=list(settings.REDIS_SETTINGS),
        queue_keep_last=settings.QUEUE_KEEP_LAST_JOBS,
        capacity_per_s=Interval(low=low, mid=mid, high=high),
        headroom=mid / req.rps - 1.0,
        feasible=carries,
        cpu_utilisation=min(util, 1.0),
        p95_ms=p95 if carries else None,
        bound=bound,
        ram_idle_mb=None,
        ram_peak_mb=None,
        server=ServerChoice(
            provider=worker_g.provider,
            size=worker_g.size,
            vcpu=worker_g.host.vcpu,
            arch=worker_g.host.arch,
            monthly_eur=worker_g.monthly_eur,
        ),
        topology=groups,
        webhook_processors=lay.webhooks,
        hosts=lay.hosts,
        monthly_eur=lay.monthly_eur,
        render_command=RENDER_CLUSTER if lay.hosts > 1 else RENDER_TOPOLOGY,
        fits=fits,
        warnings=warnings,
        evidence=explain.evidence(basis.fitted, basis.ram.evidence, profile, setup, worker_g.host),
        notes=explain.prior_notes(True, basis.fitted.demand_rows)
        + [n for n in [explain.data_ops_note(req.rps, basis.fitted.demand_rows, profile.overhead_key)] if n],
        extrapolated=extrapolated,
        setup=setup,
    )


def data_ram_mib(req: Request, g) -> int:
    from n8n_sizer.advisor.catalog import sizes_for

    ram = next((x.ram_mib for x in sizes_for(req.provider, req.arch) if x.size == g.size), None)
    return ram or RAM_MIB_PER_VCPU_ASSUMED * int(g.host.vcpu)
