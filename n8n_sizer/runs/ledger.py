"""Seed 004's ledger: after the load and a drain window, what was fired, accepted, refused, and lost.

fired               requests sent to the target (a request the in-flight cap kept back was not fired;
                    it is counted as not_sent)
accepted            answered 2xx
refused             fired and not accepted: non-2xx, timeout, reset, refused (loud: the client saw it)
accepted_then_lost  accepted minus the successful executions n8n stored for the workflow during the load
                    (silent loss). Reported raw: a negative number means n8n stored more successful
                    executions than it acknowledged (e.g. a timed-out request that still ran). A refusal answered
                    from inside the workflow names its execution: those are expected among the successful
                    executions too (refusals_with_execution), so they cannot hide a lost accepted request.
by_class            with --malformed: per payload class, fired / refused as it should be (REFUSAL_STATUS: not
                    lost) / accepted (2xx) / other; None when every request was valid.
lost_seqs           the accepted requests themselves whose execution is not stored as successful, matched
                    one by one by the execution id the bench workflows return; None when an accepted
                    answer carried no id (a workflow of your own that does not return `executionId`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from n8n_sizer.runs.records import REFUSAL_STATUS, ClassTally, Ledger, RequestRecord


def build_ledger(
    records: Iterable[RequestRecord],
    executions_stored: int | None,
    executions_succeeded: int | None,
    success_ids: Collection[str] | None = None,
) -> Ledger:
    """The ledger of one target from its request records and the executions counted after the drain;
    `success_ids` (the stored successful executions) lets it name each accepted request that was lost."""
    fired = not_sent = with_execution = 0
    accepted: list[RequestRecord] = []
    classes: dict[str, list[int]] = {}  # class -> [fired, refused as expected, accepted, other]
    for rec in records:
        if rec.error_class == "dropped":
            not_sent += 1
            continue
        fired += 1
        ok = rec.status is not None and 200 <= rec.status < 300
        if ok:
            accepted.append(rec)
        elif rec.execution_id is not None:
            with_execution += 1
        tally = classes.setdefault(rec.payload_class or "valid", [0, 0, 0, 0])
        tally[0] += 1
        if ok:
            tally[2] += 1
        elif rec.payload_class is not None and rec.status in REFUSAL_STATUS[rec.payload_class]:
            tally[1] += 1
        else:
            tally[3] += 1
    expected = len(accepted) + with_execution
    lost = None if executions_succeeded is None else expected - executions_succeeded
    by_class = None
    if set(classes) - {"valid"}:
        by_class = {
            name: ClassTally(fired=t[0], refused_as_expected=t[1], accepted=t[2], other=t[3])
            for name, t in sorted(classes.items())
        }
    lost_seqs = None
    if success_ids is not None and all(r.execution_id is not None for r in accepted):
        stored = set(success_ids)
        lost_seqs = [r.seq for r in accepted if r.execution_id not in stored]
    return Ledger(
        fired=fired,
        accepted=len(accepted),
        refused=fired - len(accepted),
        accepted_then_lost=lost,
        executions_stored=executions_stored,
        executions_succeeded=executions_succeeded,
        not_sent=not_sent,
        lost_seqs=lost_seqs,
        by_class=by_class,
        refusals_with_execution=with_execution,
    )


def format_ledger(name: str, ledger: Ledger) -> str:
    """Seed 004's table for one target, as text."""

    def num(value: int | None) -> str:
        return "n/a" if value is None else f"{value:,}"

    rows = [
        ("fired", num(ledger.fired), ""),
        ("accepted", num(ledger.accepted), "(2xx)"),
        ("refused", num(ledger.refused), "(loud, client errored)"),
        ("accepted then lost", num(ledger.accepted_then_lost), "(silent)"),
        (
            "  matched one by one",
            "n/a" if ledger.lost_seqs is None else f"{len(ledger.lost_seqs):,}",
            "(accepted, no stored execution with its id)",
        ),
        ("executions stored", num(ledger.executions_stored), ""),
        ("  of them successful", num(ledger.executions_succeeded), ""),
        ("not sent (in-flight cap)", num(ledger.not_sent), ""),
    ]
    if ledger.refusals_with_execution:
        rows.insert(6, ("  of them refusals", num(ledger.refusals_with_execution), "(refused inside the workflow)"))
    lines = [f"ledger {name}"] + [f"  {a:<26}{b:>9}   {c}".rstrip() for a, b, c in rows]
    if ledger.by_class:
        lines.append(f"  {'by class':<20}{'fired':>7}{'refused ok':>12}{'accepted':>10}{'other':>7}")
        for cls, t in ledger.by_class.items():
            lines.append(f"  {cls:<20}{t.fired:>7,}{t.refused_as_expected:>12,}{t.accepted:>10,}{t.other:>7,}")
    return "\n".join(lines)
