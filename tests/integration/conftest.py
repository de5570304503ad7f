"""Shared real-n8n fixtures: one regular and one queue stack for the whole session, set up over HTTP.

Each n8n start costs ~10 s and ~750 MB, so the stacks live at session scope and every test that uses
them deploys its own workflow on its own webhook path (`deploy`), never touching another test's.
- `regular_stack`: regular mode on SQLite (the other database path; `queue_stack` runs on Postgres).
- `queue_stack`: queue mode, 1 worker, Postgres 15 (Debian) and Redis with AOF.
Both are stopped at session end; the teardown fails if any of their processes is left running.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.n8n.client import N8nClient, N8nSession, set_up_instance
from n8n_sizer.n8n.workflows import deploy_workflow, read_workflow, with_webhook_path
from n8n_sizer.native import services
from n8n_sizer.native.install import N8nInstall, install_n8n
from n8n_sizer.native.stack import LocalStack, StackOptions


@dataclass(frozen=True)
class RunningN8n:
    """A started stack with an owner and an API key."""

    stack: LocalStack
    session: N8nSession

    @property
    def main_url(self) -> str:
        return self.stack.main_url

    @property
    def api_key(self) -> str:
        return self.session.api_key.get_secret_value()

    def client(self, login: bool = False) -> N8nClient:
        client = self.session.client()
        if login:
            client.login(self.session.owner)
        return client

    def deploy(self, template: str) -> tuple[str, str]:
        """Deploy a packaged workflow on a fresh webhook path; returns (workflow id, full webhook URL)."""
        workflow = with_webhook_path(read_workflow(template), f"{template}-{secrets.token_hex(4)}")
        with self.client() as client:
            workflow_id, path = deploy_workflow(client, workflow)
        return workflow_id, f"{self.main_url}{path}"


@pytest.fixture(scope="session")
def n8n_install() -> N8nInstall:
    """Node 24 + the pinned n8n from the cache; installs them (~4 min) when missing."""
    return install_n8n()


def running_stack(setup: Setup, install: N8nInstall, options: StackOptions | None = None) -> Iterator[RunningN8n]:
    """A started local stack with n8n set up; on teardown it is stopped and nothing it started may be left."""
    stack = LocalStack(setup, options, install=install)
    try:
        stack.start()
        yield RunningN8n(stack=stack, session=set_up_instance(stack.main_url))
    finally:
        procs = list(stack.processes.values())
        stack.stop()
        left = [f"{p.name} (PID {p.pid})" for p in procs if services.is_running(p) or services.group_pids(p.pid)]
        assert not left, f"stop left processes running: {left}"


@pytest.fixture(scope="session")
def regular_stack(n8n_install: N8nInstall) -> Iterator[RunningN8n]:
    yield from running_stack(Setup(mode="regular", db="sqlite"), n8n_install)


@pytest.fixture(scope="session")
def queue_stack(n8n_install: N8nInstall) -> Iterator[RunningN8n]:
    yield from running_stack(Setup(mode="queue", workers=1), n8n_install)
