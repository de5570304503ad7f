"""`check`: lint a Docker Compose file against seed 000's queue-mode checklist, one result per rule.

Each rule is a small function of the parsed file; it passes, fails with a fix, or does not apply.
"""

from __future__ import annotations

import re
from typing import Callable, Literal, Mapping

from pydantic import BaseModel, ConfigDict

from n8n_sizer.advisor.setup import CONNECTION_HEADROOM, DEFAULT_DB_POOL_SIZE, DEFAULT_GRACEFUL_SHUTDOWN_S, \
    DEFAULT_WORKER_CONCURRENCY, POSTGRES_DEFAULT_MAX_CONNECTIONS
from n8n_sizer.deploy.composefile import ComposeFile, Service, image_base, load_compose

Status = Literal["pass", "fail", "n/a"]
DOCKER_DEFAULT_STOP_GRACE_S = 10.0  # Docker's default stop timeout before SIGKILL
MIN_WORKER_CONCURRENCY = 5  # seed 000: 5/5 fell to 426/min with 238 errors at 50 req/s; 10 held 519 with none
VCPU_PER_WORKER = 2  # seed 000: 2 workers per 4 vCPU answered most; 4 added 1,013 errors
FIREWALL_LABEL = "n8n-sizer.firewalled"


class RuleResult(BaseModel):
    """One checklist rule's verdict; `fix` is set for a failure."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rule: str
    status: Status
    message: str
    fix: str | None = None


class _Ctx(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    vcpu: int | None
    longest_execution_s: int | None


def _ok(rule: str, message: str) -> RuleResult:
    return RuleResult(rule=rule, status="pass", message=message)


def _na(rule: str, message: str) -> RuleResult:
    return RuleResult(rule=rule, status="n/a", message=message)


def _fail(rule: str, message: str, fix: str) -> RuleResult:
    return RuleResult(rule=rule, status="fail", message=message, fix=fix)


def _names(services: list[Service]) -> str:
    return ", ".join(s.name for s in services)


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and re.fullmatch(r"-?\d+", text.strip()) else None


def rule_variables(cf: ComposeFile, ctx: _Ctx) -> RuleResult:
    if cf.unresolved:
        return _fail("variables", f"unresolved: {', '.join(cf.unresolved)} (no value, no default)",
                     "pass --env FILE with these variables (the .env Docker Compose reads), or set them")
    return _ok("variables", "every ${VAR} reference resolves")


def rule_db_type(cf: ComposeFile, ctx: _Ctx) -> RuleResult:
    if not cf.n8n:
        return _na("db-type", "no n8n service")
    bad = [f"{s.name}={s.env['DB_TYPE']!r}" for s in cf.n8n
           if s.env.get("DB_TYPE", "sqlite") not in ("sqlite", "postgresdb")]
    if bad:
        return _fail("db-type", f"DB_TYPE {', '.join(bad)}: n8n ignores it and silently starts on SQLite",
                     "set DB_TYPE: postgresdb (exactly) on every n8n service")
    if cf.queue_mode:
        off = [s for s in cf.n8n if s.env.get("DB_TYPE") != "postgresdb"]
        if off:
            return _fail("db-type", f"queue mode, but DB_TYPE is not postgresdb on {_names(off)}",
                         "set DB_TYPE: postgresdb on main and every worker (queue mode needs a shared Postgres)")
        return _ok("db-type", "DB_TYPE is postgresdb on every n8n service")
    return _ok("db-type", f"regular mode on {cf.n8n[0].env.get('DB_TYPE', 'sqlite')}")


def rule_encryption_key(cf: ComposeFile, ctx: _Ctx) -> RuleResult:
    if len(cf.n8n) < 2:
        return _na("encryption-key", "one n8n process; n8n keeps its key in /home/node/.n8n/config (back it up)")
    keys = {s.name: s.env.get("N8N_ENCRYPTION_KEY") for s in cf.n8n}
    unset = [name for name, key in keys.items() if not key]
    if unset:
        return _fail("encryption-key", f"N8N_ENCRYPTION_KEY unset on {', '.join(unset)}: each makes its own key "
                     "and a worker with another key refuses to start", "set one N8N_ENCRYPTION_KEY on every n8n service")
    if len(set(keys.values())) > 1:
        return _fail("encryption-key", f"N8N_ENCRYPTION_KEY differs between {', '.join(keys)}",
                     "use main's key (from /home/node/.n8n/config) on every n8n service; never change it")
    return _ok("encryption-key", f"one N8N_ENCRYPTION_KEY on {len(keys)} n8n services")


def _pinned(image: str) -> str | None:
    """Why `image` is not pinned, or None when it is."""
    if "${" in image:
        return "unresolved"
    repo, tag, digest = image_base(image)
    if digest:
        return None
    if tag is None:
        return "no tag (means latest)"
    match = re.match(r"^v?(\d+(?:\.\d+)*)", tag)
    # Postgres numbers releases MAJOR.MINOR since 10 (17.10 is a patch release); the others use three parts.
    needed = 2 if repo.rsplit("/", 1)[-1].startswith("postgres") else 3
    if not match or len(match.group(1).split(".")) < needed:
        return f"tag {tag!r} moves"
    return None


def rule_images_pinned(cf: ComposeFile, ctx: _Ctx) -> RuleResult:
    loose = [f"{s.name} ({s.image}: {why})" for s in cf.services if s.image and (why := _pinned(s.image))]
    if loose:
        return _fail("images-pinned", f"not pinned: {'; '.join(loose)}",
                     "pin exact versions, e.g. n8nio/n8n:2.41.1 with n8nio/runners of the same version")
    return _ok("images-pinned", f"{sum(1 for s in cf.services if s.image)} images pinned to exact versions")


def _healthy_dep(service: Service, target: Service) -> bool:
    return service.depends_on.get(target.name) == "service_healthy" and target.has_healthcheck


def rule_start_order(cf: ComposeFile, ctx: _Ctx) -> RuleResult:
    mains, workers = cf.by_role("main"), cf.by_role("worker", "webhook")
    if not mains:
        return _na("start-order", "no n8n main service")
    gaps: list[str] = []
    for main in mains:
        for dep in cf.by_role("postgres") if main.env.get("DB_TYPE") == "postgresdb" else []:
            if not _healthy_dep(main, dep):
                gaps.append(f"{main.name} -> {dep.name}")
        for dep in cf.by_role("redis") if cf.queue_mode else []:
            if not _healthy_dep(main, dep):
                gaps.append(f"{main.name} -> {dep.name}")
    for worker in workers:
        if not any(_healthy_dep(worker, main) for main in mains):
            gaps.append(f"{worker.name} -> {mains[0].name}")
    if gaps:
        return _fail("start-order", f"not waiting for a healthy service: {', '.join(gaps)}",
                     "add depends_on with condition: service_healthy (and a healthcheck on the target): "
                     "main after Postgres and Redis, workers after main, so one process migrates")
    if not workers and not (cf.by_role("postgres") or cf.by_role("redis")):
        return _na("start-order", "a single n8n service with nothing to wait for")
    return _ok("start-order", "Postgres/Redis healthy -> main healthy -> workers")


def _broker_host(runner: Service) -> str:
    uri = runner.env.get("N8N_RUNNERS_TASK_BROKER_URI", "http://127.0.0.1:5679")
    match = re.match(r"^\w+://([^/:]+)", uri)
    return match.group(1) if match else uri


def rule_runner_per_process(cf: ComposeFile, ctx: _Ctx) -> RuleResult:
    external = [s for s in cf.n8n if s.env.get("N8N_RUNNERS_MODE") == "external"]
    if not external:
        return _na("runner-per-process", "task runners run inside each n8n process (internal mode, deprecated in 2.x)")
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
        problems.append(f"{', '.join(strays)} point at no n8n process ({', '.join(_broker_host(r) for r in runners if r.name in strays)})")
    if problems:
        return _fail("runner-per-process", "; ".join(problems),
                     "one runner service per n8n process with N8N_RUNNERS_TASK_BROKER_URI=http://<that service>:5679, "
                     "the same N8N_RUNNERS_AUTH_TOKEN, and N8N_RUNNERS_BROKER_LISTEN_ADDRESS=0.0.0.0 on n8n")
    return _ok("runner-per-process", f"{len(external)} n8n processes, each with its own runner")


def rule_runner_healthcheck(cf: ComposeFile, ctx: _Ctx) -> RuleResult:
    runners = cf.by_role("runner")
    if not runners:
        return _na("runner-healthcheck", "no runner service")
    bare = [r for r in runners if not r.has_healthcheck]
    if bare:
        return _fail("runner-healthcheck", f"no healthcheck on {_names(bare)}: platforms mark them running:unknown "
                     "and fail the stack (seed 000, field note 2)",
                     'add healthcheck: test: ["CMD-SHELL", "wget -qO- http://127.0.0.1:5680/healthz"]')
    return _ok("runner-healthcheck", f"healthcheck on {len(runners)} runners")


def _redis_arg(service: Service, flag: str) -> str | None:
    tokens = service.command
    for i, token in enumerate(tokens):
        if token == flag and i + 1 < len(tokens):
            return tokens[i + 1]
        if token.startswith(flag + "="):
            return token.split("=", 1)[1]
    return None


def _redis_rule(rule: str, flag: str, wanted: str, default: str, why: str) -> Callable[[ComposeFile, _Ctx], RuleResult]:
    def check(cf: ComposeFile, ctx: _Ctx) -> RuleResult:
        if not cf.queue_mode:
            return _na(rule, "not in queue mode")
        redis = cf.by_role("redis")
        if not redis:
            return _na(rule, "Redis is not in this file; set it there")
        wrong = []
        for service in redis:
            value = _redis_arg(service, flag)
            if value is None and any(t.endswith(".conf") for t in service.command):
                return _na(rule, f"{service.name} reads a config file check cannot see; make sure it has {flag} {wanted}")
            if (value or default) != wanted:
                wrong.append(f"{service.name} {flag} {value or default}")
        if wrong:
            return _fail(rule, f"{', '.join(wrong)}: {why}", f"start Redis with {flag} {wanted}")
        return _ok(rule, f"{flag} {wanted} on {_names(redis)}")

    check.__name__ = f"rule_{rule.replace('-', '_')}"
    return check


rule_redis_noeviction = _redis_rule(
    "redis-noeviction", "--maxmemory-policy", "noeviction", "noeviction",
    "an evicting policy may delete Bull's job keys without a warning (seed 000)")
rule_redis_appendonly = _redis_rule(
    "redis-appendonly", "--appendonly", "yes", "no",
    "without AOF a Redis restart crashed all 20 waiting executions; with it, none (seed 000)")


def _pool(service: Service) -> int:
    return _int(service.env.get("DB_POSTGRESDB_POOL_SIZE")) or DEFAULT_DB_POOL_SIZE


def _max_connections(service: Service) -> int:
    for i, token in enumerate(service.command):
        match = re.fullmatch(r"(?:--)?max_connections=(\d+)", token)
        if match and (token.startswith("--") or (i > 0 and service.command[i - 1] == "-c")):
            return int(match.group(1))
    return POSTGRES_DEFAULT_MAX_CONNECTIONS


def rule_postgres_pool(cf: ComposeFile, ctx: _Ctx) -> RuleResult:
    users = [s for s in cf.n8n if s.env.get("DB_TYPE") == "postgresdb"]
    if not users:
        return _na("postgres-pool", "no n8n service on Postgres")
    mains = [s for s in users if s.role == "main"]
    others = [s for s in users if s.role != "main"]
    need = sum(_pool(s) + 1 for s in mains) + sum(_pool(s) for s in others)
    arithmetic = " + ".join([f"({_pool(s)} + 1)" for s in mains] + [str(_pool(s)) for s in others])
    total = need + CONNECTION_HEADROOM
    postgres = cf.by_role("postgres")
    if not postgres:
        return _na("postgres-pool", f"Postgres is not in this file; give it max_connections >= {total} "
                   f"({arithmetic} + {CONNECTION_HEADROOM} headroom)")
    limit = min(_max_connections(p) for p in postgres)
    if total > limit:
        return _fail("postgres-pool", f"pools need {arithmetic} + {CONNECTION_HEADROOM} headroom = {total}, "
                     f"above max_connections {limit}",
                     f'raise it: command: ["postgres", "-c", "max_connections={total}"], or lower DB_POSTGRESDB_POOL_SIZE')
    return _ok("postgres-pool", f"{arithmetic} + {CONNECTION_HEADROOM} headroom = {total} <= max_connections {limit}")


def _concurrency(worker: Service) -> int:
    tokens = worker.command
    for i, token in enumerate(tokens):
        if token.startswith("--concurrency="):
            return _int(token.split("=", 1)[1]) or 0
        if token == "--concurrency" and i + 1 < len(tokens):
            return _int(tokens[i + 1]) or 0
    return DEFAULT_WORKER_CONCURRENCY


def rule_worker_concurrency(cf: ComposeFile, ctx: _Ctx) -> RuleResult:
    workers = cf.by_role("worker")
    if not workers:
        return _na("worker-concurrency", "no workers")
    low = [f"{w.name} --concurrency={_concurrency(w)}" for w in workers if _concurrency(w) < MIN_WORKER_CONCURRENCY]
    if low:
        return _fail("worker-concurrency", f"{', '.join(low)}: at 5, two workers fell to 426/min with 238 errors (seed 000)",
                     f"use --concurrency={DEFAULT_WORKER_CONCURRENCY} (n8n's default; it held 519/min with no errors)")
    values = sorted({_concurrency(w) for w in workers})
    note = "" if min(values) >= DEFAULT_WORKER_CONCURRENCY else f" ({DEFAULT_WORKER_CONCURRENCY} recommended)"
    return _ok("worker-concurrency", f"--concurrency {', '.join(map(str, values))}{note}")


def rule_workers_vs_cores(cf: ComposeFile, ctx: _Ctx) -> RuleResult:
    workers = cf.by_role("worker")
    if not workers:
        return _na("workers-vs-cores", "no workers")
    if ctx.vcpu is None:
        return _na("workers-vs-cores", f"{len(workers)} workers; pass --vcpu to compare with the cores")
    most = max(1, ctx.vcpu // VCPU_PER_WORKER)
    if len(workers) > most:
        return _fail("workers-vs-cores", f"{len(workers)} workers on {ctx.vcpu} vCPU: on 4 vCPU, 4 workers answered "
                     "no more than 2 and added 1,013 errors (seed 000)",
                     f"run at most {most} workers on {ctx.vcpu} vCPU, or add cores, not workers")
    return _ok("workers-vs-cores", f"{len(workers)} workers on {ctx.vcpu} vCPU (at most {most})")


def rule_binary_data(cf: ComposeFile, ctx: _Ctx) -> RuleResult:
    procs = cf.n8n
    if len(procs) < 2:
        return _na("binary-data", "one n8n process: its own disk is enough")
    on_disk = [s for s in procs if s.env.get("N8N_DEFAULT_BINARY_DATA_MODE") == "filesystem"]
    if not on_disk:
        return _ok("binary-data", "binary data in the database (unset or database mode)")
    def mount(service: Service) -> str | None:
        path = service.env.get("N8N_BINARY_DATA_STORAGE_PATH", "/home/node/.n8n/binaryData")
        sources = [src for src, target in service.volumes if src and path.startswith(target.rstrip("/"))]
        return sources[0] if sources else None
    sources = {s.name: mount(s) for s in procs}
    if None in sources.values() or len(set(sources.values())) > 1:
        return _fail("binary-data", "filesystem binary data without one volume shared by main and every worker: "
                     "a worker could not read main's upload (HTTP 500, seed 000 drill 5)",
                     "remove N8N_DEFAULT_BINARY_DATA_MODE (queue mode then stores binary data in Postgres), "
                     "or mount one shared volume at the storage path on every n8n service")
    return _ok("binary-data", f"filesystem binary data on one shared volume ({next(iter(sources.values()))})")


def rule_pruning(cf: ComposeFile, ctx: _Ctx) -> RuleResult:
    mains = cf.by_role("main")
    if not mains:
        return _na("pruning", "no n8n main service")
    off = [m for m in mains if m.env.get("EXECUTIONS_DATA_PRUNE", "true").lower() == "false"]
    if off:
        return _fail("pruning", f"EXECUTIONS_DATA_PRUNE=false on {_names(off)}: execution data grows without end",
                     "set EXECUTIONS_DATA_PRUNE=true with EXECUTIONS_DATA_MAX_AGE and EXECUTIONS_DATA_PRUNE_MAX_COUNT")
    unset = [m for m in mains if "EXECUTIONS_DATA_MAX_AGE" not in m.env and "EXECUTIONS_DATA_PRUNE_MAX_COUNT" not in m.env]
    if unset:
        return _fail("pruning", f"no pruning limits on {_names(unset)}: defaults are 336 h or 10,000 executions, "
                     "only 18 minutes of history at 550/min (seed 000)",
                     "set EXECUTIONS_DATA_MAX_AGE (hours) and EXECUTIONS_DATA_PRUNE_MAX_COUNT for your volume")
    return _ok("pruning", "pruning on, with explicit limits")


def rule_shutdown_timeout(cf: ComposeFile, ctx: _Ctx) -> RuleResult:
    runs = cf.by_role("worker") if cf.queue_mode else cf.by_role("main")
    if not runs:
        return _na("shutdown-timeout", "no n8n process that runs executions")
    problems: list[str] = []
    shortest = None
    for s in runs:
        n8n_s = _int(s.env.get("N8N_GRACEFUL_SHUTDOWN_TIMEOUT")) or DEFAULT_GRACEFUL_SHUTDOWN_S
        docker_s = s.stop_grace_s if s.stop_grace_s is not None else DOCKER_DEFAULT_STOP_GRACE_S
        shortest = n8n_s if shortest is None else min(shortest, n8n_s)
        if docker_s <= n8n_s:
            problems.append(f"{s.name}: stop_grace_period {docker_s:g} s <= N8N_GRACEFUL_SHUTDOWN_TIMEOUT {n8n_s} s")
        if ctx.longest_execution_s is not None and n8n_s <= ctx.longest_execution_s:
            problems.append(f"{s.name}: N8N_GRACEFUL_SHUTDOWN_TIMEOUT {n8n_s} s <= longest execution "
                            f"{ctx.longest_execution_s} s")
    if problems:
        return _fail("shutdown-timeout", "; ".join(problems) + " (seed 000 drill 6: runs past the timeout were cut off)",
                     "raise N8N_GRACEFUL_SHUTDOWN_TIMEOUT above your longest execution and stop_grace_period above that")
    tail = "" if ctx.longest_execution_s is not None else "; pass --longest-execution-s to compare with your workflows"
    return _ok("shutdown-timeout", f"n8n waits {shortest} s, Docker longer{tail}")


def rule_metrics_public(cf: ComposeFile, ctx: _Ctx) -> RuleResult:
    with_metrics = [s for s in cf.by_role("main", "webhook") if s.env.get("N8N_METRICS", "false").lower() == "true"]
    if not with_metrics:
        return _na("metrics-public", "N8N_METRICS is off")
    problems, notes = [], []
    for s in with_metrics:
        port = _int(s.env.get("N8N_PORT")) or 5678
        public = s.host_network or any(p.container_port == port and p.public for p in s.ports)
        if public and s.labels.get(FIREWALL_LABEL, "").lower() == "true":
            notes.append(f"{s.name}'s {port} is published, declared firewalled by label {FIREWALL_LABEL}")
        elif public:
            problems.append(f"{s.name} publishes {port} on every address, and /metrics has no login")
    proxies = cf.by_role("proxy")
    if proxies and not any("/metrics" in text for text in cf.config_texts):
        problems.append(f"{_names(proxies)} may forward /metrics (check cannot see a rule that blocks it)")
    if problems:
        return _fail("metrics-public", "; ".join(problems),
                     'publish n8n only on 127.0.0.1 ("127.0.0.1:5678:5678") behind a proxy that blocks /metrics, '
                     "or restrict the port to your monitoring server with a firewall")
    return _ok("metrics-public", "; ".join(notes) or "/metrics is not published to the internet")


def rule_production_limit(cf: ComposeFile, ctx: _Ctx) -> RuleResult:
    workers = cf.by_role("worker")
    if not cf.queue_mode or not workers:
        return _na("production-limit", "not in queue mode")
    clash = [f"{w.name}: N8N_CONCURRENCY_PRODUCTION_LIMIT {w.env['N8N_CONCURRENCY_PRODUCTION_LIMIT']} vs "
             f"--concurrency {_concurrency(w)}" for w in workers
             if _int(w.env.get("N8N_CONCURRENCY_PRODUCTION_LIMIT")) not in (None, -1, _concurrency(w))]
    if clash:
        return _fail("production-limit", f"{'; '.join(clash)}: in queue mode the limit replaces --concurrency "
                     "on every worker (it is per worker, not a total)",
                     "remove N8N_CONCURRENCY_PRODUCTION_LIMIT from workers (a regular-mode leftover), or set it "
                     "equal to --concurrency")
    return _ok("production-limit", "no N8N_CONCURRENCY_PRODUCTION_LIMIT overriding --concurrency")


RULES: dict[str, Callable[[ComposeFile, _Ctx], RuleResult]] = {
    "variables": rule_variables,
    "db-type": rule_db_type,
    "encryption-key": rule_encryption_key,
    "images-pinned": rule_images_pinned,
    "start-order": rule_start_order,
    "runner-per-process": rule_runner_per_process,
    "runner-healthcheck": rule_runner_healthcheck,
    "redis-noeviction": rule_redis_noeviction,
    "redis-appendonly": rule_redis_appendonly,
    "postgres-pool": rule_postgres_pool,
    "worker-concurrency": rule_worker_concurrency,
    "workers-vs-cores": rule_workers_vs_cores,
    "binary-data": rule_binary_data,
    "pruning": rule_pruning,
    "shutdown-timeout": rule_shutdown_timeout,
    "metrics-public": rule_metrics_public,
    "production-limit": rule_production_limit,
}


def check_compose(compose_text: str, env: dict[str, str] | None = None, vcpu: int | None = None, *,
                  longest_execution_s: int | None = None,
                  env_files: Mapping[str, Mapping[str, str]] | None = None) -> list[RuleResult]:
    """Run every rule over a compose file. `env` resolves `${VAR}`; `env_files` maps each service's
    `env_file:` path, as written, to its variables. Raises `InputError` when the text is not Compose."""
    from n8n_sizer.errors import InputError

    if vcpu is not None and vcpu < 1:
        raise InputError(f"--vcpu {vcpu} must be >= 1; try --vcpu 4")
    compose = load_compose(compose_text, env, env_files)
    ctx = _Ctx(vcpu=vcpu, longest_execution_s=longest_execution_s)
    return [rule(compose, ctx) for rule in RULES.values()]
