"""Drills that break a worker: SIGKILL mid-execution (1), another encryption key (2), a normal stop (6)."""

from __future__ import annotations

import secrets
import time

from n8n_sizer.drills.common import (
    DrillContext,
    DrillFailed,
    DrillOutcome,
    check,
    counts,
    iso_seconds,
    wait_for,
)
from n8n_sizer.n8n.client import FINAL_STATUSES

# Seed 000, "Failure drills", 1. Kill a worker mid-execution (n8n 2.40.7, four 50 s Wait executions).
KILL_EXPECTED = {
    "outcome": "the 4 running executions turned to error (about 70 s after SIGKILL)",
    "timing": "about 70 s from SIGKILL to error, with n8n's default Bull timings (60 s lock, 30 s stalled check)",
    "retry": "not retried on the other worker",
    "other": "the other worker kept serving new executions",
    "log": "main logged 'job stalled more than maxStalledCount (execution 2)'",
}
# Seed 000, "Failure drills", 2. Worker with a different encryption key.
WRONG_KEY_EXPECTED = {
    "start": "the worker refused to start",
    "message": (
        "Error: Deployment key 'signing.hmac' cannot be read with this instance encryption key / "
        "Worker exiting due to an error (a settings file with the old key: 'Mismatching encryption keys')"
    ),
    "other": "the other worker ran all 8 test executions, all success",
}
LIGHT_AFTER_KILL = 5  # new executions sent after the kill: does the other worker keep serving?
WRONG_KEY_PATTERN = r"(?i)encryption key|Mismatching|signing\.hmac|exiting due to an error"


def _new_ids(ctx: DrillContext, template: str, before: set[str]) -> dict[str, str]:
    return {i: s for i, s in ctx.executions(template).items() if i not in before}


def kill_worker(
    ctx: DrillContext, executions: int = 4, wait_s: int = 30, settle_timeout_s: float = 180.0
) -> DrillOutcome:
    """SIGKILL worker-1 while it runs `executions` Wait executions; worker-2 stays up and must keep serving.

    worker-2 is stopped while the executions are handed out, so they all land on worker-1, and started
    again as worker-1 is killed.
    """
    stack = ctx.stack
    if len(stack.worker_names) < 2:
        raise DrillFailed("kill-worker needs a queue stack with 2 workers (the other worker must keep serving)")
    before = set(ctx.executions("long-wait"))
    ctx.workflow_id("light")
    marks = {name: ctx.mark(name) for name in ("main", "worker-1", "worker-2")}
    try:
        stack.stop_worker(2, timeout_s=30)
        for _ in range(executions):
            status, body = ctx.post("long-wait", {"seconds": wait_s}, timeout_s=15)
            if status != 200:
                raise DrillFailed(f"long-wait webhook answered {status}: {body}")
        running = wait_for(
            lambda: (lambda s: s if len(s) == executions and set(s.values()) == {"running"} else None)(
                _new_ids(ctx, "long-wait", before)
            ),
            30,
            f"{executions} executions running on worker-1",
        )
        # kill at once, while worker-2 boots: the Wait executions must still be running on worker-1
        stack.start_worker(2, wait=False)
        killed_at, killed_wall = time.monotonic(), time.time()
        stack.kill_worker(1)
        stack.stop_process("worker-1", timeout_s=5)  # reaps it; the group is already gone
        stack.wait_ready("worker-2")
        served = []
        for _ in range(LIGHT_AFTER_KILL):
            served.append(ctx.post("light", {"number": 2}, timeout_s=20)[0])
            time.sleep(1.0)

        def all_final() -> dict[str, dict] | None:
            items = {i: item for i, item in ctx.execution_items("long-wait").items() if i in running}
            done = len(items) == len(running) and all(item.get("status") in FINAL_STATUSES for item in items.values())
            return items if done else None

        items = wait_for(
            all_final,
            settle_timeout_s - (time.monotonic() - killed_at),
            "the killed worker's executions reach a final status",
            poll_s=1.0,
        )
        final = {i: str(item.get("status")) for i, item in items.items()}
        # n8n's own stop time, so the figure does not depend on how often this loop polls
        final_at = {
            i: stopped - killed_wall
            for i, item in items.items()
            if (stopped := iso_seconds(item.get("stoppedAt"))) is not None
        }
    finally:
        ctx.restore()
    retried = [i for i in running if marks["worker-2"].find(rf"Worker started execution {i}\b")]
    stalled_lines = marks["main"].find(r"stalled|too many times")
    by_status = counts(final)
    errored = by_status.get("error", 0)
    slowest = max(final_at.values()) if final_at else None
    # None: no execution was marked (a missing value stays None, never a sentinel number)
    timings = {
        "first_marked_after_kill_s": round(min(final_at.values()), 1) if final_at else None,
        "last_marked_after_kill_s": round(slowest, 1) if slowest is not None else None,
    }
    ok_served = sum(1 for s in served if s == 200)
    settings = stack.stall_settings
    # n8n 2.41.1: Bull's lock expiry + stalled check, then main re-reads the execution for up to 30 s
    # (MAX_STALLED_COUNT_GRACE_WINDOW_MS, workflow-runner.js) before it marks it error.
    timing_note = (
        f" (Bull lock {settings['QUEUE_WORKER_LOCK_DURATION']} ms, stalled check every "
        f"{settings.get('QUEUE_WORKER_STALLED_INTERVAL', '30000')} ms, then main's 30 s stalled-job "
        f"grace window; the queue-mode test ran n8n's 60 s / 30 s)"
        if "QUEUE_WORKER_LOCK_DURATION" in settings
        else " (n8n's Bull timings: 60 s lock, 30 s check, then main's 30 s stalled-job grace window)"
    )
    when = (
        f"{timings['first_marked_after_kill_s']:.0f}-{timings['last_marked_after_kill_s']:.0f} s"
        if final_at
        else "never"
    )
    checks = [
        check(
            f"{errored} of {executions} running executions turned to error {when} after SIGKILL{timing_note}; "
            f"statuses: {by_status}",
            KILL_EXPECTED["outcome"],
            errored == executions,
            f"only {errored} of {executions} ended as error" if errored != executions else "",
        ),
        check(
            f"{len(retried)} of {executions} were started again on worker-2",
            KILL_EXPECTED["retry"],
            not retried,
            f"executions {retried} were retried on worker-2",
        ),
        check(
            f"worker-2 answered {ok_served} of {len(served)} new light executions (1 s apart, right after the kill) "
            f"with 200 (statuses {served}; None = no answer within 20 s)",
            KILL_EXPECTED["other"],
            ok_served == len(served),
            f"{len(served) - ok_served} right after the kill got no answer: their execution stalled too",
        ),
        check(
            f"main logged: {stalled_lines[-1] if stalled_lines else '(no stalled-job line)'}",
            KILL_EXPECTED["log"],
            bool(stalled_lines),
            "main did not log a stalled job",
        ),
    ]
    if "QUEUE_WORKER_LOCK_DURATION" not in settings and final_at:  # n8n's own timings: comparable with the seed
        checks.append(
            check(
                f"{when} from SIGKILL to error with n8n 2.41.1's default Bull timings",
                KILL_EXPECTED["timing"],
                abs(timings["last_marked_after_kill_s"] - 70) <= 20,
                "n8n 2.41.1's main waits a further 30 s (stalled-job grace window) before it marks them",
            )
        )
    return DrillOutcome(
        drill="kill-worker",
        checks=checks,
        observed={
            "executions": executions,
            "wait_s": wait_s,
            "statuses": by_status,
            "retried_on_worker_2": retried,
            "light_statuses_after_kill": served,
            "marked_after_kill_s": {k: round(v, 1) for k, v in final_at.items()},
        },
        timings_s=timings,
        log_lines={"main": stalled_lines, "worker-2": marks["worker-2"].find(r"Worker (started|finished) execution")},
        settings=settings,
    )


def wrong_key(ctx: DrillContext, timeout_s: float = 90.0) -> DrillOutcome:
    """Start worker-2 with another N8N_ENCRYPTION_KEY: with a fresh user folder (a container without a volume,
    as in seed 000) and, where the target can, with its own folder (whose settings file holds the stack's key)."""
    stack = ctx.stack
    if len(stack.worker_names) < 2:
        raise DrillFailed("wrong-key needs a queue stack with 2 workers (worker-2 gets the wrong key)")
    other_key = secrets.token_hex(32)
    results: dict[str, dict] = {}
    try:
        stack.stop_worker(2, timeout_s=30)
        for variant, overrides in stack.wrong_key_variants():
            mark = ctx.mark("worker-2")
            started = time.monotonic()
            stack.start_worker(2, env_overrides={"N8N_ENCRYPTION_KEY": other_key, **overrides}, wait=False)

            def ended_or_ready() -> str | None:
                if not stack.is_running("worker-2"):
                    return "exited"
                return "ready" if stack.is_ready("worker-2") else None

            state = wait_for(ended_or_ready, timeout_s, "worker-2 with the wrong key exits or becomes ready")
            results[variant] = {
                "state": state,
                "after_s": round(time.monotonic() - started, 1),
                "lines": mark.find(WRONG_KEY_PATTERN),
            }
            stack.stop_process("worker-2", timeout_s=10)
        # 60 s: a worker just restarted by the previous drill may still be clearing stalled jobs
        served = [ctx.post("light", {"number": n}, timeout_s=60)[0] for n in range(3)]
    finally:
        if stack.is_running("worker-2"):
            stack.stop_process("worker-2", timeout_s=10)
        ctx.restore()  # worker-2 again with the stack's own key
    checks = []
    for variant, res in results.items():
        refused = res["state"] == "exited"
        specific = [line for line in res["lines"] if "signing.hmac" in line or "Mismatching" in line]
        message = (specific or res["lines"] or ["(no encryption-key line in its log)"])[0]
        checks.append(
            check(
                f"{variant}: worker-2 {'exited' if refused else 'became READY'} after {res['after_s']} s; "
                f"log: {message}",
                f"{WRONG_KEY_EXPECTED['start']}: {WRONG_KEY_EXPECTED['message']}",
                refused and bool(res["lines"]),
                "it started with the wrong key" if not refused else "no key error in its log",
            )
        )
    ok = sum(1 for s in served if s == 200)
    checks.append(
        check(
            f"worker-1 answered {ok} of {len(served)} light executions with 200 meanwhile",
            WRONG_KEY_EXPECTED["other"],
            ok == len(served),
            "the other worker did not serve them all",
        )
    )
    return DrillOutcome(
        drill="wrong-key",
        checks=checks,
        observed={variant: {"state": r["state"], "after_s": r["after_s"]} for variant, r in results.items()}
        | {"light_statuses": served},
        timings_s={f"{variant} exit_s": r["after_s"] for variant, r in results.items()},
        log_lines={f"worker-2 ({variant})": r["lines"] for variant, r in results.items()},
        settings={},
    )


# Seed 000, "Failure drills", 6: docker stop (SIGTERM, stop_grace_period 60 s) of a worker running two 20 s
# and two 50 s executions, with N8N_GRACEFUL_SHUTDOWN_TIMEOUT at its default of 30 s.
GRACEFUL_EXPECTED = {
    "short": "the 2 executions shorter than the timeout (20 s of 30 s) finished",
    "long": "the 2 longer ones (50 s) were cut off and marked error",
    "exit": "n8n's N8N_GRACEFUL_SHUTDOWN_TIMEOUT (30 s) decided, not Docker's 60 s grace period",
}


def graceful_shutdown(
    ctx: DrillContext,
    shutdown_timeout_s: int = 12,
    short_s: int = 5,
    long_s: int = 30,
    grace_s: float = 40.0,
    settle_timeout_s: float = 120.0,
) -> DrillOutcome:
    """SIGTERM worker-1 (as `docker stop` does, SIGKILL after `grace_s`) while it runs 2 executions shorter
    and 2 longer than its N8N_GRACEFUL_SHUTDOWN_TIMEOUT (scaled down from seed 000's 20 s / 50 s / 30 s)."""
    stack = ctx.stack
    if not short_s < shutdown_timeout_s < long_s < grace_s:
        raise DrillFailed("graceful-shutdown needs short < shutdown timeout < long < grace period")
    before = set(ctx.executions("long-wait"))
    overridden = False
    try:
        if len(stack.worker_names) > 1:
            stack.stop_worker(2, timeout_s=30)
        stack.stop_worker(1, timeout_s=30)
        overridden = True
        stack.start_worker(1, env_overrides={"N8N_GRACEFUL_SHUTDOWN_TIMEOUT": str(shutdown_timeout_s)})
        mark, main_mark = ctx.mark("worker-1"), ctx.mark("main")
        lengths: dict[str, int] = {}
        for seconds in (short_s, short_s, long_s, long_s):
            status, body = ctx.post("long-wait", {"seconds": seconds}, timeout_s=15)
            if status != 200:
                raise DrillFailed(f"long-wait webhook answered {status}: {body}")
            wait_for(lambda: set(_new_ids(ctx, "long-wait", before)) - set(lengths), 15, "the execution is stored")
            new = set(_new_ids(ctx, "long-wait", before)) - set(lengths)
            lengths.update({ex_id: seconds for ex_id in new})
        wait_for(
            lambda: (lambda s: len(s) == 4 and set(s.values()) == {"running"})(_new_ids(ctx, "long-wait", before)),
            30,
            "4 executions running on worker-1",
        )
        time.sleep(1.0)
        started = time.monotonic()
        stack.stop_process("worker-1", timeout_s=grace_s)  # SIGTERM, then SIGKILL after grace_s
        stop_s = round(time.monotonic() - started, 1)
        overridden = False
        ctx.restore()  # both workers back (with the stack's own settings): anything re-queued can run

        def mine() -> dict[str, str]:
            # an execution between its worker's exit and the stall check may be in no listing at all
            now = _new_ids(ctx, "long-wait", before)
            return {i: now.get(i, "not listed") for i in lengths}

        try:
            final = wait_for(
                lambda: (lambda now: now if set(now.values()) <= set(FINAL_STATUSES) else None)(mine()),
                settle_timeout_s,
                "the 4 executions reach a final status",
                poll_s=1.0,
            )
        except DrillFailed:
            final = mine()  # recorded as they are: the checks below say which did not end
    finally:
        if overridden and stack.is_running("worker-1"):  # failed midway: worker-1 still has the short timeout
            stack.stop_process("worker-1", timeout_s=grace_s)
        ctx.restore()
    short = {i: final[i] for i, s in lengths.items() if s == short_s}
    long = {i: final[i] for i, s in lengths.items() if s == long_s}
    lines = mark.find(r"Received SIGTERM|Stopping worker|Waiting for|shut ?down|Worker (started|finished)", 12)
    killed = stop_s >= grace_s - 0.5
    return DrillOutcome(
        drill="graceful-shutdown",
        checks=[
            check(
                f"{sum(s == 'success' for s in short.values())} of {len(short)} {short_s} s executions finished: "
                f"{counts(short)}",
                GRACEFUL_EXPECTED["short"],
                set(short.values()) == {"success"},
                "an execution shorter than the timeout did not finish",
            ),
            check(
                f"{long_s} s executions: {counts(long)}",
                GRACEFUL_EXPECTED["long"],
                set(long.values()) == {"error"},
                f"they ended as {counts(long)}, not error",
            ),
            check(
                f"worker-1 exited {stop_s} s after SIGTERM "
                f"({'SIGKILLed at the grace period' if killed else 'on its own'}; timeout {shutdown_timeout_s} s, "
                f"grace {grace_s:.0f} s)",
                GRACEFUL_EXPECTED["exit"],
                not killed and stop_s < grace_s,
                "the worker outlived the grace period and was SIGKILLed",
            ),
        ],
        observed={
            "shutdown_timeout_s": shutdown_timeout_s,
            "short_s": short_s,
            "long_s": long_s,
            "grace_s": grace_s,
            "short": counts(short),
            "long": counts(long),
            "stop_s": stop_s,
        },
        timings_s={"stop_s": stop_s},
        log_lines={"worker-1": lines, "main": main_mark.find(r"stalled|too many times|Problem with execution", 4)},
        settings={"N8N_GRACEFUL_SHUTDOWN_TIMEOUT": str(shutdown_timeout_s), "grace_period_s": f"{grace_s:g}"},
    )
