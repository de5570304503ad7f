"""`check --topology` rules across hosts: one pure function each, over every host's parsed compose file.

A host's own rules (bundle/checks/one_host.py) cannot see these: a worker host's pool looks harmless alone, and the
sum over every host is what Postgres refuses (seed 000: "remaining connection slots are reserved" at
~380 req/s); a key that differs on one host breaks every credential that host touches.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from n8n_sizer.advisor.pools import CONNECTION_HEADROOM, pool_terms, required_max_connections
from n8n_sizer.bundle.caddyfile import parse_routes, route_for
from n8n_sizer.bundle.checks.rule import RuleResult, fail, na, ok
from n8n_sizer.bundle.checks.service_settings import max_connections_of, pool_size, redis_arg, unreadable_pool_settings
from n8n_sizer.bundle.composefile import ComposeFile, Service, image_base, redis_users
from n8n_sizer.safety.frozen import Frozen

DATA_PORTS = {5432: "Postgres", 6379: "Redis"}
# Paths n8n-io/n8n-hosting routes to webhook processors / keeps on main, probed with a sample path each.
PROCESSOR_PATHS = ("/webhook/x", "/webhook-waiting/x", "/form/x", "/form-waiting/x")
MAIN_PATHS = ("/webhook-test/x", "/form-test/x", "/rest/login", "/")


class HostFiles(Frozen):
    name: str
    compose: ComposeFile
    private_ip: str | None = None  # from topology.json, when the folder has one


class Cluster(Frozen):
    hosts: list[HostFiles]
    subnet: str | None = None

    def services(self, *roles: str) -> list[tuple[HostFiles, Service]]:
        return [(h, s) for h in self.hosts for s in h.compose.services if not roles or s.role in roles]

    @property
    def n8n(self) -> list[tuple[HostFiles, Service]]:
        return self.services("main", "worker", "webhook")


def _where(pairs: list[tuple[HostFiles, Service]]) -> str:
    return ", ".join(f"{h.name}/{s.name}" for h, s in pairs)


def rule_one_key(c: Cluster) -> RuleResult:
    procs = c.n8n
    if not procs:
        return na("cluster-encryption-key", "no n8n process")
    unset = [(h, s) for h, s in procs if not s.env.get("N8N_ENCRYPTION_KEY")]
    if unset:
        return fail(
            "cluster-encryption-key",
            f"N8N_ENCRYPTION_KEY unset on {_where(unset)}",
            "give every host's .env the same N8N_ENCRYPTION_KEY (render --topology keeps one in .secrets.env)",
        )
    by_key: dict[str, list[str]] = {}
    for h, s in procs:
        by_key.setdefault(s.env["N8N_ENCRYPTION_KEY"], []).append(h.name)
    if len(by_key) > 1:
        groups = "; ".join(", ".join(sorted(set(hosts))) for hosts in by_key.values())
        return fail(
            "cluster-encryption-key",
            f"{len(by_key)} different N8N_ENCRYPTION_KEYs across hosts ({groups}): "
            "a process with another key cannot read the credentials the others stored",
            "copy main's key into every host's .env (never change main's); keep one .secrets.env",
        )
    return ok(
        "cluster-encryption-key",
        f"one N8N_ENCRYPTION_KEY on {len(procs)} n8n processes, {len({h.name for h, _ in procs})} hosts",
    )


def _endpoint_problems(
    c: Cluster,
    role: str,
    fields: tuple[str, ...],
    port: int,
    password_of: Callable[[Service], str | None],
    password_field: str,
) -> list[str]:
    procs = c.n8n
    problems: list[str] = []
    seen = {tuple(s.env.get(f, "") for f in fields) for _, s in procs}
    if len(seen) > 1:
        problems.append(f"{'/'.join(fields)} differ between n8n processes")
    servers = c.services(role)
    if len(servers) != 1:
        problems.append(f"{len(servers)} {role} services across the hosts, expected one")
        return problems
    host, server = servers[0]
    addresses = {a for p in server.ports if p.container_port == port for a in [p.host_ip] if a}
    addresses |= {host.private_ip} if host.private_ip else set()
    # Published on every address and no topology.json: any of the host's addresses may be right
    # (data-ports-private blames the publishing itself).
    unknown = host.private_ip is None and any(p.container_port == port and not p.host_ip for p in server.ports)
    for h, s in procs if not unknown else []:
        target = s.env.get(fields[0], "")
        local = h.name == host.name and target in server.aliases
        if target not in addresses and not local:
            problems.append(
                f"{h.name}/{s.name} points {fields[0]} at {target or 'nothing'}, not at "
                f"{host.name}'s {role} ({', '.join(sorted(addresses)) or 'unpublished'})"
            )
            break
    secret = password_of(server)
    if secret is not None and any(s.env.get(password_field) != secret for _, s in procs):
        problems.append(f"{password_field} differs from the password {host.name}/{server.name} was started with")
    return problems


def _redis_password(redis: Service, user: str) -> str | None:
    """The password Redis was started with for `user` (the default user's is --requirepass); None when Redis
    does not define that user (cluster-redis-acl says so)."""

    found = redis_users(redis).get(user)
    return found.password if found else None


def rule_data_endpoints(c: Cluster) -> RuleResult:
    if not c.n8n:
        return na("cluster-data-endpoints", "no n8n process")
    problems = _endpoint_problems(
        c,
        "postgres",
        (
            "DB_POSTGRESDB_HOST",
            "DB_POSTGRESDB_PORT",
            "DB_POSTGRESDB_DATABASE",
            "DB_POSTGRESDB_USER",
            "DB_POSTGRESDB_PASSWORD",
        ),
        5432,
        lambda s: s.env.get("POSTGRES_PASSWORD"),
        "DB_POSTGRESDB_PASSWORD",
    )
    if any(s.env.get("EXECUTIONS_MODE") == "queue" for _, s in c.n8n):  # regular mode on one host uses no Redis
        login = next((s.env.get("QUEUE_BULL_REDIS_USERNAME") for _, s in c.n8n), None) or "default"
        problems += _endpoint_problems(
            c,
            "redis",
            (
                "QUEUE_BULL_REDIS_HOST",
                "QUEUE_BULL_REDIS_PORT",
                "QUEUE_BULL_REDIS_USERNAME",
                "QUEUE_BULL_REDIS_PASSWORD",
            ),
            6379,
            lambda s: _redis_password(s, login),
            "QUEUE_BULL_REDIS_PASSWORD",
        )
    if problems:
        return fail(
            "cluster-data-endpoints",
            "; ".join(problems),
            "point every n8n process at the data host's private address with the same database, user "
            "and passwords (one .secrets.env); re-render with `render --topology`",
        )
    return ok(
        "cluster-data-endpoints",
        f"{len(c.n8n)} n8n processes share one Postgres and one Redis endpoint and their credentials",
    )


def rule_cluster_pool(c: Cluster) -> RuleResult:
    users = [(h, s) for h, s in c.n8n if s.env.get("DB_TYPE") == "postgresdb"]
    servers = c.services("postgres")
    if not users or not servers:
        return na("cluster-pool", "no n8n process on Postgres, or no Postgres in these hosts")
    unreadable = unreadable_pool_settings([s for _, s in users], [s for _, s in servers])
    if unreadable:
        return fail(
            "cluster-pool",
            f"{', '.join(unreadable)}: not a whole number in range; the pool sum cannot trust it",
            "set every DB_POSTGRESDB_POOL_SIZE and max_connections to a whole number",
        )
    # Seed 000's formula over every host's processes, main first (advisor/pools.py)
    need, arithmetic = pool_terms(sorted(((s.role, pool_size(s)) for _, s in users), key=lambda p: (p[0] != "main", p)))
    limit = min(max_connections_of(s) for _, s in servers)
    total = required_max_connections(need)
    if total > limit:
        return fail(
            "cluster-pool",
            f"every host's pools need {arithmetic} + {CONNECTION_HEADROOM} headroom = {total}, "
            f"above max_connections {limit}: Postgres would refuse connections under load "
            "('remaining connection slots are reserved', the queue-mode test)",
            f"raise max_connections to {total} on the data host (mind its memory) or lower "
            "DB_POSTGRESDB_POOL_SIZE on workers",
        )
    return ok("cluster-pool", f"{arithmetic} + {CONNECTION_HEADROOM} headroom = {total} <= max_connections {limit}")


def _resolve(c: Cluster, lb_host: HostFiles, upstream: str) -> tuple[HostFiles, Service] | None:
    """The service an upstream `name:port` (on the LB's host) or `ip:port` (another host) reaches."""
    host_part, _, port_text = upstream.rpartition(":")
    port = int(port_text) if port_text.isdigit() else None
    for s in lb_host.compose.services:
        if host_part in s.aliases:
            return lb_host, s
    for h in c.hosts:
        for s in h.compose.services:
            for p in s.ports:
                published = p.host_ip == host_part or (not p.host_ip and h.private_ip == host_part)
                if published and port is not None and (p.host_port or p.container_port) == port:
                    return h, s
    return None


def rule_webhook_routes(c: Cluster) -> RuleResult:
    processors = c.services("webhook")
    if not processors:
        return na("webhook-routes", "no webhook processors: main takes the production webhooks")
    proxies = c.services("proxy")
    if len(proxies) != 1:
        return fail(
            "webhook-routes",
            f"{len(processors)} webhook processors and {len(proxies)} load balancers",
            "run one load balancer that routes /webhook/* and /form/* to the webhook processors",
        )
    lb_host, lb = proxies[0]
    routes = [r for text in lb_host.compose.config_texts for r in parse_routes(text)]
    problems: list[str] = []
    for path, want in [(p, "webhook") for p in PROCESSOR_PATHS] + [(p, "main") for p in MAIN_PATHS]:
        route = route_for(routes, path)
        if route is None or not route.upstreams:
            problems.append(f"{path} reaches no upstream")
            continue
        reached = [_resolve(c, lb_host, u) for u in route.upstreams]
        wrong = [u for u, r in zip(route.upstreams, reached, strict=True) if r is None or r[1].role != want]
        if wrong:
            problems.append(f"{path} goes to {', '.join(wrong)}, not only to {want}")
        elif route.health_uri is None:
            problems.append(f"{path}'s upstreams are not health-checked")
    if problems:
        return fail(
            "webhook-routes",
            f"{lb_host.name}/{lb.name}: " + "; ".join(problems),
            "route /webhook/*, /webhook-waiting/*, /form/*, /form-waiting/* to the webhook processors and "
            "everything else (/webhook-test/*, /form-test/*, the editor) to main, each reverse_proxy "
            "with health_uri (render --topology writes such a Caddyfile)",
        )
    return ok(
        "webhook-routes",
        f"production webhook and form paths reach {len(processors)} webhook processors, "
        "test paths and the editor reach main, all health-checked",
    )


def rule_main_webhooks_off(c: Cluster) -> RuleResult:
    mains, processors = c.services("main"), c.services("webhook")
    flag = "N8N_DISABLE_PRODUCTION_MAIN_PROCESS"
    if not mains:
        return na("main-webhooks-off", "no n8n main")
    off = [(h, s) for h, s in mains if s.env.get(flag, "false").lower() == "true"]
    if processors and len(off) != len(mains):
        return fail(
            "main-webhooks-off",
            f"{len(processors)} webhook processors, but main still serves production "
            f"webhooks ({flag} unset on {_where([m for m in mains if m not in off])})",
            f"set {flag}=true on main, so production webhooks run only on the webhook processors",
        )
    if not processors and off:
        return fail(
            "main-webhooks-off",
            f"{flag}=true on {_where(off)} and no webhook processor: production webhooks would go nowhere",
            f"remove {flag}, or add webhook processors",
        )
    state = "off on main" if processors else "served by main (no webhook processors)"
    return ok("main-webhooks-off", f"production webhooks {state}")


def rule_cluster_redis(c: Cluster) -> RuleResult:
    """A data host has no n8n process, so its own `redis-*` rules do not apply: check Redis here."""
    servers = c.services("redis")
    if not servers or not c.n8n:
        return na("cluster-redis", "no Redis, or no n8n process using it")
    wanted = {"--appendonly": ("yes", "no"), "--maxmemory-policy": ("noeviction", "noeviction")}
    problems = []
    for h, s in servers:
        for flag, (want, default) in wanted.items():
            value = redis_arg(s, flag) or default
            if value != want:
                problems.append(f"{h.name}/{s.name} {flag} {value}")
        if not redis_arg(s, "--requirepass"):
            problems.append(f"{h.name}/{s.name} has no --requirepass (other hosts reach it over the network)")
    if problems:
        return fail(
            "cluster-redis",
            "; ".join(problems) + ": without AOF a Redis restart lost every waiting "
            "execution, an evicting policy may drop Bull's keys (the queue-mode test)",
            "start Redis with --requirepass ${REDIS_PASSWORD} --appendonly yes --maxmemory-policy noeviction",
        )
    return ok("cluster-redis", f"{_where(servers)}: password, AOF and noeviction")


def _transaction_pooler(s: Service, texts: list[str]) -> bool:
    base = image_base(s.image)[0].rsplit("/", 1)[-1].lower() if s.image else ""
    if "pgbouncer" not in base and "pgbouncer" not in s.name.lower():
        return False
    modes = [v for k, v in s.env.items() if k.upper() in ("POOL_MODE", "PGBOUNCER_POOL_MODE")]
    modes += [t.split("=", 1)[1] for t in s.command if t.lower().startswith("pool_mode=")]
    modes += re.findall(r"pool_mode\s*=\s*(\w+)", "\n".join(texts))
    return any(m.strip().lower() == "transaction" for m in modes)


def rule_pgbouncer_transaction(c: Cluster) -> RuleResult:
    poolers = [(h, s) for h, s in c.services() if _transaction_pooler(s, h.compose.config_texts)]
    queue = any(s.role == "worker" or s.env.get("EXECUTIONS_MODE") == "queue" for _, s in c.n8n)
    if poolers and queue:
        return fail(
            "pgbouncer-transaction",
            f"PgBouncer in transaction mode ({_where(poolers)}) in front of queue "
            "mode: n8n's advisory locks and LISTEN/NOTIFY need a session, and broke within a day (the queue-mode test)",
            "connect n8n straight to Postgres (size max_connections with the pool arithmetic), or run "
            "PgBouncer with POOL_MODE=session",
        )
    return ok("pgbouncer-transaction", "no transaction-mode PgBouncer in front of n8n")


def rule_public_url(c: Cluster) -> RuleResult:
    """The URL n8n gives out for webhooks: a cluster is called from outside, never at a loopback address."""
    procs = c.n8n
    if not procs:
        return na("cluster-public-url", "no n8n process")
    if len(c.hosts) == 1:  # one bench host keeps localhost; production's own rule checks its domain
        return na("cluster-public-url", "one host: its single-host rules apply")
    from n8n_sizer.safety.text import printable
    from n8n_sizer.safety.urls import url_parts

    for h, s in procs:  # the one URL grammar (safety/urls.py): no credentials, a real host and port
        if s.env.get("WEBHOOK_URL"):
            try:
                url_parts(s.env["WEBHOOK_URL"], "WEBHOOK_URL")
            except ValueError as exc:
                return fail("cluster-public-url", f"{printable(exc, limit=300)} ({_where([(h, s)])})", _PUBLIC_FIX)

    def loopback(value: str) -> bool:
        return url_parts(value).is_loopback

    bad = [(h, s) for h, s in procs if not s.env.get("WEBHOOK_URL") or loopback(s.env["WEBHOOK_URL"])]
    if bad:
        return fail(
            "cluster-public-url",
            f"WEBHOOK_URL is unset or this host's own address on {_where(bad)}: "
            "webhooks registered with other services would point nowhere",
            _PUBLIC_FIX,
        )
    return ok("cluster-public-url", f"webhooks are given out at {printable(procs[0][1].env['WEBHOOK_URL'])}")


_PUBLIC_FIX = "render with --public-url <the load balancer's public URL> (N8N_PUBLIC_URL in each .env)"
