"""The data host's rendered server flags on the real servers: Debian's PostgreSQL reads every rendered
`-c` setting (max_connections and the memory it implies) and reports them back; Debian's redis-server runs
the rendered Redis command line and demands its password.

No Docker engine here: what can run is the command line each image is given.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from n8n_sizer.bundle.composefile import load_compose
from n8n_sizer.bundle.render_topology import render_topology
from n8n_sizer.bundle.secrets import generate_secrets, parse_env_text
from n8n_sizer.bundle.topology import load_topology_text
from n8n_sizer.native.redis import RedisError, redis_command
from n8n_sizer.native.services import free_port, init_postgres, postgres_bin_dir, spawn, stop_process, wait_redis

pytestmark = pytest.mark.integration
TOPOLOGY = Path(__file__).resolve().parents[1] / "data" / "topologies" / "advise-rps-400.json"


def _data_services():
    bundle = render_topology(
        load_topology_text(TOPOLOGY.read_text(), "t"), generate_secrets(), public_url="http://n8n.example.com:5678/"
    ).hosts["data"]
    env = parse_env_text(bundle.env)
    return {s.name: s for s in load_compose(bundle.compose, env).services}, env


@pytest.fixture
def pg_dir():
    """A folder Debian's `postgres` user can enter (pytest's tmp_path is root-only when run as root)."""
    folder = Path(tempfile.mkdtemp(prefix="n8n-sizer-cluster-pg-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_real_postgres_accepts_the_data_hosts_settings(pg_dir: Path) -> None:
    services, env = _data_services()
    command = services["n8n-postgres"].command
    assert command[0] == "postgres"
    settings = dict(command[i + 1].split("=", 1) for i in range(1, len(command), 2) if command[i] == "-c")
    # max_connections from every process's pool (pools.py); the memory settings fit Postgres' container limit
    # (ram.py: shared_buffers, work_mem x connections, maintenance_work_mem and the cache estimate)
    assert settings["max_connections"] == "120"
    assert set(settings) == {
        "max_connections",
        "shared_buffers",
        "work_mem",
        "maintenance_work_mem",
        "effective_cache_size",
    }
    assert all(settings[k].endswith("MB") for k in settings if k != "max_connections")
    data = pg_dir / "pg"
    init_postgres(data, "n8n", env["POSTGRES_PASSWORD"])
    user = "postgres" if os.geteuid() == 0 else None
    shown = {}
    for name in settings:
        # `-C` loads the configuration with the same `-c` flags, validates it, prints one value, and exits.
        proc = subprocess.run(
            [str(postgres_bin_dir() / "postgres"), "-D", str(data), *command[1:], "-C", name],
            capture_output=True,
            text=True,
            timeout=60,
            user=user,
            cwd=data,
        )
        assert proc.returncode == 0, proc.stderr
        shown[name] = proc.stdout.strip()
    # `-C` prints each in its base unit: shared_buffers and effective_cache_size in 8 kB pages, the work_mems in kB.
    mb = {k: int(v.removesuffix("MB")) for k, v in settings.items() if k != "max_connections"}
    assert shown == {
        "max_connections": "120",
        "shared_buffers": str(mb["shared_buffers"] * 1024 // 8),
        "work_mem": str(mb["work_mem"] * 1024),
        "maintenance_work_mem": str(mb["maintenance_work_mem"] * 1024),
        "effective_cache_size": str(mb["effective_cache_size"] * 1024 // 8),
    }


def test_real_redis_runs_the_data_hosts_command_line(tmp_path: Path) -> None:
    services, env = _data_services()
    command = services["n8n-redis"].command
    port = free_port()
    argv = [*command, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp_path), "--save", ""]
    proc = spawn("redis", argv, {"PATH": "/usr/bin:/bin"}, tmp_path / "redis.log", port)
    try:
        wait_redis(proc, env["REDIS_PASSWORD"], timeout_s=30)

        def cli(*args: str, auth: bool = True) -> list[str]:
            extra = ["--no-auth-warning", "-a", env["REDIS_PASSWORD"]] if auth else []
            return subprocess.run(
                ["redis-cli", "-p", str(port), *extra, *args], capture_output=True, text=True, timeout=10, check=True
            ).stdout.split()

        assert cli("CONFIG", "GET", "appendonly") == ["appendonly", "yes"]
        assert cli("CONFIG", "GET", "maxmemory-policy") == ["maxmemory-policy", "noeviction"]
        assert "NOAUTH" in " ".join(cli("PING", auth=False))
        # n8n's ACL user, as rendered: its own keys, nothing else (docs/cluster.md#least-privilege)
        n8n_pw = env["REDIS_N8N_PASSWORD"]
        assert redis_command(port, n8n_pw, "SET", "bull:jobs:probe", "1", user="n8n") == "OK"
        for forbidden in (("GET", "elsewhere"), ("FLUSHALL",), ("CONFIG", "GET", "requirepass")):
            with pytest.raises(RedisError, match="NOPERM"):
                redis_command(port, n8n_pw, *forbidden, user="n8n")
        with pytest.raises(RedisError):  # and the default user's password is not n8n's
            redis_command(port, n8n_pw, "PING")
    finally:
        stop_process(proc, timeout_s=10)
