"""A stand-in of n8n's public API on 127.0.0.1, for the history reader's unit tests: a real HTTP server (threads,
standard library) that answers `/api/v1/workflows` and `/api/v1/executions` the way n8n 2.41.1 does (newest first,
cursor `{lastId, limit}` in base64, `startedAfter`/`startedBefore`, `includeData`), from data a test gives it, or
misbehaves the way a test tells it to (`hook`: a function of the request that answers instead).

Shapes follow captured answers of a real n8n 2.41.1 (tests/data/n8n_api/).
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

KEY = "test-api-key-0123456789"

Answer = tuple[int, dict[str, str], bytes]
Hook = Callable[[str, dict[str, str], dict[str, str]], Answer | None]


def iso(unix: float) -> str:
    return datetime.fromtimestamp(unix, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def json_answer(obj, status: int = 200) -> Answer:
    return status, {"Content-Type": "application/json; charset=utf-8"}, json.dumps(obj).encode()


def execution(
    i: int,
    workflow_id: str,
    started: float,
    took_s: float = 0.05,
    status: str = "success",
    mode: str = "webhook",
    runs: dict | None = None,
    nodes: list | None = None,
) -> dict:
    """One execution as n8n 2.41.1 lists it; `runs` {node: [(start offset s, executionTime ms, status)]} adds data."""
    item = {
        "id": str(i),
        "finished": status == "success",
        "mode": mode,
        "retryOf": None,
        "retrySuccessId": None,
        "status": status,
        "startedAt": iso(started),
        "stoppedAt": iso(started + took_s),
        "workflowId": workflow_id,
        "waitTill": None,
    }
    if runs is not None:
        run_data = {
            node: [
                {
                    "startTime": int((started + off) * 1000),
                    "executionIndex": k,
                    "source": [],
                    "hints": [],
                    "executionTime": ms,
                    "executionStatus": st,
                    "data": {"main": [[{"json": {"secret": "payload"}}]]},
                }
                for k, (off, ms, st) in enumerate(node_runs)
            ]
            for node, node_runs in runs.items()
        }
        item["data"] = {"version": 1, "startData": {}, "resultData": {"runData": run_data}}
        item["workflowData"] = {"id": workflow_id, "name": "x", "nodes": nodes or [], "connections": {}}
    return item


class FakeN8n:
    """`with FakeN8n(workflows, executions) as api: api.url` ; `executions` newest first (descending ids)."""

    def __init__(
        self, workflows: list[dict] | None = None, executions: list[dict] | None = None, hook: Hook | None = None
    ) -> None:
        self.workflows = workflows or []
        self.executions = executions or []
        self.hook = hook
        self.requests: list[str] = []
        self.keys_seen: list[str | None] = []
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeN8n:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
                headers = {k.lower(): v for k, v in self.headers.items()}
                fake.requests.append(self.path)
                fake.keys_seen.append(headers.get("x-n8n-api-key"))
                answer = fake.hook(parts.path, query, headers) if fake.hook else None
                if answer is None:
                    answer = fake.answer(parts.path, query, headers)
                status, extra, body = answer
                try:
                    self.send_response(status)
                    for k, v in extra.items():
                        if k != "X-No-Length":
                            self.send_header(k, v)
                    if extra.get("X-No-Length") is None and "Content-Length" not in extra:
                        self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def answer(self, path: str, query: dict[str, str], headers: dict[str, str]) -> Answer:
        if headers.get("x-n8n-api-key") != KEY:
            return json_answer({"message": "Unauthorized"}, 401)
        limit = min(int(query.get("limit", 100)), 250)
        if path == "/api/v1/workflows":
            offset = 0
            if "cursor" in query:
                cur = json.loads(base64.b64decode(query["cursor"]))
                offset, limit = cur["offset"], cur["limit"]
            page = self.workflows[offset : offset + limit]
            more = len(self.workflows) > offset + limit
            cursor = base64.b64encode(json.dumps({"limit": limit, "offset": offset + limit}).encode()).decode()
            return json_answer({"data": page, "nextCursor": cursor if more else None})
        if path == "/api/v1/executions":
            items = [e for e in self.executions if e["status"] != "running"]
            if "workflowId" in query:
                items = [e for e in items if e["workflowId"] == query["workflowId"]]
            if "status" in query:
                items = [e for e in items if e["status"] == query["status"]]
            for key, keep in (("startedAfter", lambda a, b: a >= b), ("startedBefore", lambda a, b: a <= b)):
                if key in query:
                    bound = datetime.fromisoformat(query[key].replace("Z", "+00:00")).timestamp()
                    items = [
                        e
                        for e in items
                        if keep(datetime.fromisoformat(e["startedAt"].replace("Z", "+00:00")).timestamp(), bound)
                    ]
            if "cursor" in query:
                cur = json.loads(base64.b64decode(query["cursor"]))
                limit = cur["limit"]
                items = [e for e in items if int(e["id"]) < int(cur["lastId"])]
            page = items[:limit]
            if query.get("includeData") != "true":
                page = [{k: v for k, v in e.items() if k not in ("data", "workflowData")} for e in page]
            more = len(items) > limit
            last = page[-1]["id"] if page else "0"
            cursor = base64.b64encode(json.dumps({"lastId": last, "limit": limit}).encode()).decode()
            return json_answer({"data": page, "nextCursor": cursor if more else None})
        return json_answer({"message": "not found"}, 404)
