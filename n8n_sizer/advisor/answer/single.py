"""Build the recommendation for a single-host answer (today's answer, plus the topology of one group)."""

from __future__ import annotations

from n8n_sizer.advisor import ram, settings
from n8n_sizer.advisor.answer import explain as explain
from n8n_sizer.advisor.answer.base import (
    RENDER_TOPOLOGY,
    Basis,
    BindingBound,
    Candidate,
    Interval,
    Recommendation,
    Request,
    ServerChoice,
    SingleChoice,
    SizeFit,
    request_echo,
)
from n8n_sizer.advisor.answer.contract import HostGroup, PoolSizes, Roles
from n8n_sizer.advisor.pools import connection_ram_mib
from n8n_sizer.advisor.pools import (
    setup_connections as postgres_connections,
)
from n8n_sizer.advisor.pools import (
    setup_recommended_max_connections as recommended_max_connections,
)

_ROLE = {"main": "main", "workers": "worker", "runners": "worker", "slots": "worker"}


def build_single(
    basis: Basis,
    req: Request,
    s: SingleChoice,
    carries: bool,
    fits: list[SizeFit],
    usl_cap: float,
    queue_alt: Candidate | None,
) -> Recommendation:
    """One host's answer. `usl_cap`: the contention fit's ceiling for this setup (inf without one); `queue_alt`:
    the queue-mode setup with the most capacity on this host, when a regular answer's one process binds."""
    profile, c, opt, host = req.profile, s.cand, s.option, s.option.shape
    setup = c.setup
    low, mid, high = (min(v, usl_cap) for v in basis.fitted.throughput_interval(profile, setup, host))
    where = (f"{opt.provider} {opt.size}" if opt.size else f"a {opt.vcpu}-vCPU server") + (
        " (shared-core)" if s.shared_core else ""
    )
    roles = Roles(
        main=1,
        workers=setup.workers,
        postgres=1 if setup.db == "postgres" else 0,
        redis=1 if setup.mode == "queue" else 0,
    )
    on_host = "+".join(r for r, n in roles.counts().items() if n)  # the cores bind every role on the host
    role = "main" if setup.mode == "regular" and c.bound.name == "slots" else _ROLE.get(c.bound.name, on_host)
    bound = BindingBound(name=c.bound.name, role=role, host="server", why=c.bound.why)
    warnings: list[str] = []
    choice_text = explain.describe_choice(c.mode, setup.workers, 0, 1, where)
    warnings += explain.common_warnings(basis, req, carries, low, mid, s.p95, choice_text, bound, fits, False, False)
    extrapolated = explain.extrapolated(basis.fitted, profile, setup, host, warnings, False)
    util = basis.model.cpu_utilisation_at(profile, setup, host, min(req.rps, mid))
    if queue_alt is not None and util < 0.6:
        warnings.append(
            f"one process is the ceiling ({c.bound.name}) while the cores are only ~{util:.0%} busy: the "
            f"queue-mode test's signal for queue mode, where {queue_alt.setup.workers} workers would carry "
            f"about {queue_alt.mid:.1f}/s on this host"
        )
    if s.shared_core:
        soak = basis.soak
        warnings.append(
            f"{opt.size} is shared-core (burstable): sustained capacity uses its {host.vcpu:g} vCPU "
            "baseline; bursts above it spend CPU credits"
            + (
                f"; its p95 rests on the measured e2-micro soak ({soak.id}: p95 {soak.results.p95_ms:,.0f} ms "
                f"at {soak.load.offered_rps:g} req/s)"
                if soak is not None
                else ""
            )
        )
    if opt.provider == "gcp":
        warnings.append(
            "no GCP throughput measurement is embedded: e2 capacity is predicted at Hetzner's measured "
            "speed" + ("; the e2-micro soak measured latency only" if basis.soak is not None else "")
        )
    warnings.extend(explain.measured_errors(basis.fitted, profile, setup, host, req.rps, carries))
    ram_idle, ram_peak = basis.ram.idle_mb(setup), basis.ram.peak_mb(setup)
    if opt.ram_mib is not None and ram.stack_limit_mib(setup) > ram.usable_mib(opt.ram_mib):
        warnings.append(  # a setup the user gave (the search never picks one that does not fit)
            f"the containers' memory limits sum to {ram.stack_limit_mib(setup):,} MiB, more than the "
            f"{ram.usable_mib(opt.ram_mib):,} MiB {opt.size or 'this host'} leaves them after the OS: "
            f"at most {ram.slots_that_fit(setup, opt.ram_mib)} executions at once fit (docs/deploy.md#memory-limits)"
        )
    if c.slots_memory_cap is not None and opt.ram_mib is not None:
        warnings.append(
            ram.memory_cap_text(setup, opt.ram_mib, opt.size or "this host", c.slots_asked, c.slots_memory_cap)
        )
        if c.bound.name == "slots":
            warnings.append(
                f"those {c.slots_memory_cap} executions at once bind the capacity: {c.bound.why} gives {mid:.1f}/s; "
                "a server with more memory, or queue mode (the backlog waits in Redis, not in memory), carries more"
            )
    if setup.mode == "queue" and setup.production_limit is None:
        warnings.append(
            "keep N8N_CONCURRENCY_PRODUCTION_LIMIT unset (-1) in queue mode: when set, each worker "
            "takes its limit from it instead of --concurrency (per worker, not a total)"
        )
    queue = setup.mode == "queue"
    maxc = recommended_max_connections(setup)
    server = ServerChoice(
        provider=opt.provider,
        size=opt.size,
        vcpu=opt.vcpu,
        arch=host.arch,
        monthly_eur=opt.monthly_eur,
        shared_core=s.shared_core,
    )
    return Recommendation(
        request=request_echo(req),
        mode=c.mode,
        workers=setup.workers,
        concurrency=setup.concurrency if queue else None,
        concurrency_per_vcpu=(
            round(setup.workers * setup.concurrency / opt.vcpu, 2)
            if queue
            else round(setup.production_limit / opt.vcpu, 2)
            if setup.production_limit
            else None
        ),
        runner_concurrency=setup.runner_concurrency,
        production_limit=setup.production_limit,
        db_pool_size=PoolSizes(main=setup.db_pool_size, webhook=None, worker=setup.db_pool_size if queue else None),
        postgres_connections=postgres_connections(setup),
        max_connections=maxc,
        max_connections_ram_mib=connection_ram_mib(maxc),
        redis=list(settings.REDIS_SETTINGS) if queue else [],
        queue_keep_last=settings.QUEUE_KEEP_LAST_JOBS if queue else None,
        capacity_per_s=Interval(low=low, mid=mid, high=high),
        headroom=mid / req.rps - 1.0,
        feasible=carries,
        cpu_utilisation=min(util, 1.0),
        p95_ms=s.p95 if carries else None,
        bound=bound,
        ram_idle_mb=ram_idle,
        ram_peak_mb=ram_peak,
        server=server,
        topology=[
            HostGroup(
                name="server",
                provider=opt.provider,
                size=opt.size,
                vcpu=opt.vcpu,
                arch=host.arch,
                count=1,
                roles=roles,
                monthly_eur=opt.monthly_eur,
            )
        ],
        webhook_processors=0,
        hosts=1,
        monthly_eur=opt.monthly_eur,
        render_command=RENDER_TOPOLOGY,
        fits=fits,
        warnings=warnings,
        evidence=explain.evidence(basis.fitted, basis.ram.evidence, profile, setup, host),
        # the contention fit (USL) bounds queue-mode answers only: its note is about them alone
        notes=basis.notes_about(profile.name, host.vcpu, host.arch) if setup.mode == "queue" else [],
        extrapolated=extrapolated,
        setup=setup,
        memory=ram.memory_plan(setup, opt.ram_mib),
    )
