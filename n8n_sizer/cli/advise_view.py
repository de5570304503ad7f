"""`advise`: check the inputs, call the advisor, print the recommendation (PGTune style) or JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pydantic import ValidationError

from n8n_sizer.errors import InputError

ARCHES = ("x86", "arm")
MAX_HOSTS_LIMIT = 200
PROVIDERS = ("hetzner", "gcp")


def _check_inputs(rps: float | None, vcpu: int | None, arch: str, provider: str | None, p95_ms: float | None,
                  validate: bool, cpu_ms: float | None = None, wait_ms: float | None = None,
                  workload: str | None = None, max_hosts: int | None = None) -> None:
    from n8n_sizer.safety import numbers as n

    n.check_numbers({"--rps": (rps, n.RATE_PER_S), "--vcpu": (vcpu, n.VCPU), "--cpu-ms": (cpu_ms, n.CPU_MS),
                     "--wait-ms": (wait_ms, n.WAIT_MS), "--p95-ms": (p95_ms, n.LATENCY_MS)})
    if workload is not None and (cpu_ms is not None or wait_ms is not None):
        given = " and ".join(f for f, v in (("--cpu-ms", cpu_ms), ("--wait-ms", wait_ms)) if v is not None)
        raise InputError(f"{given} describe a custom workload, and --workload {workload} names another; drop "
                         f"--workload to size the custom one, or drop {given}")
    if validate:
        given = [f for f, v in (("--rps", rps), ("--vcpu", vcpu), ("--provider", provider), ("--p95-ms", p95_ms),
                                ("--workload", workload), ("--cpu-ms", cpu_ms), ("--wait-ms", wait_ms),
                                ("--max-hosts", max_hosts)) if v is not None]
        if given:
            raise InputError(f"--validate scores the model on its measurements and ignores {', '.join(given)}; "
                             "run it alone (with --results or --json if you like), or drop --validate")
    if not validate and rps is None:
        raise InputError("--rps is required: the sustained webhook rate to carry, e.g. --rps 40")
    if rps is not None and not rps > 0:
        raise InputError(f"--rps must be > 0 (got {rps:g}); it is requests per second, e.g. --rps 40")
    if vcpu is not None and vcpu <= 0:
        raise InputError(f"--vcpu must be >= 1 (got {vcpu}); omit it to get the cheapest size that fits")
    if max_hosts is not None and not 1 <= max_hosts <= MAX_HOSTS_LIMIT:
        raise InputError(f"--max-hosts must be 1 to {MAX_HOSTS_LIMIT} (got {max_hosts}); 1 asks for a single server")
    if arch not in ARCHES:
        raise InputError(f"unknown --arch {arch!r}; accepted: {', '.join(ARCHES)}")
    if provider is not None and provider not in PROVIDERS:
        raise InputError(f"unknown --provider {provider!r}; accepted: {', '.join(PROVIDERS)}")
    if p95_ms is not None and not p95_ms > 0:
        raise InputError(f"--p95-ms must be > 0 (got {p95_ms:g}); it is the latency target in milliseconds")


def run_advise(*, rps, vcpu, arch, provider, workload, cpu_ms, wait_ms, p95_ms, results, validate, json_out,
               compose, generate_missing_secrets: bool = False, max_hosts=None, burst=None, burst_seconds=None,
               topology: Path | None = None, on_this_machine: bool = False) -> int:
    from n8n_sizer.advisor.engine import build_advisor
    from n8n_sizer.advisor.profiles import profile_for
    from n8n_sizer.advisor.recommend import MAX_HOSTS_DEFAULT, Request

    _check_inputs(rps, vcpu, arch, provider, p95_ms, validate, cpu_ms, wait_ms, workload, max_hosts)
    _check_burst(burst, burst_seconds, validate)
    _check_given(topology, on_this_machine, validate, vcpu, max_hosts, provider, compose)
    workload = workload or "light"
    if validate and compose is not None:
        raise InputError("--validate renders no stack, so --compose would be ignored; drop one of them")
    if compose is not None:
        from n8n_sizer.safety.files import require_output_folder

        compose = require_output_folder(compose, "--compose", fix="try --compose ./n8n-stack")
    extra = None
    if results is not None:
        from n8n_sizer.runs.fit_input import load_results
        from n8n_sizer.safety.files import require_folder

        require_folder(results, "--results", fix="pass the folder bench wrote its runs into, e.g. --results results")
        extra = load_results(results)
    user_workflows = sorted({m.workflow for m in extra or ()} - {"light", "code-heavy"})
    if workload in user_workflows and cpu_ms is None and wait_ms is None:
        profile = None  # the user's own workflow, measured in their results: its own fitted demand
    else:
        profile = profile_for(workload, cpu_ms, wait_ms)
    if validate:
        return _print_validation(extra, json_out)
    advisor = build_advisor(extra)
    if profile is None:
        from n8n_sizer.advisor.profiles import user_profile

        profile = user_profile(workload)
        if f"overhead:{profile.overhead_key}" not in advisor.model.params:
            raise InputError(f"--workload {workload}: your results hold no capacity point for it; run "
                             f"`n8n-sizer bench --workflow FILE --concurrency-sweep 10,25` so a step saturates")
    layout, given_hosts = None, None
    if topology is not None:
        from n8n_sizer.cli.advise_given import given_layout_from

        layout, arch, given_hosts = given_layout_from(topology, advisor, on_this_machine)
    req = Request(rps=rps, vcpu=vcpu, arch=arch, provider=provider, profile=profile, p95_ms=p95_ms,
                  max_hosts=max_hosts if max_hosts is not None else 1 if compose is not None else MAX_HOSTS_DEFAULT)
    try:
        rec = advisor.recommend(req) if layout is None else advisor.evaluate(req, layout, given_hosts)
    except ValidationError as exc:  # e.g. Little's law asks for more in-flight executions than a Setup allows
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "setup"
        raise InputError(f"no stack n8n-sizer renders fits these inputs: the {where} it would need is out of range "
                         f"({first.get('msg')}, got {first.get('input')}); lower --rps or --wait-ms") from None
    changes = _changes(build_advisor(None), advisor, req, rec, layout) if extra else None
    if extra:  # never advise past the user's own evidence (the same rule the report's advice applies)
        from n8n_sizer.runs.evidence import overrule

        rec, _ = overrule(rec, extra, workload)
    if compose is not None and rec.hosts > 1:  # --compose alone asks the single-server question (above)
        raise InputError(f"--compose writes a single-host stack, and this answer is {rec.hosts} hosts: save it with "
                         f"--json > advice.json and run `{rec.render_command}`, or use --max-hosts 1")
    written = _write_compose(rec, compose, generate_missing_secrets) if compose is not None else None
    surge = None
    if burst is not None:
        from n8n_sizer.advisor.answer.burst import burst_advice

        surge = burst_advice(rps, burst, burst_seconds, rec.capacity_per_s.mid, rec.p95_ms, rec.mode)
    if json_out:
        data = rec.model_dump(mode="json")
        if surge is not None:
            data["burst"] = surge.model_dump(mode="json")
        if changes is not None:
            data["changes"] = changes
        if written is not None:
            data["compose"] = {"dir": str(compose), "messages": written}
        print(json.dumps(data, indent=2))
    else:
        _print_recommendation(rec, changes, written, compose, bool(extra))
        if surge is not None:
            _print_burst(surge)
    return 0


def _check_given(topology, on_this_machine: bool, validate: bool, vcpu, max_hosts, provider, compose) -> None:
    """--topology scores the user's own layout: the search's flags would be ignored, so they are refused."""
    if on_this_machine and topology is None:
        raise InputError("--on-this-machine puts every host of a --topology on this machine's cores; pass "
                         "--topology FILE with it (e.g. the lab's topology), or drop it")
    if topology is None:
        return
    given = [f for f, v in (("--vcpu", vcpu), ("--max-hosts", max_hosts), ("--provider", provider),
                            ("--compose", compose)) if v is not None] + (["--validate"] if validate else [])
    if given:
        raise InputError(f"--topology scores the topology in the file, so {', '.join(given)} would be ignored; "
                         "drop it, or drop --topology to let advise search")


def _check_burst(burst, burst_seconds, validate: bool) -> None:
    from n8n_sizer.safety import numbers as n

    n.check_numbers({"--burst": (burst, n.Range(1, 1000, example="4")), "--burst-seconds": (burst_seconds, n.SECONDS)})
    if (burst is None) != (burst_seconds is None):
        raise InputError("--burst and --burst-seconds go together: the peak as a multiple of --rps and how long it "
                         "lasts, e.g. --burst 4 --burst-seconds 60")
    if burst is not None and validate:
        raise InputError("--validate scores the model and sizes nothing, so --burst would be ignored; drop one")


def _print_burst(b) -> None:
    drain = "never (capacity <= base rate)" if b.drain_s is None else f"{b.drain_s:,.0f} s"
    p95 = "n/a" if b.p95_ms is None else f"{b.p95_ms:,.0f} ms"
    print(f"\nburst: {b.peak_multiple:g}x for {b.burst_s:g} s = {b.peak_per_s:g} req/s against {b.capacity_per_s:.1f} "
          f"req/s capacity\n  backlog at its end  {b.backlog_max:,.0f}\n  drain time          {drain}\n"
          f"  p95 during it       {p95} (queue wait p95 {b.queue_wait_p95_ms:,.0f} ms)\n  advice              {b.advice}")


def _changes(before, after, req, new, layout=None) -> dict:
    """What the user's results changed: parameters and the recommendation (`new` is after's answer to `req`,
    for `layout` when the user gave one)."""
    from n8n_sizer.advisor.fit import is_user_point

    known_before = f"overhead:{req.profile.overhead_key}" in before.model.params
    old = None  # a workflow only your results measured is new
    if known_before:
        old = before.recommend(req) if layout is None else before.evaluate(req, layout)
    params = {}
    for name, value in after.model.params.items():
        prior = before.model.params.get(name)
        if prior is None or abs(value - prior) > 1e-3 * max(abs(prior), 1e-9):
            params[name] = {"before": prior, "after": value}
    user_points = [p.measurement.id for p in after.fitted.points if is_user_point(p.measurement)]
    user_excluded = [{"id": e.measurement.id, "reason": e.reason} for e in after.fitted.excluded
                     if is_user_point(e.measurement)]
    return {"reference_host": {"before": before.model.reference_class, "after": after.model.reference_class},
            "user_points": user_points, "user_excluded": user_excluded,
            "params": params,
            "recommendation": {"before": None if old is None else
                               {"mode": old.mode, "workers": old.workers, "capacity_per_s": old.capacity_per_s.mid},
                               "after": {"mode": new.mode, "workers": new.workers, "capacity_per_s": new.capacity_per_s.mid}}}


def _write_compose(rec, out_dir: Path, generate_missing_secrets: bool = False) -> list[str]:
    from n8n_sizer.deploy.render import write_bundle

    return write_bundle(rec.setup, out_dir, generate_missing_secrets=generate_missing_secrets)


def _mode_text(rec) -> str:
    if _spread(rec):
        return (f"queue across {rec.hosts} host(s): {rec.webhook_processors} webhook processor(s) behind a load balancer, "
                f"{rec.workers} workers (each with its own task runner), one main")
    if rec.mode == "queue":
        return f"queue (EXECUTIONS_MODE=queue, {rec.workers} worker(s), each with its own task runner)"
    if rec.mode == "regular-limit":
        return f"regular, with N8N_CONCURRENCY_PRODUCTION_LIMIT={rec.production_limit}"
    return "regular (no Redis, no workers)"


def _spread(rec) -> bool:
    """A topology answer (hosts, or webhook processors behind a load balancer), not one host's stack."""
    return rec.hosts > 1 or rec.webhook_processors > 0


def _hosts_text(r: dict) -> str:
    given = r.get("topology")
    if given is None:
        return f"up to {r['max_hosts']} host(s)"
    if given["machine_vcpu"]:
        return f"the given topology's {given['hosts']} host(s) sharing this machine's {given['machine_vcpu']:g} vCPU"
    return f"the given topology ({given['hosts']} host(s))"


def _table(rows: list[list[str]], head: list[str]) -> list[str]:
    """A plain text table (rich costs ~80 ms of import, a fifth of advise's start)."""
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    line = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return [line(head), "  ".join("-" * w for w in widths)] + [line(r) for r in rows]


def _pool_text(rec) -> str:
    p = rec.db_pool_size
    if _spread(rec):
        return (f"main {p.main}, webhook {p.webhook}, worker {p.worker}  -> {rec.postgres_connections} Postgres connections "
                f"((main + 1) + {rec.webhook_processors} x webhook + {rec.workers} x worker); max_connections "
                f"{rec.max_connections} (~{rec.max_connections_ram_mib:,.0f} MiB of backends)")
    return (f"{p.main}  -> {rec.postgres_connections} Postgres connections ((pool + 1) + {rec.workers} x pool); "
            f"max_connections {rec.max_connections}")


def _print_recommendation(rec, changes, written, compose, refitted) -> None:
    out = []
    r = rec.request
    profile = r["workload"] + (f" ({r['cpu_ms']:g} ms Code CPU, {r['wait_ms']:g} ms wait)" if r["workload"] == "custom" else "")
    size = "" if r.get("topology") else f"{'%d vCPU' % r['vcpu'] if r['vcpu'] else 'any size'} "
    out.append(f"# n8n-sizer advise: {r['rps']:g} req/s, {size}"
               f"{r['arch']}{', ' + r['provider'] if r['provider'] else ''}, workload {profile}"
               f"{', p95 <= %g ms' % r['p95_ms'] if r['p95_ms'] else ''}, {_hosts_text(r)}"
               f"{'  [refitted on your results]' if refitted else ''}")
    cap = rec.capacity_per_s
    server = rec.server
    eur = f", {rec.monthly_eur:.2f} EUR/month" if rec.monthly_eur is not None else ""
    if rec.hosts > 1:
        where = f"{rec.hosts} hosts{eur} (see the topology below)"
    else:
        where = (f"{server.provider} {server.size}" if server.size else "your server") + \
                f" ({server.vcpu:g} vCPU {server.arch}{eur})"
    b = rec.bound
    lines = [
        ("verdict", ("carries it" if rec.feasible else "does NOT carry it") + ("  (extrapolated)" if rec.extrapolated else "")),
        ("servers" if rec.hosts > 1 else "server", where),
        ("mode", _mode_text(rec)),
    ]
    if rec.mode == "queue":
        lines += [("workers", str(rec.workers)), ("worker --concurrency", str(rec.concurrency)),
                  ("concurrency per vCPU", f"{rec.concurrency_per_vcpu:g} execution slots per worker-host vCPU")]
    lines += [("N8N_RUNNERS_MAX_CONCURRENCY", str(rec.runner_concurrency))]
    if rec.production_limit is not None:
        lines += [("N8N_CONCURRENCY_PRODUCTION_LIMIT", str(rec.production_limit))]
    if rec.queue_keep_last is not None:
        lines += [("N8N_EXECUTIONS_QUEUE_KEEP_LAST_*", f"{rec.queue_keep_last} (_COMPLETED and _FAILED; n8n's 0 can "
                                                       "leave a webhook unanswered, see docs/findings/queue-webhook-hang.md)")]
    lines += [
        ("DB_POSTGRESDB_POOL_SIZE", _pool_text(rec)),
        ("capacity", f"{cap.mid:.1f} executions/s (90% interval {cap.low:.1f} to {cap.high:.1f}), bound by {b.name}"
                     f" ({b.role}{' on ' + b.host if b.host else ''}: {b.why})"),
        ("headroom", f"{rec.headroom:+.0%} at {r['rps']:g}/s"
                     + (f"; CPU use about {rec.cpu_utilisation:.0%} of the busiest host's cores" if rec.cpu_utilisation is not None else "")),
        ("p95 at that rate", f"{rec.p95_ms:,.0f} ms (server side, Poisson arrivals)" if rec.p95_ms is not None else "n/a: not carried"),
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
        rows.append([g.name, str(g.count), f"{g.provider or '-'} {g.size or '-'}", str(g.vcpu),
                     f"{g.monthly_eur:.2f}" if g.monthly_eur is not None else "-", roles])
    out += ["  " + x for x in _table(rows, ["group", "hosts", "size", "vCPU", "EUR/month each", "roles"])]
    if rec.warnings:
        out += ["", "warnings:"] + [f"  - {w}" for w in rec.warnings]
    rows = [[f.provider, f.size, str(f.vcpu), f.arch, f"{f.monthly_eur:.2f}",
             f"queue {f.workers}w" if f.mode == "queue" else f.mode, f"{f.capacity_per_s:.1f}",
             "yes" if f.carries else "no"] for f in rec.fits]
    out += ["", "single catalog sizes for this rate:"]
    out += ["  " + x for x in _table(rows, ["provider", "size", "vCPU", "arch", "EUR/month", "setup", "capacity/s", "carries"])]
    if changes:
        out.append(f"\nyour results: {len(changes['user_points'])} capacity point(s) used "
                   f"({', '.join(changes['user_points']) or 'none'})")
        out += [f"  not used: {e['id']}: {e['reason']}" for e in changes["user_excluded"]]
        if not changes["user_points"]:
            out.append("  nothing to refit on: add a step that saturates without failing, e.g. "
                       "`n8n-sizer bench --local --concurrency-sweep 10,25` (closed load, no timeouts)")
        out.append("\nwhat your results changed:")
        for name, v in changes["params"].items():
            before = "new" if v["before"] is None else f"{v['before']:.4g}"
            out.append(f"  {name:28s} {before} -> {v['after']:.4g}")
        bb, a = changes["recommendation"]["before"], changes["recommendation"]["after"]
        was = "none (a workflow only your results measured)" if bb is None else \
            f"{bb['mode']} {bb['workers']}w {bb['capacity_per_s']:.1f}/s"
        out.append(f"  recommendation: {was} -> {a['mode']} {a['workers']}w {a['capacity_per_s']:.1f}/s")
    if rec.notes:
        out += ["", "model notes:"] + [f"  - {n}" for n in rec.notes]
    out.append(f"\nevidence: {', '.join(rec.evidence)}")
    if written is not None:
        out.append(f"\nstack written to {compose}:")
        out += [f"  {m}" for m in written]
    elif _spread(rec):
        out.append(f"\nnext: save this answer with --json > advice.json, then {rec.render_command}")
    else:
        queue = f" --workers {rec.workers} --concurrency {rec.concurrency}" if rec.mode == "queue" else ""
        limit = f" --production-limit {rec.production_limit}" if rec.production_limit else ""
        render = (f"n8n-sizer render --mode {rec.setup.mode}{queue} --runner-concurrency {rec.runner_concurrency} "
                  f"--pool {rec.setup.db_pool_size}{limit} --out stack/  (or add --compose stack/ to this command)")
        out.append(f"\nnext: {render}")
    print("\n".join(out))


def _print_validation(extra, json_out: bool) -> int:
    from n8n_sizer.advisor.measurements import load_embedded
    from n8n_sizer.advisor.validate import leave_one_out

    rows = tuple(load_embedded()) + tuple(extra or ())
    v = leave_one_out(rows)
    if json_out:
        print(json.dumps({
            "median_abs_pct_error": v.median_abs_pct_error, "max_abs_pct_error": v.max_abs_pct_error,
            "interval_coverage": v.interval_coverage,
            "points": [{"id": p.id, "workflow": p.workflow, "setup": p.setup, "host": p.host,
                        "measured_per_s": p.measured_per_s, "predicted_per_s": p.predicted_per_s,
                        "low_per_s": p.low_per_s, "high_per_s": p.high_per_s, "error_pct": p.error_pct}
                       for p in v.points],
            "excluded": [{"id": e.measurement.id, "reason": e.reason} for e in v.excluded],
            "latency_points": [{"id": c.id, "setup": c.setup, "offered_per_s": c.offered_per_s,
                                "measured_p95_ms": c.measured_p95_ms, "predicted_p95_ms": c.predicted_p95_ms,
                                "error_pct": c.error_pct} for c in v.latency],
            "demand_rows": {"median_abs_pct_error": v.demand_median_abs_pct_error,
                            "max_abs_pct_error": v.demand_max_abs_pct_error,
                            "rows": [{"id": d.id, "role": d.role, "setup": d.setup, "measured_ms": d.measured_ms,
                                      "predicted_ms": d.predicted_ms, "error_pct": d.error_pct} for d in v.demand]}},
            indent=2))
        return 0
    out = ["leave-one-out: each capacity point predicted by a fit without it"]
    rows = [[p.id, p.workflow, p.setup, p.host, f"{p.measured_per_s:.2f}", f"{p.predicted_per_s:.2f}",
             f"{p.low_per_s:.1f}-{p.high_per_s:.1f}", f"{p.error_pct:+.1f}%"] for p in v.points]
    out += _table(rows, ["measurement", "workflow", "setup", "host", "measured/s", "predicted/s", "90% interval", "error"])
    out.append(f"throughput rows: median |error| {v.median_abs_pct_error:.1f}%, max |error| {v.max_abs_pct_error:.1f}%, "
               f"measured value inside the 90% interval for {v.interval_coverage:.0%} of points "
               f"({len(v.points)} capacity points)")
    out += ["", "leave-one-out: each per-role CPU row predicted by a fit without it"]
    rows = [[d.id, d.role, d.setup, f"{d.measured_ms:.1f} ms", f"{d.predicted_ms:.1f} ms", f"{d.error_pct:+.1f}%"]
            for d in v.demand]
    out += _table(rows, ["row", "role", "setup", "measured", "predicted", "error"])
    if v.demand:
        out.append(f"per-role demand rows: median |error| {v.demand_median_abs_pct_error:.1f}%, max |error| "
                   f"{v.demand_max_abs_pct_error:.1f}% ({len(v.demand)} rows)")
    out += ["", "latency check (not a target): p95 below capacity, constant-rate arrivals, plus the reported "
            "network round trip"]
    rows = [[c.id, c.setup, f"{c.offered_per_s:g}", f"{c.measured_p95_ms:,.0f} ms", f"{c.predicted_p95_ms:,.0f} ms",
             f"{c.error_pct:+.0f}%"] for c in v.latency]
    out += _table(rows, ["measurement", "setup", "offered/s", "measured p95", "predicted p95", "error"])
    out += ["", "not used as capacity points, and why:"] + [f"  {e.measurement.id}: {e.reason}" for e in v.excluded]
    print("\n".join(out))
    sys.stdout.flush()
    return 0
