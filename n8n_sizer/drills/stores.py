"""Drills that break the stores n8n leans on: Redis restarted with jobs waiting (3), Postgres under load (4)."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections import Counter

from n8n_sizer.bench.http_post import HttpPost
from n8n_sizer.bench.load import run_open
from n8n_sizer.drills.common import (
    DrillCheck,
    DrillContext,
    DrillFailed,
    DrillOutcome,
    check,
    counts,
    wait_for,
)
from n8n_sizer.errors import InputError
from n8n_sizer.n8n.client import FINAL_STATUSES
from n8n_sizer.n8n.workflows import read_workflow, webhook_path
from n8n_sizer.runs.records import RequestRecord
from n8n_sizer.runs.stats import error_kind

# Seed 000, "Redis persistence" table: 20 executions queued with no worker, Redis SIGKILLed and started.
REDIS_EXPECTED = {
    "aof": {
        "before": 20,
        "after": 20,
        "outcome": "AOF (appendonly yes, appendfsync everysec): 20 waiting before the "
        "kill, 20 after the restart, all 20 ran, success",
    },
    "none": {
        "before": 20,
        "after": 0,
        "outcome": "no persistence (appendonly no, save ''): 20 waiting before the "
        "kill, 0 after the restart, all 20 marked crashed",
    },
}
REDIS_MAIN_EXPECTED = (
    "main logged 'Lost Redis connection. Trying to reconnect in 1s...' and, with Redis away 10 s, "
    "exited; restart: unless-stopped brought it back"
)
# Seed 000, "Failure drills", 4: Postgres restarted at 4 requests a second.
POSTGRES_EXPECTED = {
    "failed": '8 of 361 requests failed: 7 x 503 {"code":503,"message":"Database is not ready!"}, 1 x HTTP 500',
    "recovered": "Postgres back in 1 s, main ready again in 3 s, no manual restart",
    "logs": "main and the worker logged 'Postgres pool client error: terminating connection due to administrator "
    "command', then 'Database connection recovered'",
}
# What n8n logs when a process loses its database connection (pg-pool's idle client error, a failed ping).
LOST_DB = r"Postgres pool client error|Database ping failed"
PING_INTERVAL_S = 2.0  # n8n's DB_PING_INTERVAL_SECONDS default
# Bull's queue lists (LLEN); with no worker every queued execution waits in "wait".
WAIT = "wait"


def redis_outcome_matches(
    persistence: str, jobs: int, waiting_before: int, waiting_after: int, by_status: dict[str, int]
) -> bool:
    """Seed 000's table: AOF keeps every waiting job and all run; without persistence none survives and
    every execution ends crashed."""
    if persistence == "aof":
        return waiting_before == waiting_after == jobs and by_status == {"success": jobs}
    return waiting_before == jobs and waiting_after == 0 and by_status == {"crashed": jobs}


def _switch_redis(ctx: DrillContext, persistence: str) -> None:
    """Run Redis with `persistence` from now on (a normal stop, then a start with the new config)."""
    if ctx.redis_persistence == persistence:
        return
    ctx.stack.stop_process("redis", timeout_s=10)
    ctx.stack.start_process("redis", redis_persistence=persistence)
    ctx.redis_persistence = persistence


def _start_workers(ctx: DrillContext) -> None:
    for name in ctx.stack.worker_names:
        if not ctx.stack.is_running(name):
            ctx.stack.start_process(name, wait=False)
    for name in ctx.stack.worker_names:
        ctx.stack.wait_ready(name)


def redis_restart(ctx: DrillContext, persistence: str = "both", jobs: int = 20, settle_s: float = 20.0) -> DrillOutcome:
    """Drill 3 with AOF, then without persistence (`persistence="both"`), or one of them; one outcome."""
    variants = ["aof", "none"] if persistence == "both" else [persistence]
    parts = [_redis_restart_once(ctx, variant, jobs, settle_s) for variant in variants]
    return DrillOutcome(
        drill="redis-restart",
        checks=[c for part in parts for c in part.checks],
        observed={variant: part.observed for variant, part in zip(variants, parts, strict=True)},
        timings_s={
            f"{variant} {key}": value
            for variant, part in zip(variants, parts, strict=True)
            for key, value in part.timings_s.items()
        },
        log_lines={
            f"{key} ({variant})": value
            for variant, part in zip(variants, parts, strict=True)
            for key, value in part.log_lines.items()
        },
        settings={"redis_persistence": ",".join(variants)},
    )


def _redis_restart_once(ctx: DrillContext, persistence: str, jobs: int, settle_s: float) -> DrillOutcome:
    """Queue `jobs` executions with every worker stopped, SIGKILL Redis, start it, start the workers."""
    if persistence not in REDIS_EXPECTED:
        raise InputError(f"--persistence {persistence}: unknown; try aof, none or both")
    stack = ctx.stack
    before_ids = set(ctx.executions("long-wait"))
    timings: dict[str, float] = {}
    main_restarted = recovery_restart = False
    stuck: dict[str, int] = {}
    try:
        _switch_redis(ctx, persistence)
        main_mark = ctx.mark("main")
        for name in stack.worker_names:
            stack.stop_process(name, timeout_s=30)
        for _ in range(jobs):
            status, body = ctx.post("long-wait", {"seconds": 1}, timeout_s=15)
            if status != 200:
                raise DrillFailed(f"long-wait webhook answered {status}: {body}")
        wait_for(lambda: ctx.bull_count(WAIT) >= jobs, 20, f"{jobs} jobs waiting in Redis")
        time.sleep(1.5)  # appendfsync everysec: give the last second its fsync, as any real outage would
        waiting_before = ctx.bull_count(WAIT)
        started = time.monotonic()
        stack.restart_redis(persistence)
        timings["redis_restart_s"] = round(time.monotonic() - started, 2)
        waiting_after = ctx.bull_count(WAIT)
        time.sleep(2.0)  # let main notice and reconnect
        main_survived = stack.is_running("main")
        if not main_survived:
            stack.stop_process("main", timeout_s=5)
            stack.start_process("main")  # what restart: unless-stopped did in seed 000
            main_restarted = True
        started = time.monotonic()
        _start_workers(ctx)
        timings["workers_ready_s"] = round(time.monotonic() - started, 1)

        def mine() -> dict[str, str]:
            return {i: s for i, s in ctx.executions("long-wait").items() if i not in before_ids}

        def settled() -> dict[str, str] | None:
            now = mine()
            return now if len(now) >= jobs and all(s in FINAL_STATUSES for s in now.values()) else None

        try:
            # 1 s executions: with their jobs in Redis, 20 s with 2 workers up is ample
            final = wait_for(settled, settle_s, "the queued executions reach a final status", poll_s=1.0)
        except DrillFailed:
            # Nothing left in Redis to run them: n8n's queue recovery marks them crashed, on main's start and
            # then every N8N_EXECUTIONS_QUEUE_RECOVERY_INTERVAL minutes (180). Restart main, as seed 000's did.
            stuck = counts(mine())
            # main waits for its "active" executions on SIGTERM; they never finish: 5 s, then SIGKILL
            stack.stop_process("main", timeout_s=5)
            stack.start_process("main")
            recovery_restart = True
            final = wait_for(settled, 60, "queue recovery after main's restart marks them", poll_s=1.0)
        timings["settled_after_workers_s"] = round(time.monotonic() - started, 1)
    finally:
        try:
            _switch_redis(ctx, "aof")
        finally:
            ctx.restore()
    by_status = counts(final)
    expected = REDIS_EXPECTED[persistence]
    lost_lines = main_mark.find(r"Lost Redis connection|Unable to connect to Redis|queue recovery")
    ok = redis_outcome_matches(persistence, jobs, waiting_before, waiting_after, by_status)
    how = (
        "main exited and was started again"
        if main_restarted
        else f"main survived the {timings['redis_restart_s']} s outage"
    )
    if recovery_restart:
        how += (
            f"; after {settle_s:.0f} s with workers up, {jobs - sum(stuck.values())} of {jobs} were not listed "
            f"by the public API (queued, status new) and none ran: restarted main so n8n's queue recovery ran"
        )
    checks = [
        check(
            f"{persistence}: {waiting_before} waiting before the SIGKILL, {waiting_after} after the restart; "
            f"once workers were back: {by_status}",
            expected["outcome"],
            ok,
            f"expected {expected['before']} -> {expected['after']} and "
            f"{'success' if persistence == 'aof' else 'crashed'} for all",
        ),
        check(
            f"{how}; main logged: {lost_lines[0] if lost_lines else '(no Redis line)'}",
            REDIS_MAIN_EXPECTED,
            not main_survived or timings["redis_restart_s"] < 10,
            "main exited although Redis was back within its 10 s reconnect window",
        ),
    ]
    return DrillOutcome(
        drill=f"redis-restart ({persistence})",
        checks=checks,
        observed={
            "persistence": persistence,
            "jobs": jobs,
            "waiting_before": waiting_before,
            "waiting_after": waiting_after,
            "statuses": by_status,
            "main_survived": main_survived,
            "main_restarted_after_exit": main_restarted,
            "main_restarted_for_queue_recovery": recovery_restart,
            "statuses_before_main_restart": stuck,
        },
        timings_s=timings,
        log_lines={"main": lost_lines},
        settings={"redis_persistence": persistence},
    )


def _load_thread(
    url: str, rate_per_s: float, duration_s: float, records: list[RequestRecord], sink
) -> threading.Thread:
    def collect(record: RequestRecord) -> None:
        records.append(record)
        if sink is not None:
            sink(record)

    async def offer() -> None:
        client = HttpPost(url, json.dumps({"number": 21}).encode(), timeout_s=30.0)
        try:
            await run_open(
                client,
                rate_per_s=rate_per_s,
                duration_s=duration_s,
                max_in_flight=200,
                step=f"rate-{rate_per_s:g}",
                target="local",
                sink=collect,
            )
        finally:
            client.close()  # inside the loop: its connections close before the loop does

    def run() -> None:
        asyncio.run(offer())

    thread = threading.Thread(target=run, name="drill-load", daemon=True)
    thread.start()
    return thread


def _failure_text(record: RequestRecord) -> str:
    """The message of a failed request: n8n's JSON "message" when the body has one, else the error."""
    found = re.search(r'"message":"([^"]*)"', record.body_snippet or "")
    if found:
        return f"{record.status} {found.group(1)}"
    return (record.body_snippet or record.error or "no answer")[:120]


def postgres_restart(
    ctx: DrillContext, rate_per_s: float = 4.0, duration_s: float = 30.0, restart_after_s: float = 8.0
) -> DrillOutcome:
    """Offer `rate_per_s` to the light workflow for `duration_s`; restart Postgres `restart_after_s` in."""
    stack = ctx.stack
    url = stack.main_url + webhook_path(read_workflow("light"))
    ctx.workflow_id("light")
    names = ["main", *stack.worker_names]
    marks = {name: ctx.mark(name) for name in names}
    records: list[RequestRecord] = []
    timings: dict[str, float] = {}
    load = _load_thread(url, rate_per_s, duration_s, records, ctx.request_sink)
    try:
        time.sleep(restart_after_s)
        restart_wall = time.time()
        started = time.monotonic()
        stack.restart_postgres()
        timings["postgres_back_s"] = round(time.monotonic() - started, 2)

        wait_for(lambda: stack.is_ready("main"), 60, "main ready again after the Postgres restart", poll_s=0.2)
        timings["main_ready_s"] = round(time.monotonic() - started, 2)
        recovered: dict[str, float] = {}
        lost: set[str] = set()

        def logged_recovery() -> bool:
            for name in names:
                if name not in lost and marks[name].find(LOST_DB, 1):
                    lost.add(name)
                if name not in recovered and marks[name].find(r"Database connection recovered", 1):
                    recovered[name] = round(time.monotonic() - started, 1)
            # n8n pings its database every DB_PING_INTERVAL_SECONDS (2): give every process a ping after
            # Postgres is back before taking silence for "did not notice"
            settled = time.monotonic() - started > timings["postgres_back_s"] + PING_INTERVAL_S + 1.0
            return settled and bool(lost) and lost <= set(recovered)

        try:
            wait_for(logged_recovery, 30, "every n8n process that lost its connection logs its recovery", poll_s=0.25)
        except DrillFailed:
            pass  # recorded below: who did not log it
        load.join(duration_s + 60)
    finally:
        load.join(duration_s + 60)
        ctx.restore()
    log_lines = {
        name: marks[name].find(
            rf"{LOST_DB}|terminating connection|Database connection recovered|"
            r"Database is not ready|ECONNREFUSED",
            6,
        )
        for name in names
    }
    checks, failures = judge_postgres_restart(records, restart_wall, timings, recovered, lost, names, rate_per_s)
    return DrillOutcome(
        drill="postgres-restart",
        checks=checks,
        observed={
            "rate_per_s": rate_per_s,
            "duration_s": duration_s,
            "requests": len(records),
            **failures,
            "recovered_logged_after_s": recovered,
            "lost_connection": sorted(lost),
            "did_not_notice": sorted(set(names) - lost - set(recovered)),
        },
        timings_s=timings,
        log_lines=log_lines,
        settings={},
    )


def judge_postgres_restart(
    records: list[RequestRecord],
    restart_wall_s: float,
    timings: dict[str, float],
    recovered: dict[str, float],
    lost: set[str],
    names: list[str],
    rate_per_s: float,
) -> tuple[list[DrillCheck], dict]:
    """Checks against seed 000 from the load's records: failures only while main was not ready, answered
    503/500 (not timeouts), none later; every n8n process that logged losing its connection (a pool client
    error or a failed ping) logged its recovery. A process whose only connection was busy in a query when
    Postgres went (its pool has no idle client to report the error, its next ping finds Postgres back) logs
    neither: it did not notice, which is no failure."""
    failed = [r for r in records if error_kind(r) is not None]
    kinds = Counter(error_kind(r) for r in failed)
    bodies = Counter(_failure_text(r) for r in failed)
    ready_at = restart_wall_s + timings["main_ready_s"]
    late = [r for r in failed if r.scheduled_s > ready_at + 5]
    answered_after = sum(1 for r in records if r.scheduled_s > ready_at and error_kind(r) is None)
    # only requests that arrive while main is not ready may fail: its outage at the offered rate, +1 s each side
    outage_budget = round((timings["main_ready_s"] + 2.0) * rate_per_s)
    detail = ", ".join(f"{n} x {k}" for k, n in kinds.most_common()) or "none"
    checks = [
        check(
            f"{len(failed)} of {len(records)} requests failed ({detail}); bodies: {dict(bodies.most_common(3))}",
            POSTGRES_EXPECTED["failed"],
            len(failed) <= outage_budget and set(kinds) <= {"503", "500"},
            f"more failures than the {outage_budget} requests sent while main was not ready, or failures that "
            f"were not answered 503/500",
        ),
        check(
            f"Postgres back in {timings['postgres_back_s']} s, main ready in {timings['main_ready_s']} s; "
            f"{answered_after} requests after that answered, {len(late)} failed more than 5 s later",
            POSTGRES_EXPECTED["recovered"],
            not late and answered_after > 0,
            "requests kept failing after main was ready again",
        ),
        check(
            f"lost the connection: {sorted(lost) or 'no process'}; 'Database connection recovered' logged by "
            f"{sorted(recovered) or 'no process'} ({', '.join(f'{k} +{v} s' for k, v in recovered.items())}); "
            f"did not notice: {sorted(set(names) - lost - set(recovered)) or 'none'}",
            POSTGRES_EXPECTED["logs"],
            bool(lost) and lost <= set(recovered),
            f"not logged by {sorted(lost - set(recovered))}" if lost else "no process logged losing its connection",
        ),
    ]
    return checks, {"failed": len(failed), "failed_by_kind": dict(kinds), "failed_bodies": dict(bodies)}
