"""Memory: the whole stack's idle and peak lines (seed 000), and what each container is given (n8n 2.41.1, measured).

The lines: stack RAM from seed 000's idle and peak measurements (whole stack: n8n, runners, Postgres, Redis).

Queue mode: a straight line in the worker count, fitted by least squares to the 1/2/4-worker figures
(idle 703/919/1,377 MB; peak 1.2/1.8/2.8 GB). Regular mode: the idle figure (476 MB) and the peak with a
production limit (0.9 GB). Regular mode without a limit has no bound once the offered rate passes
capacity: main holds every waiting request (354 MB -> 6.9 GB in 3 minutes, seed 000), which the advisor
reports as a warning rather than a number.

The containers (`stack_memory`): every n8n process, runner, Postgres and Redis gets a memory limit from what it
holds, measured on n8n 2.41.1 here (benchmarks/memory_figures.py, docs/findings/memory-per-execution.md): a base
(its RSS, warm, with one execution in flight) plus what each execution it may run at once holds, so the production
limit, `--concurrency` and the runner limit are what the limit holds, not a note beside it. A host's limits sum to
at most its RAM less the OS's share (`usable_mib`); `slots_that_fit` is the most executions a setup may run at once
on a host, and 0 says the host cannot hold the stack at all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from n8n_sizer.advisor import pools
from n8n_sizer.advisor.measurements import Measurement
from n8n_sizer.advisor.settings import QUEUE_KEEP_LAST_JOBS
from n8n_sizer.advisor.setup import Setup
from n8n_sizer.safety.frozen import Frozen


@dataclass(frozen=True)
class RamModel:
    regular_idle_mb: float
    regular_peak_mb: float
    queue_idle_mb: tuple[float, float]  # intercept, per worker
    queue_peak_mb: tuple[float, float]
    evidence: tuple[str, ...]
    # RAM an execution holds while it is in flight, in the process that runs it: n8n 2.41.1's light workflow,
    # measured here (HELD_MIB_PER_EXECUTION). Seed 000's main (2.40.7, its code-heavy workflow) grew from 354 MB to
    # 6.9 GB with 1,000 requests in flight and no production limit, ~6.5 MB each (`seed_held_mb`).
    held_mb_per_execution: float = 0.0
    seed_held_mb: float | None = None

    def __post_init__(self) -> None:
        if not self.held_mb_per_execution:
            object.__setattr__(self, "held_mb_per_execution", HELD_MIB_PER_EXECUTION)

    def idle_mb(self, setup: Setup) -> float:
        if setup.mode == "regular":
            return self.regular_idle_mb
        a, b = self.queue_idle_mb
        return a + b * setup.workers

    def peak_mb(self, setup: Setup) -> float:
        if setup.mode == "regular":
            return self.regular_peak_mb
        a, b = self.queue_peak_mb
        return a + b * setup.workers


def _line(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Ordinary least squares y = a + b x (intercept, slope)."""
    n = len(points)
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    sxx = sum((p[0] - mx) ** 2 for p in points)
    slope = sum((p[0] - mx) * (p[1] - my) for p in points) / sxx
    return my - slope * mx, slope


def fit_ram(measurements: list[Measurement] | tuple[Measurement, ...]) -> RamModel:
    """Fit the RAM lines from measurements carrying idle_ram_mb / peak_ram_mb (seed 000's tables)."""
    idle_q: list[tuple[int, float]] = []
    peak_q: list[tuple[int, float]] = []
    regular_idle: list[float] = []
    regular_peak: list[float] = []
    used: list[str] = []
    for m in measurements:
        r, s = m.results, m.setup
        if r.idle_ram_mb is not None:
            used.append(m.id)
            (idle_q.append((s.workers, r.idle_ram_mb)) if s.mode == "queue" else regular_idle.append(r.idle_ram_mb))
        if r.peak_ram_mb is not None:
            if s.mode == "queue":
                used.append(m.id)
                peak_q.append((s.workers, r.peak_ram_mb))
            elif s.production_limit is not None:  # without a limit the peak measures the backlog, not the stack
                used.append(m.id)
                regular_peak.append(r.peak_ram_mb)
    held = [
        ((r.main_ram_mb[-1] - r.main_ram_mb[0]) / m.load.max_in_flight, m.id)
        for m in measurements
        for r in [m.results]
        if m.setup.mode == "regular"
        and m.setup.production_limit is None
        and r.main_ram_mb
        and len(r.main_ram_mb) >= 2
        and m.load.max_in_flight
    ]
    used += [i for _, i in held]
    if len({w for w, _ in idle_q}) < 2 or len({w for w, _ in peak_q}) < 2 or not regular_idle or not regular_peak:
        raise ValueError("RAM model needs idle and peak figures for regular mode and >= 2 worker counts in queue mode")
    return RamModel(
        regular_idle_mb=max(regular_idle),
        regular_peak_mb=max(regular_peak),
        queue_idle_mb=_line(idle_q),
        queue_peak_mb=_line(peak_q),
        evidence=tuple(used),
        seed_held_mb=max(v for v, _ in held) if held else None,
    )


# --- What each container holds: n8n 2.41.1 (Node.js 24.22.3), measured here ----------------------------------------
# benchmarks/memory_figures.py, 2026-12-03 on this 2-core VM (speed probe 297 ms before, 338 ms after; figures and
# method in docs/findings/memory-per-execution.md): a fresh local stack per load, warmed with 20 requests, RSS sampled
# every 0.5 s under closed-loop load with N requests open. For the workflow that waits (Webhook -> Wait 20 s ->
# respond) N open requests are N executions in flight, and RSS grew in a straight line with N: 11.9 MiB each in main
# (regular mode, N = 1, 50, 100, 150: 431 -> 2,194 MiB at the peak) and 11.9 MiB in a worker (307 -> 2,066). A limit
# is `base + N x HELD_MIB_PER_EXECUTION`, the base being the intercept that puts that line at or above every peak
# measured (main: the light workflow's too, whose growth is steeper below 25 in flight).
MEASURED = "n8n 2.41.1, benchmarks/memory_figures.py, 2026-12-03"
MAIN_BASE_MIB = 526.0  # regular-mode main (idle RSS 404-442 after warm-up)
QUEUE_MAIN_BASE_MIB = 462.0  # queue-mode main, which runs no executions (idle 422-462)
WORKER_BASE_MIB = 376.0  # a worker (idle 287-300)
RUNNER_BASE_MIB = 153.0  # a JS task runner: the most either run saw (idle 114-130)
# An execution in flight holds an isolated-vm isolate of the default expression engine (one per execution, from a pool
# of 1) for its whole life, asleep in a Wait node too: its memory is outside main's V8 heap, which grew by only
# ~0.3 MiB per execution. With N8N_EXPRESSION_ENGINE=legacy the light workflow held ~1.1 MiB per execution.
HELD_MIB_PER_EXECUTION = 11.9
OPEN_REQUEST_MIB = 0.21  # queue-mode main per webhook it holds open for a job (lastNode; 100 -> 200 open: +32 MiB)
RUNNER_TASK_MIB = 0.57  # per Code task a runner accepts at once (code-heavy, 1 / 5 / 20 at once: 131 / 139 / 144)
# Seed 000: with about 1,000 jobs waiting (its load generator's cap on open requests) main stayed at 440-590 MB.
QUEUE_MAIN_OPEN_REQUESTS = 1000
# A runner's Code nodes hold the items they work on, which depends on the workflow's data: its limit is twice what
# it was measured to hold (the benchmark's Code nodes hold a number).
RUNNER_LIMIT_FACTOR = 2.0
# Regular mode without a production limit: nothing bounds what main runs at once, so its limit holds this many
# executions and check says what happens past it (seed 000's main held ~1,000 and took 6.9 GB).
UNLIMITED_MAIN_SLOTS = 100
STEP_MIB = 64  # limits and reservations are rounded up to this

# Postgres (Debian's 15, the same runs): the private memory (USS) of n8n's pool backends after load (median 3.0 MiB
# of 40), and of the postmaster and its auxiliary processes together (6-18 MiB: the higher).
PG_BACKEND_MIB = 3.0
PG_AUX_MIB = 18.2
AUTOVACUUM_MAX_WORKERS = 3  # Postgres' default; each may use maintenance_work_mem (autovacuum_work_mem = -1)

# Redis (Debian's 7, two runs): used_memory of an empty queue (2.5-2.8 MiB), per job waiting in Bull (1,000 webhooks
# answered with no worker running: 948 and 1,001 bytes each) and per finished job Bull keeps
# (N8N_EXECUTIONS_QUEUE_KEEP_LAST_*: 3,688 and 4,749 bytes); the higher of each.
REDIS_EMPTY_MIB = 2.8
REDIS_WAITING_JOB_BYTES = 1001
REDIS_KEPT_JOB_BYTES = 4749
# The backlog Redis must hold without refusing a write: a burst 100/s above capacity for ~17 minutes, or 1,000/s for
# 100 s (answer/burst.py computes a burst's own), at ~95 MiB. Past it Redis refuses writes (noeviction) and n8n's
# webhook answers an error rather than accepting a job it would lose (docs/findings/redis-at-maxmemory.md).
DEFAULT_QUEUE_DEPTH_JOBS = 100_000
# A background save or AOF rewrite forks Redis; under a write-heavy load copy-on-write can double its memory
# (redis.io, "Redis administration": up to 2 times the memory normally used), and the kernel charges the copy to the
# container. Plus Redis' own buffers (AOF, clients, replication backlog) outside `maxmemory`.
REDIS_FORK_FACTOR = 2.0
REDIS_BUFFERS_MIB = 32

# The OS's share of a host's RAM: the kernel's own reserve (seed 000's 8 GB server showed 7.7 GB usable: ~4%), the
# Docker engine (DOCKER_ENGINE_MIB: Debian's docker.io 20.10 at rest with no container, measured here 2026-12-03 with
# `benchmarks/memory_figures.py --phases engine`: dockerd 73 MiB + containerd 37 MiB) and the base system's daemons
# (systemd, journald, sshd, snapd, networkd on Ubuntu 24.04: BASE_SYSTEM_MIB, a prior, not measured here).
KERNEL_SHARE = 0.04
DOCKER_ENGINE_MIB = 110
BASE_SYSTEM_MIB = 192


class ContainerMemory(Frozen):
    """One container's memory in MiB and why: `reservation_mib` what it holds at rest (compose mem_reservation),
    `limit_mib` the most it may take (mem_limit), from what it may run at once."""

    role: str
    reservation_mib: int
    limit_mib: int
    why: str


def _up(mib: float) -> int:
    return int(math.ceil(mib / STEP_MIB - 1e-9) * STEP_MIB)


def held_mib(setup: Setup) -> float:
    """Memory one in-flight execution holds: the workload's own figure (profile held_mb) or the light one."""
    return setup.held_mb if setup.held_mb is not None else HELD_MIB_PER_EXECUTION


def _executor_limit(role: str, slots: int, held: float) -> int:
    return _up((MAIN_BASE_MIB if role == "main" else WORKER_BASE_MIB) + slots * held)


def _ingest_limit(open_requests: int) -> int:
    return _up(QUEUE_MAIN_BASE_MIB + open_requests * OPEN_REQUEST_MIB)


def executor_memory(role: str, slots: int, held: float) -> ContainerMemory:
    """main in regular mode or a worker: its base plus `slots` executions in flight at `held` MiB each."""
    base = MAIN_BASE_MIB if role == "main" else WORKER_BASE_MIB
    return ContainerMemory(
        role=role,
        reservation_mib=_up(base),
        limit_mib=_executor_limit(role, slots, held),
        why=f"{base:.0f} MiB base + {slots} executions in flight x {held:g} MiB ({MEASURED})",
    )


def ingest_memory(role: str, open_requests: int) -> ContainerMemory:
    """main in queue mode, or a webhook processor: it runs no execution and holds each open request."""
    return ContainerMemory(
        role=role,
        reservation_mib=_up(QUEUE_MAIN_BASE_MIB),
        limit_mib=_ingest_limit(open_requests),
        why=f"{QUEUE_MAIN_BASE_MIB:.0f} MiB base + {open_requests:,} open requests x {OPEN_REQUEST_MIB:g} MiB",
    )


def runner_memory(tasks: int) -> ContainerMemory:
    """A JS task runner accepting `tasks` Code tasks at once (N8N_RUNNERS_MAX_CONCURRENCY)."""
    need = RUNNER_BASE_MIB + tasks * RUNNER_TASK_MIB
    return ContainerMemory(
        role="runner",
        reservation_mib=_up(RUNNER_BASE_MIB),
        limit_mib=_up(RUNNER_LIMIT_FACTOR * need),
        why=f"{RUNNER_LIMIT_FACTOR:g} x ({RUNNER_BASE_MIB:.0f} MiB + {tasks} tasks x {RUNNER_TASK_MIB:g} MiB)",
    )


def postgres_need_mib(pg: pools.PostgresMemory) -> float:
    """What Postgres may take under its settings: shared_buffers + wal_buffers + max_connections x (work_mem + a
    backend's own memory) + (autovacuum workers + 1) x maintenance_work_mem + the postmaster and its helpers."""
    return (
        pg.shared_buffers_mib
        + pg.wal_buffers_mib
        + pg.max_connections * (pg.work_mem_mib + PG_BACKEND_MIB)
        + (AUTOVACUUM_MAX_WORKERS + 1) * pg.maintenance_work_mem_mib
        + PG_AUX_MIB
    )


def postgres_memory(pg: pools.PostgresMemory) -> ContainerMemory:
    return ContainerMemory(
        role="postgres",
        reservation_mib=_up(pg.shared_buffers_mib + PG_AUX_MIB + 10 * PG_BACKEND_MIB),
        limit_mib=_up(postgres_need_mib(pg)),
        why=(
            f"shared_buffers {pg.shared_buffers_mib} + wal_buffers {pg.wal_buffers_mib:g} + {pg.max_connections} "
            f"connections x (work_mem {pg.work_mem_mib} + {PG_BACKEND_MIB:g} per backend) + "
            f"{AUTOVACUUM_MAX_WORKERS + 1} x maintenance_work_mem {pg.maintenance_work_mem_mib} + {PG_AUX_MIB:g} MiB"
        ),
    )


def redis_maxmemory_mib(queue_depth_jobs: int, keep_last: int) -> int:
    """Redis' maxmemory: the empty queue, the finished jobs Bull keeps (completed and failed) and `queue_depth_jobs`
    waiting, rounded up."""
    need = REDIS_EMPTY_MIB * 1.0 + (
        2 * keep_last * REDIS_KEPT_JOB_BYTES + queue_depth_jobs * REDIS_WAITING_JOB_BYTES
    ) / (1 << 20)
    return _up(need)


def redis_memory(queue_depth_jobs: int, keep_last: int) -> ContainerMemory:
    maxmemory = redis_maxmemory_mib(queue_depth_jobs, keep_last)
    return ContainerMemory(
        role="redis",
        reservation_mib=_up(REDIS_EMPTY_MIB + 2 * keep_last * REDIS_KEPT_JOB_BYTES / (1 << 20)),
        limit_mib=_up(REDIS_FORK_FACTOR * maxmemory + REDIS_BUFFERS_MIB),
        why=(
            f"maxmemory {maxmemory} MiB ({queue_depth_jobs:,} waiting jobs x {REDIS_WAITING_JOB_BYTES:,} B + "
            f"{2 * keep_last:,} kept x {REDIS_KEPT_JOB_BYTES:,} B) x {REDIS_FORK_FACTOR:g} for a fork's copy-on-write "
            f"+ {REDIS_BUFFERS_MIB} MiB buffers"
        ),
    )


def os_share_mib(ram_mib: int) -> int:
    """The RAM a host keeps for itself: KERNEL_SHARE of it, the Docker engine and the base system's daemons."""
    return int(math.ceil(KERNEL_SHARE * ram_mib + DOCKER_ENGINE_MIB + BASE_SYSTEM_MIB))


def usable_mib(ram_mib: int) -> int:
    """What a host's containers may take in all: its RAM less the OS's share."""
    return ram_mib - os_share_mib(ram_mib)


def stack_memory(setup: Setup, pg: pools.PostgresMemory | None = None) -> dict[str, ContainerMemory]:
    """Every container of one host's stack, by role (main, runner, worker, postgres, redis): one runner per n8n
    process and `setup.workers` workers, each as given here. `pg`: Postgres' settings (default: its own defaults with
    the pools' max_connections, as the single-host stack renders them)."""
    held = held_mib(setup)
    out: dict[str, ContainerMemory] = {}
    if setup.mode == "regular":
        slots = setup.production_limit if setup.production_limit is not None else UNLIMITED_MAIN_SLOTS
        out["main"] = executor_memory("main", slots, held)
    else:
        out["main"] = ingest_memory("main", setup.workers * setup.concurrency + QUEUE_MAIN_OPEN_REQUESTS)
        out["worker"] = executor_memory("worker", setup.concurrency, held)
    out["runner"] = runner_memory(setup.runner_concurrency)
    if setup.db == "postgres":
        pg = pg or pools.default_postgres_memory(pools.setup_recommended_max_connections(setup))
        out["postgres"] = postgres_memory(pg)
    if setup.mode == "queue":
        depth = setup.queue_depth_jobs if setup.queue_depth_jobs is not None else DEFAULT_QUEUE_DEPTH_JOBS
        out["redis"] = redis_memory(depth, QUEUE_KEEP_LAST_JOBS)
    return out


def stack_limit_mib(setup: Setup, pg: pools.PostgresMemory | None = None) -> int:
    """The sum of every container's limit on the host (each runner and worker counted)."""
    counts = {"runner": setup.n8n_processes, "worker": setup.workers}
    return sum(m.limit_mib * counts.get(role, 1) for role, m in stack_memory(setup, pg).items())


def with_slots(setup: Setup, slots: int) -> Setup:
    """`setup` running `slots` executions at once per executing process: the production limit in regular mode,
    `--concurrency` in queue mode."""
    field = "production_limit" if setup.mode == "regular" else "concurrency"
    return setup.model_copy(update={field: slots})


def _slot_limits(setup: Setup, slots: int, held: float) -> int:
    """The limits that grow with the executions at once: regular main, or the workers and queue-mode main (which
    holds every worker's executions as open requests); the same figures stack_memory gives."""
    if setup.mode == "regular":
        return _executor_limit("main", slots, held)
    open_requests = setup.workers * slots + QUEUE_MAIN_OPEN_REQUESTS
    return setup.workers * _executor_limit("worker", slots, held) + _ingest_limit(open_requests)


def slots_that_fit(setup: Setup, ram_mib: int, pg: pools.PostgresMemory | None = None) -> int:
    """The most executions each executing process (main in regular mode, each worker in queue mode) may run at once
    with every container's limit on a host of `ram_mib` within `usable_mib`; 0 when not even one fits."""
    held = held_mib(setup)
    one = with_slots(setup, 1)
    room = usable_mib(ram_mib) - (stack_limit_mib(one, pg) - _slot_limits(one, 1, held))  # what the rest leaves

    def fits(slots: int) -> bool:
        return _slot_limits(setup, slots, held) <= room

    if not fits(1):
        return 0
    lo, hi = 1, 2 + int(room / held)  # fits(lo); not fits(hi): the limits grow with the slots
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


class MemoryPlan(Frozen):
    """One host's containers as an answer states them: each role's figures, their sum and the host's room."""

    containers: dict[str, ContainerMemory]
    limits_mib: int  # every container's limit, each runner and worker counted
    host_ram_mib: int | None
    os_share_mib: int | None


def memory_plan(setup: Setup, ram_mib: int | None) -> MemoryPlan:
    return MemoryPlan(
        containers=stack_memory(setup),
        limits_mib=stack_limit_mib(setup),
        host_ram_mib=ram_mib,
        os_share_mib=None if ram_mib is None else os_share_mib(ram_mib),
    )


def memory_cap_text(setup: Setup, ram_mib: int, where: str, asked: int | None, cap: int) -> str:
    """Why the executions at once stop at `cap` on this host, in one sentence (the answer's warning)."""
    setting = "N8N_CONCURRENCY_PRODUCTION_LIMIT" if setup.mode == "regular" else "worker --concurrency"
    proc = "main" if setup.mode == "regular" else "each worker"
    table = stack_memory(setup)
    mine = table["main" if setup.mode == "regular" else "worker"]
    others = {r: m.limit_mib * (setup.n8n_processes if r == "runner" else 1) for r, m in table.items()}
    others.pop("main" if setup.mode == "regular" else "worker")
    rest = ", ".join(f"{role} {mib:,}" for role, mib in others.items())
    why = f"Little's law asked {asked}" if asked is not None else "without one main's memory has no bound"
    return (
        f"memory caps {setting} at {cap} ({why}): {where}'s {ram_mib:,} MiB less {os_share_mib(ram_mib):,} for the OS "
        f"and {rest} MiB leave {proc} {mine.limit_mib:,} MiB, {mine.why.split(' (')[0]}"
    )


@lru_cache(maxsize=4096)  # the topology search asks the same few shapes thousands of times
def cluster_host_limits_mib(
    *,
    main: int = 0,
    webhook: int = 0,
    workers: int = 0,
    redis: int = 0,
    postgres_connections: int | None = None,
    concurrency: int,
    runner_concurrency: int,
    held: float | None,
) -> int:
    """The least a cluster host's containers need in all (the figures bundle/limits.cluster_memory renders): its n8n
    processes (main and each webhook processor holding QUEUE_MAIN_OPEN_REQUESTS) and runners, Redis at the default
    queue depth, and Postgres at its own defaults with `postgres_connections` (a Postgres given more of the host gets
    PGTune's share of what is left, never less)."""
    need = (main + webhook) * ingest_memory("main", QUEUE_MAIN_OPEN_REQUESTS).limit_mib
    need += workers * executor_memory("worker", concurrency, HELD_MIB_PER_EXECUTION if held is None else held).limit_mib
    need += (main + workers) * runner_memory(runner_concurrency).limit_mib
    need += redis * redis_memory(DEFAULT_QUEUE_DEPTH_JOBS, QUEUE_KEEP_LAST_JOBS).limit_mib
    if postgres_connections is not None:
        need += postgres_memory(pools.default_postgres_memory(postgres_connections)).limit_mib
    return need


def postgres_most_connections(budget_mib: float) -> int:
    """The most max_connections whose Postgres (its defaults, postgres_need_mib) fits in `budget_mib`, rounded down
    to the step pools.recommended_max_connections rounds up to; 0 when not even one step fits."""
    step = pools.MAX_CONNECTIONS_STEP
    base = postgres_need_mib(pools.default_postgres_memory(0))
    most = int((budget_mib - base) / (pools.DEFAULT_WORK_MEM_MIB + PG_BACKEND_MIB))
    return max(0, step * (most // step))
