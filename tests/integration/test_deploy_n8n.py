"""The rendered n8n environment on real n8n 2.41.1 (npm, run natively by the bench room's LocalStack
with Debian's Postgres and Redis): every variable the compose file gives main and its workers is
accepted, none is reported invalid or deprecated, and the queue metrics it turns on are served.

Only what cannot be the same outside Docker is left to the local stack: hosts, ports, secrets, and the
runner mode (the npm package has no external-runner launcher, notes/real-n8n.md). Every process gets
main's variables (bundle/n8n_env.py::role_env); the workers' own (lock and stall settings) are checked on
the worker.
"""

from __future__ import annotations

import re
import urllib.request

import pytest

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.bundle.composefile import load_compose
from n8n_sizer.bundle.render import render_bundle
from n8n_sizer.bundle.secrets import generate_secrets, parse_env_text
from n8n_sizer.native.stack import LocalStack, StackOptions

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

LOCAL_ONLY = {
    "DB_POSTGRESDB_HOST",
    "DB_POSTGRESDB_PORT",
    "DB_POSTGRESDB_PASSWORD",
    "QUEUE_BULL_REDIS_HOST",
    "QUEUE_BULL_REDIS_PORT",
    "QUEUE_BULL_REDIS_PASSWORD",
    "N8N_ENCRYPTION_KEY",
    "N8N_RUNNERS_MODE",
    "N8N_RUNNERS_BROKER_LISTEN_ADDRESS",
    "N8N_RUNNERS_BROKER_PORT",
    "N8N_RUNNERS_AUTH_TOKEN",
    "N8N_EDITOR_BASE_URL",
    "WEBHOOK_URL",
}


def _deprecated(log: str) -> set[str]:
    """Variable names in n8n's 'There are deprecations ...' list (lines ` - NAME -> advice`)."""
    return set(re.findall(r"^ - ([A-Z0-9_]+) ->", log, flags=re.MULTILINE))


@pytest.mark.parametrize(
    "setup, kwargs",
    [
        (Setup(mode="queue", workers=1), {}),
        (
            Setup(mode="regular", db="sqlite", production_limit=10),
            {"profile": "production", "domain": "n8n.example.com"},
        ),
    ],
    ids=["queue-bench", "regular-production"],
)
def test_rendered_env_runs_on_real_n8n(setup: Setup, kwargs: dict) -> None:
    bundle = render_bundle(setup, generate_secrets(), **kwargs)
    services = {s.name: s for s in load_compose(bundle.compose, parse_env_text(bundle.env)).services}
    rendered = {k: v for k, v in services["n8n-main"].env.items() if k not in LOCAL_ONLY}
    assert {
        "DB_TYPE",
        "EXECUTIONS_MODE",
        "N8N_METRICS",
        "N8N_GRACEFUL_SHUTDOWN_TIMEOUT",
        "EXECUTIONS_DATA_PRUNE_MAX_COUNT",
    } <= set(rendered)
    with LocalStack(setup, StackOptions(extra_env=rendered)) as stack:
        with urllib.request.urlopen(f"{stack.main_url}/metrics", timeout=30) as response:
            metrics = response.read().decode()
        logs = {name: stack.log_path(name).read_text() for name in ("main", *stack.worker_names)}
    assert re.search(r"^n8n_version_info", metrics, flags=re.MULTILINE)
    if setup.mode == "queue":
        assert re.search(r"^n8n_scaling_mode_queue_jobs_waiting \d+", metrics, flags=re.MULTILINE)
        assert f"Concurrency: {setup.concurrency}" in logs["worker-1"]
    for name, log in logs.items():
        # 2.41.1 logs "Invalid value for X - ... Falling back to default value." for a bad enum and
        # "Invalid number value for X: ..." for a bad number (both seen with deliberately bad values).
        assert not re.search(r"Invalid (?:\w+ )?value for", log), f"{name}: {log[-2000:]}"
        assert "Falling back to default" not in log, f"{name}: {log[-2000:]}"
        assert not (_deprecated(log) & set(rendered)), f"{name} deprecates rendered variables: {_deprecated(log)}"
