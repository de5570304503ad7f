"""render_bundle: golden files, Compose Specification and cloud-init schemas, refusals, and `check` on
every rendered stack.

Golden files live in tests/golden/<case>/; after an intended template change, rewrite them with
`UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/test_deploy_render.py` and review the diff.
"""

from __future__ import annotations

import base64
import gzip
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.bundle.checks.one_host import check_compose
from n8n_sizer.bundle.cloudinit import READY_MARKER, USER_DATA_LIMIT_BYTES
from n8n_sizer.bundle.n8n_env import shutdown_timeouts
from n8n_sizer.bundle.render import render_bundle
from n8n_sizer.bundle.secrets import StackSecrets, generate_secrets, parse_env_text
from n8n_sizer.errors import InputError
from n8n_sizer.versions import N8N_VERSION, POSTGRES_IMAGE, REDIS_IMAGE

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
# Fixed fake secrets so the golden files are deterministic.
FAKE = StackSecrets(
    encryption_key="0123456789abcdef" * 4,
    postgres_password="golden-fake-postgres-password",
    redis_password="golden-fake-redis-password",
    runners_auth_token="golden-fake-runners-token",
    redis_n8n_password="golden-fake-redis-n8n-password",
)
CASES: dict[str, tuple[Setup, dict]] = {
    "regular-sqlite": (Setup(mode="regular", db="sqlite"), {}),
    "regular-postgres-limit": (Setup(mode="regular", db="postgres", production_limit=10), {}),
    "queue-1-worker": (Setup(mode="queue", workers=1), {}),
    "queue-2-workers": (Setup(mode="queue", workers=2), {}),
    "queue-4-workers": (Setup(mode="queue", workers=4, db_pool_size=10, longest_execution_s=120), {}),
    "production": (Setup(mode="queue", workers=2), {"profile": "production", "domain": "n8n.example.com"}),
}
FILES = {"docker-compose.yml": "compose", "env": "env", "cloud-init.yaml": "cloud_init"}


def _bundle(case: str):
    setup, kwargs = CASES[case]
    return render_bundle(setup, FAKE, benchmark_host=kwargs.get("profile", "bench") == "bench", **kwargs)


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_golden_files(case: str) -> None:
    bundle = _bundle(case)
    folder = GOLDEN / case
    for name, attr in FILES.items():
        text = getattr(bundle, attr)
        if os.environ.get("UPDATE_GOLDEN") == "1":
            folder.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(text, encoding="utf-8")
        assert (folder / name).exists(), f"missing golden {folder / name}; run with UPDATE_GOLDEN=1"
        assert text == (folder / name).read_text(encoding="utf-8"), (
            f"{case}/{name} differs from its golden file; if intended, rerun with UPDATE_GOLDEN=1 and review"
        )


def test_every_compose_validates_against_the_compose_spec(tmp_path: Path) -> None:
    tool = Path(sys.executable).parent / "check-jsonschema"
    assert tool.exists(), "check-jsonschema is missing: pip install -e '.[test]'"
    paths = []
    for case in CASES:
        path = tmp_path / f"{case}.yml"
        path.write_text(_bundle(case).compose)
        paths.append(str(path))
    proc = subprocess.run(
        [str(tool), "--builtin-schema", "vendor.compose-spec", *paths], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_compose_spec_validation_can_fail(tmp_path: Path) -> None:
    """The schema check above is not vacuous: a misspelt key is rejected."""
    tool = Path(sys.executable).parent / "check-jsonschema"
    path = tmp_path / "bad.yml"
    path.write_text(_bundle("queue-1-worker").compose.replace("stop_grace_period:", "stop_grace_periods:"))
    proc = subprocess.run(
        [str(tool), "--builtin-schema", "vendor.compose-spec", str(path)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 1 and "stop_grace_periods" in proc.stdout


def _cloud_init_schema(path: Path) -> subprocess.CompletedProcess:
    tool = shutil.which("cloud-init")
    if tool is None:
        pytest.fail("Debian's cloud-init is not installed (scripts/test.sh installs it: apt-get install cloud-init)")
    return subprocess.run([tool, "schema", "--config-file", str(path)], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("case", sorted(CASES))
def test_cloud_init_passes_debians_schema(case: str, tmp_path: Path) -> None:
    path = tmp_path / "user-data.yaml"
    path.write_text(_bundle(case).cloud_init)
    proc = _cloud_init_schema(path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_cloud_init_schema_check_can_fail(tmp_path: Path) -> None:
    path = tmp_path / "user-data.yaml"
    path.write_text(_bundle("queue-1-worker").cloud_init.replace('permissions: "0600"', "permissions: 600"))
    proc = _cloud_init_schema(path)
    assert proc.returncode != 0 and "permissions" in proc.stdout + proc.stderr


@pytest.mark.parametrize("case", sorted(CASES))
def test_check_passes_every_rendered_stack(case: str) -> None:
    bundle = _bundle(case)
    setup = CASES[case][0]
    results = check_compose(
        bundle.compose,
        parse_env_text(bundle.env),
        vcpu=2 * max(1, setup.workers),
        longest_execution_s=setup.longest_execution_s,
    )
    failed = [(r.rule, r.message) for r in results if r.status == "fail"]
    assert failed == []
    assert sum(r.status == "pass" for r in results) >= 8


# More shapes, not kept as golden files: they must still validate and pass `check`.
MORE: list[tuple[Setup, dict]] = [
    (Setup(mode="regular", db="sqlite"), {"profile": "production", "domain": "n8n.example.com"}),
    (Setup(mode="regular", db="postgres", db_pool_size=5, longest_execution_s=900), {}),
    (Setup(mode="queue", workers=3, concurrency=20, production_limit=20, runner_concurrency=10), {}),
    (Setup(mode="queue", workers=8, db_pool_size=20), {"public_url": "http://203.0.113.7:5678/"}),
    (Setup(mode="queue", workers=64), {}),  # compressed cloud-init
]


def test_more_shapes_validate_and_pass_check(tmp_path: Path) -> None:
    tool = Path(sys.executable).parent / "check-jsonschema"
    paths = []
    for i, (setup, kwargs) in enumerate(MORE):
        bundle = render_bundle(setup, FAKE, **kwargs)
        results = check_compose(
            bundle.compose,
            parse_env_text(bundle.env),
            vcpu=2 * max(1, setup.workers),
            longest_execution_s=setup.longest_execution_s,
        )
        assert [(r.rule, r.message) for r in results if r.status == "fail"] == [], (setup, kwargs)
        path = tmp_path / f"more-{i}.yml"
        path.write_text(bundle.compose)
        paths.append(str(path))
    proc = subprocess.run(
        [str(tool), "--builtin-schema", "vendor.compose-spec", *paths], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_queue_stack_follows_seed_000() -> None:
    bundle = _bundle("queue-2-workers")
    services = yaml.safe_load(bundle.compose)["services"]
    assert set(services) == {
        "n8n-postgres",
        "n8n-redis",
        "n8n-main",
        "runner-main",
        "n8n-worker-1",
        "runner-worker-1",
        "n8n-worker-2",
        "runner-worker-2",
    }
    assert all("deploy" not in spec for spec in services.values())  # workers are services, not replicas
    assert all("healthcheck" in spec for spec in services.values())
    for n in (1, 2):
        worker, runner = services[f"n8n-worker-{n}"], services[f"runner-worker-{n}"]
        assert worker["image"] == f"docker.n8n.io/n8nio/n8n:{N8N_VERSION}"
        assert runner["image"] == f"docker.n8n.io/n8nio/runners:{N8N_VERSION}"
        assert runner["environment"]["N8N_RUNNERS_TASK_BROKER_URI"] == f"http://n8n-worker-{n}:5679"
        assert worker["depends_on"]["n8n-main"] == {"condition": "service_healthy"}
        assert worker["environment"]["DB_TYPE"] == "postgresdb"
        assert worker["environment"]["N8N_DEFAULT_BINARY_DATA_MODE"] == "database"
    assert services["n8n-postgres"]["image"] == POSTGRES_IMAGE
    assert services["n8n-redis"]["image"] == REDIS_IMAGE
    redis = " ".join(services["n8n-redis"]["command"])
    assert "--appendonly yes --appendfsync everysec --maxmemory 128mb --maxmemory-policy noeviction" in redis
    assert "--requirepass ${REDIS_PASSWORD}" in redis
    main_env = services["n8n-main"]["environment"]
    for name in ("n8n-main", "n8n-worker-1", "n8n-worker-2"):  # Bull keeps finished jobs (advisor/settings.py)
        env = services[name]["environment"]
        assert env["N8N_EXECUTIONS_QUEUE_KEEP_LAST_COMPLETED"] == env["N8N_EXECUTIONS_QUEUE_KEEP_LAST_FAILED"] == "1000"
    assert "N8N_EXECUTIONS_QUEUE_KEEP_LAST_COMPLETED" not in _bundle("regular-postgres-limit").compose
    assert main_env["N8N_METRICS_INCLUDE_QUEUE_METRICS"] == "true"
    assert main_env["OFFLOAD_MANUAL_EXECUTIONS_TO_WORKERS"] == "true"
    assert main_env["EXECUTIONS_DATA_PRUNE"] == "true"


def test_shutdown_timeouts_exceed_the_longest_execution() -> None:
    setup = Setup(mode="queue", workers=1, longest_execution_s=300)
    n8n_s, docker_s = shutdown_timeouts(setup)
    assert 300 < n8n_s < docker_s
    services = yaml.safe_load(render_bundle(setup, FAKE).compose)["services"]
    assert services["n8n-worker-1"]["environment"]["N8N_GRACEFUL_SHUTDOWN_TIMEOUT"] == str(n8n_s)
    assert services["n8n-worker-1"]["stop_grace_period"] == f"{docker_s}s"


def test_postgres_max_connections_covers_big_pools() -> None:
    setup = Setup(
        mode="queue", workers=8, db_pool_size=20
    )  # (20 + 1) + 8 x 20 + 10 = 191, rounded up to 200 (pools.py)
    services = yaml.safe_load(render_bundle(setup, FAKE).compose)["services"]
    assert services["n8n-postgres"]["command"][:3] == ["postgres", "-c", "max_connections=200"]


def test_pool_refusal_shows_the_arithmetic() -> None:
    setup = Setup(mode="queue", workers=4, db_pool_size=10)
    with pytest.raises(InputError) as err:
        render_bundle(setup, FAKE, max_connections=50)
    message = str(err.value)
    assert "(main pool 10 + 1) + 4 worker x pool 10 + 10 headroom = 61" in message
    assert "--max-connections 61" in message and "\n" not in message
    assert "max_connections=61" in render_bundle(setup, FAKE, max_connections=61).compose


def test_big_stacks_are_compressed_to_fit(tmp_path: Path) -> None:
    setup = Setup(mode="queue", workers=64)
    bundle = render_bundle(setup, FAKE)
    assert len(bundle.compose.encode()) > USER_DATA_LIMIT_BYTES  # would not fit as plain text
    assert len(bundle.cloud_init.encode()) <= USER_DATA_LIMIT_BYTES
    files = {f["path"]: f for f in yaml.safe_load(bundle.cloud_init)["write_files"]}
    compose = files["/opt/n8n/docker-compose.yml"]
    assert compose["encoding"] == "gz+b64"
    assert gzip.decompress(base64.b64decode(compose["content"])).decode() == bundle.compose
    path = tmp_path / "user-data.yaml"
    path.write_text(bundle.cloud_init)
    assert _cloud_init_schema(path).returncode == 0


def test_size_refusal_names_the_size() -> None:
    # 80 kB of kept, incompressible .env values cannot fit in 32 KiB even gzip-compressed.
    extra = {f"KEPT_{i}": secrets.token_urlsafe(4000) for i in range(20)}
    with pytest.raises(InputError) as err:
        render_bundle(Setup(mode="queue", workers=2), FAKE, extra_env=extra)
    message = str(err.value)
    assert "32,768 bytes" in message and "--workers" in message and "\n" not in message
    size = int(message.split(" would be ")[1].split(" bytes")[0].replace(",", ""))
    assert size > USER_DATA_LIMIT_BYTES


@pytest.mark.parametrize("version", ["2.41", "2", "latest", "v2.41.1", "2.41.1-beta"])
def test_unpinned_versions_are_refused(version: str) -> None:
    with pytest.raises(InputError, match="--n8n-version"):
        render_bundle(Setup(mode="regular", n8n_version=version), FAKE)


def test_production_profile_needs_a_domain_and_hides_n8n() -> None:
    with pytest.raises(InputError, match="--domain"):
        render_bundle(Setup(mode="regular"), FAKE, profile="production")
    with pytest.raises(InputError, match="--domain"):
        render_bundle(Setup(mode="regular"), FAKE, profile="production", domain="not a domain")
    doc = yaml.safe_load(_bundle("production").compose)
    assert "ports" not in doc["services"]["n8n-main"]
    assert "N8N_SECURE_COOKIE" not in doc["services"]["n8n-main"]["environment"]
    assert doc["services"]["n8n-caddy"]["ports"] == ["80:80", "443:443", "443:443/udp"]
    assert "respond @metrics 404" in doc["configs"]["caddyfile"]["content"]
    assert "N8N_PUBLIC_URL=https://n8n.example.com/" in _bundle("production").env


def test_queue_production_limit_must_not_override_concurrency() -> None:
    with pytest.raises(InputError, match="--production-limit 3"):
        render_bundle(Setup(mode="queue", workers=2, production_limit=3), FAKE)


def test_cloud_init_boots_the_stack() -> None:
    bench = yaml.safe_load(_bundle("queue-2-workers").cloud_init)
    assert _bundle("queue-2-workers").cloud_init.startswith("#cloud-config\n")
    assert bench["packages"] == ["docker.io", "docker-compose-v2"]
    files = {f["path"]: f for f in bench["write_files"]}
    assert files["/opt/n8n/.env"]["permissions"] == "0600"
    assert files["/opt/n8n/docker-compose.yml"]["content"] == _bundle("queue-2-workers").compose
    assert files["/opt/n8n/.env"]["content"] == _bundle("queue-2-workers").env
    assert READY_MARKER in files["/opt/n8n/up.sh"]["content"]
    assert "apt-daily.timer" in str(bench["bootcmd"]) and "unattended-upgrades" in str(bench["bootcmd"])
    production = yaml.safe_load(_bundle("production").cloud_init)
    assert "bootcmd" not in production  # production hosts keep their security updates


def test_boot_scripts_parse_with_the_real_shell() -> None:
    bench = yaml.safe_load(_bundle("queue-2-workers").cloud_init)
    up_sh = next(f["content"] for f in bench["write_files"] if f["path"] == "/opt/n8n/up.sh")
    scripts = [up_sh, *(cmd[2] for cmd in bench["bootcmd"])]
    for script in scripts:
        proc = subprocess.run(["sh", "-n"], input=script, capture_output=True, text=True, timeout=10)
        assert proc.returncode == 0, proc.stderr
    broken = subprocess.run(["sh", "-n"], input=up_sh.replace("fi\n", "\n"), capture_output=True, text=True, timeout=10)
    assert broken.returncode != 0  # the syntax check does catch a broken script


def test_generated_secrets_are_fresh_hex_and_hidden() -> None:
    first, second = generate_secrets(), generate_secrets()
    assert len(first.encryption_key) == 64 and int(first.encryption_key, 16) >= 0
    assert first.encryption_key != second.encryption_key
    assert first.postgres_password != first.redis_password != first.runners_auth_token
    assert first.encryption_key not in repr(first) and first.encryption_key not in str(first)
    bundle = render_bundle(Setup(mode="regular"), first)
    assert first.encryption_key in bundle.env
    assert first.encryption_key not in repr(bundle) and first.encryption_key not in str(bundle)
