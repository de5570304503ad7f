"""Postgres pools per process, the connections they open, and the `max_connections` to set (PGTune style).

Seed 000 ("Postgres connections for n8n workers") measured main at pool + 1 connections and each worker at
pool: 3 / 5 / 7 / 11 for regular / 1 / 2 / 4 workers with n8n's default pool of 2, and 44 with pool 10 on 4
workers. Its 4-worker run at 50 req/s failed 714 requests with "database not ready" at pool 2, and pool 10
removed the errors in one run: a worker that runs `--concurrency` executions at once needs a connection for
each of them when they finish together (every execution writes its result), plus one for the worker's
own job bookkeeping. So the pool follows each process's concurrency instead of staying at 2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from n8n_sizer.advisor.setup import CONNECTION_HEADROOM, DEFAULT_DB_POOL_SIZE, POSTGRES_DEFAULT_MAX_CONNECTIONS  # noqa: F401

# Without a connection pooler (PgBouncer, out of scope here) Postgres runs one backend process per
# connection, so the data host's RAM bounds them: half of it for backends (the rest for shared_buffers,
# the page cache and Redis). Above 500 a warning suggests a pooler.
POSTGRES_BACKEND_RAM_SHARE = 0.5
MANY_CONNECTIONS = 500
# `--vcpu V` off the catalog has no RAM figure: assume Hetzner CX's 2 GiB per vCPU (catalog.py).
RAM_MIB_PER_VCPU_ASSUMED = 2048
# A prior: an idle backend's private memory (its catalog caches, a few MB) plus one work_mem (4 MB default)
# for the sort an execution listing may need. Seed 002 measured the whole idle Postgres at 58-65 MiB.
RAM_PER_CONNECTION_MIB = 10.0
MAX_CONNECTIONS_STEP = 20  # round max_connections up to a tidy figure that leaves room for a later worker
# Each in-flight request at a webhook processor or main holds a connection briefly (execution row in, status
# out); a prior of 10 ms per request, sized with the same burst factor as the other settings.
INGEST_DB_HOLD_S = 0.010
BURST_FACTOR = 1.5


# notes/real-n8n.md's worker profile: Postgres writes and the ORM take ~40% of a worker's time per execution,
# so of the executions a worker has on CPU, about that share hold a connection at any moment.
DB_SHARE_OF_WORKER_TIME = 0.4


def worker_pool_size(concurrency: int, in_flight: float) -> int:
    """DB_POSTGRESDB_POOL_SIZE for a worker: a connection for each execution in a database call at once, plus
    one for its own bookkeeping (see module doc). "At once" is Little's in-flight count (executions on CPU)
    x DB_SHARE_OF_WORKER_TIME x the burst factor, at least 2 (so a worker at `--concurrency` 10 gets at least
    3, seed 000's pool of 2 being too few under load), at most its `--concurrency`: more are never used."""
    return min(concurrency, max(2, math.ceil(BURST_FACTOR * DB_SHARE_OF_WORKER_TIME * in_flight))) + 1


def ingest_pool_size(rate_per_process_per_s: float) -> int:
    """DB_POSTGRESDB_POOL_SIZE for main or a webhook processor: Little's law on the connections its requests
    hold (rate x hold time x burst), never below n8n's default of 2."""
    return max(DEFAULT_DB_POOL_SIZE, math.ceil(BURST_FACTOR * rate_per_process_per_s * INGEST_DB_HOLD_S))


MAIN_EXTRA_CONNECTIONS = 1  # seed 000: main held its pool and one more (3/5/7/11 at pool 2 with 0/1/2/4 workers)


def process_connections(pool: int, role: str) -> int:
    """The connections one n8n process holds (seed 000): main its pool and one more, any other process its pool."""
    return pool + MAIN_EXTRA_CONNECTIONS if role == "main" else pool


def connections(main_pool: int, webhook_pool: int, webhooks: int, worker_pool: int, workers: int) -> int:
    """(main pool + 1) + webhook processors x pool + workers x pool (seed 000's formula, per process)."""
    return (
        process_connections(main_pool, "main")
        + webhooks * process_connections(webhook_pool, "webhook")
        + workers * process_connections(worker_pool, "worker")
    )


def pool_terms(processes: list[tuple[str, int]]) -> tuple[int, str]:
    """(connections, seed 000's formula written out) for n8n processes given as (role, pool): `(main pool P + 1)`
    per main, `N <role> x pool P` per role and pool, in the order given. The one place the formula's text is
    built: render, check and the answer all say it this way."""
    groups: dict[tuple[str, int], int] = {}
    for role, pool in processes:
        groups[(role, pool)] = groups.get((role, pool), 0) + 1
    terms: list[str] = []
    for (role, pool), n in groups.items():
        if role == "main":
            terms += [f"(main pool {pool} + {MAIN_EXTRA_CONNECTIONS})"] * n
        else:
            terms.append(f"{n} {role} x pool {pool}")
    return sum(n * process_connections(pool, role) for (role, pool), n in groups.items()), " + ".join(terms)


def pool_arithmetic(processes: list[tuple[str, int]]) -> str:
    """`pool_terms` with the headroom and the max_connections they need, e.g. `(main pool 2 + 1) + 2 worker x
    pool 2 + 10 headroom = 17`."""
    need, terms = pool_terms(processes)
    return f"{terms} + {CONNECTION_HEADROOM} headroom = {required_max_connections(need)}"


def setup_processes(setup) -> list[tuple[str, int]]:
    """One host's `Setup` as (role, pool) per n8n process on Postgres: main and its workers; none on SQLite."""
    if setup.db != "postgres":
        return []
    return [("main", setup.db_pool_size)] + [("worker", setup.db_pool_size)] * setup.workers


def setup_connections(setup) -> int:
    """One host's `Setup`: (main pool + 1) + workers x pool; SQLite opens none."""
    return pool_terms(setup_processes(setup))[0]


def setup_required_max_connections(setup) -> int:
    """One host's `Setup`: the smallest max_connections its pools need."""
    return required_max_connections(setup_connections(setup))


def setup_recommended_max_connections(setup) -> int:
    """One host's `Setup`: the max_connections to set (Postgres' 100 unless the pools need more, rounded up)."""
    return recommended_max_connections(setup_connections(setup))


def required_max_connections(conns: int) -> int:
    """The smallest `max_connections` that covers `conns` plus CONNECTION_HEADROOM for operators."""
    return conns + CONNECTION_HEADROOM


def recommended_max_connections(conns: int) -> int:
    """What the pools and CONNECTION_HEADROOM need, rounded up to MAX_CONNECTIONS_STEP: not Postgres' default of 100.
    Every connection Postgres allows is memory its container limit must hold (work_mem and a backend's own, ram.py);
    100 where a regular-mode stack needs 13 would hold ~560 MiB for connections nothing opens."""
    need = required_max_connections(conns)
    return MAX_CONNECTIONS_STEP * math.ceil(need / MAX_CONNECTIONS_STEP)


def connection_budget(data_host_ram_mib: int) -> int:
    """The largest max_connections the data host's RAM carries (POSTGRES_BACKEND_RAM_SHARE of it), rounded down to
    the step `recommended_max_connections` rounds up to, so that what it recommends never passes it."""
    most = int(POSTGRES_BACKEND_RAM_SHARE * data_host_ram_mib / RAM_PER_CONNECTION_MIB)
    return MAX_CONNECTIONS_STEP * (most // MAX_CONNECTIONS_STEP)


def connection_ram_mib(max_connections: int) -> float:
    """RAM Postgres may need for that many backends (RAM_PER_CONNECTION_MIB each, a prior)."""
    return max_connections * RAM_PER_CONNECTION_MIB


# PGTune's rules: shared_buffers a quarter of RAM; work_mem = (RAM - shared_buffers) / (3 x max_connections),
# and never below Postgres' own default of 4 MiB (below it sorts spill to disk).
SHARED_BUFFERS_FRACTION = 0.25
MIN_WORK_MEM_MIB = 4


# Postgres' own defaults (postgresql.conf, Postgres 15-17): what a Postgres started without these settings uses.
DEFAULT_SHARED_BUFFERS_MIB = 128
DEFAULT_WORK_MEM_MIB = 4
DEFAULT_MAINTENANCE_WORK_MEM_MIB = 64
WAL_BUFFERS_MAX_MIB = 16  # wal_buffers=-1 (default): 1/32 of shared_buffers, at most 16 MiB


@dataclass(frozen=True)
class PostgresMemory:
    max_connections: int
    shared_buffers_mib: int
    work_mem_mib: int
    effective_cache_size_mib: int
    maintenance_work_mem_mib: int = DEFAULT_MAINTENANCE_WORK_MEM_MIB

    @property
    def wal_buffers_mib(self) -> float:
        """wal_buffers at its default (-1): 1/32 of shared_buffers, at most 16 MiB (Postgres' docs)."""
        return min(WAL_BUFFERS_MAX_MIB, self.shared_buffers_mib / 32)


def default_postgres_memory(max_connections: int) -> PostgresMemory:
    """One host's Postgres: Postgres' own defaults (shared_buffers 128 MiB, work_mem 4 MiB, maintenance_work_mem
    64 MiB) with the pools' max_connections. It shares the host with n8n, so PGTune's quarter of the host's RAM is
    not Postgres' to take; the rendered command states these values so its memory limit can be checked against them."""
    return PostgresMemory(
        max_connections=max_connections,
        shared_buffers_mib=DEFAULT_SHARED_BUFFERS_MIB,
        work_mem_mib=DEFAULT_WORK_MEM_MIB,
        effective_cache_size_mib=4 * 1024,  # Postgres' default (4 GB); a planner hint, not memory it takes
    )


class TooManyConnections(ValueError):
    """`max_connections` more than the host's RAM carries: the message names the most it does."""


def postgres_memory(max_connections: int, ram_mib: int, budget_mib: int | None = None) -> PostgresMemory:
    """Memory settings for `max_connections` on a host of `ram_mib` (PGTune's rules over `budget_mib`, the memory
    Postgres has there: the host's RAM less the OS's share and the other containers' limits, ram.py; default all of
    it), refused (TooManyConnections) above `connection_budget(ram_mib)`, the one rule of how many connections a
    host's RAM carries (the search keeps its answers under it too); each connection gets at least MIN_WORK_MEM_MIB
    of work_mem."""
    most = connection_budget(ram_mib)
    if max_connections > most:
        raise TooManyConnections(
            f"{max_connections} connections need more RAM than {ram_mib} MiB carries (at most "
            f"{most}: {POSTGRES_BACKEND_RAM_SHARE:.0%} of it at {RAM_PER_CONNECTION_MIB:g} MiB each)"
        )
    mem = ram_mib if budget_mib is None else max(budget_mib, 0)
    shared = max(DEFAULT_SHARED_BUFFERS_MIB, int(mem * SHARED_BUFFERS_FRACTION))
    work_mem = max(MIN_WORK_MEM_MIB, (mem - shared) // (3 * max_connections))
    return PostgresMemory(
        max_connections=max_connections,
        shared_buffers_mib=shared,
        work_mem_mib=work_mem,
        effective_cache_size_mib=max(shared, int(mem * 0.75)),
    )
