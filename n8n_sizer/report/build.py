"""`n8n-sizer report`: run folders -> one Markdown report with PNG plots.

Per setup and step it prints seed 000's table (answered per minute, errors by type, p50/p95/p99, peak
stack RAM, editor p95), then the ledger (seed 004: fired, accepted, refused, accepted-then-lost), the
alerts seed 000 recommends, and the plots. Drill runs render as (observation, seed 000's expectation,
verdict); soak runs as seed 004's 30-minute buckets; find-max runs with their search evidence.

Numbers are computed from requests.jsonl and samples.jsonl, not from summaries, so a report can be
rebuilt from the raw records of any run, including an interrupted one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from n8n_sizer.errors import InputError
from n8n_sizer.report.model import RunData, StepRow, load_run, step_rows
from n8n_sizer.runs.stats import ROLES
from n8n_sizer.safety.text import printable
from n8n_sizer.safety.write import write_atomic
from n8n_sizer.telemetry.alerts import evaluate_alerts


def cell(value) -> str:
    """A value from a run's files in a Markdown table cell: printable (safety.text), one line, pipes escaped."""
    return printable(value, limit=300).replace("|", "\\|")


def _ms(v: float | None) -> str:
    if v is None:
        return "n/a"
    return f"{v / 1000:.1f} s" if v >= 10_000 else f"{v:,.0f} ms"


def _mib(v: float | None) -> str:
    if v is None:
        return "n/a"
    return f"{v / 1024:.2f} GB" if v >= 1024 else f"{v:,.0f} MB"


def _errors(row: StepRow) -> str:
    total = sum(row.errors.values())
    if not total:
        return "0"
    detail = ", ".join(f"{n:,} {k}" for k, n in sorted(row.errors.items(), key=lambda kv: -kv[1]))
    return f"{total:,} ({detail})"


def render_step_table(rows: Sequence[StepRow]) -> str:
    head = (
        "| setup | host | step | fired | answered/min | errors | p50 | p95 | p99 | peak stack RAM | editor p95 |\n"
        "|---|---|---|---:|---:|---|---:|---:|---:|---:|---:|\n"
    )
    lines = []
    for r in rows:
        not_sent = f" (+{r.not_sent:,} not sent)" if r.not_sent else ""
        # a rate step that fell behind says so beside its figure: what it carried, not what was offered
        behind = " (did not keep up)" if r.saturated else ""
        per_min = "n/a" if r.answered_per_min is None else f"{r.answered_per_min:,.0f}"
        lines.append(
            f"| {cell(r.setup)} | {cell(r.host)} | {cell(r.step)} | {r.fired:,}{not_sent} | {per_min}{behind} "
            f"| {_errors(r)} "
            f"| {_ms(r.p50_ms)} | {_ms(r.p95_ms)} | {_ms(r.p99_ms)} | {_mib(r.peak_stack_ram_mib)} "
            f"| {_ms(r.editor_p95_ms)}{f' ({r.editor_failed:,} failed)' if r.editor_failed else ''} |"
        )
    return head + "\n".join(lines) + "\n"


def render_demands(rows: Sequence[StepRow]) -> str:
    """CPU per execution by role: what each process of the stack spent on one answered execution."""
    measured = [r for r in rows if r.demand_ms]
    if not measured:
        return ""
    roles = [role for role in ROLES if any(role in r.demand_ms for r in measured)]
    head = (
        "### CPU per execution by role\n\nBusy CPU over the step divided by the executions it answered "
        "(utilisation law), from the per-process telemetry; `advise` sizes each role from figures like these.\n\n"
        f"| setup | host | step | {' | '.join(roles)} |\n|---|---|---|{'---:|' * len(roles)}\n"
    )
    lines = [
        f"| {cell(r.setup)} | {cell(r.host)} | {cell(r.step)} | "
        + " | ".join(f"{r.demand_ms[role]:,.1f} ms" if role in r.demand_ms else "-" for role in roles)
        + " |"
        for r in measured
    ]
    return head + "\n".join(lines) + "\n"


def render_ledger(run: RunData) -> str:
    if not run.manifest.ledgers:
        return "No ledger in this run (executions were not counted).\n"
    head = "| target | fired | accepted | refused | accepted then lost | executions stored | not sent |\n|---|---:|---:|---:|---:|---:|---:|\n"

    def n(v):
        return "n/a" if v is None else f"{v:,}"

    lines = [
        f"| {cell(t)} | {l.fired:,} | {l.accepted:,} | {l.refused:,} | {n(l.accepted_then_lost)} | {n(l.executions_stored)} "
        f"| {l.not_sent:,} |"
        for t, l in run.manifest.ledgers.items()
    ]
    notes = []
    for t, l in run.manifest.ledgers.items():
        if l.lost_seqs is None:
            notes.append(
                f"- {cell(t)}: accepted requests not matched one by one (the workflow does not return `executionId`)."
            )
        else:
            shown = ", ".join(str(s) for s in l.lost_seqs[:20]) + (" ..." if len(l.lost_seqs) > 20 else "")
            notes.append(
                f"- {cell(t)}: every accepted request matched to its stored execution by id: "
                f"{len(l.lost_seqs)} without one{f' (seq {shown})' if l.lost_seqs else ''}."
            )
    classes = [
        "\n| target | payload class | fired | refused as it should be | accepted (2xx) | other |\n"
        "|---|---|---:|---:|---:|---:|"
    ]
    for t, l in run.manifest.ledgers.items():
        classes += [
            f"| {cell(t)} | {cell(c)} | {k.fired:,} | {k.refused_as_expected:,} | {k.accepted:,} | {k.other:,} |"
            for c, k in (l.by_class or {}).items()
        ]
    by_class = "\n".join(classes) + "\n" if len(classes) > 1 else ""
    return head + "\n".join(lines) + "\n\n" + "\n".join(notes) + "\n" + by_class


def render_alerts(run: RunData) -> str:
    lines = ["| target | alert (from the queue-mode test) | status | since | detail |", "|---|---|---|---|---|"]
    start = min((r.scheduled_s for r in run.requests), default=run.manifest.created_s)
    for target in run.targets():
        reqs = [r for r in run.requests if r.target == target]
        for a in evaluate_alerts(run.samples_of(target), reqs):
            since = "" if a.first_s is None else f"+{a.first_s - start:.0f} s"
            status = f"**{a.status}**" if a.status == "fired" else a.status
            lines.append(f"| {cell(target)} | {a.rule} | {status} | {since} | {cell(a.summary)} |")
    return "\n".join(lines) + "\n"


def render_drill(run: RunData) -> str:
    """A drill: `extra.checks` = [{observation, expected, verdict}], else `extra.outcome` as key/value rows."""
    extra = run.manifest.extra

    verdict = f" Verdict: **{cell(extra['verdict'])}**." if extra.get("verdict") else ""
    target = run.manifest.spec.get("target")
    where = f" on `{cell(target)}`" if target else ""
    lines = [
        f"Drill `{cell(extra.get('drill', run.manifest.run_id))}`{where}.{verdict}",
        "",
        f"| observation | {cell(extra.get('expected_heading', 'the queue-mode test saw'))} | verdict |",
        "|---|---|---|",
    ]
    checks = extra.get("checks")
    if isinstance(checks, list) and checks:
        for c in checks:
            lines.append(
                f"| {cell(c.get('observation', 'n/a'))} | {cell(c.get('expected', 'n/a'))} "
                f"| {cell(c.get('verdict', 'n/a'))} |"
            )
    else:
        outcome = extra.get("outcome") or {}
        expected = extra.get("expected") or {}
        for key, value in outcome.items():
            lines.append(
                f"| {cell(key)}: {cell(value)} | "
                f"{cell(expected.get(key, 'n/a') if isinstance(expected, dict) else expected)} "
                f"| {cell(extra.get('verdict', 'n/a'))} |"
            )
        if not outcome:
            lines.append("| no outcome recorded | n/a | n/a |")
    return "\n".join(lines) + "\n"


def render_search(run: RunData) -> str:
    """Find-max results: run.json `extra.find_max[target]` (as `bench --find-max` writes them), or a
    single `extra.search`."""
    found_by_target = dict(run.manifest.extra.get("find_max") or {})
    if not found_by_target and run.manifest.extra.get("search"):
        found_by_target = {"": run.manifest.extra["search"]}
    if not found_by_target:
        return "No search result recorded in run.json (`extra.find_max`).\n"
    return "\n".join(
        (f"#### {cell(target)}\n\n" if target else "") + _render_one_search(result, run, target)
        for target, result in found_by_target.items()
    )


def _render_one_search(search: dict, run: RunData, target: str) -> str:
    from pydantic import ValidationError

    from n8n_sizer.bench.find_max import SearchResult
    from n8n_sizer.runs.run_file import FIX, validation_line

    try:  # the search's own model, strictly: a hand-edited result is one line naming the field, never a traceback
        res = SearchResult.model_validate(search, strict=True)
    except ValidationError as exc:
        field = f"extra.find_max.{target}" if target else "extra.search"
        raise validation_line(exc, f"{run.folder / 'run.json'}: {field}", FIX) from None
    found = "none: even the lowest rate failed" if res.max_rate_per_s is None else f"{res.max_rate_per_s:.3g} req/s"
    notes = []
    if res.at_upper_bound:
        notes.append("the upper bound itself passed; the true maximum may be higher")
    if res.confirmed is False:
        notes.append("the re-run at that rate FAILED: treat it as an upper estimate")
    lines = [
        f"Highest rate within p95 <= {res.p95_target_ms:,.0f} ms and errors <= {res.error_budget:.2%}: **{found}**"
        + (f" ({'; '.join(notes)})" if notes else "")
        + ".",
        "",
        "| # | rate (req/s) | fired | errors | p95 | verdict |",
        "|---:|---:|---:|---:|---:|---|",
    ]
    for i, s in enumerate(res.steps, 1):
        o = s.outcome
        lines.append(
            f"| {i} | {o.rate_per_s:g} | {o.fired:,} | {o.errors:,} | {_ms(o.p95_ms)} | "
            f"{'pass' if s.passed else 'fail'}: {s.reason} |"
        )
    return "\n".join(lines) + "\n"


def _image(path: Path) -> str:
    return f"![{path.stem.replace('_', ' ')}]({path.name})\n"


@dataclass(frozen=True)
class ReportResult:
    markdown: Path
    images: list[Path]


def _what_next(d) -> str:
    """What finishes a run without request records: `bench --resume` only where bench accepts it."""
    m = d.manifest
    if m.finished_s is not None:
        return "it finished, so it cannot be resumed: start a new run with `n8n-sizer bench`"
    if m.kind == "find-max" or m.spec.get("source") == "local":
        return "a --find-max or --local run cannot be resumed: start a new run with `n8n-sizer bench`"
    return f"`n8n-sizer bench --resume {m.run_id}` finishes it"


def build_report(
    runs: Sequence[str | Path], out_dir: Path, *, extra_sections: Sequence[str] = (), plots: bool = True
) -> ReportResult:
    """Write `<out_dir>/report.md` (+ PNGs) for the given run folders; `extra_sections` (Markdown) go last."""
    if not runs:
        raise InputError("report needs at least one run folder; try `n8n-sizer report results/<run-id>`")
    data = [load_run(r) for r in runs]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    images: list[Path] = []
    bench = [d for d in data if d.manifest.kind in ("bench", "find-max", "soak")]
    rows = [row for d in bench for row in step_rows(d)]
    parts = [f"# Benchmark report\n\nRuns: {', '.join(f'`{d.manifest.run_id}`' for d in data)}.\n"]
    # a load run without request records has nothing to tabulate: say so, never a silently shorter report,
    # and never advise a `--resume` that bench would refuse (a finished, --local or --find-max run)
    empty = [d for d in bench if not d.requests]
    advice = "; ".join(f"`{d.manifest.run_id}`: {_what_next(d)}" for d in empty)
    has_other = any(key in d.manifest.extra for d in data for key in ("find_max", "search", "checks"))
    if empty and len(empty) == len(data) and not has_other:
        raise InputError(
            f"no request records in {', '.join(str(d.folder) for d in empty)} (requests.jsonl missing "
            f"or empty), so there is nothing to report; {advice}"
        )
    if empty:
        parts.append(
            "**Warning:** no request records in "
            + ", ".join(f"`{d.manifest.run_id}`" for d in empty)
            + f" (requests.jsonl missing or empty): these runs add no row to the tables below; {advice}.\n"
        )
    if rows:
        parts.append(
            "## Results per setup and step\n\nAnswered/min counts 2xx responses per minute: for a constant-rate "
            "step, over the span its answers needed, so a step that did not keep up reads as what it carried "
            "(and says so); latency runs from each request's scheduled time to its answer (answered requests "
            "only); errors by type: HTTP status, or the client's timeout/reset/refused.\n\n" + render_step_table(rows)
        )
        demands = render_demands(rows)
        if demands:
            parts.append(demands)
    if plots and rows:
        from n8n_sizer.report import plots as plotting

        made = plotting.plot_rows(rows, out_dir)
        images += made
        parts.extend(_image(p) for p in made)
    for d in data:
        kind = d.manifest.kind
        parts.append(f"## Run `{d.manifest.run_id}` ({kind})\n")
        if kind == "drill":
            parts.append(render_drill(d))
            continue
        if kind == "find-max":
            parts.append("### Search\n\n" + render_search(d))
        if kind == "soak":
            from n8n_sizer.bench.soak import render_soak_table, soak_table

            for target in d.targets():
                ledger = d.manifest.ledgers.get(target)
                table = soak_table(
                    [r for r in d.requests if r.target == target],
                    d.samples_of(target),
                    lost_seqs=None if ledger is None else ledger.lost_seqs,
                )
                parts.append(f"### Soak buckets, {target}\n\n" + render_soak_table(table))
        from n8n_sizer.report.cluster import render_cpu_by_host

        parts.append(render_cpu_by_host(d))  # "" unless the samples name hosts and roles (a lab's cluster)
        parts.append("### Ledger\n\n" + render_ledger(d))
        parts.append("### Alerts\n\n" + render_alerts(d))
        if plots:
            from n8n_sizer.report import plots as plotting

            for target in d.targets():
                made = plotting.plot_run_target(d, target, out_dir)
                images += made
                parts.extend(_image(p) for p in made)
                if not made:
                    parts.append(f"No telemetry samples for {target}: no time-series plot.\n")
                shaped = plotting.plot_shaped_steps(d, target, out_dir)  # ramps and bursts: offered vs answered
                images += shaped
                parts.extend(_image(p) for p in shaped)
    parts.extend(extra_sections)
    md = out_dir / "report.md"
    write_atomic(md, "\n".join(p.rstrip() + "\n" for p in parts), private=False, what=f"report {md}")
    return ReportResult(md, images)
