"""What an instance's history is made of, read through the public API (`public_api.PublicApi`) and checked: its
workflows (`WorkflowItem`) and their executions (`ExecutionItem`), each validated as it arrives, so an answer of the
wrong shape is one line naming the field, never a traceback.

n8n sends more fields than are read here and adds fields between versions, so the wire models ignore what they do
not declare (unlike the package's own records, which refuse it). Payloads are never kept: an execution read with
its data is reduced at once to each node's runs (start, time, status) and the node types of the workflow as it ran;
the rest of `data` is dropped before the next page is read. A workflow's node parameters are kept in memory only,
for whoever derives a trigger's rule or counts expressions from them (the history room); they are never written.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from n8n_sizer.n8n.public_api import API, PAGE_LIMIT, BadRequest, PageTooLarge, PublicApi, PublicApiError, list_page
from n8n_sizer.safety.frozen import Frozen

MAX_NODES = 5000
MAX_RUNS_PER_NODE = 10_000


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


def _id(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("an id is a string or a number, not true/false")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and 0 < len(value) <= 200:
        return value
    raise ValueError("an id is a non-empty string of at most 200 characters")


def unix_s(value: Any) -> float | None:
    """An ISO 8601 time (n8n's `2026-12-03T13:36:50.012Z`) as unix seconds; None stays None."""
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > 40:
        raise ValueError("expected an ISO 8601 time string")
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def iso(unix: float) -> str:
    """Unix seconds as the ISO 8601 time n8n's filters take."""
    return datetime.fromtimestamp(unix, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class NodeDef(_Wire):
    name: str
    type: str
    typeVersion: float | None = None
    disabled: bool = False
    parameters: dict[str, Any] = {}

    @field_validator("name", "type")
    @classmethod
    def _short(cls, v: str) -> str:
        if not v or len(v) > 500:
            raise ValueError("a node's name and type are non-empty strings of at most 500 characters")
        return v

    @field_validator("parameters", mode="before")
    @classmethod
    def _params(cls, v: Any) -> Any:
        return {} if v is None else v


class WorkflowItem(_Wire):
    """One workflow as `GET /api/v1/workflows` lists it: the version that runs (`activeVersion`, 2.x) when there is
    one, else the saved one."""

    id: str
    name: str
    active: bool | None = None
    created_s: float | None = None
    archived: bool | None = None
    nodes: tuple[NodeDef, ...] = ()
    connections: dict[str, Any] = {}  # n8n's {source: {kind: [[{node, type, index}]]}}, checked by the pricer's parser
    settings: dict[str, Any] = {}

    @field_validator("id", mode="before")
    @classmethod
    def _check_id(cls, v: Any) -> Any:
        return _id(v)

    @classmethod
    def from_wire(cls, raw: dict, where: str) -> WorkflowItem:
        try:
            running = raw.get("activeVersion")
            source = running if isinstance(running, dict) and running.get("nodes") else raw
            nodes = source.get("nodes")
            connections = source.get("connections") if isinstance(source.get("connections"), dict) else {}
            if not isinstance(nodes, list):
                nodes = []
            if len(nodes) > MAX_NODES:
                raise ValueError(f"{len(nodes):,} nodes, above {MAX_NODES:,}")
            settings = raw.get("settings") if isinstance(raw.get("settings"), dict) else {}
            return cls(
                id=raw.get("id"),
                name=str(raw.get("name") or "")[:500] or "(unnamed)",
                active=raw.get("active") if isinstance(raw.get("active"), bool) else None,
                created_s=unix_s(raw.get("createdAt")),
                archived=raw.get("isArchived") if isinstance(raw.get("isArchived"), bool) else None,
                nodes=tuple(NodeDef.model_validate(n) for n in nodes),
                connections=connections,
                settings=settings,
            )
        except (ValidationError, ValueError, TypeError) as exc:
            raise PublicApiError(f"{where}: a workflow that is not n8n's shape ({_first(exc)})") from None


class NodeRun(Frozen):
    """One run of one node in one execution: when it started (unix ms), how long it took (ms), how it ended."""

    node: str
    start_ms: float | None
    execution_ms: float | None
    status: str | None


class ExecutionItem(Frozen):
    """One execution as the list answers it; `runs` and `node_types` only when it was read with its data."""

    id: str
    workflow_id: str
    mode: str | None
    status: str | None
    started_s: float | None
    stopped_s: float | None
    wait_till_s: float | None
    retry_of: str | None
    runs: tuple[NodeRun, ...] | None = None
    node_types: dict[str, str] | None = None
    data_note: str | None = None  # why there is no run data although it was asked for

    @classmethod
    def from_wire(cls, raw: dict, where: str, with_data: bool = False) -> ExecutionItem:
        try:
            status, mode = raw.get("status"), raw.get("mode")
            retry = raw.get("retryOf")
            item = cls(
                id=_id(raw.get("id")),
                workflow_id=_id(raw.get("workflowId")),
                mode=mode if isinstance(mode, str) and len(mode) <= 40 else None,
                status=status if isinstance(status, str) and len(status) <= 40 else None,
                started_s=unix_s(raw.get("startedAt")),
                stopped_s=unix_s(raw.get("stoppedAt")),
                wait_till_s=unix_s(raw.get("waitTill")),
                retry_of=None if retry is None else _id(retry),
            )
        except (ValidationError, ValueError, TypeError) as exc:
            raise PublicApiError(f"{where}: an execution that is not n8n's shape ({_first(exc)})") from None
        if not with_data:
            return item
        runs, types, note = _runs_of(raw)
        return item.model_copy(update={"runs": runs, "node_types": types, "data_note": note})


def _runs_of(raw: dict) -> tuple[tuple[NodeRun, ...] | None, dict[str, str] | None, str | None]:
    """Each node's runs from `data.resultData.runData`, and node types from `workflowData.nodes`; payloads dropped."""
    if raw.get("dataTooLargeToDisplay"):
        return None, None, "its data is above the instance's EXECUTIONS_DATA_MAX_DISPLAY_SIZE"
    data = raw.get("data")
    result = data.get("resultData") if isinstance(data, dict) else None
    run_data = result.get("runData") if isinstance(result, dict) else None
    if not isinstance(run_data, dict) or not run_data:
        return None, None, "saved without run data (EXECUTIONS_DATA_SAVE_ON_SUCCESS or the workflow's setting)"
    runs: list[NodeRun] = []
    for name, node_runs in list(run_data.items())[:MAX_NODES]:
        if not isinstance(name, str) or not isinstance(node_runs, list):
            continue
        for run in node_runs[:MAX_RUNS_PER_NODE]:
            if not isinstance(run, dict):
                continue
            start, took, status = run.get("startTime"), run.get("executionTime"), run.get("executionStatus")
            runs.append(
                NodeRun(
                    node=name[:500],
                    start_ms=float(start) if _number(start) else None,
                    execution_ms=float(took) if _number(took) and took >= 0 else None,
                    status=status if isinstance(status, str) and len(status) <= 40 else None,
                )
            )
    workflow = raw.get("workflowData")
    nodes = workflow.get("nodes") if isinstance(workflow, dict) else None
    types = {
        n["name"][:500]: n["type"][:500]
        for n in (nodes if isinstance(nodes, list) else [])[:MAX_NODES]
        if isinstance(n, dict) and isinstance(n.get("name"), str) and isinstance(n.get("type"), str)
    }
    return tuple(runs), types, None


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) < 1e15


def _first(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err.get("loc", ())) or "value"
        return f"{where}: {err.get('msg')}"
    return " ".join(str(exc).split())[:160]


# --- reading ---------------------------------------------------------------------------------------------


def read_workflows(api: PublicApi) -> Iterator[WorkflowItem]:
    """Every workflow the key may read. A page above the byte cap is asked for again in smaller pages."""
    limit = PAGE_LIMIT
    while True:
        try:
            items = [
                WorkflowItem.from_wire(raw, f"GET {api.base_url}{API}/workflows")
                for page in api.pages(f"{API}/workflows", {"limit": limit})
                for raw in page
            ]
        except PageTooLarge:
            if limit == 1:
                raise
            limit = max(1, limit // 4)
            continue
        yield from items
        return


def _window(since_s: float | None, until_s: float | None) -> dict[str, str]:
    out = {}
    if since_s is not None:
        out["startedAfter"] = iso(since_s)
    if until_s is not None:
        out["startedBefore"] = iso(until_s)
    return out


def read_executions(
    api: PublicApi,
    since_s: float | None,
    until_s: float | None,
    *,
    workflow_id: str | None = None,
    status: str | None = None,
) -> Iterator[ExecutionItem]:
    """Executions started in [since, until], newest first, without their data. An instance that refuses the time
    filter (n8n before it had `startedAfter`) is read unfiltered and filtered here, stopping at the first page whose
    executions all started before `since`."""
    base: dict[str, Any] = {"limit": PAGE_LIMIT}
    if workflow_id is not None:
        base["workflowId"] = workflow_id
    if status is not None:
        base["status"] = status
    where = f"GET {api.base_url}{API}/executions"
    server_filter = True
    pages = api.pages(f"{API}/executions", {**base, **_window(since_s, until_s)})
    try:
        first = next(pages, [])
    except BadRequest as exc:
        if "started" not in str(exc).lower():
            raise
        server_filter = False
        pages = api.pages(f"{API}/executions", base)
        first = next(pages, [])
    page: list[dict] | None = first
    seen: set[str] = set()
    while page is not None:
        older = new = 0
        for raw in page:
            item = ExecutionItem.from_wire(raw, where)
            if item.id in seen:
                continue  # a page that overlaps the last one: each execution counts once
            seen.add(item.id)
            new += 1
            started = item.started_s
            if not server_filter and started is not None:
                if until_s is not None and started > until_s:
                    continue
                if since_s is not None and started < since_s:
                    older += 1
                    continue
            yield item
        if page and new == 0:
            raise PublicApiError(
                f"{where}: a page held only executions already read; the instance's paging repeats itself (read "
                f"{len(seen):,} executions before it)"
            )
        if not server_filter and page and older == len(page):
            return
        page = next(pages, None)


def sample_with_data(
    api: PublicApi,
    workflow_id: str,
    since_s: float | None,
    until_s: float | None,
    count: int,
    page_bytes: int,
) -> tuple[list[ExecutionItem], str | None]:
    """The newest `count` successful executions of a workflow in the window, with their node runs (one request;
    asked again for fewer when the page passes `page_bytes`). Returns (executions, why none when empty)."""
    limit = max(1, min(count, PAGE_LIMIT))
    params: dict[str, Any] = {"workflowId": workflow_id, "status": "success", "includeData": "true"}
    window = _window(since_s, until_s)
    where = f"GET {api.base_url}{API}/executions"
    while True:
        try:
            try:
                page = api.get_json(f"{API}/executions", {**params, **window, "limit": limit}, page_bytes)
            except BadRequest as exc:
                if "started" not in str(exc).lower() or not window:
                    raise
                window = {}
                continue
        except PageTooLarge:
            if limit == 1:
                return [], f"one execution's data is above the page cap ({page_bytes >> 20} MiB, --max-page-mb)"
            limit = max(1, limit // 4)
            continue
        items, _ = list_page(page, where)
        got = [ExecutionItem.from_wire(raw, where, with_data=True) for raw in items]
        del page, items  # the payloads go now
        if since_s is not None:
            got = [e for e in got if e.started_s is None or e.started_s >= since_s]
        if until_s is not None:
            got = [e for e in got if e.started_s is None or e.started_s <= until_s]
        if not got:
            return [], "no successful execution in the window"
        with_runs = [e for e in got if e.runs]
        if not with_runs:
            return [], got[0].data_note or "no run data"
        return with_runs, None


def started_before(api: PublicApi, since_s: float) -> bool | None:
    """Whether any execution started before `since` is still stored (None: the instance cannot filter by time)."""
    try:
        page = api.get_json(f"{API}/executions", {"limit": 1, "startedBefore": iso(since_s)})
    except BadRequest:
        return None
    items, _ = list_page(page, f"GET {api.base_url}{API}/executions")
    return bool(items)
