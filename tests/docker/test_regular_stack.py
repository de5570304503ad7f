"""`render --mode regular --db postgres` (profile bench) under a real Docker Engine with stand-in images.

One stack for the module: up to healthy, a webhook through n8n and its runner sidecar, the .env secrets in
effect, down then up with the data kept, and `check` passing the same files.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from n8n_sizer.n8n.client import N8nClient

from .conftest import (
    DockerEngine,
    N8nSetup,
    Stack,
    bring_up,
    call_webhook,
    n8n_sizer_check,
    render,
    save_logs,
    set_up_n8n,
    wait_success_count,
)

pytestmark = pytest.mark.docker
SERVICES = {"n8n-postgres", "n8n-main", "runner-main"}


@pytest.fixture(scope="module")
def stack(engine: DockerEngine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    folder = tmp_path_factory.mktemp("regular-postgres")
    render(folder, "--mode", "regular", "--db", "postgres")
    try:
        yield bring_up(engine, folder, "n8nsizer-regular")
    finally:
        save_logs(Stack(engine, folder, "n8nsizer-regular"))
        Stack(engine, folder, "n8nsizer-regular").down(volumes=True)


@pytest.fixture(scope="module")
def n8n(stack: Stack) -> Iterator[tuple[N8nClient, N8nSetup]]:
    with N8nClient(f"http://127.0.0.1:{stack.port('n8n-main', 5678)}") as client:
        yield client, set_up_n8n(client)


def test_every_service_is_healthy_by_its_own_healthcheck(stack: Stack) -> None:
    states = {s["Service"]: (s["State"], s["Health"]) for s in stack.services()}
    assert set(states) == SERVICES
    assert all(state == ("running", "healthy") for state in states.values()), states


def test_only_loopback_ports_are_published(stack: Stack) -> None:
    assert stack.port("n8n-main", 5678) > 0  # asserts 127.0.0.1 inside
    unpublished = stack.compose("port", "n8n-postgres", "5432", check=False)
    assert unpublished.returncode != 0 or unpublished.stdout.strip() in ("", ":0")


def test_webhook_runs_through_the_runner_and_is_stored(stack: Stack, n8n: tuple[N8nClient, N8nSetup]) -> None:
    client, setup = n8n
    assert call_webhook(client._http, setup.webhook, 3) == [200, 200, 200]
    assert wait_success_count(client, setup.workflow_id, 3) == 3
    # the Code node ran in the runner container: its launcher started a runner for the task
    assert "launching runner" in stack.compose("logs", "--no-color", "runner-main").stdout


def test_postgres_refuses_a_wrong_password_and_takes_the_env_one(stack: Stack) -> None:
    env = dict(
        line.split("=", 1)
        for line in (stack.folder / ".env").read_text().splitlines()
        if line and not line.startswith("#")
    )
    query = ["psql", "-h", "127.0.0.1", "-U", "n8n", "-d", "n8n", "-tAc", "select count(*) from workflow_entity"]
    wrong = stack.exec("n8n-postgres", "env", "PGPASSWORD=not-the-password", *query)
    assert wrong.returncode != 0 and "password authentication failed" in wrong.stdout + wrong.stderr
    right = stack.exec("n8n-postgres", "env", f"PGPASSWORD={env['POSTGRES_PASSWORD']}", *query)
    assert right.returncode == 0 and right.stdout.strip() == "1", right.stdout + right.stderr


def test_a_wrong_runners_token_is_refused_by_the_broker(stack: Stack) -> None:
    proc = stack.compose(
        "run",
        "--rm",
        "-T",
        "--no-deps",
        "-e",
        "N8N_RUNNERS_AUTH_TOKEN=not-the-token",
        "runner-main",
        check=False,
        timeout=120,
    )
    assert proc.returncode != 0
    assert "received status code 403" in proc.stdout + proc.stderr


def test_n8n_refuses_another_encryption_key_than_the_one_in_its_volume(stack: Stack) -> None:
    # The first start wrote the .env key into /home/node/.n8n/config: a different key must not start.
    proc = stack.compose(
        "run", "--rm", "-T", "--no-deps", "-e", "N8N_ENCRYPTION_KEY=" + "0" * 64, "n8n-main", check=False, timeout=120
    )
    assert proc.returncode != 0
    assert "Mismatching encryption keys" in proc.stdout + proc.stderr


def test_down_then_up_keeps_owner_workflow_and_executions(stack: Stack, n8n: tuple[N8nClient, N8nSetup]) -> None:
    client, setup = n8n
    before = wait_success_count(client, setup.workflow_id, 1)
    stack.down()
    stack.up()
    with N8nClient(f"http://127.0.0.1:{stack.port('n8n-main', 5678)}", setup.api_key) as again:
        again.wait_ready(180)
        again.login(setup.owner)  # the owner survived in Postgres' volume
        assert again.count_executions(setup.workflow_id).by_status.get("success", 0) == before
        again.wait_webhook_registered(setup.webhook, timeout_s=60)
        assert call_webhook(again._http, setup.webhook) == [200]
        assert wait_success_count(again, setup.workflow_id, before + 1) == before + 1


def test_main_made_no_outside_fetch(stack: Stack) -> None:
    # The bench profile turns off what calls out; the MCP registry refresh was found here (2.41.1).
    logs = stack.compose("logs", "--no-color", "n8n-main").stdout
    assert "n8n ready on" in logs
    assert "api.n8n.io" not in logs


def test_check_passes_the_same_files(stack: Stack) -> None:
    proc = n8n_sizer_check(stack.folder)
    assert proc.returncode == 0, proc.stdout
    assert " 0 failed" in proc.stdout
