"""`advise`'s text report: the answer as a person reads it (PGTune style, inputs echoed first), and a burst."""

from __future__ import annotations

from n8n_sizer.cli.text import table as _table


def print_burst(b) -> None:
    drain = "never (capacity <= base rate)" if b.drain_s is None else f"{b.drain_s:,.0f} s"
    p95 = "n/a" if b.p95_ms is None else f"{b.p95_ms:,.0f} ms"
    print(
        f"\nburst: {b.peak_multiple:g}x for {b.burst_s:g} s = {b.peak_per_s:g} req/s against {b.capacity_per_s:.1f} "
        f"req/s capacity\n  backlog at its end  {b.backlog_max:,.0f}\n  drain time          {drain}\n"
        f"  p95 during it       {p95} (queue wait p95 {b.queue_wait_p95_ms:,.0f} ms)\n  advice              {b.advice}"
    )


def _mode_text(rec) -> str:
    if _spread(rec):
        return (
            f"queue across {rec.hosts} host(s): {rec.webhook_processors} webhook processor(s) behind a load balancer, "
            f"{rec.workers} workers (each with its own task runner), one main"
        )
    if rec.mode == "queue":
        return f"queue (EXECUTIONS_MODE=queue, {rec.workers} worker(s), each with its own task runner)"
    if rec.mode == "regular-limit":
        return f"regular, with N8N_CONCURRENCY_PRODUCTION_LIMIT={rec.production_limit}"
    return "regular (no Redis, no workers)"


def _spread(rec) -> bool:
    """A topology answer (hosts, or webhook processors behind a load balancer), not one host's stack."""
    return rec.hosts > 1 or rec.webhook_processors > 0


def _hosts_text(r: dict, one_host: bool = False) -> str:
    given = r.get("topology")
    if one_host:
        return "one server first, then the ways past it"
    if given is None:
        return f"up to {r['max_hosts']} host(s)"
    if given["machine_vcpu"]:
        return f"the given topology's {given['hosts']} host(s) sharing this machine's {given['machine_vcpu']:g} vCPU"
    return f"the given topology ({given['hosts']} host(s))"


def _pool_text(rec) -> str:
    from n8n_sizer.advisor.pools import pool_terms

    p = rec.db_pool_size
    processes = [("main", p.main), *[("webhook", p.webhook)] * rec.webhook_processors]
    processes += [("worker", p.worker)] * rec.workers
    _, formula = pool_terms(processes)  # the answer's own count is rec.postgres_connections
    if _spread(rec):
        return (
            f"main {p.main}, webhook {p.webhook}, worker {p.worker}  -> {rec.postgres_connections} Postgres connections "
            f"({formula}); max_connections {rec.max_connections} (~{rec.max_connections_ram_mib:,.0f} MiB of backends)"
        )
    return f"{p.main}  -> {rec.postgres_connections} Postgres connections ({formula}); max_connections {rec.max_connections}"


COMFORT = 0.7  # advisor.answer.layout.COMFORT_UTILISATION, kept here so that printing imports no advisor


def _eur(eur: float | None, estimated: bool) -> str:
    """A monthly price; `~` marks an estimate from the provider's rates (no catalog size)."""
    return "-" if eur is None else f"{'~' if estimated else ''}{eur:.2f}"


def _carries(carries: bool, comfortable: bool) -> str:
    return "yes" if comfortable else "little headroom" if carries else "no"


def _verdict(rec) -> str:
    mid, rps = rec.capacity_per_s.mid, rec.request["rps"]
    one = f"one {rec.one_host.vcpu}-vCPU server " if rec.one_host is not None else ""
    if rec.comfortable:
        return f"{one}carries it ({rps / mid:.0%} of its capacity)"
    if rec.feasible:
        return f"{one}carries it, with little headroom ({rps / mid:.0%} of its capacity): a burst will queue"
    return f"{one}does NOT carry it: about {mid:.1f}/s at most" + (
        "; see the ways past it below" if rec.alternatives else ""
    )


def print_recommendation(rec, changes, written, compose, refitted) -> None:
    out = []
    r = rec.request
    profile = r["workload"] + (
        f" ({r['cpu_ms']:g} ms Code CPU, {r['wait_ms']:g} ms wait)" if r["workload"] == "custom" else ""
    )
    vcpu = f"{r['vcpu']:d} vCPU" if r["vcpu"] else "any size"
    p95 = f", p95 <= {r['p95_ms']:g} ms" if r["p95_ms"] else ""
    size = "" if r.get("topology") else f"{vcpu} "
    out.append(
        f"# n8n-sizer advise: {r['rps']:g} req/s, {size}"
        f"{r['arch']}{', ' + r['provider'] if r['provider'] else ''}, workload {profile}"
        f"{p95}, {_hosts_text(r, rec.one_host is not None)}"
        f"{'  [refitted on your results]' if refitted else ''}"
    )
    cap = rec.capacity_per_s
    server = rec.server
    eur = f", {_eur(rec.monthly_eur, rec.price_estimated)} EUR/month" if rec.monthly_eur is not None else ""
    eur += " estimated: no catalog size, see the warnings" if rec.price_estimated else ""
    if rec.hosts > 1:
        where = f"{rec.hosts} hosts{eur} (see the topology below)"
    else:
        where = (
            f"{server.provider} {server.size}" if server.size else "your server"
        ) + f" ({server.vcpu:g} vCPU {server.arch}{eur})"
    b = rec.bound
    lines = [
        ("verdict", _verdict(rec) + ("  (extrapolated)" if rec.extrapolated else "")),
        ("servers" if rec.hosts > 1 else "server", where),
        ("mode", _mode_text(rec)),
    ]
    if rec.mode == "queue":
        lines += [
            ("workers", str(rec.workers)),
            ("worker --concurrency", str(rec.concurrency)),
            ("concurrency per vCPU", f"{rec.concurrency_per_vcpu:g} execution slots per worker-host vCPU"),
        ]
    lines += [
        ("concurrency setting", rec.concurrency_setting),
        ("N8N_RUNNERS_MAX_CONCURRENCY", str(rec.runner_concurrency)),
    ]
    if rec.production_limit is not None:
        lines += [("N8N_CONCURRENCY_PRODUCTION_LIMIT", str(rec.production_limit))]
    if rec.queue_keep_last is not None:
        lines += [
            (
                "N8N_EXECUTIONS_QUEUE_KEEP_LAST_*",
                f"{rec.queue_keep_last} (_COMPLETED and _FAILED; n8n's 0 can "
                "leave a webhook unanswered, see docs/findings/queue-webhook-hang.md)",
            )
        ]
    lines += [
        ("DB_POSTGRESDB_POOL_SIZE", _pool_text(rec)),
        (
            "capacity",
            f"{cap.mid:.1f} executions/s (90% interval {cap.low:.1f} to {cap.high:.1f}), bound by {b.name}"
            f" ({b.role}{' on ' + b.host if b.host else ''}: {b.why})",
        ),
        (
            "headroom",
            f"{rec.headroom:+.0%} at {r['rps']:g}/s"
            + (
                f"; CPU use about {rec.cpu_utilisation:.0%} of the busiest host's cores"
                if rec.cpu_utilisation is not None
                else ""
            ),
        ),
        (
            "p95 at that rate",
            f"{rec.p95_ms:,.0f} ms (server side, Poisson arrivals)" if rec.p95_ms is not None else "n/a: not carried",
        ),
    ]
    if rec.ram_idle_mb is not None:
        lines.append(("stack RAM", f"{rec.ram_idle_mb:,.0f} MB idle, {rec.ram_peak_mb:,.0f} MB peak"))
    out += [f"{name:34s} {value}" for name, value in lines]
    if rec.redis:
        out.append("Redis".ljust(34) + " " + rec.redis[0])
        out += [" " * 35 + line for line in rec.redis[1:]]
    out += ["", "topology (process counts per host):"]
    rows = []
    for g in rec.topology:
        roles = ", ".join(f"{k} {v}" for k, v in g.roles.counts().items() if v)
        rows.append(
            [
                g.name,
                str(g.count),
                f"{g.provider or '-'} {g.size or '-'}",
                str(g.vcpu),
                _eur(g.monthly_eur, g.size is None),
                roles,
            ]
        )
    out += ["  " + x for x in _table(rows, ["group", "hosts", "size", "vCPU", "EUR/month each", "roles"])]
    if rec.warnings:
        out += ["", "warnings:"] + [f"  - {w}" for w in rec.warnings]
    if rec.alternatives:
        out += ["", "ways past it (each priced; ask its command for the whole answer, then render it):"]
        rows = [
            [
                a.what,
                str(a.hosts),
                _eur(a.monthly_eur, a.price_estimated),
                f"{a.capacity_per_s.mid:.1f}",
                _carries(a.carries, a.comfortable),
                a.advise_command,
            ]
            for a in rec.alternatives
        ]
        out += ["  " + x for x in _table(rows, ["option", "hosts", "EUR/month", "capacity/s", "carries", "command"])]
    rows = [
        [
            f.provider,
            f.size,
            str(f.vcpu),
            f.arch,
            f"{f.monthly_eur:.2f}",
            f"queue {f.workers}w" if f.mode == "queue" else f.mode,
            f"{f.capacity_per_s:.1f}",
            _carries(f.carries, f.comfortable),
        ]
        for f in rec.fits
    ]
    vcpu = f"{r['vcpu']}-vCPU " if r.get("vcpu") else ""
    sized = r.get("sized_for_rps")
    head = (
        f"catalog sizes, each with its setup for {sized:.3g}/s (the burst) (carries: at {r['rps']:g}/s, "
        if sized
        else "catalog sizes for this rate (carries: "
    )
    out += ["", f"single {vcpu}{head}the verdict's rule, at most {COMFORT:.0%} of capacity):"]
    if rows:
        out += [
            "  " + x
            for x in _table(rows, ["provider", "size", "vCPU", "arch", "EUR/month", "setup", "capacity/s", "carries"])
        ]
    else:
        out.append(
            f"  none: no catalog size has {r.get('vcpu') or 'this many'} vCPU ({r['arch']}"
            f"{', ' + r['provider'] if r['provider'] else ''}); the server above is yours"
        )
    if changes:
        out.append(
            f"\nyour results: {len(changes['user_points'])} capacity point(s) used "
            f"({', '.join(changes['user_points']) or 'none'})"
        )
        out += [f"  not used: {e['id']}: {e['reason']}" for e in changes["user_excluded"]]
        if not changes["user_points"]:
            out.append(
                "  nothing to refit on: add a step that saturates without failing, e.g. "
                "`n8n-sizer bench --local --concurrency-sweep 10,25` (closed load, no timeouts)"
            )
        out.append("\nwhat your results changed:")
        for name, v in changes["params"].items():
            before = "new" if v["before"] is None else f"{v['before']:.4g}"
            out.append(f"  {name:28s} {before} -> {v['after']:.4g}")
        bb, a = changes["recommendation"]["before"], changes["recommendation"]["after"]
        was = (
            "none (a workflow only your results measured)"
            if bb is None
            else f"{bb['mode']} {bb['workers']}w {bb['capacity_per_s']:.1f}/s"
        )
        out.append(f"  recommendation: {was} -> {a['mode']} {a['workers']}w {a['capacity_per_s']:.1f}/s")
    if rec.notes:
        out += ["", "model notes:"] + [f"  - {n}" for n in rec.notes]
    out.append(f"\nevidence: {', '.join(rec.evidence)}")
    if written is not None:
        out.append(f"\nstack written to {compose}:")
        out += [f"  {m}" for m in written]
        out += [f"  {line}" for line in _carrying_instead(rec)]
    else:
        out.append("\n" + "\n".join(next_lines(rec)))
    print("\n".join(out))


def _render_command(rec) -> str:
    """The command that renders this answer's own setup."""
    if _spread(rec):
        return f"save this answer with --json > advice.json, then {rec.render_command}"
    queue = f" --workers {rec.workers} --concurrency {rec.concurrency}" if rec.mode == "queue" else ""
    limit = f" --production-limit {rec.production_limit}" if rec.production_limit else ""
    limit += f" --held-mb {rec.held_mb:g}" if rec.held_mb is not None else ""
    return (
        f"n8n-sizer render --mode {rec.setup.mode}{queue} --runner-concurrency {rec.runner_concurrency} "
        f"--pool {rec.setup.db_pool_size}{limit} --out stack/  (or add --compose stack/ to this command)"
    )


def _carrying_instead(rec) -> list[str]:
    """When the answer does not carry the rate: that it does not, and the first way past it that does."""
    if rec.feasible:
        return []
    rps, target = rec.request["rps"], rec.request.get("p95_ms")
    what = (
        f"within --p95-ms {target:g}"
        if target and rec.capacity_per_s.mid > rps
        else f"(about {rec.capacity_per_s.mid:.1f}/s at most)"
    )
    lines = [f"this setup does NOT carry {rps:g}/s {what}"]
    carrying = next((a for a in rec.alternatives if a.carries), None)
    if carrying is not None:
        lines.append(f"the one that does ({carrying.what}): {carrying.advise_command}, then {carrying.render_command}")
    else:
        lines.append("nothing asked here carries it: see the warnings for what would")
    return lines


def next_lines(rec) -> list[str]:
    """`next:`: render the setup asked for; when it does not carry the rate, it says so and names the one that does."""
    lines = [f"next: {_render_command(rec)}"]
    return lines + [f"      {line}" for line in _carrying_instead(rec)]
