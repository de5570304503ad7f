"""`check` rules about the n8n processes themselves: database, key, runners, concurrency, binary data,
pruning, shutdown (seed 000's checklist and failure drills)."""

from __future__ import annotations

import re

from n8n_sizer.advisor.settings import QUEUE_KEEP_LAST_ENV, QUEUE_KEEP_LAST_JOBS
from n8n_sizer.advisor.setup import DEFAULT_GRACEFUL_SHUTDOWN_S, DEFAULT_WORKER_CONCURRENCY, most_workers
from n8n_sizer.bundle.checks.rule import CheckContext, RuleResult, as_int, fail, na, names, ok
from n8n_sizer.bundle.composefile import ComposeFile, Service, image_base

DOCKER_DEFAULT_STOP_GRACE_S = 10.0  # Docker's default stop timeout before SIGKILL
MIN_WORKER_CONCURRENCY = 5  # seed 000: 5/5 fell to 426/min with 238 errors at 50 req/s; 10 held 519 with none


def rule_db_type(cf: ComposeFile, ctx: CheckContext) -> RuleResult:
    if not cf.n8n:
        return na("db-type", "no n8n service")
    bad = [
        f"{s.name}={s.env['DB_TYPE']!r}"
        for s in cf.n8n
        if s.env.get("DB_TYPE", "sqlite") not in ("sqlite", "postgresdb")
    ]
    if bad:
        return fail(
            "db-type",
            f"DB_TYPE {', '.join(bad)}: n8n ignores it and silently starts on SQLite",
            "set DB_TYPE: postgresdb (exactly) on every n8n service",
        )
    if cf.queue_mode:
        off = [s for s in cf.n8n if s.env.get("DB_TYPE") != "postgresdb"]
        if off:
            return fail(
                "db-type",
                f"queue mode, but DB_TYPE is not postgresdb on {names(off)}",
                "set DB_TYPE: postgresdb on main and every worker (queue mode needs a shared Postgres)",
            )
        return ok("db-type", "DB_TYPE is postgresdb on every n8n service")
    return ok("db-type", f"regular mode on {cf.n8n[0].env.get('DB_TYPE', 'sqlite')}")


def rule_encryption_key(cf: ComposeFile, ctx: CheckContext) -> RuleResult:
    if len(cf.n8n) < 2:
        return na("encryption-key", "one n8n process; n8n keeps its key in /home/node/.n8n/config (back it up)")
    keys = {s.name: s.env.get("N8N_ENCRYPTION_KEY") for s in cf.n8n}
    unset = [name for name, key in keys.items() if not key]
    if unset:
        return fail(
            "encryption-key",
            f"N8N_ENCRYPTION_KEY unset on {', '.join(unset)}: each makes its own key "
            "and a worker with another key refuses to start",
            "set one N8N_ENCRYPTION_KEY on every n8n service",
        )
    if len(set(keys.values())) > 1:
        return fail(
            "encryption-key",
            f"N8N_ENCRYPTION_KEY differs between {', '.join(keys)}",
            "use main's key (from /home/node/.n8n/config) on every n8n service; never change it",
        )
    return ok("encryption-key", f"one N8N_ENCRYPTION_KEY on {len(keys)} n8n services")


def _broker_host(runner: Service) -> str:
    uri = runner.env.get("N8N_RUNNERS_TASK_BROKER_URI", "http://127.0.0.1:5679")
    match = re.match(r"^\w+://([^/:]+)", uri)
    return match.group(1) if match else uri


def rule_runner_per_process(cf: ComposeFile, ctx: CheckContext) -> RuleResult:
    external = [s for s in cf.n8n if s.env.get("N8N_RUNNERS_MODE") == "external"]
    if not external:
        return na("runner-per-process", "task runners run inside each n8n process (internal mode, deprecated in 2.x)")
    runners = cf.by_role("runner")
    problems: list[str] = []
    for proc in external:
        mine = [r for r in runners if _broker_host(r) in proc.aliases]
        if len(mine) != 1:
            problems.append(f"{proc.name} has {len(mine)} runners pointed at it")
        for runner in mine:
            if runner.env.get("N8N_RUNNERS_AUTH_TOKEN") != proc.env.get("N8N_RUNNERS_AUTH_TOKEN"):
                problems.append(f"{runner.name}'s N8N_RUNNERS_AUTH_TOKEN differs from {proc.name}'s")
        if proc.env.get("N8N_RUNNERS_BROKER_LISTEN_ADDRESS", "127.0.0.1") in ("127.0.0.1", "localhost"):
            problems.append(f"{proc.name}'s broker listens on 127.0.0.1 only")
    hosts = {alias for proc in external for alias in proc.aliases}
    strays = [r.name for r in runners if _broker_host(r) not in hosts]
    if strays:
        problems.append(
            f"{', '.join(strays)} point at no n8n process ({', '.join(_broker_host(r) for r in runners if r.name in strays)})"
        )
    if problems:
        return fail(
            "runner-per-process",
            "; ".join(problems),
            "one runner service per n8n process with N8N_RUNNERS_TASK_BROKER_URI=http://<that service>:5679, "
            "the same N8N_RUNNERS_AUTH_TOKEN, and N8N_RUNNERS_BROKER_LISTEN_ADDRESS=0.0.0.0 on n8n",
        )
    return ok("runner-per-process", f"{len(external)} n8n processes, each with its own runner")


def rule_runner_healthcheck(cf: ComposeFile, ctx: CheckContext) -> RuleResult:
    runners = cf.by_role("runner")
    if not runners:
        return na("runner-healthcheck", "no runner service")
    bare = [r for r in runners if not r.has_healthcheck]
    if bare:
        return fail(
            "runner-healthcheck",
            f"no healthcheck on {names(bare)}: platforms mark them running:unknown "
            "and fail the stack (the queue-mode test, field note 2)",
            'add healthcheck: test: ["CMD-SHELL", "wget -qO- http://127.0.0.1:5680/healthz"]',
        )
    return ok("runner-healthcheck", f"healthcheck on {len(runners)} runners")


def rule_runner_version(cf: ComposeFile, ctx: CheckContext) -> RuleResult:
    runners = [r for r in cf.by_role("runner") if r.image]
    n8n_images = [s for s in cf.n8n if s.image]
    if not runners or not n8n_images:
        return na("runner-version", "no runner image or no n8n image")
    tags = {s.name: image_base(s.image)[1] for s in (*n8n_images, *runners)}
    if len(set(tags.values())) > 1:
        listed = ", ".join(f"{name} {tag or 'latest'}" for name, tag in tags.items())
        return fail(
            "runner-version",
            f"n8n and runner images differ: {listed}",
            "use one version for n8nio/n8n and n8nio/runners (they are released together)",
        )
    return ok("runner-version", f"n8n and {len(runners)} runners on {next(iter(tags.values()))}")


def _concurrency(worker: Service) -> int | None:
    """The worker's --concurrency; n8n's default when it sets none; None when the value is not a number."""
    tokens = worker.command
    for i, token in enumerate(tokens):
        if token.startswith("--concurrency="):
            return as_int(token.split("=", 1)[1])
        if token == "--concurrency" and i + 1 < len(tokens):
            return as_int(tokens[i + 1])
    return DEFAULT_WORKER_CONCURRENCY


def rule_worker_concurrency(cf: ComposeFile, ctx: CheckContext) -> RuleResult:
    workers = cf.by_role("worker")
    if not workers:
        return na("worker-concurrency", "no workers")
    unreadable = [w.name for w in workers if _concurrency(w) is None]
    if unreadable:
        return fail(
            "worker-concurrency",
            f"{', '.join(unreadable)}: --concurrency is not a whole number",
            f"give each worker a number, e.g. --concurrency={DEFAULT_WORKER_CONCURRENCY}",
        )
    low = [f"{w.name} --concurrency={_concurrency(w)}" for w in workers if _concurrency(w) < MIN_WORKER_CONCURRENCY]
    if low:
        return fail(
            "worker-concurrency",
            f"{', '.join(low)}: at 5, two workers fell to 426/min with 238 errors (the queue-mode test)",
            f"use --concurrency={DEFAULT_WORKER_CONCURRENCY} (n8n's default; it held 519/min with no errors)",
        )
    values = sorted({_concurrency(w) for w in workers})
    note = "" if min(values) >= DEFAULT_WORKER_CONCURRENCY else f" ({DEFAULT_WORKER_CONCURRENCY} recommended)"
    return ok("worker-concurrency", f"--concurrency {', '.join(map(str, values))}{note}")


def rule_workers_vs_cores(cf: ComposeFile, ctx: CheckContext) -> RuleResult:
    workers = cf.by_role("worker")
    if not workers:
        return na("workers-vs-cores", "no workers")
    if ctx.vcpu is None:
        return na("workers-vs-cores", f"{len(workers)} workers; pass --vcpu to compare with the cores")
    # Beside main, Postgres and Redis a worker gets about two vCPU's worth (the queue-mode test: 4 workers on 4 vCPU
    # answered no more than 2); on a host of its own, about one core per worker (one event loop each, plus its
    # runner's share), which is what `advise` sizes dedicated worker hosts with.
    shared = any(cf.by_role(role) for role in ("main", "postgres", "redis"))
    most = most_workers(ctx.vcpu, shared)
    where = "beside main, Postgres and Redis" if shared else "on a worker host of their own"
    if len(workers) > most:
        return fail(
            "workers-vs-cores",
            f"{len(workers)} workers on {ctx.vcpu} vCPU {where}: on 4 vCPU, 4 workers "
            "answered no more than 2 and added 1,013 errors (the queue-mode test)",
            f"run at most {most} workers on {ctx.vcpu} vCPU, or add cores, not workers",
        )
    return ok("workers-vs-cores", f"{len(workers)} workers on {ctx.vcpu} vCPU {where} (at most {most})")


def rule_binary_data(cf: ComposeFile, ctx: CheckContext) -> RuleResult:
    procs = cf.n8n
    if len(procs) < 2:
        return na("binary-data", "one n8n process: its own disk is enough")
    on_disk = [s for s in procs if s.env.get("N8N_DEFAULT_BINARY_DATA_MODE") == "filesystem"]
    if not on_disk:
        return ok("binary-data", "binary data in the database (unset or database mode)")

    def mount(service: Service) -> str | None:
        path = service.env.get("N8N_BINARY_DATA_STORAGE_PATH", "/home/node/.n8n/binaryData")
        sources = [src for src, target in service.volumes if src and path.startswith(target.rstrip("/"))]
        return sources[0] if sources else None

    sources = {s.name: mount(s) for s in procs}
    if None in sources.values() or len(set(sources.values())) > 1:
        return fail(
            "binary-data",
            "filesystem binary data without one volume shared by main and every worker: "
            "a worker could not read main's upload (HTTP 500, the queue-mode test drill 5)",
            "remove N8N_DEFAULT_BINARY_DATA_MODE (queue mode then stores binary data in Postgres), "
            "or mount one shared volume at the storage path on every n8n service",
        )
    return ok("binary-data", f"filesystem binary data on one shared volume ({next(iter(sources.values()))})")


def rule_queue_retention(cf: ComposeFile, ctx: CheckContext) -> RuleResult:
    """n8n's default 0 lets main miss a fast job's end: that webhook never answers (advisor/settings.py)."""
    if not cf.queue_mode:
        return na("queue-retention", "regular mode: no Bull queue")
    enqueuers = cf.by_role("main", "webhook")
    if not enqueuers:
        return na("queue-retention", "no main or webhook service")
    short = [
        f"{s.name} {name}={s.env.get(name, '0 (unset)')}"
        for s in enqueuers
        for name in QUEUE_KEEP_LAST_ENV
        if (as_int(s.env.get(name)) or 0) < 1
    ]
    if short:
        return fail(
            "queue-retention",
            f"{', '.join(short)}: Bull deletes a finished job at once, and a webhook "
            "whose job ends before main looks for it never answers (11 of 7,970 in n8n-sizer's benchmark)",
            f"set {' and '.join(QUEUE_KEEP_LAST_ENV)} to {QUEUE_KEEP_LAST_JOBS} on every n8n service",
        )
    return ok("queue-retention", f"Bull keeps finished jobs ({names(enqueuers)})")


def rule_pruning(cf: ComposeFile, ctx: CheckContext) -> RuleResult:
    mains = cf.by_role("main")
    if not mains:
        return na("pruning", "no n8n main service")
    off = [m for m in mains if m.env.get("EXECUTIONS_DATA_PRUNE", "true").lower() == "false"]
    if off:
        return fail(
            "pruning",
            f"EXECUTIONS_DATA_PRUNE=false on {names(off)}: execution data grows without end",
            "set EXECUTIONS_DATA_PRUNE=true with EXECUTIONS_DATA_MAX_AGE and EXECUTIONS_DATA_PRUNE_MAX_COUNT",
        )
    unset = [
        m for m in mains if "EXECUTIONS_DATA_MAX_AGE" not in m.env and "EXECUTIONS_DATA_PRUNE_MAX_COUNT" not in m.env
    ]
    if unset:
        return fail(
            "pruning",
            f"no pruning limits on {names(unset)}: defaults are 336 h or 10,000 executions, "
            "only 18 minutes of history at 550/min (the queue-mode test)",
            "set EXECUTIONS_DATA_MAX_AGE (hours) and EXECUTIONS_DATA_PRUNE_MAX_COUNT for your volume",
        )
    return ok("pruning", "pruning on, with explicit limits")


def rule_shutdown_timeout(cf: ComposeFile, ctx: CheckContext) -> RuleResult:
    runs = cf.by_role("worker") if cf.queue_mode else cf.by_role("main")
    if not runs:
        return na("shutdown-timeout", "no n8n process that runs executions")
    problems: list[str] = []
    shortest = None
    for s in runs:
        n8n_s = as_int(s.env.get("N8N_GRACEFUL_SHUTDOWN_TIMEOUT")) or DEFAULT_GRACEFUL_SHUTDOWN_S
        docker_s = s.stop_grace_s if s.stop_grace_s is not None else DOCKER_DEFAULT_STOP_GRACE_S
        shortest = n8n_s if shortest is None else min(shortest, n8n_s)
        if docker_s <= n8n_s:
            problems.append(f"{s.name}: stop_grace_period {docker_s:g} s <= N8N_GRACEFUL_SHUTDOWN_TIMEOUT {n8n_s} s")
        if ctx.longest_execution_s is not None and n8n_s <= ctx.longest_execution_s:
            problems.append(
                f"{s.name}: N8N_GRACEFUL_SHUTDOWN_TIMEOUT {n8n_s} s <= longest execution {ctx.longest_execution_s} s"
            )
    if problems:
        return fail(
            "shutdown-timeout",
            "; ".join(problems) + " (the queue-mode test drill 6: runs past the timeout were cut off)",
            "raise N8N_GRACEFUL_SHUTDOWN_TIMEOUT above your longest execution and stop_grace_period above that",
        )
    tail = "" if ctx.longest_execution_s is not None else "; pass --longest-execution-s to compare with your workflows"
    return ok("shutdown-timeout", f"n8n waits {shortest} s, Docker longer{tail}")


def rule_production_limit(cf: ComposeFile, ctx: CheckContext) -> RuleResult:
    workers = cf.by_role("worker")
    if not cf.queue_mode or not workers:
        return na("production-limit", "not in queue mode")
    clash = [
        f"{w.name}: N8N_CONCURRENCY_PRODUCTION_LIMIT {w.env['N8N_CONCURRENCY_PRODUCTION_LIMIT']} vs "
        f"--concurrency {_concurrency(w)}"
        for w in workers
        if as_int(w.env.get("N8N_CONCURRENCY_PRODUCTION_LIMIT")) not in (None, -1, _concurrency(w))
    ]
    if clash:
        return fail(
            "production-limit",
            f"{'; '.join(clash)}: in queue mode the limit replaces --concurrency "
            "on every worker (it is per worker, not a total)",
            "remove N8N_CONCURRENCY_PRODUCTION_LIMIT from workers (a regular-mode leftover), or set it "
            "equal to --concurrency",
        )
    return ok("production-limit", "no N8N_CONCURRENCY_PRODUCTION_LIMIT overriding --concurrency")


def rule_main_memory_limit(cf: ComposeFile, ctx: CheckContext) -> RuleResult:
    """A main without a memory limit on a host it shares: under overload main grew from 0.8 to 2.2 GB
    (notes/real-n8n.md) and takes its neighbours (workers, Postgres) down with the host."""
    from n8n_sizer.advisor.setup import Setup
    from n8n_sizer.bundle.limits import memory_table

    mains = cf.by_role("main")
    if not mains:
        return na("main-memory-limit", "no n8n main service")
    others = [s for s in cf.services if s.role not in ("main", "runner")]
    if not others:
        return na("main-memory-limit", "main has the host to itself (and its runner)")
    unlimited = [m for m in mains if m.mem_limit_mib is None]
    if unlimited:
        want = memory_table(Setup(mode="queue" if cf.queue_mode else "regular", workers=int(cf.queue_mode)))["main"]
        return fail(
            "main-memory-limit",
            f"{names(unlimited)} has no memory limit on a host it shares with "
            f"{names(others)}: a main that grows under overload takes them with it",
            f"set mem_limit: {want.limit_mib}m (and mem_reservation: {want.reservation_mib}m) on main: "
            f"{want.why} (docs/deploy.md#memory-limits)",
        )
    return ok("main-memory-limit", f"main limited to {mains[0].mem_limit_mib:,.0f} MiB beside {names(others)}")
