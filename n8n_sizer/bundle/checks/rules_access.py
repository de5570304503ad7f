"""`check` rules about who may log in or connect where: n8n's own Postgres role (not the superuser), n8n's own
Redis ACL user, and data ports that only the cluster's subnet reaches. One host's rules take a compose file; the
`cluster-` ones take every host of a topology (rules_cluster.Cluster)."""

from __future__ import annotations

import ipaddress

from n8n_sizer.bundle.checks.rule import CheckContext, RuleResult, fail, na, ok
from n8n_sizer.bundle.checks.rules_cluster import DATA_PORTS, Cluster, _where
from n8n_sizer.bundle.composefile import ComposeFile, RedisUser, Service, redis_users
from n8n_sizer.bundle.n8n_env import REDIS_N8N_RULES

POSTGRES_DEFAULT_SUPERUSER = "postgres"  # the postgres image's POSTGRES_USER default, and n8n's DB user default


def superuser_logins(postgres: list[Service], n8n: list[Service]) -> list[str]:
    """n8n services that log in to Postgres as the image's superuser (`name=user`), for one host or a cluster."""
    supers = {s.env.get("POSTGRES_USER") or POSTGRES_DEFAULT_SUPERUSER for s in postgres}
    return [
        f"{s.name}={s.env.get('DB_POSTGRESDB_USER') or POSTGRES_DEFAULT_SUPERUSER}"
        for s in n8n
        if s.env.get("DB_TYPE") == "postgresdb"
        and (s.env.get("DB_POSTGRESDB_USER") or POSTGRES_DEFAULT_SUPERUSER) in supers
    ]


POSTGRES_ROLE_FIX = (
    "give n8n a role of its own that owns its database (an init script in "
    "/docker-entrypoint-initdb.d, as `render` writes) and set DB_POSTGRESDB_USER to it; keep "
    "POSTGRES_USER for setup"
)


def rule_postgres_role(cf: ComposeFile, ctx: CheckContext) -> RuleResult:
    postgres = cf.by_role("postgres")
    if not postgres or not cf.n8n:
        return na("postgres-role", "no Postgres beside n8n in this file")
    bad = superuser_logins(postgres, cf.n8n)
    if bad:
        return fail(
            "postgres-role",
            f"{', '.join(bad)} logs in as the Postgres superuser: any n8n process could drop every database",
            POSTGRES_ROLE_FIX,
        )
    return ok("postgres-role", "n8n logs in with a role of its own, not the superuser")


def _unlimited(rules: tuple[str, ...]) -> bool:
    every_key = any(w in ("~*", "allkeys") for w in rules)
    every_command = "allcommands" in rules or ("+@all" in rules and "-@dangerous" not in rules)
    return every_key or every_command


def redis_acl_problems(redis: list[Service], n8n: list[Service]) -> list[str]:
    """Why n8n's Redis login is not least privilege: an n8n process logging in as the default user (no
    QUEUE_BULL_REDIS_USERNAME), as a user Redis does not define, or as one allowed every key or command."""
    defined: dict[str, RedisUser] = {}
    for s in redis:
        defined.update(redis_users(s))
    problems = []
    for s in n8n:
        if s.env.get("EXECUTIONS_MODE") != "queue" and s.role != "worker":
            continue
        user = s.env.get("QUEUE_BULL_REDIS_USERNAME") or "default"
        if user == "default":
            problems.append(f"{s.name} logs in to Redis as the default user")
        elif user not in defined:
            problems.append(f"{s.name} logs in as Redis user {user!r}, which no --user of Redis defines")
        elif _unlimited(defined[user].rules):
            problems.append(
                f"Redis user {user!r} of {s.name} may use every key or command ({' '.join(defined[user].rules)})"
            )
    return problems


REDIS_ACL_FIX = (
    f"start Redis with an ACL user for n8n (`--user n8n on >${{REDIS_N8N_PASSWORD}} "
    f"{' '.join(REDIS_N8N_RULES)}`, as `render` writes) and set QUEUE_BULL_REDIS_USERNAME and "
    "QUEUE_BULL_REDIS_PASSWORD to it; keep --requirepass for the operator"
)


def rule_redis_acl(cf: ComposeFile, ctx: CheckContext) -> RuleResult:
    redis = cf.by_role("redis")
    if not redis or not cf.queue_mode:
        return na("redis-acl", "no Redis beside queue-mode n8n in this file")
    problems = redis_acl_problems(redis, cf.n8n)
    if problems:
        return fail(
            "redis-acl",
            "; ".join(problems) + ": any n8n process could FLUSHALL the queue or reconfigure Redis",
            REDIS_ACL_FIX,
        )
    return ok("redis-acl", "n8n logs in to Redis as its own ACL user (its keys and channels only)")


def _private(address: str, subnet: str | None) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if subnet is not None:
        return ip in ipaddress.ip_network(subnet)
    return ip.is_private and not ip.is_loopback and not ip.is_unspecified


def rule_data_ports_private(c: Cluster) -> RuleResult:
    problems: list[str] = []
    for h, s in c.services():
        data = s.role in ("postgres", "redis")
        if data and s.host_network:
            problems.append(f"{h.name}/{s.name} uses the host network: every interface gets its port")
        for p in s.ports:
            if (data or p.container_port in DATA_PORTS) and not _private(p.host_ip, c.subnet):
                where = p.host_ip or "every address"
                problems.append(f"{h.name}/{s.name} publishes {p.container_port} on {where}")
    if problems:
        return fail(
            "data-ports-private",
            "; ".join(problems),
            'publish Postgres and Redis only on the host\'s private address, e.g. "10.89.0.10:5432:5432"'
            + (f" (inside {c.subnet})" if c.subnet else ""),
        )
    published = [f"{h.name}/{s.name}" for h, s in c.services("postgres", "redis") if s.ports]
    return ok(
        "data-ports-private",
        f"Postgres and Redis listen on private addresses only ({', '.join(published) or 'unpublished'})",
    )


def rule_cluster_postgres_role(c: Cluster) -> RuleResult:
    """Least privilege across hosts: no n8n process on any host logs in as the data host's superuser."""

    postgres = [s for _, s in c.services("postgres")]
    if not postgres or not c.n8n:
        return na("cluster-postgres-role", "no Postgres or no n8n process")
    bad = superuser_logins(postgres, [s for _, s in c.n8n])
    if bad:
        where = _where([(h, s) for h, s in c.n8n if any(b.startswith(f"{s.name}=") for b in bad)])
        return fail("cluster-postgres-role", f"{where} log in as the Postgres superuser", POSTGRES_ROLE_FIX)
    return ok("cluster-postgres-role", f"{len(c.n8n)} n8n processes log in with n8n's own role")


def rule_cluster_redis_acl(c: Cluster) -> RuleResult:
    """Least privilege across hosts: every n8n process logs in to the data host's Redis as n8n's ACL user."""

    redis = [s for _, s in c.services("redis")]
    if not redis or not c.n8n:
        return na("cluster-redis-acl", "no Redis or no n8n process")
    problems = redis_acl_problems(redis, [s for _, s in c.n8n])
    if problems:
        return fail("cluster-redis-acl", "; ".join(problems), REDIS_ACL_FIX)
    return ok("cluster-redis-acl", f"{len(c.n8n)} n8n processes log in to Redis as n8n's own ACL user")
