"""Seed 004's ledger: after the load and a drain window, what was fired, accepted, refused, and lost.

fired               requests sent to the target (a request the in-flight cap kept back was not fired;
                    it is counted as not_sent)
accepted            answered 2xx
refused             fired and not accepted: non-2xx, timeout, reset, refused (loud: the client saw it)
accepted_then_lost  accepted minus the successful executions n8n stored for the workflow during the load
                    (silent loss). Reported raw: a negative number means n8n stored more successful
                    executions than it acknowledged (e.g. a timed-out request that still ran).
lost_seqs           the accepted requests themselves whose execution is not stored as successful, matched
                    one by one by the execution id the bench workflows return; None when an accepted
                    answer carried no id (a workflow of your own that does not return `executionId`).
"""

from __future__ import annotations

from typing import Collection, Iterable

from n8n_sizer.runs.records import Ledger, RequestRecord


def build_ledger(records: Iterable[RequestRecord], executions_stored: int | None,
                 executions_succeeded: int | None, success_ids: Collection[str] | None = None) -> Ledger:
    """The ledger of one target from its request records and the executions counted after the drain;
    `success_ids` (the stored successful executions) lets it name each accepted request that was lost."""
    fired = not_sent = 0
    accepted: list[RequestRecord] = []
    for rec in records:
        if rec.error_class == "dropped":
            not_sent += 1
            continue
        fired += 1
        if rec.status is not None and 200 <= rec.status < 300:
            accepted.append(rec)
    lost = None if executions_succeeded is None else len(accepted) - executions_succeeded
    lost_seqs = None
    if success_ids is not None and all(r.execution_id is not None for r in accepted):
        stored = set(success_ids)
        lost_seqs = [r.seq for r in accepted if r.execution_id not in stored]
    return Ledger(fired=fired, accepted=len(accepted), refused=fired - len(accepted), accepted_then_lost=lost,
                  executions_stored=executions_stored, executions_succeeded=executions_succeeded,
                  not_sent=not_sent, lost_seqs=lost_seqs)


def format_ledger(name: str, ledger: Ledger) -> str:
    """Seed 004's table for one target, as text."""
    def num(value: int | None) -> str:
        return "n/a" if value is None else f"{value:,}"

    rows = [("fired", num(ledger.fired), ""), ("accepted", num(ledger.accepted), "(2xx)"),
            ("refused", num(ledger.refused), "(loud, client errored)"),
            ("accepted then lost", num(ledger.accepted_then_lost), "(silent)"),
            ("  matched one by one", "n/a" if ledger.lost_seqs is None else f"{len(ledger.lost_seqs):,}",
             "(accepted, no stored execution with its id)"),
            ("executions stored", num(ledger.executions_stored), ""),
            ("  of them successful", num(ledger.executions_succeeded), ""),
            ("not sent (in-flight cap)", num(ledger.not_sent), "")]
    return "\n".join([f"ledger {name}"] + [f"  {a:<26}{b:>9}   {c}".rstrip() for a, b, c in rows])
