"""The partition drill: iptables DROP of the data host's address inside one worker host's namespace for N seconds,
then healed (the rules deleted by their exact spec); judged by `plan.partition_outcome_matches`."""

from __future__ import annotations

import secrets
import time

from n8n_sizer.drills.common import DrillOutcome, check
from n8n_sizer.lab.drills.actions import (
    REDIS_LINES,
    log_lines,
    log_marks,
    n8n_on,
    sleep_until,
    wait_ready,
    watch,
    worker_hosts,
)
from n8n_sizer.lab.drills.context import LabDrillContext, statuses
from n8n_sizer.lab.drills.judge import (
    PROMISES,
    answered_after,
    iptables_command,
    ledger_text,
    nothing_lost,
    partition_outcome_matches,
    partition_rules,
    window,
)


def partition(
    ctx: LabDrillContext,
    host: str | None = None,
    seconds: float = 12.0,
    rate_per_s: float = 2.0,
    duration_s: float = 30.0,
    cut_at_s: float = 5.0,
) -> DrillOutcome:
    victim, others = worker_hosts(ctx, host)
    lab = ctx.lab
    data_ip = lab.address(lab.data_host)
    rules = partition_rules(data_ip, f"{lab.state.lab_id}-{secrets.token_hex(3)}")
    procs = n8n_on(ctx, victim)
    marks = log_marks(ctx, procs)
    for p in procs:
        lab.save(p)  # an n8n process that gives up on Redis exits: it is started again from this
    wid, url = ctx.new_workflow("partition")
    load = ctx.load(url, rate_per_s, duration_s, f"rate-{rate_per_s:g}")
    t: dict[str, float] = {}
    inserted: list[list[str]] = []
    exited_at: dict[str, float] = {}
    restarted: dict[str, float] = {}
    left: list[str] = []
    try:
        sleep_until(load.started_s + cut_at_s)
        t["cut"] = time.time()
        for rule in rules:
            lab.run(victim, iptables_command("-I", rule))
            inserted.append(rule)
        watch(lambda: t["cut"] + seconds, ctx, procs, exited_at)
    finally:
        t["heal"] = time.time()
        for rule in inserted:  # by the exact spec it was inserted with
            lab.run(victim, iptables_command("-D", rule), check=False)
        left = [" ".join(r) for r in inserted if lab.run(victim, iptables_command("-C", r), check=False).exit_code == 0]
        for p in procs:
            if p.name in exited_at or not lab.is_running(p.name):
                exited_at.setdefault(p.name, time.time())
                started = time.monotonic()
                lab.start_process(p.name)  # from the snapshot saved before the cut
                restarted[p.name] = time.monotonic() - started
            else:
                lab.drop_snapshot(p)
    survivors = [p for p in procs if p.name not in exited_at]
    ready = wait_ready(ctx, [p.name for p in survivors], t["heal"])
    records = load.wait()
    after = ctx.after_load(url, rate_per_s, records)
    ledger, found = ctx.ledger(records + after, wid)
    lines = log_lines(ctx, procs, marks, REDIS_LINES + r"|Database connection|ECONNREFUSED|ETIMEDOUT|timeout")
    cut_s = t["heal"] - t["cut"]
    verdicts = []
    for p in procs:
        gone = exited_at.get(p.name)
        matched, why = partition_outcome_matches(
            cut_s, gone is not None, None if gone is None else gone - t["cut"], ready.get(p.name) is not None
        )
        state = (
            f"exited {gone - t['cut']:.1f} s in, started again ({restarted[p.name]:.1f} s to ready)"
            if gone is not None
            else f"rode it out, ready {ready.get(p.name)} s after the heal"
        )
        verdicts.append(
            check(
                f"{victim} cut off from {lab.data_host} ({data_ip}) for {cut_s:.1f} s (iptables DROP "
                f"both ways in its namespace): {p.name} {state}",
                PROMISES["partition"],
                matched,
                why,
            )
        )
    during = window(records, t["cut"], t["heal"])
    after_ok, after_sent = answered_after(after, 0.0)
    healed = window(records, t["heal"], None)
    checks = verdicts + [
        check(
            f"during the partition {during['sent']} sent, {during['answered']} answered, {during['failed']} failed "
            f"{during['failures'] or ''}; after the heal {healed['answered']} of {healed['sent']} answered, then "
            f"{after_ok} of {after_sent}",
            f"{', '.join(others)} keeps serving; after the heal everything is answered",
            after_sent > 0 and after_ok == after_sent and during["answered"] > 0,
            "requests still failed after the heal" if after_ok < after_sent else "nothing was answered meanwhile",
        ),
        check(
            f"ledger: {ledger_text(ledger)}",
            "nothing accepted lost (ledger: lost = 0)",
            nothing_lost(ledger),
            "accepted requests without a stored successful execution",
        ),
        check(
            f"the drill's iptables rules left in {victim}: {left or 'none'}",
            "the partition is healed completely",
            not left,
            "a rule could not be deleted",
        ),
    ]
    return DrillOutcome(
        drill="partition",
        checks=checks,
        observed={
            "host": victim,
            "peer": data_ip,
            "rules": [" ".join(r) for r in rules],
            "exited": sorted(exited_at),
            "during": during,
            "healed": healed,
            "after": {"answered": after_ok, "sent": after_sent},
            "rules_left": left,
            "executions": statuses(found),
            "ledger": ledger.model_dump(),
        },
        timings_s={"partition_s": round(cut_s, 2), **{f"{k}_ready_s": v for k, v in ready.items()}},
        log_lines={k: v for k, v in lines.items() if v},
        settings={"seconds": str(seconds), "rate_per_s": str(rate_per_s)},
    )
