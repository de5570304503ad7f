"""The words around an answer: which measurements it rests on, what is extrapolated, and what binds it.

Every sentence here is derived from the same bound the answer reports, so a warning cannot contradict it:
"more cores, not more workers" only when a host's cores bind, "more workers" only when workers or their
runners bind, a latency miss only when the capacity carries the rate but the p95 target does not hold.
"""

from __future__ import annotations

from n8n_sizer.advisor.answer.base import BindingBound, SizeFit
from n8n_sizer.advisor.answer.layout import COMFORT_UTILISATION as COMFORT
from n8n_sizer.advisor.capacity import HostShape
from n8n_sizer.advisor.fit import FittedModel, profile_of
from n8n_sizer.advisor.profiles import WorkflowProfile
from n8n_sizer.advisor.roles import PINNED_BY, PRIORS
from n8n_sizer.advisor.setup import Setup


def same_measured(m, profile: WorkflowProfile, setup: Setup, host: HostShape) -> bool:
    return (
        m.workflow == profile.name
        and m.setup.mode == setup.mode
        and float(m.hardware.vcpu) == host.vcpu
        and m.hardware.arch == host.arch
    )


def evidence(fitted: FittedModel, ram_evidence, profile: WorkflowProfile, setup: Setup, host: HostShape) -> list[str]:
    pts = [p.measurement for p in fitted.points if profile_of(p.measurement).overhead_key == profile.overhead_key]
    pts.sort(
        key=lambda m: (
            m.setup.mode != setup.mode,
            abs(m.setup.workers - setup.workers),
            abs(float(m.hardware.vcpu) - host.vcpu),
            m.id,
        )
    )
    rows = [m.id for m in pts[:8]]
    if setup.mode == "queue":
        rows += [r.id for r in fitted.demand_rows][:4]
    return rows + list(ram_evidence[:2])


def extrapolated(
    fitted: FittedModel, profile: WorkflowProfile, setup: Setup, host: HostShape, warnings: list[str], multi_host: bool
) -> bool:
    if not profile.measured:
        warnings.append(
            f"extrapolated: the {profile.name} profile borrows the light workflow's measured n8n overhead "
            f"and adds your {profile.code_cpu_ms:g} ms of Code CPU and {profile.wait_ms:g} ms of waiting"
        )
        return True
    if multi_host:
        warnings.append(
            "extrapolated: no capacity measurement (throughput at saturation) ran n8n on several hosts "
            "or with webhook processors; the topology rests on the fitted per-role demands (CPU per "
            "execution measured by role) and the priors listed in the notes"
        )
        return True
    same = [
        p.measurement
        for p in fitted.points
        if same_measured(p.measurement, profile, setup, host)
        and (setup.mode == "regular" or p.measurement.setup.workers == setup.workers)
    ]
    if same:
        return False
    measured = sorted(
        {
            (
                p.measurement.setup.mode,
                p.measurement.setup.workers,
                float(p.measurement.hardware.vcpu),
                p.measurement.hardware.arch,
            )
            for p in fitted.points
            if p.measurement.workflow == profile.name
        }
    )
    listed = "; ".join(f"{mode}{f' {w}w' if w else ''} on {v:g} vCPU {a}" for mode, w, v, a in measured)
    warnings.append(
        f"extrapolated: no measurement of the {profile.name} workflow in {setup.mode} mode"
        f"{f' with {setup.workers} workers' if setup.workers else ''} on {host.vcpu:g} vCPU {host.arch}; "
        f"measured: {listed or 'none'}"
    )
    return True


def measured_errors(
    fitted: FittedModel, profile: WorkflowProfile, setup: Setup, host: HostShape, rate: float, carries: bool
) -> list[str]:
    """Failed measurements of this workflow on this host size, for this setup or one with more workers:
    all of them when the rate is past capacity, else those at up to 1.5x the requested rate."""
    out = []
    for e in fitted.excluded:
        m = e.measurement
        errors = m.results.errors or 0
        relevant = not carries or (m.load.offered_rps or 0.0) <= 1.5 * rate
        if errors and relevant and same_measured(m, profile, setup, host) and m.setup.workers >= setup.workers:
            if m.setup.mode == "regular" and m.setup.production_limit != setup.production_limit:
                continue
            from n8n_sizer.advisor.measurements import describe_setup  # only a failed measurement needs its words

            out.append(
                f"measured {describe_setup(m)} on {host.vcpu:g} vCPU: {errors} errors at "
                f"{m.load.offered_rps:g} req/s ({m.id})"
            )
    return out


def redis_ceiling(per_s: float) -> str:
    """What a binding Redis means and what lifts it (n8n's Bull queue is one Redis: it cannot be sharded)."""
    return (
        f"Redis' single core binds at about {per_s:.0f}/s: give Redis a host of its own or a faster core; "
        "n8n's queue lives in one Redis and cannot be spread over shards, so past that one n8n cluster does "
        "not go"
    )


def plateau_warning(rate: float, top: float, mid: float, hosts: int, max_hosts: int, bound: BindingBound) -> str:
    """A most-capacity answer on the plateau (topology_search.PLATEAU_MARGIN): what the most reaches, what this
    one carries, and that more hosts buy next to nothing."""
    from n8n_sizer.advisor.answer.topology_search import PLATEAU_MARGIN

    where = f" on {bound.host}" if bound.host else ""
    return (
        f"at its ceiling: no topology carries {rate:g}/s with the usual headroom; the most any topology of up to "
        f"{max_hosts} hosts reaches is about {top:.0f}/s, bound by {bound.name}{where}; this one carries about "
        f"{mid:.0f}/s with {hosts} hosts, and more hosts would add less than {PLATEAU_MARGIN:.0%}. What lifts the "
        "ceiling is what lifts that bound (below), not more hosts"
    )


def what_would_help(
    bound: BindingBound, multi_host: bool, max_hosts: int, limited_by_connections: bool, at_per_s: float | None = None
) -> str:
    """The remedy that matches the binding bound, and only that one (`at_per_s`: where it binds)."""
    if limited_by_connections:
        return (
            "the worker count is held by Postgres connections: every worker's pool must fit under the "
            "max_connections its data host's RAM carries; a larger data host, or a pooler such as PgBouncer "
            "(not set up by this tool)"
        )
    more_hosts = (
        f"allow more hosts (--max-hosts above {max_hosts})"
        if max_hosts > 1
        else "allow several hosts (drop --max-hosts 1)"
    )
    if bound.name in ("host", "cpu"):
        if not multi_host:
            return f"More cores, not more workers, would carry it: a larger server, or {more_hosts}"
        return f"more cores would carry it: larger hosts for {bound.host}, or {more_hosts}"
    if bound.name in ("workers", "runners"):
        return f"more workers (each with its task runner) would carry it: {more_hosts}, or larger worker hosts"
    if bound.name == "main":
        if multi_host:
            return (
                "main's own process binds; n8n runs one main without a licence (multi-main is out of scope): "
                "move work off main, e.g. timers and polling triggers to fewer workflows"
            )
        return f"main's event loop binds: webhook processors take production webhooks off main ({more_hosts})"
    if bound.name == "webhook":
        return f"more webhook processors would carry it: {more_hosts}"
    if bound.name == "redis":
        return redis_ceiling(at_per_s) if at_per_s else redis_ceiling(0.0).replace(" at about 0/s", "")
    if bound.name == "slots":
        return (
            "the execution slots bind: more slots (production limit or worker --concurrency) as far as memory holds "
            "them (docs/deploy.md#memory-limits), then a server with more memory"
        )
    return more_hosts


def describe_choice(mode: str, workers: int, webhooks: int, hosts: int, where: str) -> str:
    if hosts > 1:
        return (
            f"{hosts} hosts ({where}): queue mode, {workers} workers, {webhooks} webhook processor(s) "
            "behind a load balancer"
        )
    if mode == "queue":
        return f"{where} in queue mode with {workers} worker(s)"
    return f"{where} in regular mode"


def infeasible_warning(
    rate: float, mid: float, choice_text: str, bound: BindingBound, remedy: str, fits: list[SizeFit], multi_host: bool
) -> str:
    head = (
        f"not sustainable: no option within the limits carries {rate:g}/s; the highest-capacity one, "
        f"{choice_text}, carries about {mid:.1f}/s, bound by {bound.name} ({bound.why}). {remedy}"
    )
    carrying = [f for f in fits if f.carries]
    if not multi_host and carrying and bound.name in ("host", "cpu"):
        f = carrying[0]
        return head + (
            f"; {f.provider} {f.size} ({f.vcpu} vCPU, {f.monthly_eur:.2f} EUR/month) in "
            f"{f.mode} mode{f' with {f.workers} workers' if f.workers else ''} would carry it, "
            f"about {f.capacity_per_s:.1f}/s"
        )
    return head


def given_infeasible_warning(mid: float, bound: BindingBound) -> str:
    """A topology the user gave does not carry the rate: what it carries, what binds it, and what would carry
    more in terms of that topology (the search's remedies speak of other options and --max-hosts)."""
    if bound.name in ("host", "cpu"):
        remedy = f"more cores for {bound.host}: a larger size for it, or its roles spread over more hosts"
    elif bound.name in ("workers", "runners"):
        remedy = "more workers (each with its task runner): more worker hosts, or larger ones with more workers each"
    elif bound.name == "webhook":
        remedy = "more webhook processors, on the ingest host if it has idle cores, else on more hosts"
    else:
        remedy = what_would_help(bound, True, 2, False, mid)
    return f"not sustainable: this topology carries about {mid:.1f}/s, bound by {bound.name} ({bound.why}); {remedy}"


def latency_warning(
    rate: float, p95: float | None, target: float, mid: float, choice_text: str, shared_core_row: str | None
) -> str:
    got = "grows without bound" if p95 is None else f"is about {p95:,.0f} ms"
    why = f"; shared-core sizes rest on the measured soak ({shared_core_row})" if shared_core_row else ""
    return (
        f"latency target missed: at {rate:g}/s the predicted p95 of {choice_text} {got}, above --p95-ms "
        f"{target:g}, though its capacity ({mid:.1f}/s) carries the rate{why}"
    )


def prior_notes(multi_host: bool, demand_rows) -> list[str]:
    """The priors an answer rests on that no per-role row pins (roles.py), named for the notes."""
    if not multi_host:
        return []
    pinned = {r.role for r in demand_rows if r.role != "main" or r.measurement.setup.webhook_processors > 0}
    return [
        f"prior {p.name} = {p.value:g}, no measured row pins it: {p.why}"
        for p in PRIORS
        if PINNED_BY[p.name] not in pinned
    ]


def data_ops_note(rate: float, demand_rows, workflow: str) -> str | None:
    """Redis commands and Postgres transactions per second at `rate`, from the operations per execution the kernel-
    counted rows of this workflow measured (median): the data host's load in units that transfer across hardware."""
    import statistics

    rows = {r.measurement.id: r.measurement.results for r in demand_rows if r.measurement.workflow == workflow}
    cmds = [x.redis_commands_per_execution for x in rows.values() if x.redis_commands_per_execution]
    txs = [x.postgres_transactions_per_execution for x in rows.values() if x.postgres_transactions_per_execution]
    parts = [
        f"about {rate * statistics.median(v):,.0f} {what}/s ({statistics.median(v):.0f} per {workflow} "
        f"execution, median of {len(v)} measured steps)"
        for v, what in ((cmds, "Redis commands"), (txs, "Postgres transactions"))
        if v
    ]
    return f"data host at {rate:g}/s: " + " and ".join(parts) if parts else None


def price_estimate_warning(vcpu: int, arch: str, ram_mib: int, eur: float, rate) -> str:
    """The words for a price the catalog does not hold (`rate`: catalog.PriceRate)."""
    return (
        f"no catalog size has {vcpu} vCPU {arch}: {eur:,.2f} EUR/month a host is an estimate at {rate.provider}'s rates, "
        f"{rate.per_vcpu_eur:.2f} EUR per vCPU and {rate.per_gib_eur:.2f} per GiB a month for {vcpu} vCPU and "
        f"{ram_mib / 1024:g} GiB ({rate.how}); check your provider's price"
    )


def concurrency_setting(rec) -> str:
    """How many executions run at once, per vCPU, in words: every mode states one."""
    if rec.mode == "queue":
        vcpu = sum(g.count * g.vcpu for g in rec.topology if g.roles.workers) or None
        return (
            f"worker --concurrency {rec.concurrency}: {rec.workers} x {rec.concurrency} = "
            f"{rec.workers * rec.concurrency} execution slots"
            + (f" on {vcpu:g} worker-host vCPU, {rec.concurrency_per_vcpu:g} per vCPU" if vcpu else "")
        )
    vcpu = rec.server.vcpu
    if rec.mode == "regular-limit":
        return (
            f"N8N_CONCURRENCY_PRODUCTION_LIMIT={rec.production_limit}: {rec.production_limit / vcpu:.3g} "
            f"executions per vCPU at once; a burst waits in main's FIFO instead of holding memory"
        )
    return (
        "N8N_CONCURRENCY_PRODUCTION_LIMIT=-1 (off): executions are short, so few run at once and a limit "
        "would not bind; set one if your workflows grow longer (see --burst)"
    )


def common_warnings(
    basis,
    req,
    carries: bool,
    low: float,
    mid: float,
    p95: float | None,
    choice_text: str,
    bound: BindingBound,
    fits,
    multi: bool,
    by_connections: bool,
) -> list[str]:
    """The warnings every kind of answer gives: a latency miss, a rate not carried (with the remedy its bound
    calls for), little headroom, or an interval whose low end is below the rate."""
    out = []
    latency_miss = req.p95_ms is not None and req.rps < mid and (p95 is None or p95 > req.p95_ms)
    if latency_miss:
        row = basis.soak.id if basis.soak is not None and "shared-core" in choice_text else None
        out.append(latency_warning(req.rps, p95, req.p95_ms, mid, choice_text, row))
    elif not carries and req.given:
        out.append(given_infeasible_warning(mid, bound))
    elif not carries:
        remedy = what_would_help(bound, multi, req.max_hosts, by_connections, mid)
        out.append(infeasible_warning(req.rps, mid, choice_text, bound, remedy, fits, multi))
    elif req.rps > COMFORT * mid:
        out.append(
            f"little headroom: {req.rps:g}/s is {req.rps / mid:.0%} of the predicted capacity "
            f"({mid:.1f}/s); a burst will queue"
        )
    if carries and bound.name == "redis":
        out.append(redis_ceiling(mid))
    if carries and req.rps > low:
        out.append(
            f"the low end of the capacity interval ({low:.1f}/s) is below {req.rps:g}/s: "
            "measure your workflow (`n8n-sizer bench`) before relying on it"
        )
    return out
