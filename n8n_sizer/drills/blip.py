"""Drill 7 (beyond seed 000): Redis unreachable for a few seconds without a restart; do workers resume?

Users report workers that silently stop taking jobs after a network blip. Two blips, Redis itself keeps
its data and PID in both:
- "pause": SIGSTOP Redis for `pause_s`, then SIGCONT (a host or network that stops answering: connections
  stay open, nothing comes back);
- "drop": CLIENT KILL of every client connection (a middlebox resetting connections).
After each, `jobs` Wait executions (more than one worker's concurrency of 10, so both must take some) are
sent; the drill records whether they all run and which worker took how many.
"""

from __future__ import annotations

import re
import signal
import time

from n8n_sizer.drills.common import (
    DrillContext,
    DrillFailed,
    DrillOutcome,
    check,
    counts,
    wait_for,
)
from n8n_sizer.n8n.client import FINAL_STATUSES

BLIP_EXPECTED = (
    "not in the queue-mode test; users report workers that silently stop taking jobs after Redis drops: "
    "expected here, every worker takes jobs again on its own"
)
LOG_PATTERN = r"Lost Redis|reconnect|Unable to connect|ECONNRESET|Redis|error"


def _blip(ctx: DrillContext, kind: str, pause_s: float) -> float:
    """Interrupt Redis once; seconds it was unreachable (for "drop": the kill itself)."""
    started = time.monotonic()
    if kind == "pause":
        ctx.stack.signal("redis", signal.SIGSTOP, whole_group=False)
        try:
            time.sleep(pause_s)
        finally:
            ctx.stack.signal("redis", signal.SIGCONT, whole_group=False)
    else:
        for client_type in ("normal", "pubsub"):
            ctx.redis("CLIENT", "KILL", "TYPE", client_type)  # SKIPME yes by default: not this connection
    return round(time.monotonic() - started, 2)


def redis_blip(
    ctx: DrillContext, pause_s: float = 8.0, jobs: int = 20, wait_s: int = 3, settle_timeout_s: float = 90.0
) -> DrillOutcome:
    stack = ctx.stack
    workers = stack.worker_names
    checks, observed, timings, log_lines = [], {}, {}, {}
    try:
        for kind in ("pause", "drop"):
            before = set(ctx.executions("long-wait"))
            marks = {name: ctx.mark(name) for name in ["main", *workers]}
            timings[f"{kind}_unreachable_s"] = _blip(ctx, kind, pause_s)
            time.sleep(2.0)  # what a client would see right after the blip, no grace beyond this
            alive = {name: stack.is_running(name) for name in ["main", *workers]}
            sent_at = time.monotonic()
            statuses = [ctx.post("long-wait", {"seconds": wait_s}, timeout_s=30)[0] for _ in range(jobs)]

            def settled(before: set = before) -> dict[str, str] | None:
                now = {i: s for i, s in ctx.executions("long-wait").items() if i not in before}
                return now if len(now) >= jobs and all(s in FINAL_STATUSES for s in now.values()) else None

            try:
                final = wait_for(settled, settle_timeout_s, f"{jobs} executions after the {kind} blip finish", 1.0)
            except DrillFailed:
                final = {i: s for i, s in ctx.executions("long-wait").items() if i not in before}
            timings[f"{kind}_jobs_done_s"] = round(time.monotonic() - sent_at, 1)
            taken = {name: len(marks[name].find(r"Worker started execution", 1000)) for name in workers}
            by_status = counts(final)
            answers = counts({str(i): str(s) for i, s in enumerate(statuses)})
            ok = by_status.get("success", 0) == jobs and all(taken.values()) and all(alive.values())
            checks.append(
                check(
                    f"{kind} ({timings[f'{kind}_unreachable_s']} s): webhooks {answers}, "
                    f"executions {by_status} within {timings[f'{kind}_jobs_done_s']} s; jobs taken per worker {taken}; "
                    f"processes alive {alive}",
                    BLIP_EXPECTED,
                    ok,
                    "not every worker took jobs again"
                    if not all(taken.values())
                    else "a process exited"
                    if not all(alive.values())
                    else "not every execution succeeded",
                )
            )
            observed[kind] = {
                "webhook_statuses": answers,
                "executions": by_status,
                "taken_per_worker": taken,
                "alive_after": alive,
            }
            log_lines |= {
                f"{name} ({kind})": [
                    line
                    for line in marks[name].find(LOG_PATTERN, 4)
                    if not re.search(r"Worker (started|finished)", line)
                ]
                for name in ["main", *workers]
            }
    finally:
        if stack.is_running("redis"):
            stack.signal("redis", signal.SIGCONT, whole_group=False)  # never leave Redis stopped
        ctx.restore()
    return DrillOutcome(
        drill="redis-blip",
        checks=checks,
        observed=observed,
        timings_s=timings,
        log_lines=log_lines,
        settings={"pause_s": f"{pause_s:g}", "jobs": str(jobs)},
    )
