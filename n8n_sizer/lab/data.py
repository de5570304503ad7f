"""The data role on a lab host: Debian's PostgreSQL and Redis listening on the host's private address.

Runs ON the data host (over SSH, in its namespace), with the native stack's own building blocks:

    python -m n8n_sizer.remote.lab_data up --state DIR --listen 10.89.0.10 --subnet 10.89.0.0/24

Postgres takes scram-authenticated TCP from the subnet only (one pg_hba line added to initdb's), Redis demands
its password, AOF everysec and noeviction as in the rendered data host. Both use their standard ports: each
namespace has its own port space, as each server of a cluster does. `DIR/secrets.json` (0600) holds the two
passwords; stdout gets the endpoints as JSON, never a secret. The processes are detached; `lab down` stops
them with every other process of the namespace.

`deploy_data_host(host, ...)` is the caller's side: it runs that command over any `Host` and parses it.
"""

from __future__ import annotations

import ipaddress
import json
import secrets
from pathlib import Path

from n8n_sizer.bundle.n8n_env import POSTGRES_DATABASE, POSTGRES_USER
from n8n_sizer.errors import InputError, RemoteError
from n8n_sizer.safety.frozen import Frozen

POSTGRES_PORT = 5432
REDIS_PORT = 6379
START_TIMEOUT_S = 60.0


class DataEndpoints(Frozen):
    """Where the data host's services answer (no secrets: those stay in `secrets_file` on the host)."""

    address: str
    postgres_port: int
    postgres_pid: int
    redis_port: int
    redis_pid: int
    database: str
    user: str
    secrets_file: str


def pg_hba_line(subnet: str) -> str:
    """Password (scram) logins over TCP from the cluster's subnet and from nowhere else."""
    net = ipaddress.ip_network(subnet)
    return f"host all all {net} scram-sha-256\n"


def data_port_rules(subnet: str, clients: list[str]) -> list[list[str]]:
    """iptables INPUT rules of the data host's namespace, in order: Postgres and Redis answer the hosts that run
    n8n (`clients`) and reset every other address of the subnet (the load generators share it), as the rendered
    data host does (`bundle.cloudinit.data_port_rules`)."""
    rules = [
        ["-p", "tcp", "--dport", str(port), "-s", f"{ip}/32", "-j", "ACCEPT"]
        for port in (POSTGRES_PORT, REDIS_PORT)
        for ip in clients
    ]
    return rules + [
        [
            "-p",
            "tcp",
            "--dport",
            str(port),
            "-s",
            str(ipaddress.ip_network(subnet)),
            "-j",
            "REJECT",
            "--reject-with",
            "tcp-reset",
        ]
        for port in (POSTGRES_PORT, REDIS_PORT)
    ]


def close_data_ports(subnet: str, clients: list[str]) -> None:
    import subprocess

    for rule in data_port_rules(subnet, clients):
        try:
            subprocess.run(
                ["iptables", "-w", "5", "-A", "INPUT", *rule], check=True, capture_output=True, text=True, timeout=30
            )
        except (OSError, subprocess.SubprocessError) as exc:
            detail = getattr(exc, "stderr", None) or exc
            raise RemoteError(f"iptables could not close the data ports to the rest of the subnet: {detail}") from None


def start_data_services(
    state: Path, listen: str, subnet: str, max_connections: int, clients: list[str] | None = None
) -> DataEndpoints:
    from n8n_sizer.native import services
    from n8n_sizer.safety.write import write_atomic

    if ipaddress.ip_address(listen) not in ipaddress.ip_network(subnet):
        raise InputError(f"--listen {listen} is not in --subnet {subnet}; pass the data host's private address")
    state.mkdir(parents=True, mode=0o755)  # Debian's postgres user must reach its data folder inside
    if clients:
        close_data_ports(subnet, clients)
    pg_password, redis_password = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    redis_n8n_password = secrets.token_urlsafe(24)  # n8n's ACL user; redis_password is the default user's
    write_atomic(
        state / "secrets.json",
        json.dumps(
            {
                "postgres_password": pg_password,
                "redis_password": redis_password,
                "redis_n8n_password": redis_n8n_password,
            }
        )
        + "\n",
        private=True,
    )
    pg_data = state / "postgres"
    services.init_postgres(pg_data, POSTGRES_USER, pg_password)
    with open(pg_data / "pg_hba.conf", "a") as hba:
        hba.write(pg_hba_line(subnet))
    where = ("127.0.0.1", listen)
    pg = services.start_postgres(pg_data, POSTGRES_PORT, max_connections, state / "postgres.log", listen=where)
    services.wait_postgres(pg, pg_data, START_TIMEOUT_S)
    services.create_database(pg_data, POSTGRES_PORT, POSTGRES_USER, POSTGRES_DATABASE)
    redis_dir = state / "redis"
    redis_dir.mkdir(mode=0o700)
    services.write_redis_config(
        redis_dir / "redis.conf",
        redis_dir,
        REDIS_PORT,
        redis_password,
        "aof",
        listen=where,
        n8n_password=redis_n8n_password,
    )
    redis = services.start_redis(redis_dir / "redis.conf", REDIS_PORT, state / "redis.log")
    services.wait_redis(redis, redis_password, START_TIMEOUT_S)
    return DataEndpoints(
        address=listen,
        postgres_port=POSTGRES_PORT,
        postgres_pid=pg.pid,
        redis_port=REDIS_PORT,
        redis_pid=redis.pid,
        database=POSTGRES_DATABASE,
        user=POSTGRES_USER,
        secrets_file=str(state / "secrets.json"),
    )


def deploy_data_host(
    host,
    python: str,
    state: str,
    listen: str,
    subnet: str,
    max_connections: int = 100,
    clients: list[str] | None = None,
) -> DataEndpoints:
    """Start the data role on `host` (a `hosts.host.Host`) with the host's `python`; its endpoints. With
    `clients`, only those addresses of the subnet reach Postgres and Redis."""
    from n8n_sizer.remote.protocol import Program, run

    args = ["up", "--state", state, "--listen", listen, "--subnet", subnet, "--max-connections", str(max_connections)]
    args += ["--clients", ",".join(clients)] if clients else []
    return run(host, Program.LAB_DATA, args, DataEndpoints, python=python, timeout_s=START_TIMEOUT_S * 3)
