"""A local HTTP server that answers the Hetzner Cloud and GCP Compute endpoints the reaper uses.

Real HTTP on 127.0.0.1 (port 0), stdlib only. It keeps state (servers, firewalls, SSH keys; instances,
firewall rules, subnetworks, networks), follows the documented shapes (Hetzner `label_selector`,
`page`/`per_page`, `meta.pagination.next_page`, 422 `resource_in_use`; GCP aggregated lists, filters,
`nextPageToken`, Operations and `/wait`), deletes asynchronously like the real APIs (a deleted Hetzner
server stays listed for one more list call), and injects scripted failures (429, 5xx, 403).
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

TOKEN = "test-token"
PAGE_SIZE = 2  # small, so every list needs several pages


@dataclass
class Fault:
    method: str
    path: str  # exact path, or a prefix ending in '*'
    status: int
    times: int  # how often; -1 forever
    body: dict[str, Any] = field(default_factory=dict)

    def matches(self, method: str, path: str) -> bool:
        if method != self.method or self.times == 0:
            return False
        return path.startswith(self.path[:-1]) if self.path.endswith("*") else path == self.path


@dataclass
class CloudState:
    hetzner: dict[str, dict[int, dict[str, Any]]] = field(
        default_factory=lambda: {"servers": {}, "firewalls": {}, "ssh_keys": {}, "networks": {}}
    )
    deleting_servers: dict[int, int] = field(default_factory=dict)  # id -> list calls left before it vanishes
    gcp: dict[str, dict[str, dict[str, Any]]] = field(
        default_factory=lambda: {"instances": {}, "firewalls": {}, "subnetworks": {}, "networks": {}}
    )
    operations: dict[str, dict[str, Any]] = field(default_factory=dict)  # GCP operation name -> its error
    faults: list[Fault] = field(default_factory=list)
    # A broken API (or proxy) that lists everything whatever the label selector or filter says.
    ignore_label_selector: bool = False
    log: list[tuple[str, str, dict[str, list[str]]]] = field(default_factory=list)
    next_id: int = 100
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add_hetzner(self, kind: str, name: str, labels: dict[str, str], **extra: Any) -> int:
        self.next_id += 1
        self.hetzner[kind][self.next_id] = {"id": self.next_id, "name": name, "labels": labels, **extra}
        return self.next_id

    def add_gcp(self, kind: str, name: str, scope: str, **extra: Any) -> None:
        self.next_id += 1
        self.gcp[kind][name] = {"id": str(self.next_id), "name": name, "scope": scope, **extra}

    def requests(self, method: str, prefix: str = "") -> list[str]:
        return [p for m, p, _ in self.log if m == method and p.startswith(prefix)]


def _selector_matches(selector: str, labels: dict[str, str]) -> bool:
    for term in filter(None, selector.split(",")):
        if "=" in term:
            key, value = term.split("=", 1)
            if labels.get(key) != value:
                return False
        elif term not in labels:
            return False
    return True


def _gcp_filter_matches(expr: str, item: dict[str, Any]) -> bool:
    for key, value in re.findall(r'labels\.([a-z0-9_-]+) = "([^"]*)"', expr):
        if (item.get("labels") or {}).get(key) != value:
            return False
    name = re.search(r'name eq "([^"]*)"', expr)
    return not name or re.fullmatch(name.group(1), item["name"]) is not None


class _Handler(BaseHTTPRequestHandler):
    state: CloudState  # set on the subclass made per server

    def log_message(self, *args: Any) -> None:  # keep test output quiet
        pass

    def _send(self, status: int, body: dict[str, Any] | None = None, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self, method: str) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        st = self.state
        with st.lock:
            st.log.append((method, url.path, query))
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                return self._send(401, {"error": {"code": "unauthorized", "message": "unable to authenticate"}})
            for fault in st.faults:
                if fault.matches(method, url.path):
                    fault.times -= 1 if fault.times > 0 else 0
                    body = fault.body or {"error": {"code": "injected", "message": f"injected {fault.status}"}}
                    return self._send(fault.status, body, {"Retry-After": "0"} if fault.status == 429 else None)
            if url.path.startswith("/hetzner/"):
                return self._hetzner(method, url.path[len("/hetzner") :], query)
            if url.path.startswith("/gcp/projects/test-project/"):
                return self._gcp(method, url.path[len("/gcp/projects/test-project/") :], query)
            return self._send(404, {"error": {"code": "not_found", "message": "no such endpoint"}})

    def do_GET(self) -> None:
        self._handle("GET")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def do_POST(self) -> None:
        self._handle("POST")

    # Hetzner: /servers, /firewalls, /ssh_keys
    def _hetzner(self, method: str, path: str, query: dict[str, list[str]]) -> None:
        st = self.state
        parts = path.strip("/").split("/")
        kind = parts[0]
        if kind not in st.hetzner:
            return self._send(404, {"error": {"code": "not_found", "message": path}})
        if method == "GET" and len(parts) == 1:
            if kind == "servers":  # an asynchronous delete finishes after one more list
                for sid in list(st.deleting_servers):
                    st.deleting_servers[sid] -= 1
                    if st.deleting_servers[sid] < 0:
                        st.hetzner["servers"].pop(sid, None)
                        del st.deleting_servers[sid]
            selector = query.get("label_selector", [""])[0]
            page, per_page = int(query.get("page", ["1"])[0]), int(query.get("per_page", ["25"])[0])
            per_page = min(per_page, PAGE_SIZE)
            items = [
                i
                for _, i in sorted(st.hetzner[kind].items())
                if st.ignore_label_selector or _selector_matches(selector, i.get("labels") or {})
            ]
            last = max(1, -(-len(items) // per_page))
            chunk = items[(page - 1) * per_page : page * per_page]
            meta = {
                "pagination": {
                    "page": page,
                    "per_page": per_page,
                    "previous_page": page - 1 or None,
                    "next_page": page + 1 if page < last else None,
                    "last_page": last,
                    "total_entries": len(items),
                }
            }
            return self._send(200, {kind: chunk, "meta": meta})
        if method == "DELETE" and len(parts) == 2:
            rid = int(parts[1])
            if rid not in st.hetzner[kind] or rid in st.deleting_servers:
                return self._send(404, {"error": {"code": "not_found", "message": f"{kind} {rid} not found"}})
            if kind == "firewalls":
                users = [s for sid, s in st.hetzner["servers"].items() if rid in s.get("firewall_ids", [])]
                if users:
                    return self._send(
                        422, {"error": {"code": "resource_in_use", "message": "Firewall still applied to a resource"}}
                    )
            if kind == "servers":
                st.deleting_servers[rid] = 1
                return self._send(200, {"action": {"id": rid, "command": "delete_server", "status": "running"}})
            del st.hetzner[kind][rid]
            return self._send(204)
        return self._send(405, {"error": {"code": "method_not_allowed", "message": path}})

    # GCP compute v1, project test-project
    def _gcp(self, method: str, path: str, query: dict[str, list[str]]) -> None:
        st = self.state
        expr = query.get("filter", [""])[0]
        start = int(query.get("pageToken", ["0"])[0])
        agg = re.fullmatch(r"aggregated/(instances|subnetworks)", path)
        glob = re.fullmatch(r"global/(firewalls|networks)", path)
        if method == "GET" and (agg or glob):
            kind = (agg or glob).group(1)
            items = [
                i for _, i in sorted(st.gcp[kind].items()) if st.ignore_label_selector or _gcp_filter_matches(expr, i)
            ]
            chunk = items[start : start + PAGE_SIZE]
            body: dict[str, Any] = {}
            if agg:
                body["items"] = {}
                for item in chunk:
                    body["items"].setdefault(item["scope"], {kind: []})[kind].append(
                        {k: v for k, v in item.items() if k != "scope"}
                    )
            else:
                body["items"] = [{k: v for k, v in i.items() if k != "scope"} for i in chunk]
            if start + PAGE_SIZE < len(items):
                body["nextPageToken"] = str(start + PAGE_SIZE)
            return self._send(200, body)
        wait = re.fullmatch(r"(.+)/operations/(op-[a-z0-9-]+)/wait", path)
        if method == "POST" and wait:
            error = st.operations.get(wait.group(2), {}).get("error")
            return self._send(200, {"name": wait.group(2), "status": "DONE", **({"error": error} if error else {})})
        delete = re.fullmatch(
            r"(zones/[^/]+|regions/[^/]+|global)/(instances|firewalls|subnetworks|networks)/([^/]+)", path
        )
        if method == "DELETE" and delete:
            scope, kind, name = delete.groups()
            item = st.gcp[kind].get(name)
            if item is None or item["scope"] != scope:
                return self._send(404, {"error": {"code": 404, "message": f"{kind}/{name} was not found"}})
            op = f"op-{kind}-{name}"
            in_use = (
                kind == "subnetworks" and any(i.get("subnetwork") == name for i in st.gcp["instances"].values())
            ) or (kind == "networks" and any(s.get("network") == name for s in st.gcp["subnetworks"].values()))
            if in_use:
                st.operations[op] = {
                    "error": {
                        "errors": [
                            {"code": "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE", "message": f"{kind}/{name} is in use"}
                        ]
                    }
                }
            else:
                del st.gcp[kind][name]
            return self._send(200, {"name": op, "status": "RUNNING"})
        return self._send(404, {"error": {"code": 404, "message": f"no endpoint {method} {path}"}})


class ProviderServer:
    """`with ProviderServer() as srv:` serves on 127.0.0.1:<free port> until the block ends."""

    def __init__(self) -> None:
        self.state = CloudState()
        handler = type("Handler", (_Handler,), {"state": self.state})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def hetzner_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/hetzner"

    @property
    def gcp_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/gcp"

    def __enter__(self) -> ProviderServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
