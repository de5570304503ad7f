"""Seed 004's ledger: after the load and a drain window, what was fired, accepted, refused, and lost.

fired               requests sent to the target (a request the in-flight cap kept back was not fired;
                    it is counted as not_sent)
accepted            answered 2xx
refused             fired and not accepted: non-2xx, timeout, reset, refused (loud: the client saw it)
accepted_then_lost  accepted minus the successful executions n8n stored for the workflow during the load
                    (silent loss). Reported raw: a negative number means n8n stored more successful
                    executions than it acknowledged (e.g. a timed-out request that still ran).
"""

from __future__ import annotations

from typing import Iterable

from n8n_sizer.bench.records import Ledger, RequestRecord


def build_ledger(records: Iterable[RequestRecord], executions_stored: int | None,
                 executions_succeeded: int | None) -> Ledger:
    """The ledger of one target from its request records and the executions counted after the drain."""
    fired = accepted = not_sent = 0
    for rec in records:
        if rec.error_class == "dropped":
            not_sent += 1
            continue
        fired += 1
        if rec.status is not None and 200 <= rec.status < 300:
            accepted += 1
    lost = None if executions_succeeded is None else accepted - executions_succeeded
    return Ledger(fired=fired, accepted=accepted, refused=fired - accepted, accepted_then_lost=lost,
                  executions_stored=executions_stored, executions_succeeded=executions_succeeded,
                  not_sent=not_sent)


def format_ledger(name: str, ledger: Ledger) -> str:
    """Seed 004's table for one target, as text."""
    def num(value: int | None) -> str:
        return "n/a" if value is None else f"{value:,}"

    rows = [("fired", num(ledger.fired), ""), ("accepted", num(ledger.accepted), "(2xx)"),
            ("refused", num(ledger.refused), "(loud, client errored)"),
            ("accepted then lost", num(ledger.accepted_then_lost), "(silent)"),
            ("executions stored", num(ledger.executions_stored), ""),
            ("  of them successful", num(ledger.executions_succeeded), ""),
            ("not sent (in-flight cap)", num(ledger.not_sent), "")]
    return "\n".join([f"ledger {name}"] + [f"  {a:<26}{b:>9}   {c}".rstrip() for a, b, c in rows])
