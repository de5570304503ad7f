"""A private Docker Engine with stand-in images, and rendered stacks brought up on it (docs/docker.md).

The engine and its images are per session; each test module brings up one rendered stack and shares it
between its tests (bringing a stack up is the expensive part). Every stack is removed with its volumes,
and the engine is stopped by PID, even when a test fails.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from n8n_sizer.n8n.client import N8nClient, OwnerLogin
from n8n_sizer.n8n.workflows import deploy_workflow, read_workflow

REPO = Path(__file__).resolve().parents[2]
CLI = Path(sys.executable).parent / "n8n-sizer"
UP_TIMEOUT_S = 420  # compose's own --wait-timeout is below it, so compose reports which service failed


def _load_standins() -> Any:
    spec = importlib.util.spec_from_file_location("n8n_sizer_standins", REPO / "scripts" / "standins" / "standins.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


standins = _load_standins()


@pytest.fixture(scope="session")
def engine() -> Iterator[Any]:
    if os.geteuid() != 0:
        pytest.fail("the docker tests start dockerd and need root (as CI runs them)")
    eng = standins.start_engine()
    try:
        mapping = standins.load_or_build_images(eng)
        yield DockerEngine(eng, mapping)
    finally:
        standins.stop_engine(eng)


@dataclass(frozen=True)
class DockerEngine:
    engine: Any  # standins.Engine
    images: dict[str, str]  # pinned image -> stand-in


def render(out: Path, *args: str) -> None:
    """`n8n-sizer render` through the installed entry point, as a user runs it."""
    command = [str(CLI)] if CLI.exists() else [sys.executable, "-c", "from n8n_sizer.cli import main; main()"]
    proc = subprocess.run([*command, "render", *args, "--out", str(out)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def n8n_sizer_check(out: Path) -> subprocess.CompletedProcess:
    command = [str(CLI)] if CLI.exists() else [sys.executable, "-c", "from n8n_sizer.cli import main; main()"]
    return subprocess.run(
        [*command, "check", str(out / "docker-compose.yml"), "--env", str(out / ".env")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
    )


@dataclass(frozen=True)
class Stack:
    """One rendered folder brought up as one Compose project on the private engine."""

    docker: DockerEngine
    folder: Path
    project: str

    def compose(self, *args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
        eng = self.docker.engine
        proc = subprocess.run(
            [
                str(eng.compose),
                "-p",
                self.project,
                "-f",
                "docker-compose.yml",
                "-f",
                "docker-compose.standins.yml",
                *args,
            ],
            cwd=self.folder,
            env=eng.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"compose {' '.join(args)} exited {proc.returncode}:\n{proc.stdout[-3000:]}"
                f"\n{proc.stderr[-3000:]}\n{self.logs_tail()}"
            )
        return proc

    def logs_tail(self) -> str:
        proc = subprocess.run(
            [
                str(self.docker.engine.compose),
                "-p",
                self.project,
                "-f",
                "docker-compose.yml",
                "-f",
                "docker-compose.standins.yml",
                "logs",
                "--no-color",
                "--tail",
                "15",
            ],
            cwd=self.folder,
            env=self.docker.engine.env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        return proc.stdout[-6000:]

    def up(self) -> float:
        """`up -d --wait`: returns once every service's own healthcheck passes; seconds taken."""
        started = time.monotonic()
        self.compose("up", "-d", "--wait", "--wait-timeout", str(UP_TIMEOUT_S - 60), timeout=UP_TIMEOUT_S)
        return time.monotonic() - started

    def down(self, volumes: bool = False) -> None:
        self.compose("down", *(["--volumes"] if volumes else []), timeout=180)

    def services(self) -> list[dict[str, Any]]:
        """`compose ps` as JSON: one object per container (Service, State, Health, ...)."""
        text = self.compose("ps", "--all", "--format", "json").stdout.strip()
        if text.startswith("["):
            return json.loads(text)
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def port(self, service: str, container_port: int) -> int:
        """The host port (on 127.0.0.1) published for `container_port`."""
        address = self.compose("port", service, str(container_port)).stdout.strip()
        host, _, port = address.rpartition(":")
        assert host == "127.0.0.1", f"{service}:{container_port} is published on {address}, not loopback only"
        return int(port)

    def exec(
        self, service: str, *command: str, check: bool = False, timeout: float = 60
    ) -> subprocess.CompletedProcess:
        return self.compose("exec", "-T", service, *command, check=check, timeout=timeout)

    def container_id(self, service: str) -> str:
        return self.compose("ps", "-q", service).stdout.strip()

    def inspect(self, service: str, template: str) -> str:
        return self.docker.engine.docker("inspect", "-f", template, self.container_id(service)).stdout.strip()


def bring_up(docker: DockerEngine, folder: Path, project: str) -> Stack:
    standins.write_override(folder / "docker-compose.yml", docker.images)
    stack = Stack(docker, folder, project)
    stack.up()
    return stack


def wait_healthy(stack: Stack, service: str, timeout_s: float = 180) -> str:
    deadline = time.monotonic() + timeout_s
    health = ""
    while time.monotonic() < deadline:
        health = stack.inspect(service, "{{.State.Health.Status}}")
        if health == "healthy":
            return health
        time.sleep(2)
    raise AssertionError(f"{service} not healthy after {timeout_s:.0f} s (last: {health})\n{stack.logs_tail()}")


class SNITransport(httpx.HTTPTransport):
    """Connect to 127.0.0.1 but send `server_name` in TLS and verify the certificate for it."""

    def __init__(self, server_name: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._server_name = server_name

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.extensions = {**request.extensions, "sni_hostname": self._server_name}
        return super().handle_request(request)


def https_client(port: int, server_name: str, root_pem: str, timeout_s: float = 60) -> httpx.Client:
    """An HTTPS client for the stack's Caddy that trusts only `root_pem` (Caddy's local CA)."""
    context = ssl.create_default_context(cadata=root_pem)
    return httpx.Client(
        base_url=f"https://127.0.0.1:{port}",
        headers={"Host": server_name},
        timeout=timeout_s,
        transport=SNITransport(server_name, verify=context),
    )


@dataclass(frozen=True)
class N8nSetup:
    owner: OwnerLogin
    api_key: str
    workflow_id: str
    webhook: str


def set_up_n8n(client: N8nClient) -> N8nSetup:
    """Owner, login, API key, and the packaged light workflow (Webhook -> Code, so the runner is used)."""
    client.wait_ready(180)
    owner = OwnerLogin.generate()
    client.setup_owner(owner)
    client.login(owner)
    key = client.create_api_key()
    workflow_id, webhook = deploy_workflow(client, read_workflow("light"), timeout_s=60)
    return N8nSetup(owner=owner, api_key=key, workflow_id=workflow_id, webhook=webhook)


def call_webhook(http: httpx.Client, path: str, n: int = 1, timeout_s: float = 60) -> list[int]:
    """POST the webhook `n` times, one after another; the HTTP statuses."""
    return [http.post(path, json={"n": i}, timeout=timeout_s).status_code for i in range(n)]


def save_logs(stack: Stack) -> None:
    """Keep every container's log next to the rendered files (pytest's temp folder) for a failed run."""
    proc = stack.compose("logs", "--no-color", "--timestamps", check=False, timeout=120)
    (stack.folder.parent / f"{stack.folder.name}-compose.log").write_text(proc.stdout + proc.stderr)


def wait_success_count(client: N8nClient, workflow_id: str, at_least: int, timeout_s: float = 60) -> int:
    """Stored successful executions, once there are at least `at_least` (n8n saves just after answering)."""
    deadline = time.monotonic() + timeout_s
    count = 0
    while time.monotonic() < deadline:
        count = client.count_executions(workflow_id).by_status.get("success", 0)
        if count >= at_least:
            return count
        time.sleep(0.5)
    return count


def blocked_queue_pops(redis_stack: Stack) -> int:
    """Workers waiting on Bull's queue right now: Redis clients blocked in BRPOPLPUSH (one per worker)."""
    clients = redis_stack.exec("n8n-redis", "redis-cli", "client", "list", check=True).stdout
    return sum(1 for line in clients.splitlines() if "cmd=brpoplpush" in line)


def kill_worker(stack: Stack, service: str, redis_stack: Stack, timeout_s: float = 60) -> float:
    """SIGKILL the worker container's init from the host (a crash, not `docker stop`), then wait until
    Redis has let go of its blocking pop; seconds that took.

    Until the kernel has closed the dead worker's sockets, Redis still counts its BRPOPLPUSH as waiting and
    may hand it the next job. n8n runs Bull with maxStalledCount 0, so such a job is failed by the stalled
    check (every 30 s), never retried: a webhook sent in that instant answers 500 after 30-90 s (the flake of
    docs/docker.md). The tests send their webhooks after the crash, not into it.
    """
    before = blocked_queue_pops(redis_stack)
    pid = int(stack.inspect(service, "{{.State.Pid}}"))
    started = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    while time.monotonic() - started < timeout_s:
        if blocked_queue_pops(redis_stack) < before:
            return time.monotonic() - started
        time.sleep(0.1)
    raise AssertionError(f"Redis still holds {before} blocked pops {timeout_s:.0f} s after {service} was killed")


def serves_as_before(client: N8nClient, setup: N8nSetup, before: int) -> None:
    """After a down and up: n8n is ready, the owner logs in, the `before` successful executions are still
    stored, the webhook is registered again and one more call runs to success."""
    client.wait_ready(180)
    client.login(setup.owner)
    assert client.count_executions(setup.workflow_id).by_status.get("success", 0) == before
    client.wait_webhook_registered(setup.webhook, timeout_s=60)
    assert call_webhook(client._http, setup.webhook) == [200]
    assert wait_success_count(client, setup.workflow_id, before + 1) == before + 1


def survives_worker_kill(client: N8nClient, setup: N8nSetup, worker_stack: Stack, redis_stack: Stack) -> None:
    """Kill n8n-worker-1 (a crash), then 6 webhooks are answered and executed by the workers left; the restart
    policy brings the killed one back, healthy by its own healthcheck."""
    before = wait_success_count(client, setup.workflow_id, 1)
    restarts = int(worker_stack.inspect("n8n-worker-1", "{{.RestartCount}}"))
    gone_s = kill_worker(worker_stack, "n8n-worker-1", redis_stack)
    answers = []
    for _ in range(6):
        started = time.monotonic()
        answers.append(
            (call_webhook(client._http, setup.webhook, timeout_s=60)[0], round(time.monotonic() - started, 1))
        )
    print(f"worker gone from Redis after {gone_s:.2f} s; webhooks after it (status, seconds): {answers}")
    assert [status for status, _ in answers] == [200] * 6, answers
    assert wait_success_count(client, setup.workflow_id, before + 6) == before + 6
    deadline = time.monotonic() + 120
    while int(worker_stack.inspect("n8n-worker-1", "{{.RestartCount}}")) == restarts and time.monotonic() < deadline:
        time.sleep(1)
    assert int(worker_stack.inspect("n8n-worker-1", "{{.RestartCount}}")) == restarts + 1
    assert wait_healthy(worker_stack, "n8n-worker-1") == "healthy"
