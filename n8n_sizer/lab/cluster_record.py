"""What `lab deploy` recorded about a running cluster (`<lab folder>/cluster.json`, a `LabCluster`): its processes
by host and role with their PIDs, the one `Setup` it is reported as, and the Redis password file the operator's
redis-cli reads. `cluster_handle.LabClusterHandle` acts on these processes; bench and the drills read them here."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

N8N_ROLES = ("main", "webhook", "worker")


@dataclass(frozen=True)
class ClusterProcess:
    host: str
    role: str  # main, webhook, worker, load_balancer, redis, postgres
    name: str  # unique in the cluster: main, webhook-1, worker-1-worker-1, caddy, redis, postgres
    pid: int
    ready_url: str | None = None  # HTTP readiness as the host itself reaches it
    log: str | None = None


def recorded_pids(cluster) -> dict[str, dict[str, int]]:
    """{host: {process name: PID}} of everything the deploy started (n8n, Caddy, Postgres, Redis)."""
    out: dict[str, dict[str, int]] = {}
    for host, procs in cluster.processes.items():
        out[host] = {p.name: p.pid for p in procs}
    ingest = next((h for h, procs in cluster.processes.items() if any(p.role == "main" for p in procs)), None)
    if cluster.load_balancer_pid is not None and ingest is not None:
        out[ingest]["caddy"] = cluster.load_balancer_pid
    if cluster.data is not None:
        out.setdefault(cluster.data_host, {}).update(postgres=cluster.data.postgres_pid, redis=cluster.data.redis_pid)
    return out


def redis_password_file(cluster) -> str:
    """The Redis password alone in a 0600 file next to the cluster's secrets, for redis-cli to read at run time
    (never on a command line). Every namespace shares this machine's filesystem, so the data host reads it."""
    from n8n_sizer.safety.files import read_user_text
    from n8n_sizer.safety.write import write_atomic

    path = Path(cluster.secrets_file).with_name("redis-probe.secret")
    if not path.exists():
        text = read_user_text(
            cluster.secrets_file,
            "the lab's cluster secrets",
            private=True,
            max_bytes=1 << 16,
            fix="run `n8n-sizer lab deploy` again",
        )
        write_atomic(path, json.loads(text)["redis_password"], private=True)
    return str(path)
