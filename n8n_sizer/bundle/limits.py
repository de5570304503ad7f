"""Memory per container (compose `mem_reservation` / `mem_limit`, Redis' `--maxmemory`), from advisor/ram.py.

Every container's figures come from what it may hold at once (`ram.stack_memory`): an n8n process that runs
executions (main in regular mode, a worker) gets its measured base plus the executions it may run at once (the
production limit or `--concurrency`) times what one holds; main in queue mode and a webhook processor their base plus
the requests they hold open; a runner twice its measured size with its Code tasks; Postgres what its own settings
allow (shared_buffers, wal_buffers, max_connections x (work_mem + a backend), maintenance_work_mem per autovacuum
worker); Redis twice its `maxmemory` (a fork's copy-on-write) plus its buffers, `maxmemory` sized for the queue's
backlog. The reservation is what the container holds at rest. docs/deploy.md#memory-limits has the figures and
their sources; `check` holds a file to the same arithmetic (bundle/checks/rules_memory.py).
"""

from __future__ import annotations

from n8n_sizer.advisor import pools, ram
from n8n_sizer.advisor.answer.contract import ClusterHost, Topology
from n8n_sizer.advisor.settings import QUEUE_KEEP_LAST_JOBS
from n8n_sizer.advisor.setup import Setup
from n8n_sizer.safety.frozen import Frozen


class Memory(Frozen):
    """One container's memory, in MiB, and the arithmetic behind its limit (written above it in the file)."""

    reservation_mib: int
    limit_mib: int
    why: str


# V8's old space as a share of an n8n container's memory limit. Node sizes its heap from the container's limit when
# none is given: under a 704 MiB limit main's heap stopped at ~254 MB and n8n 2.41.1 died at start ("JavaScript heap
# out of memory", tests/docker), though the process needs ~460 MiB in all. n8n's docs name NODE_OPTIONS
# --max-old-space-size as the setting; three quarters leave the rest of the limit to buffers and native memory.
NODE_HEAP_SHARE = 0.75
_N8N_ROLES = {"n8n-main": "main", "n8n-worker": "worker", "n8n-webhook": "webhook"}


def with_node_heap(env: dict[str, dict[str, str]], memory: dict[str, Memory]) -> dict[str, dict[str, str]]:
    """Each n8n process's environment with NODE_OPTIONS --max-old-space-size at NODE_HEAP_SHARE of its container's
    limit (services named n8n-main, n8n-worker-N, n8n-webhook-N; runners and the rest unchanged)."""
    out = {}
    for name, values in env.items():
        role = next((r for prefix, r in _N8N_ROLES.items() if name == prefix or name.startswith(prefix + "-")), None)
        if role is not None and role in memory:
            heap = int(memory[role].limit_mib * NODE_HEAP_SHARE)
            values = {**values, "NODE_OPTIONS": f"--max-old-space-size={heap}"}
        out[name] = values
    return out


def _memory(m: ram.ContainerMemory) -> Memory:
    return Memory(reservation_mib=m.reservation_mib, limit_mib=m.limit_mib, why=m.why)


def memory_table(setup: Setup, pg: pools.PostgresMemory | None = None) -> dict[str, Memory]:
    """Every role's figures for one host's stack (main, runner, worker, postgres, redis)."""
    return {role: _memory(m) for role, m in ram.stack_memory(setup, pg).items()}


def redis_maxmemory_mib(queue_depth_jobs: int | None) -> int:
    depth = ram.DEFAULT_QUEUE_DEPTH_JOBS if queue_depth_jobs is None else queue_depth_jobs
    return ram.redis_maxmemory_mib(depth, QUEUE_KEEP_LAST_JOBS)


def cluster_memory(t: Topology, host: ClusterHost, pg: pools.PostgresMemory | None) -> dict[str, Memory]:
    """The figures of one host of a cluster, by role: workers and runners at the topology's concurrency, main and
    each webhook processor holding the 1,000 open requests seed 000 saw (the load balancer spreads a cluster's
    requests over them; the same figure the topology search sizes hosts with), Postgres from its settings, Redis from
    the queue depth."""
    held = t.held_mb if t.held_mb is not None else ram.HELD_MIB_PER_EXECUTION
    out = {
        "main": _memory(ram.ingest_memory("main", ram.QUEUE_MAIN_OPEN_REQUESTS)),
        "webhook": _memory(ram.ingest_memory("webhook", ram.QUEUE_MAIN_OPEN_REQUESTS)),
        "worker": _memory(ram.executor_memory("worker", t.concurrency, held)),
        "runner": _memory(ram.runner_memory(t.runner_concurrency)),
    }
    depth = t.queue_depth_jobs if t.queue_depth_jobs is not None else ram.DEFAULT_QUEUE_DEPTH_JOBS
    out["redis"] = _memory(ram.redis_memory(depth, QUEUE_KEEP_LAST_JOBS))
    if pg is not None:
        out["postgres"] = _memory(ram.postgres_memory(pg))
    return out


def host_limit_mib(t: Topology, host: ClusterHost, pg: pools.PostgresMemory | None, without: str = "") -> int:
    """The sum of the limits of every container on `host` (one runner per main and worker), leaving out `without`."""
    table = cluster_memory(t, host, pg)
    r = host.roles
    counts = {
        "main": r.main,
        "webhook": r.webhook,
        "worker": r.workers,
        "runner": r.main + r.workers,
        "postgres": r.postgres,
        "redis": r.redis,
    }
    return sum(table[role].limit_mib * n for role, n in counts.items() if n and role != without and role in table)


def postgres_budget_mib(t: Topology, host: ClusterHost) -> int:
    """What Postgres may take on its host: the host's usable RAM less every other container's limit there."""
    return ram.usable_mib(host.ram_mib) - host_limit_mib(t, host, None, without="postgres")


def parse_memory_mib(value: object) -> float | None:
    """Compose's memory value (`768m`, `1g`, `512M`, bytes as a number) in MiB; None when absent or unreadable."""
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) / (1 << 20)
    text = str(value).strip().lower().removesuffix("b")
    units = {"k": 1 / 1024, "m": 1.0, "g": 1024.0, "t": 1024.0 * 1024}
    try:
        if text and text[-1] in units:
            return float(text[:-1]) * units[text[-1]]
        return float(text) / (1 << 20)
    except ValueError:
        return None
