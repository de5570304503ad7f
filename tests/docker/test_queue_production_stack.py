"""`render --mode queue --workers 2 --profile production` under a real Docker Engine with stand-in images.

One stack covers queue mode and the production profile (the CI budget has room for two stacks, not
four): Postgres, Redis, main, two workers, a runner per n8n process, and Caddy terminating TLS with its
local CA for `n8n.localhost` (Caddy issues certificates for *.localhost from its own CA, never from
ACME). The test trusts that CA's root and nothing else.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from n8n_sizer.n8n.client import N8nClient

from .conftest import (
    DockerEngine,
    N8nSetup,
    SNITransport,
    Stack,
    bring_up,
    call_webhook,
    https_client,
    n8n_sizer_check,
    render,
    save_logs,
    serves_as_before,
    set_up_n8n,
    survives_worker_kill,
    wait_success_count,
)

pytestmark = pytest.mark.docker
DOMAIN = "n8n.localhost"
SERVICES = {
    "n8n-postgres",
    "n8n-redis",
    "n8n-main",
    "runner-main",
    "n8n-worker-1",
    "runner-worker-1",
    "n8n-worker-2",
    "runner-worker-2",
    "n8n-caddy",
}
CADDY_ROOT = "/data/caddy/pki/authorities/local/root.crt"


@pytest.fixture(scope="module")
def stack(engine: DockerEngine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    folder = tmp_path_factory.mktemp("queue-production")
    render(folder, "--mode", "queue", "--workers", "2", "--profile", "production", "--domain", DOMAIN)
    try:
        yield bring_up(engine, folder, "n8nsizer-queue")
    finally:
        save_logs(Stack(engine, folder, "n8nsizer-queue"))
        Stack(engine, folder, "n8nsizer-queue").down(volumes=True)


def caddy_root(stack: Stack) -> str:
    proc = stack.exec("n8n-caddy", "cat", CADDY_ROOT, check=True)
    assert "BEGIN CERTIFICATE" in proc.stdout
    return proc.stdout


def client_through_caddy(stack: Stack, api_key: str | None = None) -> N8nClient:
    """An n8n client whose every call goes through Caddy over verified HTTPS."""
    port = stack.port("n8n-caddy", 443)
    client = N8nClient(f"https://127.0.0.1:{port}", api_key)
    client._http.close()
    client._http = https_client(port, DOMAIN, caddy_root(stack))
    return client


@pytest.fixture(scope="module")
def n8n(stack: Stack) -> Iterator[tuple[N8nClient, N8nSetup]]:
    client = client_through_caddy(stack)
    try:
        yield client, set_up_n8n(client)
    finally:
        client.close()


def test_every_service_is_healthy_by_its_own_healthcheck(stack: Stack) -> None:
    states = {s["Service"]: (s["State"], s["Health"]) for s in stack.services()}
    assert set(states) == SERVICES
    assert all(state == ("running", "healthy") for state in states.values()), states


def test_tls_is_verified_against_caddys_local_ca_only(stack: Stack) -> None:
    port = stack.port("n8n-caddy", 443)
    untrusting = httpx.Client(
        base_url=f"https://127.0.0.1:{port}", headers={"Host": DOMAIN}, timeout=30, transport=SNITransport(DOMAIN)
    )  # the system's CAs only
    with untrusting, pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        untrusting.get("/healthz")
    with https_client(port, DOMAIN, caddy_root(stack)) as http:
        assert http.get("/healthz").status_code == 200
        assert http.get("/metrics").status_code == 404  # the Caddyfile keeps n8n's metrics private


def test_webhook_through_caddy_is_executed_by_a_worker_and_stored(
    stack: Stack, n8n: tuple[N8nClient, N8nSetup]
) -> None:
    client, setup = n8n
    assert call_webhook(client._http, setup.webhook, 4) == [200] * 4
    assert wait_success_count(client, setup.workflow_id, 4) == 4
    workers = stack.compose("logs", "--no-color", "n8n-worker-1", "n8n-worker-2").stdout
    assert workers.count("Worker finished execution") >= 4  # queue mode: workers ran them, not main
    runners = stack.compose("logs", "--no-color", "runner-worker-1", "runner-worker-2").stdout
    assert "launching runner" in runners  # the Code node ran in a worker's runner sidecar


def test_redis_refuses_a_wrong_password(stack: Stack) -> None:
    wrong = stack.exec("n8n-redis", "redis-cli", "--no-auth-warning", "-a", "not-the-password", "ping")
    assert "WRONGPASS" in wrong.stdout + wrong.stderr
    right = stack.exec("n8n-redis", "redis-cli", "ping")  # REDISCLI_AUTH from .env, as the healthcheck
    assert right.stdout.strip() == "PONG"


def test_a_killed_worker_leaves_the_stack_answering_and_comes_back(
    stack: Stack, n8n: tuple[N8nClient, N8nSetup]
) -> None:
    client, setup = n8n
    survives_worker_kill(client, setup, stack, stack)  # SIGKILL from the host, then gone from Redis


def test_down_then_up_keeps_data_and_the_certificate_authority(stack: Stack, n8n: tuple[N8nClient, N8nSetup]) -> None:
    client, setup = n8n
    root_before = caddy_root(stack)
    before = wait_success_count(client, setup.workflow_id, 1)
    stack.down()
    stack.up()
    assert caddy_root(stack) == root_before  # caddy-data volume: clients keep trusting the same CA
    again = client_through_caddy(stack, setup.api_key)
    try:
        serves_as_before(again, setup, before)
    finally:
        again.close()


def test_check_passes_the_same_files(stack: Stack) -> None:
    proc = n8n_sizer_check(stack.folder)
    assert proc.returncode == 0, proc.stdout
    assert " 0 failed" in proc.stdout


def test_the_folder_is_the_rendered_one(stack: Stack) -> None:
    # the override is the only file added next to what `render` wrote
    assert sorted(p.name for p in Path(stack.folder).iterdir()) == [
        ".env",
        "cloud-init.yaml",
        "docker-compose.standins.yml",
        "docker-compose.yml",
    ]
