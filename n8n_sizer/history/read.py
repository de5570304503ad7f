"""Read an instance's history through its public API (`n8n.public_api`, `n8n.history_api`) into a `History`.

1. Every workflow (its running version's nodes: types, names, expressions counted, the trigger and its rule).
2. Every execution started in the window [since, until], newest first, without data: start, stop, status, mode,
   retry, waiting. A read stopped by one of its bounds (pages, bytes, seconds) keeps what it read: newest first, so
   it covers every workflow from the oldest execution it reached to `until`, and the window starts there.
3. Whether anything older than `since` is still stored: when not, older executions were pruned (or the instance is
   younger), and the window starts at the oldest one stored.
4. Per workflow, its newest `sample` successful executions with their data (one request each, fewer items when a
   page passes the byte cap): each node's runs, reduced to times at once (history/timings.py).

Nothing of a payload, a parameter or a credential is kept. What could not be seen is said in the history's notes:
executions saved without data, successes not saved at all, pruned history, a read cut short.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Callable

from pydantic import Field, SecretStr

from n8n_sizer.advisor.workflow_price import load_node_costs
from n8n_sizer.advisor.workflow_price.export import count_expressions, parse_connections, printable
from n8n_sizer.errors import InputError
from n8n_sizer.history.anonymise import Anonymiser
from n8n_sizer.history.arrivals import summarise
from n8n_sizer.history.record import History, NodeInfo, ReadInfo, SeenTrigger, WorkflowHistory
from n8n_sizer.history.timings import FINISHED, PARK_GAP_MS, SampleTimings, durations
from n8n_sizer.history.trigger_seen import trigger_of
from n8n_sizer.n8n.history_api import (
    ExecutionItem,
    WorkflowItem,
    read_executions,
    read_workflows,
    sample_with_data,
    started_before,
)
from n8n_sizer.n8n.public_api import BudgetSpent, PublicApi, ReadBounds
from n8n_sizer.safety.frozen import Frozen

DAY_S = 86400.0
PRUNE_SETTINGS = (
    "EXECUTIONS_DATA_MAX_AGE (default 336 hours) or EXECUTIONS_DATA_PRUNE_MAX_COUNT (default 10,000 executions)"
)


class ReadRequest(Frozen):
    url: str
    since_s: float
    until_s: float
    sample: int = Field(20, ge=0, le=250)
    anonymise: bool = False
    bounds: ReadBounds = ReadBounds()


class _Tally:
    """One workflow's executions as the list gives them (no data)."""

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.by_status: Counter[str] = Counter()
        self.by_mode: Counter[str] = Counter()
        self.durations_ms: list[float] = []
        self.retries = 0
        self.waiting = 0
        self.successes = 0

    def add(self, e: ExecutionItem) -> None:
        status = e.status or "unknown"
        self.by_status[status] += 1
        self.by_mode[e.mode or "unknown"] += 1
        self.retries += e.mode == "retry" or e.retry_of is not None
        self.waiting += status == "waiting"
        self.successes += status == "success"
        if e.started_s is not None:
            self.starts.append(e.started_s)
            if status in FINISHED and e.stopped_s is not None:
                self.durations_ms.append(max((e.stopped_s - e.started_s) * 1000.0, 0.0))


def read_history(
    req: ReadRequest,
    api_key: SecretStr,
    progress: Callable[[str, int, int], None] | None = None,
    transport=None,
) -> History:
    """The instance's `History` over [since, until] (see the module docstring); `PublicApiError` (one line) when
    the instance cannot be read at all."""
    table = load_node_costs()
    with PublicApi(req.url, api_key, req.bounds, progress, transport) as api:
        workflows = {w.id: w for w in read_workflows(api)}
        tallies: dict[str, _Tally] = defaultdict(_Tally)
        oldest, truncated = None, None
        try:
            for e in read_executions(api, req.since_s, req.until_s):
                tallies[e.workflow_id].add(e)
                if e.started_s is not None and (oldest is None or e.started_s < oldest):
                    oldest = e.started_s
        except BudgetSpent as exc:
            truncated = str(exc)
        window_start, pruned = req.since_s, None
        if truncated is not None and oldest is not None:
            window_start = oldest
        elif truncated is None:
            try:
                older = started_before(api, req.since_s)
            except BudgetSpent:
                older = None
            if older is False and oldest is not None and oldest > req.since_s + 60:
                window_start = oldest
                pruned = (
                    f"no execution started before {_when(oldest)} is stored, later than --since: older ones were "
                    f"pruned ({PRUNE_SETTINGS}) or the instance is younger; the rates are over what is stored"
                )
        samples: dict[str, list[ExecutionItem]] = {}
        sample_notes: dict[str, str] = {}
        for wid, tally in tallies.items():
            if req.sample == 0 or tally.successes == 0:
                continue
            if truncated is not None:
                sample_notes[wid] = "not sampled: the read had already reached its bounds"
                continue
            try:
                got, why = sample_with_data(api, wid, window_start, req.until_s, req.sample, req.bounds.max_page_bytes)
            except BudgetSpent as exc:
                truncated = str(exc)
                sample_notes[wid] = "not sampled: the read reached its bounds"
                continue
            samples[wid] = got
            if why:
                sample_notes[wid] = f"no node timings: {why}"
        info = ReadInfo(
            instance=req.url,
            read_at_s=time.time(),
            since_s=req.since_s,
            until_s=req.until_s,
            window_start_s=window_start,
            window_end_s=req.until_s,
            requests=api.requests,
            bytes_read=api.bytes,
            seconds=round(api.elapsed_s, 3),
            sample_per_workflow=req.sample,
            truncated=truncated,
            pruned=pruned,
        )
    history = build_history(info, workflows, tallies, samples, sample_notes, table)
    return Anonymiser().history(history) if req.anonymise else history


def _when(unix: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(unix))


def _nodes(w: WorkflowItem | None) -> tuple[NodeInfo, ...]:
    if w is None:
        return ()
    out = []
    for n in w.nodes:
        try:
            expressions = count_expressions(n.parameters)
        except ValueError:  # parameters too deep or too many to count: say 0 rather than fail the read
            expressions = 0
        out.append(
            NodeInfo(name=n.name, type=n.type, type_version=n.typeVersion, disabled=n.disabled, expressions=expressions)
        )
    return tuple(out)


def _edges(w: WorkflowItem | None, notes: list[str]) -> tuple[tuple[str, str, int, str, int], ...]:
    """The workflow's connections as edges between its nodes; none (with a note) when n8n's shape is not there."""
    if w is None or not w.connections:
        return ()
    try:
        edges, _, _ = parse_connections(w.connections, {printable(n.name) for n in w.nodes})
    except InputError as exc:
        notes.append(f"its connections could not be read ({str(exc)[:160]}): every node priced once")
        return ()
    return tuple((e.source, e.kind, e.output, e.target, e.input) for e in edges)


def build_history(info, workflows, tallies, samples, sample_notes, table) -> History:
    """The history from what was read (pure: no I/O). Workflows in order of executions, most first."""
    window_s = max(info.window_end_s - info.window_start_s, 1.0)
    entries: list[WorkflowHistory] = []
    all_starts: list[float] = []
    any_success = any(t.successes for t in tallies.values())
    ids = sorted(set(tallies) | {w.id for w in workflows.values() if w.active})
    for wid in ids:
        w, tally = workflows.get(wid), tallies.get(wid) or _Tally()
        notes: list[str] = []
        start = info.window_start_s
        if w is not None and w.created_s is not None and w.created_s > start:
            start = w.created_s  # a workflow made during the window: its rate over its own life
        own_window = max(info.window_end_s - start, 1.0)
        rates = summarise(tally.starts, start, own_window, origin_s=info.window_start_s)
        all_starts.extend(tally.starts)
        nodes = _nodes(w)
        trigger = (
            trigger_of((n.type, n.disabled, n.parameters) for n in w.nodes)
            if w is not None
            else SeenTrigger(kind="other")
        )
        if w is None:
            notes.append("not in the workflow list (deleted, archived or not readable with this key)")
        setting = (w.settings.get("saveDataSuccessExecution") if w is not None else None) or None
        if setting == "none":
            notes.append(
                "its successful executions are not saved (workflow setting saveDataSuccessExecution: none): its rate "
                "counts failed executions only and its node times are unknown"
            )
        elif tally.starts and tally.successes == 0 and not any_success:
            notes.append(
                "no successful execution stored: with EXECUTIONS_DATA_SAVE_ON_SUCCESS=none the rate counts failed "
                "executions only; node times cannot be derived"
            )
        sampled = SampleTimings(samples.get(wid, ()), {n.name: n.type for n in nodes}, table)
        notes.extend(sampled.notes)
        if wid in sample_notes:
            notes.append(sample_notes[wid])
        parked = sampled.parked_ms is not None and sampled.parked_ms > 0
        kept = [d for d in tally.durations_ms if not (parked and d > PARK_GAP_MS)]
        running = sampled.running_ms
        if running is None and kept:
            running = sum(kept) / len(kept)
            notes.append("time in flight from durations (no node timings)")
        entries.append(
            WorkflowHistory(
                id=wid,
                name=w.name if w is not None else f"(workflow {wid})",
                active=w.active if w is not None else None,
                trigger=trigger,
                nodes=nodes,
                edges=_edges(w, notes),
                rates=rates,
                by_status=dict(sorted(tally.by_status.items())),
                by_mode=dict(sorted(tally.by_mode.items())),
                retries=tally.retries,
                errors=tally.by_status.get("error", 0) + tally.by_status.get("crashed", 0),
                waiting_now=tally.waiting,
                durations=durations(kept),
                sampled=sampled.sampled,
                node_timings=sampled.node_timings,
                running_ms=running,
                parked_ms=sampled.parked_ms,
                notes=tuple(notes),
            )
        )
    entries.sort(key=lambda e: -e.rates.executions)
    notes = []
    if info.truncated:
        notes.append(f"the read stopped early ({info.truncated}); the window starts at the oldest execution read")
    if info.pruned:
        notes.append(info.pruned)
    if tallies and not any_success:
        notes.append(
            "no successful execution is stored for any workflow: the instance likely runs with "
            "EXECUTIONS_DATA_SAVE_ON_SUCCESS=none; rates count failures only, durations and node times are unknown"
        )
    total = summarise(all_starts, info.window_start_s, window_s)
    return History(read=info, total=total, workflows=tuple(entries), notes=tuple(notes))
