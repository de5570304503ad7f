"""One n8n environment: every n8n variable of every process role comes from `bundle.n8n_env.role_env`.

The single-host compose template, the cluster template, the native stack and the lab render or start exactly
that function's output (the lab and the native stack with their own addresses), and no template or module on
those paths writes an n8n variable of its own: a second source fails `test_no_second_source_of_n8n_variables`.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
import yaml

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.bundle.checks.one_host import check_compose
from n8n_sizer.bundle.n8n_env import (
    COMPOSE_WIRING,
    N8nPorts,
    role_env,
    shape_of_setup,
    shape_of_topology,
    shutdown_timeouts,
    stall_seconds,
)
from n8n_sizer.bundle.native_env import NativeSecrets, n8n_env
from n8n_sizer.bundle.render import render_bundle
from n8n_sizer.bundle.render_topology import cluster_wiring, render_topology
from n8n_sizer.bundle.secrets import generate_secrets, parse_env_text
from n8n_sizer.bundle.topology import parse_topology
from n8n_sizer.lab.n8n_role import lab_env, role_ports

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "n8n_sizer"
TOPOLOGIES = ROOT / "tests" / "data" / "topologies"
SETUPS = [
    Setup(mode="regular", db="sqlite"),
    Setup(mode="regular", production_limit=10, longest_execution_s=120),
    Setup(mode="queue", workers=2, concurrency=10, db_pool_size=4),
    Setup(mode="queue", workers=1, concurrency=5, longest_execution_s=300, runner_concurrency=3),
]
# What only says where a process runs: addresses, ports, folders, secrets, the runner mode, log settings.
WHERE_IT_RUNS = {
    "N8N_RUNNERS_MODE",
    "N8N_RUNNERS_BROKER_LISTEN_ADDRESS",
    "N8N_RUNNERS_BROKER_PORT",
    "N8N_RUNNERS_AUTH_TOKEN",
    "DB_POSTGRESDB_HOST",
    "DB_POSTGRESDB_PORT",
    "DB_POSTGRESDB_PASSWORD",
    "QUEUE_BULL_REDIS_HOST",
    "QUEUE_BULL_REDIS_PORT",
    "QUEUE_BULL_REDIS_PASSWORD",
    "N8N_ENCRYPTION_KEY",
    "N8N_EDITOR_BASE_URL",
    "WEBHOOK_URL",
    "N8N_HOST",
    "N8N_PORT",
    "N8N_LISTEN_ADDRESS",
    "N8N_PROTOCOL",
    "N8N_USER_FOLDER",
    "N8N_LOG_LEVEL",
    "N8N_LOG_OUTPUT",
    "N8N_ENFORCE_SETTINGS_FILE_PERMISSIONS",
    "QUEUE_HEALTH_CHECK_PORT",
    "EXTERNAL_HOOK_FILES",  # the drain hook's path: in the container or in the package
    "PATH",
    "HOME",
    "LANG",
    "NODE_OPTIONS",  # the V8 heap under a container's memory limit (bundle/limits.py); natively there is no limit
}
N8N_NAME = r"(?:N8N_[A-Z0-9_]+|DB_[A-Z0-9_]+|QUEUE_[A-Z0-9_]+|EXECUTIONS_[A-Z0-9_]+|WEBHOOK_URL|OFFLOAD_[A-Z0-9_]+|GENERIC_TIMEZONE)"
# Overrides that are addresses or folders, not settings: a stack's fresh user folder, the cluster's public URL in
# its .env (render_topology.py).
ADDRESS_OVERRIDES = {"N8N_USER_FOLDER", "N8N_PUBLIC_URL"}
# The rooms that render or start n8n. drills/ is left out on purpose: a drill changes one setting to see what
# happens (a shorter lock, another key), and says so in its record.
PATHS = ("bundle", "lab", "native", "stack", "fleet", "bench")


def _role_of(service: str) -> str:
    return next(
        r
        for r in ("main", "webhook", "worker", "runner")
        if service.startswith(f"n8n-{r}") or service.startswith(f"{r}-")
    )


def _rendered_envs(compose: str) -> dict[str, dict[str, str]]:
    doc = yaml.safe_load(compose)
    return {
        name: svc["environment"]
        for name, svc in doc["services"].items()
        if "/n8n:" in svc["image"] or "/runners:" in svc["image"]
    }


def _broker(service: str) -> str:
    return "n8n-main" if service == "runner-main" else service.replace("runner-", "n8n-")


def _heap_apart(service: str, env: dict[str, str]) -> dict[str, str]:
    """The environment without NODE_OPTIONS, which every n8n process (not a runner) gets from its container's memory
    limit (bundle/limits.with_node_heap), not from role_env."""
    rest = {k: v for k, v in env.items() if k != "NODE_OPTIONS"}
    if service.startswith("runner-"):
        assert "NODE_OPTIONS" not in env, service
    else:
        assert re.fullmatch(r"--max-old-space-size=\d+", env["NODE_OPTIONS"]), service
    return rest


@pytest.mark.parametrize("setup", SETUPS, ids=lambda s: f"{s.mode}-{s.db}-{s.workers}w")
@pytest.mark.parametrize("profile", ["bench", "production"])
def test_every_single_host_service_gets_exactly_role_env(setup: Setup, profile: str) -> None:
    domain = "n8n.example.com" if profile == "production" else None
    shape = shape_of_setup(setup, profile, domain)
    envs = _rendered_envs(render_bundle(setup, generate_secrets(), profile=profile, domain=domain).compose)
    assert "n8n-main" in envs and len(envs) == 2 * (1 + setup.workers)
    for service, env in envs.items():
        want = role_env(shape, _role_of(service), COMPOSE_WIRING, broker_host=_broker(service))
        assert _heap_apart(service, env) == want, service


@pytest.mark.parametrize("case", ["advise-rps-400", "gcp-three-hosts", "lb-apart"])
def test_every_cluster_service_gets_exactly_role_env_and_the_lab_the_same_settings(case: str, tmp_path: Path) -> None:
    t = parse_topology(json.loads((TOPOLOGIES / f"{case}.json").read_text()))
    shape, wiring = shape_of_topology(t, "bench"), cluster_wiring(t)
    secrets = NativeSecrets(
        encryption_key="k" * 32, postgres_password="pg", redis_password="rd", redis_n8n_password="rn"
    )
    seen = set()
    for host, bundle in render_topology(t, generate_secrets(), public_url="http://n8n.example.com:5678/").hosts.items():
        for service, env in _rendered_envs(bundle.compose).items():
            role = _role_of(service)
            env = _heap_apart(service, env)
            assert env == role_env(shape, role, wiring, broker_host=_broker(service)), (host, service)
            if role == "runner":
                continue
            # The lab starts this role from the same topology: everything but the addresses is equal.
            index = int(service.rsplit("-", 1)[1]) if role != "main" else 1
            lab = lab_env(
                t,
                role,
                ports=role_ports(role, index),
                folder=tmp_path,
                secrets=secrets,
                data="10.89.0.10",
                listen="10.89.0.11",
                main="10.89.0.11",
                path="/bin",
            )
            settings = {k: v for k, v in env.items() if k not in WHERE_IT_RUNS}
            assert {k: lab[k] for k in settings if k in lab} == settings, (host, service)
            assert set(settings) <= set(lab), set(settings) - set(lab)
            seen.add(role)
    assert seen >= {"main", "worker"}


def _native(setup: Setup, role: str, tmp_path: Path) -> dict[str, str]:
    secrets = NativeSecrets(
        encryption_key="k" * 32, postgres_password="pg", redis_password="rd", redis_n8n_password="rn"
    )
    return n8n_env(
        setup,
        role=role,
        ports=N8nPorts(http=5678, broker=5679, health=5680 if role == "worker" else None),
        user_folder=tmp_path,
        secrets=secrets,
        postgres_port=5432 if setup.db == "postgres" else None,
        redis_port=6379 if setup.mode == "queue" else None,
        path="/bin",
        home="/root",
    )


@pytest.mark.parametrize("setup", SETUPS, ids=lambda s: f"{s.mode}-{s.db}-{s.workers}w")
def test_the_native_stack_carries_the_rendered_settings(setup: Setup, tmp_path: Path) -> None:
    envs = _rendered_envs(render_bundle(setup, generate_secrets()).compose)
    for service, role in {
        "n8n-main": "main",
        **{f"n8n-worker-{i}": "worker" for i in range(1, setup.workers + 1)},
    }.items():
        native = _native(setup, role, tmp_path)
        settings = {k: v for k, v in envs[service].items() if k not in WHERE_IT_RUNS}
        assert {k: native.get(k) for k in settings} == settings, service


def written_n8n_names(source: str) -> list[tuple[int, str]]:
    """(line, name) of every n8n variable the Python `source` writes: a dict literal's key, a subscript assigned to
    (`env["X"] = ...`, `env["X"] += ...`), a keyword of a call (`dict(X=...)`, `env.update(X=...)`) or the first
    argument of `setdefault`. Reading one (`env.get("X")`, `env["X"]` in an expression) is not writing it."""
    name = re.compile(rf"{N8N_NAME}$")
    out = []

    def note(node: ast.AST, text: object) -> None:
        if isinstance(text, str) and name.match(text):
            out.append((node.lineno, text))

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Dict):
            for key in node.keys:
                if isinstance(key, ast.Constant):
                    note(key, key.value)
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant):
                    note(t, t.slice.value)
        elif isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg:
                    note(node, kw.arg)
            attr = node.func.attr if isinstance(node.func, ast.Attribute) else None
            if attr == "setdefault" and node.args and isinstance(node.args[0], ast.Constant):
                note(node, node.args[0].value)
    return out


def test_no_second_source_of_n8n_variables() -> None:
    """No template and no module that renders or starts n8n (but bundle/n8n_env.py) writes an n8n variable: a YAML
    key in a template; in Python any way `written_n8n_names` sees. Reading one (check's rules) is fine."""
    offenders = []
    for path in sorted((PACKAGE / "templates").glob("*.j2")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.match(rf"\s*-?\s*{N8N_NAME}\s*:", line):
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    for room in PATHS:
        for path in sorted((PACKAGE / room).rglob("*.py")):
            if path == PACKAGE / "bundle" / "n8n_env.py":
                continue
            for n, name in written_n8n_names(path.read_text()):
                if name not in ADDRESS_OVERRIDES:
                    offenders.append(f"{path.relative_to(ROOT)}:{n}: {name}")
    assert offenders == [], "n8n variables written outside bundle/n8n_env.py:\n" + "\n".join(offenders)


@pytest.mark.parametrize(
    "source",
    [
        'env = {"N8N_DISABLED_MODULES": "x"}',
        'env["N8N_DISABLE_PRODUCTION_MAIN_PROCESS"] = "true"',
        "env.update(EXECUTIONS_MODE='queue')",
        "env.setdefault('DB_POSTGRESDB_POOL_SIZE', '2')",
        "env: dict = {}\nenv['QUEUE_BULL_REDIS_DB'] += '1'",
    ],
)
def test_the_second_source_check_sees_every_way_of_writing(source: str) -> None:
    """The scan above finds what a second source would look like (so the test can fail)."""
    assert written_n8n_names(source), source
    assert re.match(rf"\s*-?\s*{N8N_NAME}\s*:", '      DB_POSTGRESDB_POOL_SIZE: "2"')


def test_reading_a_variable_is_not_writing_it() -> None:
    assert written_n8n_names('x = env.get("WEBHOOK_URL") or env["N8N_PORT"]') == []


def test_the_graceful_shutdown_and_the_lock_outlast_the_longest_execution() -> None:
    setup = Setup(mode="queue", workers=1, longest_execution_s=300)
    n8n_s, grace_s = shutdown_timeouts(setup)
    worker = role_env(shape_of_setup(setup), "worker", COMPOSE_WIRING)
    assert worker["N8N_GRACEFUL_SHUTDOWN_TIMEOUT"] == str(n8n_s) and n8n_s > 300 and grace_s > n8n_s
    lock_s, renew_s, stalled_s = stall_seconds(300, cpu_headroom=0.5)
    assert worker["QUEUE_WORKER_LOCK_DURATION"] == str(lock_s * 1000) and lock_s == 600
    assert renew_s < lock_s and stalled_s <= lock_s
    assert stall_seconds(5)[0] == 60  # never below n8n's own default
    assert stall_seconds(100, cpu_headroom=0.25)[0] == 400  # less headroom, a longer lock
    assert "QUEUE_WORKER_LOCK_DURATION" not in role_env(shape_of_setup(setup), "main", COMPOSE_WIRING)


@pytest.mark.parametrize("setup", SETUPS, ids=lambda s: f"{s.mode}-{s.db}-{s.workers}w")
def test_check_rules_judge_the_native_environment_as_they_judge_the_rendered_one(setup: Setup, tmp_path: Path) -> None:
    """The rendered file with each n8n service's settings swapped for the native stack's: the n8n rules that
    pass on the rendered file pass on the native environment too (the shutdown-timeout drift failed here)."""
    bundle = render_bundle(setup, generate_secrets())
    env = parse_env_text(bundle.env)
    compose = yaml.safe_load(bundle.compose)
    kwargs = {"vcpu": 4, "longest_execution_s": setup.longest_execution_s}
    rendered = {r.rule: r.status for r in check_compose(bundle.compose, env, **kwargs)}
    for service, role in {
        "n8n-main": "main",
        **{f"n8n-worker-{i}": "worker" for i in range(1, setup.workers + 1)},
    }.items():
        native = {k: v for k, v in _native(setup, role, tmp_path).items() if k not in WHERE_IT_RUNS}
        spec = compose["services"][service]["environment"]
        compose["services"][service]["environment"] = {**spec, **{k: native[k] for k in native if k in spec}}
    swapped = {r.rule: r for r in check_compose(yaml.safe_dump(compose), env, **kwargs)}
    assert rendered["shutdown-timeout"] == "pass"
    for rule, status in rendered.items():
        assert swapped[rule].status == status, (rule, swapped[rule].message)
