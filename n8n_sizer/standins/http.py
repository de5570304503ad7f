"""A delayed HTTP/JSON stand-in: answers each path after its own latency, so a workflow's calls can be pointed at
it instead of the service they call (the replay of a history, `bench --history`, and the tests).

    with DelayedHttp({"/crm/lookup": DelayedRoute(latency_ms=200)}) as server:
        httpx.get(server.url + "/crm/lookup")   # {"ok": true, "path": "/crm/lookup"} after ~200 ms

Any method; a path not configured answers 404 JSON at once (or the `default` route when one is given). Bounded:
at most `max_in_flight` requests are held at once (more answer 503 at once, never queue without bound), a request
body above `max_body_bytes` is refused with 413 unread, and every latency is capped at an hour. It listens on
127.0.0.1 unless told another address (a lab namespace's). Threads, one per connection, from the standard library.

As a process: `python -m n8n_sizer.standins.http --routes '{"/a": {"latency_ms": 200}}' [--port N] [--host H]`
prints one JSON line `{"url": ..., "pid": ...}` when it listens and runs until SIGTERM or SIGINT; `start_process`
and `stop_process` start it and stop it by that PID. Imports no other room.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pydantic import Field

from n8n_sizer.errors import InputError
from n8n_sizer.safety.frozen import Frozen

MAX_LATENCY_MS = 3_600_000.0


class DelayedRoute(Frozen):
    latency_ms: float = Field(0.0, ge=0, le=MAX_LATENCY_MS)
    status: int = Field(200, ge=100, le=599)
    body: Any = None  # JSON answered; None: {"ok": true, "path": <path>}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class DelayedHttp:
    """The stand-in, in this process (a thread): `start()` returns its URL, `stop()` ends it and its requests."""

    def __init__(
        self,
        routes: dict[str, DelayedRoute],
        host: str = "127.0.0.1",
        port: int = 0,
        default: DelayedRoute | None = None,
        max_in_flight: int = 512,
        max_body_bytes: int = 1 << 20,
    ) -> None:
        for path in routes:
            if not isinstance(path, str) or not path.startswith("/") or len(path) > 2000:
                raise InputError(f"stand-in route {str(path)[:80]!r}: a path starts with '/', e.g. /api/lookup")
        self.routes = dict(routes)
        self.default = default
        self.host, self.port = host, port
        self.max_body_bytes = max_body_bytes
        self._slots = threading.BoundedSemaphore(max_in_flight)
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self.served: Counter[str] = Counter()
        self.refused = 0
        self.in_flight = 0
        self.peak_in_flight = 0  # the most requests held at once
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._server is None:
            raise InputError("the HTTP stand-in is not started; start it (start() or `with DelayedHttp(...)`) first")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> DelayedHttp:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> str:
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # quiet: a replay sends thousands
                pass

            def _answer(self) -> None:
                path = self.path.split("?", 1)[0]
                length = self.headers.get("Content-Length")
                if length is not None and (not length.isdigit() or int(length) > stand_in.max_body_bytes):
                    self._send(413, {"error": f"body above {stand_in.max_body_bytes} bytes"}, close=True)
                    return
                if length:
                    self.rfile.read(int(length))
                route = stand_in.routes.get(path, stand_in.default)
                if route is None:
                    self._send(404, {"error": "no such stand-in path", "path": path})
                    return
                if not stand_in._slots.acquire(blocking=False):
                    with stand_in._lock:
                        stand_in.refused += 1
                    self._send(503, {"error": "stand-in busy"})
                    return
                with stand_in._lock:
                    stand_in.in_flight += 1
                    stand_in.peak_in_flight = max(stand_in.peak_in_flight, stand_in.in_flight)
                try:
                    if route.latency_ms:
                        stand_in._stopping.wait(route.latency_ms / 1000.0)
                    body = {"ok": True, "path": path} if route.body is None else route.body
                    self._send(route.status, body)
                    with stand_in._lock:
                        stand_in.served[path] += 1
                finally:
                    with stand_in._lock:
                        stand_in.in_flight -= 1
                    stand_in._slots.release()

            def _send(self, status: int, body: Any, close: bool = False) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if close:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

        try:
            self._server = _Server((self.host, self.port), Handler)
        except OSError as exc:
            raise InputError(
                f"the HTTP stand-in cannot listen on {self.host}:{self.port} ({exc.strerror or exc}); pick another "
                "port, or 0 for any free one"
            ) from None
        self._thread = threading.Thread(target=self._server.serve_forever, name="standin-http", daemon=True)
        self._thread.start()
        return self.url

    def stop(self) -> None:
        """Stop listening; requests still waiting out their latency answer at once."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = None


def parse_routes(text: str) -> dict[str, DelayedRoute]:
    """`{"/path": {"latency_ms": 200, "status": 200, "body": {...}}, ...}` (what `--routes` takes)."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise InputError(f'--routes is not JSON ({exc}); e.g. --routes \'{{"/a": {{"latency_ms": 200}}}}\'') from None
    if not isinstance(raw, dict) or len(raw) > 10_000:
        raise InputError('--routes is an object of at most 10,000 paths, e.g. {"/a": {"latency_ms": 200}}')
    try:
        return {path: DelayedRoute.model_validate(spec) for path, spec in raw.items()}
    except ValueError as exc:
        raise InputError(f"--routes: {' '.join(str(exc).split())[:200]}") from None


def start_process(routes: dict[str, DelayedRoute], host: str = "127.0.0.1", port: int = 0, timeout_s: float = 20.0):
    """Start the stand-in as its own process; (pid, url) once it listens. Stop it with `stop_process(pid)`."""
    spec = json.dumps({path: route.model_dump() for path, route in routes.items()})
    proc = subprocess.Popen(
        [sys.executable, "-m", "n8n_sizer.standins.http", "--routes", spec, "--host", host, "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + timeout_s
    line = ""
    while time.monotonic() < deadline and not line:
        line = proc.stdout.readline() if proc.stdout is not None else ""
        if proc.poll() is not None and not line:
            break
    if not line:
        stop_process(proc.pid)
        err = (proc.stderr.read() if proc.stderr is not None else "")[-300:]
        raise InputError(f"the HTTP stand-in did not start: {' '.join(err.split()) or 'no output'}")
    started = json.loads(line)
    return proc.pid, started["url"]


def stop_process(pid: int, timeout_s: float = 10.0) -> None:
    """SIGTERM the stand-in started by `start_process`, then SIGKILL after `timeout_s`; reaped when it is a child."""
    for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # not our child: poll for it to go
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    return
                done = 0
            if done:
                return
            time.sleep(0.05)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m n8n_sizer.standins.http", description=__doc__.split("\n")[0])
    parser.add_argument("--routes", required=True, help='JSON: {"/path": {"latency_ms": 200}, ...}')
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        server = DelayedHttp(parse_routes(args.routes), host=args.host, port=args.port)
        url = server.start()
    except InputError as exc:
        print(f"standins.http: {exc}", file=sys.stderr)
        return 2
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    print(json.dumps({"url": url, "pid": os.getpid()}), flush=True)
    while not done.wait(0.5):
        pass
    server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
