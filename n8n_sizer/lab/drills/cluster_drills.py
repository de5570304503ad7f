"""The cluster drills on a deployed lab, each under a short bounded load through the lab's load balancer:

- stop-worker-host: every n8n process of one worker host stopped (SIGTERM: n8n's graceful shutdown), kept down,
  started again; the other worker host carries on;
- kill-webhook: one webhook processor SIGKILLed (with its task runner), started again; Caddy routes around it;
- restart-redis: the data host's Redis stopped and started again (AOF everysec); the n8n processes reconnect;
- partition: iptables DROP of the data host's address inside one worker host's namespace for N seconds, healed;
- rolling-restart: every webhook processor, then every worker, SIGTERMed and started one at a time
  (lab/drills/rolling.py).

Each returns a `DrillOutcome` whose checks stand next to what n8n promises (`plan.PROMISES`) and whose
`observed` holds the cluster's ledger. Everything a drill changes is put back in a `finally`: processes it
stopped are started from their snapshots, the partition's rules are deleted by their exact spec.
"""

from __future__ import annotations

from collections.abc import Callable

from n8n_sizer.drills.common import DrillFailed, DrillOutcome, check
from n8n_sizer.lab.cluster_record import N8N_ROLES
from n8n_sizer.lab.drills.actions import (
    REDIS_LINES,
    log_lines,
    log_marks,
    n8n_on,
    outage,
    started_by_host,
    wait_ready,
    worker_hosts,
)
from n8n_sizer.lab.drills.context import LabDrillContext, record_lab_drill, statuses
from n8n_sizer.lab.drills.judge import (
    HEALTH_INTERVAL_S,
    HEALTH_TIMEOUT_S,
    PROMISES,
    answered_after,
    ledger_text,
    nothing_lost,
    ok,
    ran_on,
    window,
)
from n8n_sizer.lab.drills.partition import partition
from n8n_sizer.lab.drills.rolling import rolling_restart


def stop_worker_host(
    ctx: LabDrillContext,
    host: str | None = None,
    rate_per_s: float = 2.0,
    duration_s: float = 30.0,
    stop_at_s: float = 5.0,
    down_for_s: float = 12.0,
) -> DrillOutcome:
    victim, others = worker_hosts(ctx, host)
    wid, url = ctx.new_workflow("stop-worker-host")
    victims = n8n_on(ctx, victim)
    workers = ctx.lab.find(role="worker")
    marks = log_marks(ctx, workers)
    load = ctx.load(url, rate_per_s, duration_s, f"rate-{rate_per_s:g}")
    t, back = outage(ctx, load.started_s + stop_at_s, victims, "TERM", 35.0, down_for_s)
    records = load.wait()
    ready = wait_ready(ctx, [name for name, _ in back], t["restart"])
    after = ctx.after_load(url, rate_per_s, records)
    ledger, found = ctx.ledger(records + after, wid)
    during = window(records, t["down"], t["restart"])
    answered_ids = [
        r.execution_id for r in records if ok(r) and r.execution_id and t["down"] <= r.sent_s < t["restart"]
    ]
    started = started_by_host(ctx, workers, marks)
    where = ran_on(answered_ids, started)
    after_where = ran_on([r.execution_id for r in after if ok(r) and r.execution_id], started)
    after_ok = sum(1 for r in after if ok(r))
    carried = during["answered"] > 0 and during["failed"] == 0 and set(where) <= set(others)
    checks = [
        check(
            f"{victim} down {t['restart'] - t['down']:.1f} s ({', '.join(p.name for p in victims)} stopped with "
            f"SIGTERM in {t['down'] - t['stop']:.1f} s): {during['sent']} requests sent meanwhile, "
            f"{during['answered']} answered, {during['failed']} failed {during['failures'] or ''}; their "
            f"executions ran on {where or 'no host'}",
            PROMISES["stop-worker-host"],
            carried,
            f"expected every request answered and run on {', '.join(others)}",
        ),
        check(
            f"ledger: {ledger_text(ledger)}",
            "every accepted request executed (ledger: lost = 0)",
            nothing_lost(ledger),
            "accepted requests without a stored successful execution",
        ),
        check(
            f"{victim} started again: ready {ready} s after the start; then {after_ok} of {len(after)} answered, run on "
            f"{after_where}",
            "the stopped host's workers rejoin when started: they take jobs again",
            all(v is not None for v in ready.values()) and after_ok == len(after) and victim in after_where,
            f"{victim} took no job after its restart" if victim not in after_where else "a request failed after",
        ),
    ]
    return DrillOutcome(
        drill="stop-worker-host",
        checks=checks,
        observed={
            "host": victim,
            "others": others,
            "during": during,
            "ran_on": where,
            "after": {"answered": after_ok, "sent": len(after), "ran_on": after_where},
            "executions": statuses(found),
            "ledger": ledger.model_dump(),
            "processes": [p.name for p in victims],
        },
        timings_s={
            "stopping_s": round(t["down"] - t["stop"], 2),
            "down_s": round(t["restart"] - t["down"], 2),
            "restart_s": round(t["back"] - t["restart"], 2),
        },
        log_lines={},
        settings={"rate_per_s": str(rate_per_s), "duration_s": str(duration_s)},
    )


def kill_webhook(
    ctx: LabDrillContext,
    name: str = "webhook-1",
    rate_per_s: float = 2.0,
    duration_s: float = 30.0,
    kill_at_s: float = 5.0,
    down_for_s: float = 15.0,
) -> DrillOutcome:
    found_procs = ctx.lab.find(role="webhook", name=name)
    if not found_procs:
        raise DrillFailed(f"the lab runs no webhook processor {name!r}; lab deploy a topology with webhook >= 2")
    if len(ctx.lab.find(role="webhook")) < 2 or ctx.lab.cluster.load_balancer_pid is None:
        raise DrillFailed("kill-webhook needs 2 webhook processors behind the load balancer")
    proc = found_procs[0]
    wid, url = ctx.new_workflow("kill-webhook")
    load = ctx.load(url, rate_per_s, duration_s, f"rate-{rate_per_s:g}")
    t, [(_, ready_s)] = outage(ctx, load.started_s + kill_at_s, [proc], "KILL", 5.0, down_for_s)
    t["kill"] = t["stop"]
    records = load.wait()
    after = ctx.after_load(url, rate_per_s, records)
    ledger, found = ctx.ledger(records + after, wid)
    noticed = t["kill"] + HEALTH_INTERVAL_S + HEALTH_TIMEOUT_S
    first = window(records, t["kill"], noticed)
    later = window(records, noticed, t["back"])
    after_ok, after_sent = answered_after(after, 0.0)
    checks = [
        check(
            f"{name} SIGKILLed for {t['back'] - t['kill']:.1f} s: in the first {noticed - t['kill']:.0f} s "
            f"(one health interval + timeout) {first['sent']} sent, {first['answered']} answered, "
            f"{first['failed']} failed {first['failures'] or ''}; after that {later['sent']} sent, "
            f"{later['answered']} answered, {later['failed']} failed {later['failures'] or ''}",
            PROMISES["kill-webhook"],
            later["failed"] == 0 and later["sent"] > 0,
            "requests failed after the load balancer should have taken it out",
        ),
        check(
            f"ledger: {ledger_text(ledger)}",
            "nothing accepted lost (ledger: lost = 0)",
            nothing_lost(ledger),
            "accepted requests without a stored successful execution",
        ),
        check(
            f"{name} started again, ready in {ready_s:.1f} s; afterwards {after_ok} of {after_sent} answered",
            "the processor rejoins; every request after it is back is answered",
            after_sent > 0 and after_ok == after_sent,
            "requests failed after the restart",
        ),
    ]
    return DrillOutcome(
        drill="kill-webhook",
        checks=checks,
        observed={
            "processor": name,
            "first_interval": first,
            "after_interval": later,
            "during": window(records, t["kill"], t["back"]),
            "after_restart": {"answered": after_ok, "sent": after_sent},
            "executions": statuses(found),
            "ledger": ledger.model_dump(),
        },
        timings_s={"down_s": round(t["back"] - t["kill"], 2), "ready_s": round(ready_s, 2)},
        log_lines={},
        settings={"rate_per_s": str(rate_per_s), "duration_s": str(duration_s)},
    )


def restart_redis(
    ctx: LabDrillContext, rate_per_s: float = 2.0, duration_s: float = 30.0, restart_at_s: float = 8.0
) -> DrillOutcome:
    redis = ctx.lab.find(role="redis")
    if not redis:
        raise DrillFailed(f"no Redis runs on the data host {ctx.lab.data_host}")
    n8n = [p for p in ctx.lab.processes() if p.role in N8N_ROLES]
    marks = log_marks(ctx, n8n)
    wid, url = ctx.new_workflow("restart-redis")
    load = ctx.load(url, rate_per_s, duration_s, f"rate-{rate_per_s:g}")
    # Redis is started again at once: the drill is the restart, not an outage of chosen length.
    t, [(_, ready_s)] = outage(ctx, load.started_s + restart_at_s, redis[:1], "TERM", 10.0, 0.0)
    ready = wait_ready(ctx, [p.name for p in n8n], t["back"], timeout_s=60.0)
    records = load.wait()
    after = ctx.after_load(url, rate_per_s, records)
    ledger, found = ctx.ledger(records + after, wid)
    exited = [p.name for p in n8n if not ctx.lab.is_running(p.name)]
    ready = {k: v for k, v in ready.items() if k not in exited}
    lines = log_lines(ctx, n8n, marks, REDIS_LINES)
    down_s = t["back"] - t["stop"]
    after_ok, after_sent = answered_after(after, 0.0)
    during = window(records, t["stop"], None)
    expect_exit = down_s > 10.0
    checks = [
        check(
            f"Redis down {down_s:.2f} s (SIGTERM, AOF everysec; started again, PING in {ready_s:.2f} s); n8n "
            f"processes that exited: {exited or 'none'}; the others ready again, seconds after Redis: {ready}",
            PROMISES["restart-redis"],
            (bool(exited) == expect_exit) and all(v is not None for v in ready.values()),
            "a process exited within the 10 s window" if exited else "a process did not get ready again",
        ),
        check(
            f"{during['sent']} requests sent from the stop to the end of the load: {during['answered']} answered, "
            f"{during['failed']} failed {during['failures'] or ''}; then {after_ok} of {after_sent} answered",
            "the processes reconnect: requests answered again",
            after_sent > 0 and after_ok == after_sent,
            "requests still failed after the processes reconnected",
        ),
        check(
            f"ledger: {ledger_text(ledger)}",
            "nothing accepted lost (AOF everysec)",
            nothing_lost(ledger),
            "accepted requests without a stored successful execution",
        ),
    ]
    return DrillOutcome(
        drill="restart-redis",
        checks=checks,
        observed={
            "exited": exited,
            "ready_after_s": ready,
            "during": during,
            "after": {"answered": after_ok, "sent": after_sent},
            "executions": statuses(found),
            "ledger": ledger.model_dump(),
        },
        timings_s={"redis_down_s": round(down_s, 2), "redis_ready_s": round(ready_s, 2)},
        log_lines={k: v for k, v in lines.items() if v},
        settings={"rate_per_s": str(rate_per_s), "duration_s": str(duration_s)},
    )


LAB_DRILLS: dict[str, Callable[..., DrillOutcome]] = {
    "stop-worker-host": stop_worker_host,
    "kill-webhook": kill_webhook,
    "restart-redis": restart_redis,
    "partition": partition,
    "rolling-restart": rolling_restart,
}


def run_lab_drill(name: str, ctx: LabDrillContext, out_dir, **params):
    """Run the cluster drill `name` on the lab and record it in `out_dir` (a `RunStore`)."""
    from n8n_sizer.errors import InputError

    if name not in LAB_DRILLS:
        raise InputError(f"drill {name!r} is unknown on a lab; try one of {', '.join(LAB_DRILLS)}")
    return record_lab_drill(name, LAB_DRILLS[name], ctx, out_dir, **params)
