"""`lab deploy`: the lab's topology deployed role by role over SSH, as it would be to a fleet's servers.

Order matters and follows what each role waits for: the data host first (Postgres, Redis), then main (it runs
the database migrations), then the webhook processors, the load balancer and the workers. One secret set for
the whole cluster: the data host's two passwords plus one encryption key, in a 0600 file in the lab's folder
(every namespace shares this machine's filesystem, so each host reads it there; a fleet would copy it).
Nothing is deployed twice: a host whose state folder exists is refused. What was started is recorded in
`<lab folder>/hosts/cluster.json` (no secrets) once every role is up, so `bench --inventory` finds and reuses it.
"""

from __future__ import annotations

import json
import secrets
import shutil
import sys
import tempfile
from pathlib import Path

from n8n_sizer.bundle.render_topology import data_clients, ingest_caddyfile
from n8n_sizer.bundle.topology import parse_topology
from n8n_sizer.errors import InputError
from n8n_sizer.fleet.inventory import load_inventory
from n8n_sizer.hosts.host import SshHost
from n8n_sizer.lab.data import DataEndpoints, deploy_data_host
from n8n_sizer.lab.ingest import deploy_caddy, lab_caddyfile
from n8n_sizer.lab.n8n_role import MAIN_PORT, N8nProcess, deploy_n8n_role
from n8n_sizer.lab.state import LabState, read_lab_state
from n8n_sizer.safety.files import read_user_text
from n8n_sizer.safety.frozen import Frozen
from n8n_sizer.safety.jsondoc import load_json
from n8n_sizer.safety.write import write_atomic

DEPLOY_FIX = "run `n8n-sizer lab deploy --inventory lab.json` again"


class LabCluster(Frozen):
    """What `lab deploy` started, where the load goes, and every process per host (no secrets)."""

    url: str  # the load balancer, or main when there is none: what the generators load
    data_host: str
    processes: dict[str, list[N8nProcess]]
    load_balancer_pid: int | None = None
    secrets_file: str
    data: DataEndpoints | None = None  # Postgres' and Redis' PIDs and ports on the data host (telemetry)


CLUSTER_RECORD = "cluster.json"  # in the lab's `hosts/` folder, written once the whole topology is up
OWNER_LOGIN = "n8n-owner.json"  # beside it, 0600
OWNER_CREDENTIALS = "n8n-owner-credentials.json"  # 0600: the owner main creates from its environment
OWNER_EMAIL = "lab-owner@n8n-sizer.invalid"


def deployed_cluster(path: Path) -> LabCluster | None:
    """What `lab deploy` (or a bench) started on the lab of `path`, or None when nothing is deployed yet.
    A `hosts/` folder without the record is a deploy that did not finish: refused, it cannot be trusted."""
    state = read_lab_state(path)
    if state.folder is None:
        return None
    root = Path(state.folder) / "hosts"
    record = cluster_record(Path(state.folder))
    if record.is_file():
        return LabCluster.model_validate_json(read_user_text(record, "the lab's cluster record", fix=DEPLOY_FIX))
    if root.exists():
        raise InputError(
            f"the lab of {path} has a deploy that did not finish ({root} holds no {CLUSTER_RECORD}); "
            "`lab down` and `lab up` for a fresh one"
        )
    return None


def deploy_lab(path: Path, python: str = sys.executable) -> LabCluster:
    state = read_lab_state(path)
    if state.topology is None or state.folder is None or state.client_key is None:
        raise InputError(
            f"--inventory {path} records no topology; it was written by an older `lab up`: lab down and up again"
        )
    topology = parse_topology(state.topology, f"--inventory {path}: lab.topology")
    inventory = load_inventory(read_user_text(path, "--inventory", fix="pass the lab.json of `lab up`"))
    root = Path(state.folder) / "hosts"
    if root.exists():
        raise InputError(
            f"the lab of {path} is already deployed ({root} exists); `lab down` and `lab up` for a fresh one"
        )
    hosts = {
        h.name: SshHost(h.name, h.private_ip, h.ssh_user, key_file=Path(state.client_key))
        for h in inventory.hosts.values()
    }
    try:
        cluster = _deploy(state, topology, hosts, root, python)
        # What the bench and the drills act on later (every process and its PID, no secrets).
        write_cluster(Path(state.folder), cluster)
        return cluster
    finally:
        for host in hosts.values():
            host.close()


def cluster_record(folder: Path) -> Path:
    return folder / "hosts" / CLUSTER_RECORD


def lab_owner(hosts_dir: Path) -> tuple[str, str] | None:
    """(email, password) of the owner `lab deploy` gave main through N8N_INSTANCE_OWNER_* (in the lab's
    `hosts/` folder); None for a lab deployed before it did."""
    path = hosts_dir / OWNER_CREDENTIALS
    if not path.exists():
        return None
    doc = load_json(
        read_user_text(path, "the lab's owner credentials", private=True, max_bytes=1 << 12, fix=DEPLOY_FIX),
        "the lab's owner credentials",
        DEPLOY_FIX,
    )
    return str(doc["email"]), str(doc["password"])


def _owner_files(root: Path) -> Path:
    """The owner main creates at start: its password (0600, for bench and drills to log in) and, for main,
    only its bcrypt hash (0600). Nobody sets the owner up over the network, so nobody can claim it first."""
    import bcrypt  # paramiko's dependency: the lab needs the bench extra anyway

    password = f"Nz9-{secrets.token_urlsafe(18)}"  # n8n's rule: 8+ characters, a number and an uppercase letter
    write_atomic(
        root / OWNER_CREDENTIALS, json.dumps({"email": OWNER_EMAIL, "password": password}) + "\n", private=True
    )
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=10)).decode()
    env_file = root / "n8n-owner-env.json"
    write_atomic(env_file, json.dumps({"email": OWNER_EMAIL, "password_hash": hashed}) + "\n", private=True)
    return env_file


def owner_login(folder: Path) -> Path:
    """The n8n owner login of the lab's cluster (0600): saved by whichever of bench and drill set n8n up first."""
    return folder / "hosts" / OWNER_LOGIN


def write_cluster(folder: Path, cluster: LabCluster) -> None:
    write_atomic(cluster_record(folder), cluster.model_dump_json(indent=2) + "\n", private=True)


def read_cluster(state: LabState) -> LabCluster:
    """The LabCluster `lab deploy` recorded; one-line InputError when the lab is not deployed."""
    path = cluster_record(Path(state.folder or "."))
    if not path.is_file():
        raise InputError(
            f"the lab {state.lab_id} is not deployed ({path} is missing); run "
            "`n8n-sizer lab deploy --inventory lab.json` first"
        )
    return LabCluster.model_validate_json(read_user_text(path, "the lab's cluster record", fix=DEPLOY_FIX))


def _same_code_python(root: Path, python: str) -> str:
    """A `python` for the lab's hosts that imports this very n8n_sizer: the hosts share this machine's files,
    and a role started over SSH must run the code that deployed it (its flags, its owner handling), not
    whatever an editable install elsewhere points to. A 0700 script in the lab's root-owned folder."""
    import shlex

    import n8n_sizer

    package_parent = Path(n8n_sizer.__file__).resolve().parent.parent
    wrapper = root / "python"
    write_atomic(
        wrapper,
        f'#!/bin/sh\nPYTHONPATH={shlex.quote(str(package_parent))} exec {shlex.quote(python)} "$@"\n',
        private=True,
    )
    wrapper.chmod(0o700)
    return str(wrapper)


def _deploy(state: LabState, topology, hosts: dict[str, SshHost], root: Path, python: str) -> LabCluster:
    root.mkdir(mode=0o755)  # Debian's postgres user passes through to its data folder inside
    python = _same_code_python(root, python)
    topo_hosts = topology.hosts()
    data = next(h for h in topo_hosts if h.roles.postgres)
    ingest = next(h for h in topo_hosts if h.roles.main)
    ends = deploy_data_host(
        hosts[data.name],
        python,
        str(root / data.name),
        data.private_ip,
        state.subnet,
        max_connections=_max_connections(topology),
        clients=data_clients(topology),
    )
    # The data host's passwords land in a private folder of their own (0700, unpredictable name), read through
    # the one reader and removed at once: never at a predictable path with the umask's mode.
    fetched = Path(tempfile.mkdtemp(prefix=".data-secrets-", dir=root))
    try:
        data_secrets = fetched / "data-secrets.json"
        hosts[data.name].get(ends.secrets_file, data_secrets)
        passwords = load_json(
            read_user_text(
                data_secrets, "the data host's secrets", max_bytes=1 << 16, fix="run `n8n-sizer lab deploy` again"
            ),
            "the data host's secrets",
            "run `n8n-sizer lab deploy` again",
        )
    finally:
        shutil.rmtree(fetched, ignore_errors=True)
    cluster_secrets = root / "cluster-secrets.json"
    write_atomic(
        cluster_secrets, json.dumps({"encryption_key": secrets.token_hex(32), **passwords}) + "\n", private=True
    )
    topology_file = root / "topology.json"  # what every n8n process starts from, as `render --topology` does
    write_atomic(topology_file, json.dumps(state.topology) + "\n", private=False)
    common = {
        "data": data.private_ip,
        "main": ingest.private_ip,
        "secrets_file": str(cluster_secrets),
        "topology_file": str(topology_file),
    }
    behind_lb = bool(ingest.roles.load_balancer)
    main_listen = "127.0.0.1" if behind_lb else ingest.private_ip
    procs: dict[str, list[N8nProcess]] = {h.name: [] for h in topo_hosts}
    procs[ingest.name].append(
        deploy_n8n_role(
            hosts[ingest.name],
            python,
            role="main",
            name="main",
            state=str(root / ingest.name),
            listen=main_listen,
            owner_file=str(_owner_files(root)),
            **common,
        )
    )
    for i in range(1, ingest.roles.webhook + 1):
        procs[ingest.name].append(
            deploy_n8n_role(
                hosts[ingest.name],
                python,
                role="webhook",
                name=f"webhook-{i}",
                index=i,
                state=str(root / ingest.name),
                listen="127.0.0.1",
                **common,
            )
        )
    lb_pid = None
    if behind_lb:
        caddyfile = root / ingest.name / "Caddyfile"
        write_atomic(caddyfile, lab_caddyfile(ingest_caddyfile(topology), ingest.private_ip), private=True)
        lb_pid = deploy_caddy(
            hosts[ingest.name], python, state=str(root / ingest.name), config=str(caddyfile), listen=ingest.private_ip
        ).pid
    for host in topo_hosts:
        for w in range(1, host.roles.workers + 1):
            name = f"{host.name}-worker-{w}"  # unique in the cluster, says where it runs
            # Each worker of a host gets its own health port: they share the host's port space.
            procs[host.name].append(
                deploy_n8n_role(
                    hosts[host.name],
                    python,
                    role="worker",
                    name=name,
                    index=w,
                    state=str(root / host.name),
                    listen=host.private_ip,
                    **common,
                )
            )
    return LabCluster(
        url=f"http://{ingest.private_ip}:{MAIN_PORT}",
        data_host=data.name,
        processes={k: v for k, v in procs.items() if v},
        load_balancer_pid=lb_pid,
        secrets_file=str(cluster_secrets),
        data=ends,
    )


def _max_connections(topology) -> int:
    from n8n_sizer.bundle.topology import max_connections

    return max_connections(topology)
