"""The rolling restart on a deployed lab (issue 28's bar): every webhook processor, then every worker, stopped
with SIGTERM (n8n's graceful shutdown: a worker finishes the jobs it holds, a processor answers what it holds)
and started again, one process at a time, under a bounded load through the lab's load balancer.

The order and the pauses are the procedure docs/cluster.md recommends: the next process is stopped only once
the restarted one answers its readiness check AND the load balancer has had `LB_NOTICE_S` to see it healthy
again (Caddy checks every 2 s, 5 s to answer), so there is always a healthy webhook processor in rotation and a
worker taking jobs. Passing means: nothing accepted lost (the ledger), no execution ended other than "success",
and every process back and ready.
"""

from __future__ import annotations

import re
import time

from n8n_sizer.bundle.drain import HEALTH_INTERVAL_S, webhook_stop_grace_s
from n8n_sizer.drills.common import DrillFailed, DrillOutcome, check
from n8n_sizer.lab.drills.context import LabDrillContext, statuses
from n8n_sizer.lab.drills.judge import PROMISES, ledger_text, nothing_lost, window

# Caddy's health_interval: a restarted processor is seen healthy within one interval of answering its
# readiness check; 3 intervals leave room for a slow answer on a busy host (the kill-webhook drill's lesson).
LB_NOTICE_S = 3.0 * HEALTH_INTERVAL_S
# The rendered stop grace for the lab's longest execution (30 s): n8n_env.shutdown_seconds, and for a webhook
# processor the drain wait before n8n sees the signal (drain.webhook_stop_grace_s).
LOG_RE = re.compile(
    r'"level":"(error|warn)"|n8n-sizer drain|Error|error|[Ss]hutting down|[Ss]topping|[Rr]unner|[Dd]rain|Received SIG'
)
STOP_GRACE_S = {"webhook": float(webhook_stop_grace_s(60)), "worker": 60.0}


def rolling_restart(
    ctx: LabDrillContext, rate_per_s: float = 2.0, duration_s: float = 150.0, first_at_s: float = 5.0
) -> DrillOutcome:
    webhooks, workers = ctx.lab.find(role="webhook"), ctx.lab.find(role="worker")
    if len(webhooks) < 2 or ctx.lab.cluster.load_balancer_pid is None:
        raise DrillFailed("rolling-restart needs 2 webhook processors behind the load balancer")
    if len(workers) < 2:
        raise DrillFailed(f"rolling-restart needs 2 workers (one restarts, one takes jobs); the lab has {len(workers)}")
    wid, url = ctx.new_workflow("rolling-restart")
    # Caddy's proxy errors, the drain hook's lines, and each worker's own (its task runner writes to the same log)
    watched = [*ctx.lab.find(role="load_balancer"), *webhooks, *workers]
    marks = {p.name: ctx.lab.log_size(p) for p in watched}
    load = ctx.load(url, rate_per_s, duration_s, f"rate-{rate_per_s:g}")
    steps: list[dict] = []
    time.sleep(max(0.0, load.started_s + first_at_s - time.time()))
    began = time.time()
    for proc in [*webhooks, *workers]:
        stop_s, forced = time.time(), False
        try:  # the StackHandle stop: SIGTERM to n8n's PID only (as `docker stop`), SIGKILL after the grace
            forced = ctx.lab.stop_process(proc.name, timeout_s=STOP_GRACE_S[proc.role])
        finally:  # started again also when the stop failed: a drill never leaves the cluster short of a process
            down_s = time.time()
            ctx.lab.start_process(proc.name)  # waits until it answers its readiness check
            ready_s = time.time() - down_s
        steps.append(
            {
                "process": proc.name,
                "stop_s": round(stop_s - began, 1),
                "stopping_s": round(down_s - stop_s, 1),
                "ready_s": round(ready_s, 1),
                "forced": forced,
            }
        )
        if proc.role == "webhook":
            time.sleep(LB_NOTICE_S)
    ended = time.time()
    records = load.wait()
    after = ctx.after_load(url, rate_per_s, records)
    ledger, found = ctx.ledger(records + after, wid)
    during = window(records, began, ended)
    by_status = statuses(found)
    # Every refused request of the whole load, with when it went (s after the first stop): which stop it met.
    refusals = [
        {"at_s": round(r.sent_s - began, 1), "status": r.status, "error": (r.error or r.body_snippet or "")[:200]}
        for r in records + after
        if r.error_class != "dropped" and not (r.status is not None and 200 <= r.status < 300)
    ]
    not_success = {s: n for s, n in by_status.items() if s != "success"}
    failures = ctx.failures(found) if not_success else []
    back = all(ctx.lab.ready(p) for p in ctx.lab.find(role="webhook") + ctx.lab.find(role="worker"))
    inside = ended <= load.started_s + duration_s
    forced = [s["process"] for s in steps if s["forced"]]
    each = ", ".join(f"{s['process']} stopped in {s['stopping_s']} s, ready {s['ready_s']} s" for s in steps)
    checks = [
        check(
            f"{len(steps)} processes restarted one at a time in {ended - began:.0f} s ({each}); meanwhile "
            f"{during['sent']} sent, {during['answered']} answered, {during['failed']} refused "
            f"{during['failures'] or ''}",
            PROMISES["rolling-restart"],
            back and inside and not forced,
            f"SIGKILLed after the stop grace: {forced}"
            if forced
            else "a process did not come back ready"
            if not back
            else "the restarts outlasted the load: raise duration_s",
        ),
        check(
            f"whole load: {ledger.fired} fired, {ledger.refused} refused",
            "nothing refused: a stopping webhook processor leaves rotation before n8n stops (its drain hook)",
            ledger.refused == 0,
            f"refused (s after the first stop): {refusals}; steps at {[s['stop_s'] for s in steps]} s",
        ),
        check(
            f"ledger: {ledger_text(ledger)}",
            "nothing accepted lost (ledger: lost = 0)",
            nothing_lost(ledger),
            "accepted requests without a stored successful execution",
        ),
        check(
            f"executions: {by_status}",
            "no execution fails",
            not not_success and bool(by_status),
            f"executions ended {not_success}: {[(f['id'], f['last_node'], f['error']) for f in failures]}",
        ),
    ]
    return DrillOutcome(
        drill="rolling-restart",
        checks=checks,
        observed={
            "steps": steps,
            "refusals": refusals,
            "during": during,
            "executions": by_status,
            "failed_executions": failures,
            "ledger": ledger.model_dump(),
            "workflow_id": wid,
        },
        timings_s={"rolling_s": round(ended - began, 2)},
        log_lines={
            p.name: [line[:400] for line in ctx.lab.log_since(p, marks[p.name]) if LOG_RE.search(line)][:60]
            for p in watched
        },
        settings={"rate_per_s": str(rate_per_s), "duration_s": str(duration_s), "lb_notice_s": str(LB_NOTICE_S)},
    )
