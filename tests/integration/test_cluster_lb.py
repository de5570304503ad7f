"""The ingest host's rendered Caddyfile, run by a real Caddy (Debian's package) on 127.0.0.1: n8n's routing
table holds, /metrics is closed, and an upstream whose health check fails stops getting traffic.

The n8n upstreams are stand-in HTTP servers on 127.0.0.1 that answer with their own name; only the
upstream addresses and the listen address of the rendered Caddyfile are changed, nothing else.
"""

from __future__ import annotations

import http.server
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from n8n_sizer.bundle.render_topology import render_topology
from n8n_sizer.bundle.secrets import generate_secrets
from n8n_sizer.bundle.topology import load_topology_text

pytestmark = pytest.mark.integration
TOPOLOGY = Path(__file__).resolve().parents[1] / "data" / "topologies" / "advise-rps-400.json"
DEADLINE_S = 60  # a bound on waiting for Caddy and its health checks, not a measured threshold


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stub:
    """An HTTP server that answers every path with its name; /healthz* answers `health` (200 or 503)."""

    def __init__(self, name: str) -> None:
        self.name, self.health, self.port = name, 200, _free_port()
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                status = stub.health if self.path.startswith("/healthz") else 200
                body = stub.name.encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture
def caddy(tmp_path: Path):
    tool = shutil.which("caddy")
    if tool is None:
        pytest.fail("Debian's caddy is not installed (apt-get install caddy; scripts/test.sh installs it)")
    ingest = render_topology(
        load_topology_text(TOPOLOGY.read_text(), "t"), generate_secrets(), public_url="http://n8n.example.com:5678/"
    ).hosts["ingest"]
    text = yaml.safe_load(ingest.compose)["configs"]["caddyfile"]["content"]
    stubs = {name: Stub(name) for name in ("n8n-main", "n8n-webhook-1", "n8n-webhook-2")}
    lb_port, admin_port = _free_port(), _free_port()
    for name, stub in stubs.items():
        text = text.replace(f"{name}:5678", f"127.0.0.1:{stub.port}")
    assert text.startswith(":5678 {")
    text = f"{{\n  admin 127.0.0.1:{admin_port}\n}}\nhttp://127.0.0.1:{lb_port} {{" + text[len(":5678 {") :]
    config = tmp_path / "Caddyfile"
    config.write_text(text)
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    proc = subprocess.Popen(
        [tool, "run", "--config", str(config), "--adapter", "caddyfile"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "caddy.log", "w"),
    )
    try:
        base = f"http://127.0.0.1:{lb_port}"
        deadline = time.monotonic() + DEADLINE_S
        while True:
            try:
                if _get(base + "/")[0] == 200:
                    break
            except OSError:
                pass
            assert proc.poll() is None, (tmp_path / "caddy.log").read_text()
            assert time.monotonic() < deadline, "caddy did not answer; " + (tmp_path / "caddy.log").read_text()
            time.sleep(0.2)
        yield base, stubs
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        for stub in stubs.values():
            stub.stop()


def test_real_caddy_follows_n8ns_routing_table(caddy) -> None:
    base, _ = caddy
    for path in ("/webhook/abc", "/webhook-waiting/1", "/form/f", "/form-waiting/2", "/mcp/m"):
        seen = {_get(base + path) for _ in range(6)}
        assert {status for status, _ in seen} == {200}, path
        assert {body for _, body in seen} <= {"n8n-webhook-1", "n8n-webhook-2"}, (path, seen)
    for path in ("/webhook-test/abc", "/form-test/f", "/mcp-test/m", "/rest/login", "/", "/webhookx"):
        assert _get(base + path) == (200, "n8n-main"), path
    assert _get(base + "/metrics")[0] == 404


def test_a_webhook_processor_failing_its_health_check_gets_no_traffic(caddy) -> None:
    base, stubs = caddy
    stubs["n8n-webhook-1"].health = 503
    deadline = time.monotonic() + DEADLINE_S
    # Wait for Caddy's active check (every 5 s) to mark it down, then every request must go to the other.
    # 16 in a row from one of two processors happens by chance once in 2**15 tries: the check marked it down.
    while {_get(base + "/webhook/x")[1] for _ in range(16)} != {"n8n-webhook-2"}:
        assert time.monotonic() < deadline, "caddy kept sending to the unhealthy processor"
        time.sleep(0.5)
    assert {_get(base + "/webhook/x")[1] for _ in range(20)} == {"n8n-webhook-2"}
    assert {_get(base + "/form/x")[1] for _ in range(20)} == {"n8n-webhook-2"}
