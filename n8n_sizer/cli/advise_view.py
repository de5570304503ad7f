"""`advise`: check the inputs, call the advisor, print the recommendation (PGTune style) or JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pydantic import ValidationError

from n8n_sizer.errors import InputError

ARCHES = ("x86", "arm")
PROVIDERS = ("hetzner", "gcp")


def _check_inputs(rps: float | None, vcpu: int | None, arch: str, provider: str | None, p95_ms: float | None,
                  validate: bool, cpu_ms: float | None = None, wait_ms: float | None = None,
                  workload: str | None = None) -> None:
    from n8n_sizer.safety import numbers as n

    n.check_numbers({"--rps": (rps, n.RATE_PER_S), "--vcpu": (vcpu, n.VCPU), "--cpu-ms": (cpu_ms, n.CPU_MS),
                     "--wait-ms": (wait_ms, n.WAIT_MS), "--p95-ms": (p95_ms, n.LATENCY_MS)})
    if workload is not None and (cpu_ms is not None or wait_ms is not None):
        given = " and ".join(f for f, v in (("--cpu-ms", cpu_ms), ("--wait-ms", wait_ms)) if v is not None)
        raise InputError(f"{given} describe a custom workload, and --workload {workload} names another; drop "
                         f"--workload to size the custom one, or drop {given}")
    if validate:
        given = [f for f, v in (("--rps", rps), ("--vcpu", vcpu), ("--provider", provider), ("--p95-ms", p95_ms),
                                ("--workload", workload), ("--cpu-ms", cpu_ms), ("--wait-ms", wait_ms)) if v is not None]
        if given:
            raise InputError(f"--validate scores the model on its measurements and ignores {', '.join(given)}; "
                             "run it alone (with --results or --json if you like), or drop --validate")
    if not validate and rps is None:
        raise InputError("--rps is required: the sustained webhook rate to carry, e.g. --rps 40")
    if rps is not None and not rps > 0:
        raise InputError(f"--rps must be > 0 (got {rps:g}); it is requests per second, e.g. --rps 40")
    if vcpu is not None and vcpu <= 0:
        raise InputError(f"--vcpu must be >= 1 (got {vcpu}); omit it to get the cheapest size that fits")
    if arch not in ARCHES:
        raise InputError(f"unknown --arch {arch!r}; accepted: {', '.join(ARCHES)}")
    if provider is not None and provider not in PROVIDERS:
        raise InputError(f"unknown --provider {provider!r}; accepted: {', '.join(PROVIDERS)}")
    if p95_ms is not None and not p95_ms > 0:
        raise InputError(f"--p95-ms must be > 0 (got {p95_ms:g}); it is the latency target in milliseconds")


def run_advise(*, rps, vcpu, arch, provider, workload, cpu_ms, wait_ms, p95_ms, results, validate, json_out,
               compose, generate_missing_secrets: bool = False) -> int:
    from n8n_sizer.advisor.engine import build_advisor
    from n8n_sizer.advisor.profiles import profile_for
    from n8n_sizer.advisor.recommend import Request

    _check_inputs(rps, vcpu, arch, provider, p95_ms, validate, cpu_ms, wait_ms, workload)
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
    req = Request(rps=rps, vcpu=vcpu, arch=arch, provider=provider, profile=profile, p95_ms=p95_ms)
    try:
        rec = advisor.recommend(req)
    except ValidationError as exc:  # e.g. Little's law asks for more in-flight executions than a Setup allows
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "setup"
        raise InputError(f"no stack n8n-sizer renders fits these inputs: the {where} it would need is out of range "
                         f"({first.get('msg')}, got {first.get('input')}); lower --rps or --wait-ms") from None
    changes = _changes(build_advisor(None), advisor, req, rec) if extra else None
    written = _write_compose(rec, compose, generate_missing_secrets) if compose is not None else None
    if json_out:
        data = rec.model_dump(mode="json")
        if changes is not None:
            data["changes"] = changes
        if written is not None:
            data["compose"] = {"dir": str(compose), "messages": written}
        print(json.dumps(data, indent=2))
    else:
        _print_recommendation(rec, changes, written, compose, bool(extra))
    return 0


def _changes(before, after, req, new) -> dict:
    """What the user's results changed: parameters and the recommendation (`new` is after's answer to `req`)."""
    from n8n_sizer.advisor.fit import is_user_point

    known_before = f"overhead:{req.profile.overhead_key}" in before.model.params
    old = before.recommend(req) if known_before else None  # a workflow only your results measured is new
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
    if rec.mode == "queue":
        return f"queue (EXECUTIONS_MODE=queue, {rec.workers} worker(s), each with its own task runner)"
    if rec.mode == "regular-limit":
        return f"regular, with N8N_CONCURRENCY_PRODUCTION_LIMIT={rec.production_limit}"
    return "regular (no Redis, no workers)"


def _print_recommendation(rec, changes, written, compose, refitted) -> None:
    from rich.console import Console
    from rich.table import Table

    out = Console(highlight=False, soft_wrap=True, width=max(Console().width, 110))
    r = rec.request
    profile = r["workload"] + (f" ({r['cpu_ms']:g} ms Code CPU, {r['wait_ms']:g} ms wait)" if r["workload"] == "custom" else "")
    out.print(f"# n8n-sizer advise: {r['rps']:g} req/s, {'%d vCPU' % r['vcpu'] if r['vcpu'] else 'any size'} "
              f"{r['arch']}{', ' + r['provider'] if r['provider'] else ''}, workload {profile}"
              f"{', p95 <= %g ms' % r['p95_ms'] if r['p95_ms'] else ''}"
              f"{'  [refitted on your results]' if refitted else ''}")
    cap = rec.capacity_per_s
    server = rec.server
    where = (f"{server.provider} {server.size}" if server.size else "your server") + \
            f" ({server.vcpu:g} vCPU {server.arch}{', %.2f EUR/month' % server.monthly_eur if server.monthly_eur is not None else ''})"
    lines = [
        ("verdict", ("carries it" if rec.feasible else "does NOT carry it") + ("  (extrapolated)" if rec.extrapolated else "")),
        ("server", where),
        ("mode", _mode_text(rec)),
    ]
    if rec.mode == "queue":
        lines += [("workers", str(rec.workers)), ("worker --concurrency", str(rec.concurrency))]
    lines += [("N8N_RUNNERS_MAX_CONCURRENCY", str(rec.runner_concurrency))]
    if rec.production_limit is not None:
        lines += [("N8N_CONCURRENCY_PRODUCTION_LIMIT", str(rec.production_limit))]
    if rec.queue_keep_last is not None:
        lines += [("N8N_EXECUTIONS_QUEUE_KEEP_LAST_*", f"{rec.queue_keep_last} (_COMPLETED and _FAILED; n8n's 0 can "
                                                       "leave a webhook unanswered, see docs/findings/queue-webhook-hang.md)")]
    lines += [
        ("DB_POSTGRESDB_POOL_SIZE", f"{rec.db_pool_size}  -> {rec.postgres_connections} Postgres connections "
                                    f"((pool + 1) + {rec.workers} x pool); max_connections {rec.max_connections}"),
        ("capacity", f"{cap.mid:.1f} executions/s (90% interval {cap.low:.1f} to {cap.high:.1f}), bound by {rec.bound}"),
        ("headroom", f"{rec.headroom:+.0%} at {r['rps']:g}/s; CPU use about {rec.cpu_utilisation:.0%} of the cores"),
        ("p95 at that rate", f"{rec.p95_ms:,.0f} ms (server side, Poisson arrivals)" if rec.p95_ms is not None else "n/a: past capacity"),
        ("stack RAM", f"{rec.ram_idle_mb:,.0f} MB idle, {rec.ram_peak_mb:,.0f} MB peak"),
    ]
    for name, value in lines:
        out.print(f"{name:34s} {value}")
    if rec.redis:
        out.print("Redis".ljust(34) + " " + rec.redis[0])
        for line in rec.redis[1:]:
            out.print(" " * 35 + line)
    if rec.warnings:
        out.print("\nwarnings:")
        for w in rec.warnings:
            out.print(f"  - {w}")
    table = Table(title="catalog sizes for this rate", title_justify="left")
    for col in ("provider", "size", "vCPU", "arch", "EUR/month", "setup", "capacity/s", "carries"):
        table.add_column(col, no_wrap=True)
    for f in rec.fits:
        setup = f"queue {f.workers}w" if f.mode == "queue" else f.mode
        table.add_row(f.provider, f.size, str(f.vcpu), f.arch, f"{f.monthly_eur:.2f}", setup,
                      f"{f.capacity_per_s:.1f}", "yes" if f.carries else "no")
    out.print()
    out.print(table)
    if changes:
        out.print(f"\nyour results: {len(changes['user_points'])} capacity point(s) used "
                  f"({', '.join(changes['user_points']) or 'none'})")
        for e in changes["user_excluded"]:
            out.print(f"  not used: {e['id']}: {e['reason']}")
        if not changes["user_points"]:
            out.print("  nothing to refit on: add a step that saturates without failing, e.g. "
                      "`n8n-sizer bench --local --concurrency-sweep 10,25` (closed load, no timeouts)")
        out.print("\nwhat your results changed:")
        for name, v in changes["params"].items():
            before = "new" if v["before"] is None else f"{v['before']:.4g}"
            out.print(f"  {name:28s} {before} -> {v['after']:.4g}")
        b, a = changes["recommendation"]["before"], changes["recommendation"]["after"]
        was = "none (a workflow only your results measured)" if b is None else \
            f"{b['mode']} {b['workers']}w {b['capacity_per_s']:.1f}/s"
        out.print(f"  recommendation: {was} -> {a['mode']} {a['workers']}w {a['capacity_per_s']:.1f}/s")
    if rec.notes:
        out.print("\nmodel notes:")
        for n in rec.notes:
            out.print(f"  - {n}")
    out.print(f"\nevidence: {', '.join(rec.evidence)}")
    if written is not None:
        out.print(f"\nstack written to {compose}:")
        for m in written:
            out.print(f"  {m}")
    else:
        queue = f" --workers {rec.workers} --concurrency {rec.concurrency}" if rec.mode == "queue" else ""
        limit = f" --production-limit {rec.production_limit}" if rec.production_limit else ""
        render = (f"n8n-sizer render --mode {rec.setup.mode}{queue} --runner-concurrency {rec.runner_concurrency} "
                  f"--pool {rec.db_pool_size}{limit} --out stack/  (or add --compose stack/ to this command)")
        out.print(f"\nnext: {render}")


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
                                "error_pct": c.error_pct} for c in v.latency]}, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    out = Console(highlight=False, soft_wrap=True, width=max(Console().width, 200))
    table = Table(title="leave-one-out: each capacity point predicted by a fit without it", title_justify="left")
    for col in ("measurement", "workflow", "setup", "host", "measured/s", "predicted/s", "90% interval", "error"):
        table.add_column(col, no_wrap=True)
    for p in v.points:
        table.add_row(p.id, p.workflow, p.setup, p.host, f"{p.measured_per_s:.2f}", f"{p.predicted_per_s:.2f}",
                      f"{p.low_per_s:.1f}-{p.high_per_s:.1f}", f"{p.error_pct:+.1f}%")
    out.print(table)
    out.print(f"median |error| {v.median_abs_pct_error:.1f}%, max |error| {v.max_abs_pct_error:.1f}%, "
              f"measured value inside the 90% interval for {v.interval_coverage:.0%} of points "
              f"({len(v.points)} capacity points)")
    lat = Table(title="latency check (not a target): p95 below capacity, constant-rate arrivals, plus the "
                      "reported network round trip", title_justify="left")
    for col in ("measurement", "setup", "offered/s", "measured p95", "predicted p95", "error"):
        lat.add_column(col, no_wrap=True)
    for c in v.latency:
        lat.add_row(c.id, c.setup, f"{c.offered_per_s:g}", f"{c.measured_p95_ms:,.0f} ms", f"{c.predicted_p95_ms:,.0f} ms",
                    f"{c.error_pct:+.0f}%")
    out.print(lat)
    out.print("\nnot used as capacity points, and why:")
    for e in v.excluded:
        out.print(f"  {e.measurement.id}: {e.reason}")
    sys.stdout.flush()
    return 0
