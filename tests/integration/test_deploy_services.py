"""The rendered stack's server flags on the real servers: Debian's redis-server started with the
rendered Redis command line, Debian's PostgreSQL with the rendered `-c max_connections=N`.

No Docker engine here, so the images themselves cannot run; what can run is the command line each
image is given, and the servers must accept it and apply it.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from n8n_sizer.advisor.pools import setup_recommended_max_connections, setup_required_max_connections
from n8n_sizer.advisor.setup import Setup
from n8n_sizer.bundle.composefile import load_compose
from n8n_sizer.bundle.render import render_bundle
from n8n_sizer.bundle.secrets import generate_secrets, parse_env_text
from n8n_sizer.native.redis import redis_ping
from n8n_sizer.native.services import (
    free_port,
    init_postgres,
    postgres_bin_dir,
    spawn,
    start_postgres,
    stop_process,
    wait_postgres,
    wait_redis,
)

pytestmark = pytest.mark.integration


def _services(setup: Setup):
    bundle = render_bundle(setup, generate_secrets())
    env = parse_env_text(bundle.env)
    return {s.name: s for s in load_compose(bundle.compose, env).services}, env


def test_rendered_redis_command_runs_on_real_redis(tmp_path: Path) -> None:
    services, env = _services(Setup(mode="queue", workers=2))
    command = services["n8n-redis"].command
    assert command[0] == "redis-server"
    port = free_port()
    argv = [*command, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp_path), "--save", ""]
    proc = spawn("redis", argv, {"PATH": "/usr/bin:/bin"}, tmp_path / "redis.log", port)
    try:
        wait_redis(proc, env["REDIS_PASSWORD"], timeout_s=30)

        def cli(*args: str, auth: bool = True) -> str:
            extra = ["--no-auth-warning", "-a", env["REDIS_PASSWORD"]] if auth else []
            return subprocess.run(
                ["redis-cli", "-p", str(port), *extra, *args], capture_output=True, text=True, timeout=10, check=True
            ).stdout.split()

        assert cli("CONFIG", "GET", "appendonly") == ["appendonly", "yes"]
        assert cli("CONFIG", "GET", "appendfsync") == ["appendfsync", "everysec"]
        assert cli("CONFIG", "GET", "maxmemory-policy") == ["maxmemory-policy", "noeviction"]
        assert "NOAUTH" in " ".join(cli("PING", auth=False))  # the password is required
        assert not redis_ping(port, "a-wrong-password")
    finally:
        stop_process(proc, timeout_s=10)


@pytest.fixture
def pg_dir():
    """A folder Debian's `postgres` user can enter (pytest's tmp_path is root-only when run as root)."""
    folder = Path(tempfile.mkdtemp(prefix="n8n-sizer-deploy-pg-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_rendered_max_connections_is_applied_by_real_postgres(pg_dir: Path) -> None:
    tmp_path = pg_dir
    setup = Setup(mode="queue", workers=8, db_pool_size=20)  # needs 191, above Postgres' default 100
    services, env = _services(setup)
    command = services["n8n-postgres"].command
    assert command[:2] == ["postgres", "-c"]
    wanted = int(command[2].split("=", 1)[1])
    assert setup_required_max_connections(setup) == 191  # rounded up to the step (advisor/pools.py)
    assert wanted == setup_recommended_max_connections(setup) == 200
    data = tmp_path / "pg"
    init_postgres(data, "n8n", env["POSTGRES_PASSWORD"])
    port = free_port()
    proc = start_postgres(data, port, wanted, tmp_path / "postgres.log")
    try:
        wait_postgres(proc, data, timeout_s=60)
        shown = subprocess.run(
            [
                str(postgres_bin_dir() / "psql"),
                "-h",
                str(data),
                "-p",
                str(port),
                "-U",
                "n8n",
                "-d",
                "postgres",
                "-tAc",
                "SHOW max_connections",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()
        assert int(shown) == wanted
    finally:
        stop_process(proc, timeout_s=30)
