"""An n8n process of a lab host (main, a webhook processor or a worker) against the data host's Postgres and Redis.

Runs ON the host (over SSH, in its namespace) with exactly the environment `render --topology` writes for that
role (`bundle.n8n_env.role_env` of the topology in `--topology`, pools, limits and timeouts included), addresses
aside, and the shared n8n install (never installed here):

    python -m n8n_sizer.remote.lab_n8n up --role worker --name worker-1 --state DIR --data 10.89.0.10 \
        --listen 10.89.0.12 --main 10.89.0.11 --secrets FILE --topology FILE

Every host has its own port space, so main listens on 5678, as in the rendered bundles, and a worker's
health check on 5720+N. Behind the ingest host's load balancer, main and the webhook processors listen on the
host's loopback only (`--listen 127.0.0.1`, webhook processor N on 5680+N) and Caddy on its private address,
as only Caddy publishes a port in the rendered ingest bundle; main then runs with production webhooks off (as
rendered). `--secrets` is a 0600 JSON file with the cluster's one
encryption key and the data host's two passwords. Prints the process as JSON (no secrets) once it is ready.
"""

from __future__ import annotations

import re
from pathlib import Path

from n8n_sizer.errors import InputError
from n8n_sizer.lab.data import POSTGRES_PORT, REDIS_PORT
from n8n_sizer.safety.frozen import Frozen

MAIN_PORT = 5678  # n8n's own default, as in the rendered bundles
BROKER_PORT = 5679  # each process runs its own task broker, on its host's loopback
WEBHOOK_BASE_PORT = 5680  # webhook processor N listens on 5680+N (N <= 9), its unused broker port 5690+N
WORKER_BROKER_BASE_PORT = 5700  # worker N of a host: broker 5700+N, health check 5720+N (N <= 19)
WORKER_HEALTH_BASE_PORT = 5720
READY_TIMEOUT_S = 300.0  # a cold n8n start on a busy 2-core machine, migrations included


class N8nProcess(Frozen):
    name: str
    role: str
    pid: int
    ready_url: str
    log: str


def role_ports(role: str, index: int):
    from n8n_sizer.bundle.n8n_env import N8nPorts

    if role == "webhook":  # `n8n webhook` starts no task broker; its broker port is only kept apart
        return N8nPorts(http=WEBHOOK_BASE_PORT + index, broker=WEBHOOK_BASE_PORT + 10 + index)
    if role == "worker":  # N8N_PORT is main's, for WEBHOOK_URL; a worker serves only its health check
        return N8nPorts(http=MAIN_PORT, broker=WORKER_BROKER_BASE_PORT + index, health=WORKER_HEALTH_BASE_PORT + index)
    return N8nPorts(http=MAIN_PORT, broker=BROKER_PORT)


BCRYPT_RE = re.compile(r"\$2[aby]\$\d{2}\$[./A-Za-z0-9]{53}")  # what n8n's owner loader accepts


def owner_env(owner_file: Path) -> dict[str, str]:
    """N8N_INSTANCE_OWNER_* from the lab's 0600 owner file: n8n creates the owner while it starts, before it
    serves a request, so no local user can claim `/rest/owner/setup` on the lab's address first."""
    from n8n_sizer.safety.files import read_user_text
    from n8n_sizer.safety.jsondoc import load_json

    fix = "run `n8n-sizer lab deploy` again"
    doc = load_json(read_user_text(owner_file, "--owner", private=True, max_bytes=1 << 12, fix=fix), "--owner", fix)
    if (
        not isinstance(doc, dict)
        or not isinstance(doc.get("email"), str)
        or not BCRYPT_RE.fullmatch(str(doc.get("password_hash", "")))
    ):
        raise InputError(f"--owner {owner_file} is not an owner file (email, bcrypt password_hash); {fix}")
    from n8n_sizer.bundle.n8n_env import instance_owner_env

    return instance_owner_env(doc["email"], doc["password_hash"])


def lab_env(
    topology, role: str, *, ports, folder: Path, secrets, data: str, listen: str, main: str, path: str
) -> dict[str, str]:
    """The environment `render --topology` gives this role (`bundle.n8n_env.role_env` of the topology, bench
    profile), wired to the lab's addresses: the data host's Postgres and Redis, runners internal."""
    from n8n_sizer.bundle.n8n_env import process_env, shape_of_topology
    from n8n_sizer.bundle.native_env import native_wiring

    wiring = native_wiring(
        secrets,
        http_port=MAIN_PORT,
        broker_port=ports.broker,
        postgres_port=POSTGRES_PORT,
        redis_port=REDIS_PORT,
        host=data,
        public_url=f"http://{main}:{MAIN_PORT}/",
    )
    return process_env(
        shape_of_topology(topology, "bench"),
        role,
        wiring,
        ports=ports,
        user_folder=folder,
        path=path,
        home=str(folder),
        listen=listen,
    )


def start_n8n_role(
    role: str,
    name: str,
    state: Path,
    data: str,
    listen: str,
    main: str,
    secrets_file: Path,
    topology_file: Path,
    index: int = 1,
    owner_file: Path | None = None,
) -> N8nProcess:
    from n8n_sizer.bundle.native_env import NativeSecrets
    from n8n_sizer.bundle.topology import load_topology_text
    from n8n_sizer.native import services
    from n8n_sizer.native.install import find_installed

    install = find_installed()
    if install is None:
        raise InputError("n8n is not installed on this host; run `bash scripts/test.sh` once (it installs n8n)")
    from n8n_sizer.safety.files import read_user_text

    secrets = NativeSecrets.model_validate_json(
        read_user_text(
            secrets_file, "--secrets", private=True, max_bytes=1 << 16, fix="pass the 0600 file `lab deploy` wrote"
        )
    )
    topology = load_topology_text(
        read_user_text(topology_file, "--topology", max_bytes=1 << 20, fix="pass the topology.json `lab deploy` wrote"),
        f"--topology {topology_file}",
    )
    folder = state / name
    folder.mkdir(parents=True, exist_ok=False)
    ports = role_ports(role, index)
    env = lab_env(
        topology,
        role,
        ports=ports,
        folder=folder,
        secrets=secrets,
        data=data,
        listen=listen,
        main=main,
        path=install.env_path(),
    )
    if owner_file is not None:
        env |= owner_env(owner_file)
    argv = [str(install.node_bin), str(install.n8n_bin)]
    argv += {"main": ["start"], "webhook": ["webhook"], "worker": ["worker", f"--concurrency={topology.concurrency}"]}[
        role
    ]
    log = state / f"{name}.log"
    port = ports.health if role == "worker" else ports.http
    proc = services.spawn(name, argv, env, log, port, cwd=folder, health_port=ports.health, broker_port=BROKER_PORT)
    url = f"http://{listen}:{port}/healthz/readiness"
    services.wait_until(proc, lambda: services.http_ok(url), READY_TIMEOUT_S, f"ready at {url}")
    return N8nProcess(name=name, role=role, pid=proc.pid, ready_url=url, log=str(log))


def deploy_n8n_role(
    host,
    python: str,
    *,
    role: str,
    name: str,
    state: str,
    data: str,
    listen: str,
    main: str,
    secrets_file: str,
    topology_file: str,
    index: int = 1,
    owner_file: str | None = None,
) -> N8nProcess:
    """Start `role` on `host` (a `hosts.host.Host`) and wait until it is ready."""
    from n8n_sizer.remote.protocol import Program, run

    args = [
        "up",
        "--role",
        role,
        "--name",
        name,
        "--state",
        state,
        "--data",
        data,
        "--listen",
        listen,
        "--main",
        main,
        "--secrets",
        secrets_file,
        "--topology",
        topology_file,
        "--index",
        str(index),
    ]
    args += ["--owner", owner_file] if owner_file else []
    return run(host, Program.LAB_N8N, args, N8nProcess, python=python, timeout_s=READY_TIMEOUT_S + 60)
