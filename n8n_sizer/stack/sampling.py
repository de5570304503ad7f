"""What the telemetry sampler follows on a native stack (`LocalStack`): its processes, Redis, Postgres, /metrics."""

from __future__ import annotations

import os
from pathlib import Path

from n8n_sizer.bundle.n8n_env import POSTGRES_DATABASE, POSTGRES_USER
from n8n_sizer.telemetry.probes.host import host_probes
from n8n_sizer.telemetry.probes.services import n8n_metrics_probe, postgres_probe, redis_probes


def local_stack_telemetry(stack, *, n8n_metrics: bool = False) -> dict:
    """Sampler arguments for `LocalStack`: host probes, Redis and Bull (queue mode), Postgres
    connections (over its private socket, trust auth), and which PIDs to follow.

    Returns {"probes": [...], "processes": {...}, "trees": {...}} for `Sampler(host, sink, **that)`.
    `n8n_metrics` adds main's /metrics queue gauges (LocalStack starts main with N8N_METRICS=true and,
    in queue mode, N8N_METRICS_INCLUDE_QUEUE_METRICS=true).
    """
    probes = host_probes()
    processes = {name: p.pid for name, p in stack.processes.items() if name not in ("postgres", "redis")}
    trees = {name: p.pid for name, p in stack.processes.items() if name in ("postgres", "redis")}
    if stack.uses_redis and stack.redis_port:
        # redis-cli reads the password from this 0600 file at run time: it never sits in a command line
        secret = Path(stack.stack_dir) / "redis-probe.secret"
        if not secret.exists():
            fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(stack.secrets.redis_password)
        probes += redis_probes(stack.redis_port, password_file=str(secret))
    if stack.uses_postgres and stack.postgres_port:
        probes.append(
            postgres_probe(
                stack.postgres_port, host=str(stack.postgres_socket_dir), user=POSTGRES_USER, database=POSTGRES_DATABASE
            )
        )
    if n8n_metrics:
        # main's own port: a load balancer in front (webhook processors) closes /metrics
        probes.append(n8n_metrics_probe(stack.direct_main_url))
    return {"probes": probes, "processes": processes, "trees": trees}
