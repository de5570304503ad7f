"""The pure parts of the cluster drills: what n8n promises, the partition's iptables rules, and the tallies and
verdicts computed from request records (no I/O here, so every rule is tested without a lab).

What n8n promises, per drill (n8n's queue-mode docs, the rendered load balancer, the queue-mode test):
- workers: "scale down by removing workers"; Redis holds the queue "and allows the next available worker to
  pick them up", so one worker host stopping leaves the other to carry on, and every accepted request runs;
- webhook processors run behind a load balancer; the rendered Caddyfile health-checks each one every 2 s
  (5 s timeout, at the drain hook's /healthz/drain) and retries a refused connection on another for 10 s, so a
  dead processor costs only the requests it held and those sent to it before the balancer saw it gone (a
  stopped one costs nothing: it drains first, docs/cluster.md#stopping-a-process-draining);
- Redis: n8n's processes retry a lost Redis connection every second for 10 s and exit after that (the
  queue-mode test's main did); with AOF everysec a restart keeps the queue, so nothing accepted is lost;
- a partition is a Redis and Postgres outage seen from one host only: the same 10 s rule applies to it.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable

from n8n_sizer.bundle.drain import HEALTH_INTERVAL_S, HEALTH_TIMEOUT_S
from n8n_sizer.runs.records import Ledger, RequestRecord

PROMISES = {
    "stop-worker-host": "n8n's docs: workers can be removed; Redis lets the next available worker pick each job "
    "up, so the other worker host carries on and every accepted request is executed",
    "kill-webhook": "n8n's docs: webhook processors behind a load balancer; the rendered Caddyfile health-checks "
    f"each every {HEALTH_INTERVAL_S} s ({HEALTH_TIMEOUT_S} s timeout) and retries a refused connection on another: "
    "only requests sent before it noticed fail, nothing accepted is lost",
    "restart-redis": "n8n retries a lost Redis every 1 s for 10 s (`Lost Redis connection. Trying to reconnect "
    "in 1s... (0s/10s)`) and exits after that; AOF everysec keeps the queue: nothing accepted "
    "is lost",
    "rolling-restart": "n8n's graceful shutdown (N8N_GRACEFUL_SHUTDOWN_TIMEOUT above the longest execution, "
    "the stop grace above that) and the load balancer's readiness checks and retries: "
    "restarted one at a time, nothing accepted is lost and no execution fails",
    "partition": "a partition is a Redis and Postgres outage seen from one host: n8n reconnects when the link "
    "returns, and a process that cannot reach Redis for more than 10 s exits (the queue-mode test) "
    "and needs its restart policy",
}
REDIS_GIVE_UP_S = 10.0  # n8n's reconnect window before a process exits (QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD)


def partition_rules(peer: str, tag: str) -> list[list[str]]:
    """iptables rules, for the worker host's own namespace, that drop every packet to and from `peer` (the data
    host). Commented with the drill's tag so a leftover is recognisable; removed by this exact spec."""
    if not tag.replace("-", "").isalnum():
        raise ValueError(f"tag {tag!r}: letters, digits and dashes only")
    comment = ["-m", "comment", "--comment", f"n8n-sizer drill {tag}"]
    return [
        ["INPUT", "-s", f"{peer}/32", *comment, "-j", "DROP"],
        ["OUTPUT", "-d", f"{peer}/32", *comment, "-j", "DROP"],
    ]


def iptables_command(action: str, rule: list[str]) -> str:
    """`iptables -w 5 -I|-D|-C RULE` as one shell line (`-w`: wait for the xtables lock, never fail on it)."""
    if action not in ("-I", "-D", "-C"):
        raise ValueError(f"iptables action {action!r}: -I, -D or -C")
    return " ".join(shlex.quote(w) for w in ["iptables", "-w", "5", action, *rule])


def ok(record: RequestRecord) -> bool:
    return record.status is not None and 200 <= record.status < 300


def window(records: Iterable[RequestRecord], start_s: float, end_s: float | None) -> dict:
    """Requests sent in [start_s, end_s) (end None: to the end): how many went, answered 2xx, failed, and the
    failures by kind (HTTP status or error class)."""
    sent = answered = 0
    failures: dict[str, int] = {}
    for r in records:
        if r.error_class == "dropped" or r.sent_s < start_s or (end_s is not None and r.sent_s >= end_s):
            continue
        sent += 1
        if ok(r):
            answered += 1
        else:
            kind = f"HTTP {r.status}" if r.status is not None else (r.error_class or "other")
            failures[kind] = failures.get(kind, 0) + 1
    return {"sent": sent, "answered": answered, "failed": sent - answered, "failures": dict(sorted(failures.items()))}


def nothing_lost(ledger: Ledger) -> bool:
    """Every accepted request has its stored successful execution (matched by id when the answers named them)."""
    if ledger.lost_seqs is not None:
        return not ledger.lost_seqs and (ledger.accepted_then_lost or 0) <= 0
    return ledger.accepted_then_lost is not None and ledger.accepted_then_lost <= 0


def ledger_text(ledger: Ledger) -> str:
    lost = "n/a" if ledger.accepted_then_lost is None else ledger.accepted_then_lost
    matched = "" if ledger.lost_seqs is None else f", {len(ledger.lost_seqs)} unmatched by execution id"
    return (
        f"{ledger.fired} fired, {ledger.accepted} accepted, {ledger.refused} refused; "
        f"{ledger.executions_succeeded} executions succeeded; accepted then lost: {lost}{matched}"
    )


def answered_after(records: Iterable[RequestRecord], after_s: float) -> tuple[int, int]:
    """(answered 2xx, sent) among requests sent at or after `after_s`."""
    late = [r for r in records if r.error_class != "dropped" and r.sent_s >= after_s]
    return sum(1 for r in late if ok(r)), len(late)


def ran_on(execution_ids: Iterable[str], started_by_host: dict[str, set[str]]) -> dict[str, int]:
    """How many of `execution_ids` each host's workers logged as started ("Worker started execution N"); ids
    no worker log names count under "(no log line)"."""
    out: dict[str, int] = {}
    for ex in execution_ids:
        hosts = [h for h, ids in started_by_host.items() if ex in ids]
        key = hosts[0] if len(hosts) == 1 else "(no log line)" if not hosts else "+".join(sorted(hosts))
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


def partition_outcome_matches(
    partition_s: float, exited: bool, exited_after_s: float | None, ready_after_heal: bool
) -> tuple[bool, str]:
    """A partitioned host's n8n process against the 10 s rule: it either rode the partition out and was ready
    after the heal, or exited no sooner than 10 s in (then the drill's restart stands in for a restart policy)."""
    if not exited:
        return ready_after_heal, "" if ready_after_heal else "survived but was not ready after the heal"
    if exited_after_s is not None and exited_after_s + 1.0 < REDIS_GIVE_UP_S:
        return False, f"exited {exited_after_s:.1f} s in, before n8n's 10 s reconnect window"
    if partition_s < REDIS_GIVE_UP_S:
        return False, f"exited although the partition ({partition_s:g} s) was shorter than the 10 s window"
    return True, ""
