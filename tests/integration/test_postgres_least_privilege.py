"""The rendered Postgres init script on Debian's real PostgreSQL: n8n gets a role of its own that owns the n8n
database and nothing else, and the superuser is refused over TCP (issue 28, least privilege).

The script is taken from a rendered compose file (its `configs: postgres-init` content, Compose's `$$` escapes
undone) and run as the postgres image's entrypoint runs it: with POSTGRES_USER, PG_ROLE_PASSWORD and PGDATA set,
psql on the server's socket, before the server takes TCP clients. Then logins are tried over TCP on 127.0.0.1.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.bundle.render import render_bundle
from n8n_sizer.bundle.secrets import generate_secrets
from n8n_sizer.native import services

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def _psql(port: int, user: str, password: str, db: str, sql: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            str(services.postgres_bin_dir() / "psql"),
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
            "-U",
            user,
            "-d",
            db,
            "-v",
            "ON_ERROR_STOP=1",
            "-tAc",
            sql,
        ],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PGPASSWORD": password, "PGCONNECT_TIMEOUT": "10"},
    )


@pytest.fixture
def pg_folder():
    """A folder Debian's `postgres` user can enter (pytest's tmp_path is root-only when run as root)."""
    folder = Path(tempfile.mkdtemp(prefix="n8n-sizer-least-privilege-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_n8n_owns_its_database_and_nothing_else_and_the_superuser_stays_inside(pg_folder: Path) -> None:
    compose = yaml.safe_load(render_bundle(Setup(mode="queue", workers=1), generate_secrets()).compose)
    postgres = compose["services"]["n8n-postgres"]
    assert postgres["environment"]["POSTGRES_USER"] == "postgres"
    n8n_user = compose["services"]["n8n-main"]["environment"]["DB_POSTGRESDB_USER"]
    script = compose["configs"]["postgres-init"]["content"].replace("$$", "$")
    password = secrets.token_hex(16)
    folder = pg_folder
    data = folder / "data"
    services.init_postgres(data, "postgres", password)
    port = services.free_port()
    proc = services.start_postgres(data, port, 50, folder / "postgres.log")
    try:
        services.wait_postgres(proc, data, 60)
        env = {
            **os.environ,
            "POSTGRES_USER": "postgres",
            "PG_ROLE_PASSWORD": password,
            "PGDATA": str(data),
            "PGHOST": str(data),
            "PGPORT": str(port),
            "PATH": f"{services.postgres_bin_dir()}:{os.environ['PATH']}",
        }
        run = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60, env=env)
        assert run.returncode == 0, run.stderr
        reload = subprocess.run(
            [
                str(services.postgres_bin_dir() / "psql"),
                "-h",
                str(data),
                "-p",
                str(port),
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-tAc",
                "SELECT pg_reload_conf()",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert reload.stdout.strip() == "t", reload.stderr
        # n8n: its own role, no superuser, owns its database and can create its tables there (migrations)
        who = _psql(
            port,
            n8n_user,
            password,
            "n8n",
            "SELECT current_user || ' ' || rolsuper || ' ' || rolcreaterole "
            "|| ' ' || rolcreatedb FROM pg_roles WHERE rolname = current_user",
        )
        assert who.returncode == 0 and who.stdout.strip() == f"{n8n_user} false false false", who.stderr
        owner = _psql(
            port,
            n8n_user,
            password,
            "n8n",
            "CREATE TABLE migrations_probe (x int); "
            "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'n8n'",
        )
        assert owner.returncode == 0 and owner.stdout.split() == ["CREATE", "TABLE", n8n_user], owner.stderr
        # nothing else: not the postgres database, no new roles
        other = _psql(port, n8n_user, password, "postgres", "SELECT 1")
        assert other.returncode != 0 and "permission denied" in other.stderr, other.stderr
        grant = _psql(port, n8n_user, password, "n8n", "CREATE ROLE intruder")
        assert grant.returncode != 0 and "permission denied" in grant.stderr, grant.stderr
        # the superuser is refused over TCP even with the right password: setup only, from inside the container
        root = _psql(port, "postgres", password, "postgres", "SELECT 1")
        assert root.returncode != 0 and "rejects connection" in root.stderr, root.stderr
    finally:
        services.stop_process(proc, 30)
