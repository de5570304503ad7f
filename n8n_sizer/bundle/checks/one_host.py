"""`check`: lint a Docker Compose file against seed 000's queue-mode checklist, one result per rule.

Each rule is a small function of the parsed file; it passes, fails with a fix, or does not apply. This
module holds the rules about the stack around n8n (variables, images, start order, Redis, Postgres,
exposure) and the registry; rules_n8n.py holds those about the n8n processes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from n8n_sizer.advisor.pools import (
    CONNECTION_HEADROOM,
    pool_terms,
    recommended_max_connections,
    required_max_connections,
)
from n8n_sizer.advisor.setup import DEFAULT_DB_POOL_SIZE
from n8n_sizer.bundle.checks import rules_access as access
from n8n_sizer.bundle.checks import rules_memory as memory
from n8n_sizer.bundle.checks import rules_n8n as n8n
from n8n_sizer.bundle.checks.rule import CheckContext, RuleResult, Status, as_int, fail, na, names, ok
from n8n_sizer.bundle.checks.service_settings import (
    MAX_POOL,
    POSTGRES_MAX_CONNECTIONS_LIMIT,
    max_connections_of,
    pool_size,
    redis_arg,
    unreadable_pool_settings,
)
from n8n_sizer.bundle.composefile import ComposeFile, Service, image_base, load_compose
from n8n_sizer.versions import N8N_VERSION

__all__ = ["RULES", "RuleResult", "Status", "check_compose"]
FIREWALL_LABEL = "n8n-sizer.firewalled"
MIN_RAM_MIB, MAX_RAM_MIB = 256, 16 * 1024 * 1024  # `check --ram`: a server's RAM in MiB, up to 16 TiB


def rule_variables(cf: ComposeFile, ctx: CheckContext) -> RuleResult:
    if cf.unresolved:
        return fail(
            "variables",
            f"unresolved: {', '.join(cf.unresolved)} (no value, no default)",
            "pass --env FILE with these variables (the .env Docker Compose reads), or set them",
        )
    return ok("variables", "every ${VAR} reference resolves")


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


def rule_images_pinned(cf: ComposeFile, ctx: CheckContext) -> RuleResult:
    loose = [f"{s.name} ({s.image}: {why})" for s in cf.services if s.image and (why := _pinned(s.image))]
    if loose:
        return fail(
            "images-pinned",
            f"not pinned: {'; '.join(loose)}",
            f"pin exact versions, e.g. n8nio/n8n:{N8N_VERSION} with n8nio/runners of the same version",
        )
    return ok("images-pinned", f"{sum(1 for s in cf.services if s.image)} images pinned to exact versions")


def _healthy_dep(service: Service, target: Service) -> bool:
    return service.depends_on.get(target.name) == "service_healthy" and target.has_healthcheck


def rule_start_order(cf: ComposeFile, ctx: CheckContext) -> RuleResult:
    mains, workers = cf.by_role("main"), cf.by_role("worker", "webhook")
    if not mains:
        return na("start-order", "no n8n main service")
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
        return fail(
            "start-order",
            f"not waiting for a healthy service: {', '.join(gaps)}",
            "add depends_on with condition: service_healthy (and a healthcheck on the target): "
            "main after Postgres and Redis, workers after main, so one process migrates",
        )
    if not workers and not (cf.by_role("postgres") or cf.by_role("redis")):
        return na("start-order", "a single n8n service with nothing to wait for")
    return ok("start-order", "Postgres/Redis healthy -> main healthy -> workers")


def _redis_rule(
    rule: str, flag: str, wanted: str, default: str, why: str
) -> Callable[[ComposeFile, CheckContext], RuleResult]:
    def check(cf: ComposeFile, ctx: CheckContext) -> RuleResult:
        if not cf.queue_mode:
            return na(rule, "not in queue mode")
        redis = cf.by_role("redis")
        if not redis:
            return na(rule, "Redis is not in this file; set it there")
        wrong, implicit = [], []
        for service in redis:
            value = redis_arg(service, flag)
            if value is None and any(t.endswith(".conf") for t in service.command):
                return na(
                    rule, f"{service.name} reads a config file check cannot see; make sure it has {flag} {wanted}"
                )
            if value is None:
                implicit.append(service.name)
            if (value or default) != wanted:
                wrong.append(
                    f"{service.name} {flag} {value or default}" + (" (Redis' default)" if value is None else "")
                )
        if wrong:
            return fail(rule, f"{', '.join(wrong)}: {why}", f"start Redis with {flag} {wanted}")
        note = f" (Redis' default on {', '.join(implicit)}; the queue-mode test sets it explicitly)" if implicit else ""
        return ok(rule, f"{flag} {wanted} on {names(redis)}{note}")

    check.__name__ = f"rule_{rule.replace('-', '_')}"
    return check


rule_redis_noeviction = _redis_rule(
    "redis-noeviction",
    "--maxmemory-policy",
    "noeviction",
    "noeviction",
    "an evicting policy may delete Bull's job keys without a warning (the queue-mode test)",
)
rule_redis_appendonly = _redis_rule(
    "redis-appendonly",
    "--appendonly",
    "yes",
    "no",
    "without AOF a Redis restart crashed all 20 waiting executions; with it, none (the queue-mode test)",
)


def rule_postgres_pool(cf: ComposeFile, ctx: CheckContext) -> RuleResult:
    users = [s for s in cf.n8n if s.env.get("DB_TYPE") == "postgresdb"]
    if not users:
        return na("postgres-pool", "no n8n service on Postgres")
    unreadable = unreadable_pool_settings(users, cf.by_role("postgres"))
    if unreadable:
        return fail(
            "postgres-pool",
            f"{', '.join(unreadable)}: not a whole number in range (pools 1..{MAX_POOL}, "
            f"max_connections 1..{POSTGRES_MAX_CONNECTIONS_LIMIT}); the pool arithmetic cannot trust it",
            f"set DB_POSTGRESDB_POOL_SIZE to a whole number, e.g. {DEFAULT_DB_POOL_SIZE}, and max_connections "
            "to what the pools need",
        )
    # Seed 000's formula over the file's processes, main first (advisor/pools.py)
    need, arithmetic = pool_terms(sorted(((s.role, pool_size(s)) for s in users), key=lambda p: p[0] != "main"))
    total = required_max_connections(need)
    postgres = cf.by_role("postgres")
    if not postgres:
        return na(
            "postgres-pool",
            f"Postgres is not in this file; give it max_connections >= {total} "
            f"({arithmetic} + {CONNECTION_HEADROOM} headroom)",
        )
    limit = min(max_connections_of(p) for p in postgres)
    beyond = [
        f"{p.name} max_connections={max_connections_of(p)}"
        for p in postgres
        if not 1 <= max_connections_of(p) <= POSTGRES_MAX_CONNECTIONS_LIMIT
    ]
    if beyond:
        return fail(
            "postgres-pool",
            f"{', '.join(beyond)} is outside the 1..{POSTGRES_MAX_CONNECTIONS_LIMIT} "
            "Postgres accepts: it refuses to start",
            f'set max_connections to what the pools need, here {total}: command: ["postgres", "-c", '
            f'"max_connections={recommended_max_connections(need)}"]',
        )
    if total > limit:
        return fail(
            "postgres-pool",
            f"pools need {arithmetic} + {CONNECTION_HEADROOM} headroom = {total}, above max_connections {limit}",
            f'raise it: command: ["postgres", "-c", "max_connections={total}"], or lower DB_POSTGRESDB_POOL_SIZE',
        )
    return ok("postgres-pool", f"{arithmetic} + {CONNECTION_HEADROOM} headroom = {total} <= max_connections {limit}")


def rule_metrics_public(cf: ComposeFile, ctx: CheckContext) -> RuleResult:
    with_metrics = [s for s in cf.by_role("main", "webhook") if s.env.get("N8N_METRICS", "false").lower() == "true"]
    if not with_metrics:
        return na("metrics-public", "N8N_METRICS is off")
    problems, notes = [], []
    for s in with_metrics:
        port = as_int(s.env.get("N8N_PORT")) or 5678
        public = s.host_network or any(p.container_port == port and p.public for p in s.ports)
        if public and s.labels.get(FIREWALL_LABEL, "").lower() == "true":
            notes.append(f"{s.name}'s {port} is published, declared firewalled by label {FIREWALL_LABEL}")
        elif public:
            problems.append(f"{s.name} publishes {port} on every address, and /metrics has no login")
    proxies = cf.by_role("proxy")
    if proxies and not any("/metrics" in text for text in cf.config_texts):
        problems.append(f"{names(proxies)} may forward /metrics (check cannot see a rule that blocks it)")
    if problems:
        return fail(
            "metrics-public",
            "; ".join(problems),
            'publish n8n only on 127.0.0.1 ("127.0.0.1:5678:5678") behind a proxy that blocks /metrics, '
            "or restrict the port to your monitoring server with a firewall",
        )
    return ok("metrics-public", "; ".join(notes) or "/metrics is not published to the internet")


RULES: dict[str, Callable[[ComposeFile, CheckContext], RuleResult]] = {
    "variables": rule_variables,
    "db-type": n8n.rule_db_type,
    "encryption-key": n8n.rule_encryption_key,
    "images-pinned": rule_images_pinned,
    "start-order": rule_start_order,
    "runner-per-process": n8n.rule_runner_per_process,
    "runner-healthcheck": n8n.rule_runner_healthcheck,
    "runner-version": n8n.rule_runner_version,
    "redis-noeviction": rule_redis_noeviction,
    "redis-appendonly": rule_redis_appendonly,
    "postgres-pool": rule_postgres_pool,
    "worker-concurrency": n8n.rule_worker_concurrency,
    "workers-vs-cores": n8n.rule_workers_vs_cores,
    "binary-data": n8n.rule_binary_data,
    "queue-retention": n8n.rule_queue_retention,
    "pruning": n8n.rule_pruning,
    "shutdown-timeout": n8n.rule_shutdown_timeout,
    "metrics-public": rule_metrics_public,
    "production-limit": n8n.rule_production_limit,
    "main-memory-limit": n8n.rule_main_memory_limit,
    "execution-memory": memory.rule_execution_memory,
    "host-memory": memory.rule_host_memory,
    "redis-maxmemory": memory.rule_redis_maxmemory,
    "postgres-memory": memory.rule_postgres_memory,
    "postgres-role": access.rule_postgres_role,
    "redis-acl": access.rule_redis_acl,
}


def check_compose(
    compose_text: str,
    env: dict[str, str] | None = None,
    vcpu: int | None = None,
    *,
    longest_execution_s: int | None = None,
    env_files: Mapping[str, Mapping[str, str]] | None = None,
    ram_mib: int | None = None,
) -> list[RuleResult]:
    """Run every rule over a compose file. `env` resolves `${VAR}`; `env_files` maps each service's
    `env_file:` path, as written, to its variables. Raises `InputError` when the text is not Compose."""
    from n8n_sizer.errors import InputError

    if vcpu is not None and vcpu < 1:
        raise InputError(f"--vcpu {vcpu} must be >= 1; try --vcpu 4")
    if ram_mib is not None and not MIN_RAM_MIB <= ram_mib <= MAX_RAM_MIB:
        raise InputError(f"--ram {ram_mib} is not a server's RAM in MiB ({MIN_RAM_MIB}..{MAX_RAM_MIB}); try --ram 4096")
    compose = load_compose(compose_text, env, env_files)
    ctx = CheckContext(vcpu=vcpu, longest_execution_s=longest_execution_s, ram_mib=ram_mib)
    return [rule(compose, ctx) for rule in RULES.values()]
