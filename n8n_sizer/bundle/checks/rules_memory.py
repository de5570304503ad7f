"""`check` rules about memory: what a host's containers may take against its RAM, and whether each container's limit
holds what its settings let it run (advisor/ram.py's measured figures, the same arithmetic `render` sizes with).

- `host-memory` (with `--ram`, or a topology host's size): every container's limit (its reservation where it has no
  limit) summed, against the host's RAM less the OS's share;
- `execution-memory`: main's production limit (regular mode), each worker's `--concurrency` and each runner's
  N8N_RUNNERS_MAX_CONCURRENCY, against the memory limit of the container that holds those executions;
- `redis-maxmemory`: queue mode's Redis has a maxmemory (else noeviction never acts and Redis grows until the kernel
  kills it, queue and all), under a container limit that leaves room for a fork's copy-on-write;
- `postgres-memory`: a Postgres memory limit holds what its settings allow.
"""

from __future__ import annotations

import re

from n8n_sizer.advisor import ram
from n8n_sizer.advisor.pools import (
    DEFAULT_MAINTENANCE_WORK_MEM_MIB,
    DEFAULT_SHARED_BUFFERS_MIB,
    DEFAULT_WORK_MEM_MIB,
    PostgresMemory,
)
from n8n_sizer.advisor.setup import DEFAULT_RUNNER_CONCURRENCY
from n8n_sizer.bundle.checks.rule import CheckContext, RuleResult, as_int, fail, na, ok
from n8n_sizer.bundle.checks.rules_n8n import _concurrency
from n8n_sizer.bundle.checks.service_settings import max_connections_of, redis_arg
from n8n_sizer.bundle.composefile import ComposeFile, Service

HELD_LABEL = "n8n-sizer.held-mb"


def _reserved(s: Service) -> float | None:
    return s.mem_limit_mib if s.mem_limit_mib is not None else s.mem_reservation_mib


def rule_host_memory(cf: ComposeFile, ctx: CheckContext) -> RuleResult:
    if ctx.ram_mib is None:
        return na("host-memory", "pass --ram MIB (the server's RAM) to hold the containers' limits to it")
    usable, os_share = ram.usable_mib(ctx.ram_mib), ram.os_share_mib(ctx.ram_mib)
    sized = [(s.name, _reserved(s)) for s in cf.services]
    total = sum(v for _, v in sized if v is not None)
    open_ended = [name for name, v in sized if v is None]
    biggest = ", ".join(f"{n} {v:,.0f}" for n, v in sorted(sized, key=lambda t: -(t[1] or 0))[:4] if v)
    unbounded = f"; {', '.join(open_ended)} set no limit at all, so even more" if open_ended else ""
    if total > usable:
        return fail(
            "host-memory",
            f"the containers' memory limits sum to {total:,.0f} MiB (largest: {biggest} MiB), above the {usable:,} "
            f"MiB a {ctx.ram_mib:,} MiB host leaves them (the OS keeps {os_share:,}){unbounded}",
            "lower N8N_CONCURRENCY_PRODUCTION_LIMIT or worker --concurrency (and the limits with them), run fewer "
            "workers, or use a server with more RAM (docs/deploy.md#memory-limits)",
        )
    return ok(
        "host-memory",
        f"limits sum to {total:,.0f} of the {usable:,} MiB a {ctx.ram_mib:,} MiB host leaves them"
        + (f" ({', '.join(open_ended)}: no limit, so not counted)" if open_ended else ""),
    )


def _held(s: Service) -> float:
    try:
        value = float(s.labels.get(HELD_LABEL, ""))
    except ValueError:
        value = 0.0
    return value if 0 < value <= 100_000 else ram.HELD_MIB_PER_EXECUTION


def _executions(s: Service, queue_mode: bool) -> int | None:
    """What a container may run at once: a worker's --concurrency (or the production limit replacing it), regular
    main's production limit; None without a limit (-1 or unset)."""
    limit = as_int(s.env.get("N8N_CONCURRENCY_PRODUCTION_LIMIT"))
    if s.role == "worker":
        return limit if limit not in (None, -1) else _concurrency(s)
    return None if limit in (None, -1) or queue_mode else limit


def rule_execution_memory(cf: ComposeFile, ctx: CheckContext) -> RuleResult:
    runners = [r for r in cf.by_role("runner") if r.mem_limit_mib is not None]
    runs = [s for s in (cf.by_role("worker") if cf.queue_mode else cf.by_role("main")) if s.mem_limit_mib is not None]
    if not runs and not runners:
        return na("execution-memory", "no container that runs executions has a memory limit")
    problems, fine = [], []
    for s in runs:
        n, held = _executions(s, cf.queue_mode), _held(s)
        base = ram.MAIN_BASE_MIB if s.role == "main" else ram.WORKER_BASE_MIB
        setting = "N8N_CONCURRENCY_PRODUCTION_LIMIT" if s.role == "main" else "--concurrency"
        most = max(0, int((s.mem_limit_mib - base) / held))
        if n is None:
            fine.append(
                f"{s.name} (no production limit) holds about {most} executions in its {s.mem_limit_mib:,.0f} MiB"
            )
        elif base + n * held > s.mem_limit_mib:
            problems.append(
                f"{s.name}: {setting} {n} needs {base:.0f} + {n} x {held:g} = {base + n * held:,.0f} MiB, above its "
                f"mem_limit {s.mem_limit_mib:,.0f} MiB (it holds {most})"
            )
        else:
            fine.append(f"{s.name} {n} x {held:g} MiB")
    for r in runners:
        tasks = as_int(r.env.get("N8N_RUNNERS_MAX_CONCURRENCY")) or DEFAULT_RUNNER_CONCURRENCY
        need = ram.RUNNER_BASE_MIB + tasks * ram.RUNNER_TASK_MIB
        if need > r.mem_limit_mib:
            problems.append(
                f"{r.name}: N8N_RUNNERS_MAX_CONCURRENCY {tasks} needs {need:,.0f} MiB, above its mem_limit "
                f"{r.mem_limit_mib:,.0f} MiB"
            )
    if problems:
        return fail(
            "execution-memory",
            "; ".join(problems) + f" ({ram.MEASURED}): past its limit the kernel kills the container and what it runs",
            "lower the setting to what the limit holds, or raise mem_limit to the figure (and check --ram)",
        )
    return ok("execution-memory", "limits hold what runs at once: " + "; ".join(fine or ["runners only"]))


def _mib(value: str | None) -> float | None:
    """`256mb`, `1gb`, `1048576` (bytes) as Redis reads a memory value, in MiB."""
    if value is None:
        return None
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(k|kb|m|mb|g|gb)?", value.strip().lower())
    if not m:
        return None
    scale = {"k": 1000, "kb": 1024, "m": 1e6, "mb": 1 << 20, "g": 1e9, "gb": 1 << 30, None: 1}[m.group(2)]
    return float(m.group(1)) * scale / (1 << 20)


def rule_redis_maxmemory(cf: ComposeFile, ctx: CheckContext) -> RuleResult:
    redis = cf.by_role("redis")
    if not cf.queue_mode and not (redis and not cf.n8n):  # a cluster's data host holds the queue without n8n
        return na("redis-maxmemory", "not in queue mode")
    if not redis:
        return na("redis-maxmemory", "Redis is not in this file; give it a maxmemory under its memory limit there")
    problems, fine = [], []
    for s in redis:
        raw = redis_arg(s, "--maxmemory")
        maxmemory = _mib(raw)
        if raw is None and any(t.endswith(".conf") for t in s.command):
            return na("redis-maxmemory", f"{s.name} reads a config file check cannot see; give it a maxmemory there")
        if not maxmemory:
            problems.append(
                f"{s.name} has no maxmemory: noeviction never acts and Redis grows until the kernel kills it, "
                "the waiting jobs with it"
            )
        elif (
            s.mem_limit_mib is not None and ram.REDIS_FORK_FACTOR * maxmemory + ram.REDIS_BUFFERS_MIB > s.mem_limit_mib
        ):
            problems.append(
                f"{s.name}: maxmemory {maxmemory:,.0f} MiB x {ram.REDIS_FORK_FACTOR:g} (a save's copy-on-write) + "
                f"{ram.REDIS_BUFFERS_MIB} MiB buffers is above its mem_limit {s.mem_limit_mib:,.0f} MiB"
            )
        else:
            fine.append(f"{s.name} maxmemory {maxmemory:,.0f} MiB")
    if problems:
        depth = ram.DEFAULT_QUEUE_DEPTH_JOBS
        want = ram.redis_memory(depth, 1000)
        return fail(
            "redis-maxmemory",
            "; ".join(problems),
            f"start Redis with --maxmemory {ram.redis_maxmemory_mib(depth, 1000)}mb (100,000 waiting jobs at "
            f"{ram.REDIS_WAITING_JOB_BYTES:,} B each) and give it mem_limit: {want.limit_mib}m",
        )
    return ok("redis-maxmemory", ", ".join(fine) + ": at it Redis refuses new jobs rather than being killed")


_PG_UNITS = {"kb": 1 / 1024, "mb": 1.0, "gb": 1024.0, "tb": 1024.0 * 1024}


def pg_setting_mib(s: Service, name: str, default_mib: float, bare_unit_kib: float) -> float | None:
    """A Postgres memory setting from the command (`-c name=value` or `--name=value`), in MiB; its default when
    absent; None when unreadable. A bare number is in the setting's own unit (`bare_unit_kib` KiB: 8 for shared_buffers'
    pages, 1 for work_mem)."""
    for i, token in enumerate(s.command):
        m = re.fullmatch(rf"(?:--)?{name}=(.*)", token)
        if m and (token.startswith("--") or (i > 0 and s.command[i - 1] == "-c")):
            v = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmgt]b)?", m.group(1).strip().lower())
            if not v:
                return None
            return float(v.group(1)) * (_PG_UNITS[v.group(2)] if v.group(2) else bare_unit_kib / 1024)
    return default_mib


def rule_postgres_memory(cf: ComposeFile, ctx: CheckContext) -> RuleResult:
    postgres = cf.by_role("postgres")
    if not postgres:
        return na("postgres-memory", "no Postgres in this file")
    problems, fine = [], []
    for s in postgres:
        settings = {
            "shared_buffers": pg_setting_mib(s, "shared_buffers", DEFAULT_SHARED_BUFFERS_MIB, 8),
            "work_mem": pg_setting_mib(s, "work_mem", DEFAULT_WORK_MEM_MIB, 1),
            "maintenance_work_mem": pg_setting_mib(s, "maintenance_work_mem", DEFAULT_MAINTENANCE_WORK_MEM_MIB, 1),
        }
        unreadable = [k for k, v in settings.items() if v is None]
        if unreadable:
            problems.append(f"{s.name}: {', '.join(unreadable)} unreadable")
            continue
        pg = PostgresMemory(
            max_connections=max_connections_of(s),
            shared_buffers_mib=int(settings["shared_buffers"]),
            work_mem_mib=int(settings["work_mem"]),
            effective_cache_size_mib=0,
            maintenance_work_mem_mib=int(settings["maintenance_work_mem"]),
        )
        need = ram.postgres_need_mib(pg)
        if s.mem_limit_mib is None:
            fine.append(f"{s.name} has no limit (its settings allow {need:,.0f} MiB)")
        elif need > s.mem_limit_mib:
            problems.append(
                f"{s.name}: its settings allow {need:,.0f} MiB ({ram.postgres_memory(pg).why}), above its mem_limit "
                f"{s.mem_limit_mib:,.0f} MiB: a busy moment gets a backend killed and Postgres restarts every one"
            )
        else:
            fine.append(f"{s.name} settings allow {need:,.0f} of its {s.mem_limit_mib:,.0f} MiB")
    if problems:
        return fail(
            "postgres-memory",
            "; ".join(problems),
            "raise mem_limit to the figure, or lower max_connections (to what the pools need), work_mem or "
            "shared_buffers",
        )
    return ok("postgres-memory", "; ".join(fine))
