"""One n8n environment: the compose template and the native stack take the setup's settings from the same
function (`deploy.n8n_env.n8n_settings`), and `check`'s rules judge both alike."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.deploy.check import check_compose
from n8n_sizer.deploy.n8n_env import N8nPorts, StackSecrets, n8n_env, n8n_settings, shutdown_timeouts
from n8n_sizer.deploy.render import render_bundle
from n8n_sizer.deploy.secrets import generate_secrets, parse_env_text

SETUPS = [
    Setup(mode="regular", db="sqlite"),
    Setup(mode="regular", production_limit=10, longest_execution_s=120),
    Setup(mode="queue", workers=2, concurrency=10, db_pool_size=4),
    Setup(mode="queue", workers=1, concurrency=5, longest_execution_s=300, runner_concurrency=3),
]


# Differences by design: how processes find each other and their runners on a host versus in containers.
WHERE_IT_RUNS = {"N8N_RUNNERS_MODE", "N8N_RUNNERS_BROKER_LISTEN_ADDRESS", "N8N_RUNNERS_BROKER_PORT",
                 "DB_POSTGRESDB_HOST", "DB_POSTGRESDB_PORT", "DB_POSTGRESDB_PASSWORD", "QUEUE_BULL_REDIS_HOST",
                 "QUEUE_BULL_REDIS_PORT", "QUEUE_BULL_REDIS_PASSWORD", "N8N_ENCRYPTION_KEY"}


def _native(setup: Setup, role: str, tmp_path: Path) -> dict[str, str]:
    secrets = StackSecrets(encryption_key="k" * 32, postgres_password="pg", redis_password="rd")
    return n8n_env(setup, role=role, ports=N8nPorts(http=5678, broker=5679, health=5680 if role == "worker" else None),
                   user_folder=tmp_path, secrets=secrets, postgres_port=5432 if setup.db == "postgres" else None,
                   redis_port=6379 if setup.mode == "queue" else None, path="/bin", home="/root")


def _roles(setup: Setup) -> dict[str, str]:
    """compose service -> role"""
    roles = {"n8n-main": "main"}
    roles.update({f"n8n-worker-{i}": "worker" for i in range(1, setup.workers + 1)} if setup.mode == "queue" else {})
    return roles


@pytest.mark.parametrize("setup", SETUPS, ids=lambda s: f"{s.mode}-{s.db}-{s.workers}w")
def test_compose_and_native_stack_carry_the_same_settings(setup: Setup, tmp_path: Path) -> None:
    compose = yaml.safe_load(render_bundle(setup, generate_secrets()).compose)
    for service, role in _roles(setup).items():
        rendered = {k: str(v) for k, v in compose["services"][service]["environment"].items()}
        # the compose stack runs each process' runner as a sidecar (external mode): the limit is set there
        runner = compose["services"][service.replace("n8n-", "runner-")]["environment"]
        rendered["N8N_RUNNERS_MAX_CONCURRENCY"] = str(runner["N8N_RUNNERS_MAX_CONCURRENCY"])
        native = _native(setup, role, tmp_path)
        for key, value in n8n_settings(setup, role).items():
            assert rendered.get(key) == value, (service, key, rendered.get(key), value)
            assert native[key] == value, (role, key)


def test_the_graceful_shutdown_outlasts_the_longest_execution_in_both() -> None:
    setup = Setup(mode="queue", workers=1, longest_execution_s=300)
    n8n_s, grace_s = shutdown_timeouts(setup)
    assert n8n_settings(setup, "worker")["N8N_GRACEFUL_SHUTDOWN_TIMEOUT"] == str(n8n_s) and n8n_s > 300
    assert grace_s > n8n_s


@pytest.mark.parametrize("setup", SETUPS, ids=lambda s: f"{s.mode}-{s.db}-{s.workers}w")
def test_check_rules_judge_the_native_environment_as_they_judge_the_rendered_one(setup: Setup, tmp_path: Path) -> None:
    """The rendered file with each n8n service's environment swapped for the native stack's: the n8n rules that
    pass on the rendered file pass on the native environment too (the shutdown-timeout drift failed here)."""
    bundle = render_bundle(setup, generate_secrets())
    env = parse_env_text(bundle.env)
    compose = yaml.safe_load(bundle.compose)
    kwargs = {"vcpu": 4, "longest_execution_s": setup.longest_execution_s}
    rendered = {r.rule: r.status for r in check_compose(bundle.compose, env, **kwargs)}
    for service, role in _roles(setup).items():
        native = _native(setup, role, tmp_path)
        spec = compose["services"][service]["environment"]
        # what only the container needs (service names, ${VAR}s, external runners) stays; the settings are native
        native = {k: v for k, v in native.items() if k not in WHERE_IT_RUNS}
        compose["services"][service]["environment"] = {**spec, **{k: native[k] for k in native if k in spec}}
    swapped = {r.rule: r for r in check_compose(yaml.safe_dump(compose), env, **kwargs)}
    assert rendered["shutdown-timeout"] == "pass"
    for rule, status in rendered.items():
        assert swapped[rule].status == status, (rule, swapped[rule].message)
