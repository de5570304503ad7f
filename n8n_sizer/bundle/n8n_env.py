"""n8n's environment, for every process role, in one place.

`role_env(shape, role, wiring)` is the one function that says what an n8n process gets: main, a webhook
processor, a worker, or a task runner beside main or a worker. `N8nShape` is what the deployment decides
(mode, pools per role, limits, the longest execution, profile), built from a `Setup` (`shape_of_setup`) or a
`Topology` (`shape_of_topology`); `Wiring` is how the process finds the others (addresses, ports, secrets as
values or `${VAR}` references). The single-host compose template, the cluster template, the native stack
(`n8n_env`) and the lab all render this function's output, so none of them writes an n8n variable of its
own (tests/unit/test_n8n_env_one_source.py fails when one does).

Everything that would call out of a benchmark host is switched off. The names come from n8n's config
package (`@n8n/config`, 2.41.1) and from what the logs showed on start.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

from n8n_sizer.advisor.settings import queue_keep_last_env
from n8n_sizer.advisor.setup import DEFAULT_GRACEFUL_SHUTDOWN_S, Setup
from n8n_sizer.bundle.drain import COMPOSE_HOOK_PATH, drain_env, worker_drain_env
from n8n_sizer.safety.frozen import Frozen

# n8n's own timeout must exceed the longest execution (seed 000, drill 6: 50 s runs were cut at 30 s),
# and the stop grace period (Docker's, or the native stack's SIGKILL deadline) must exceed n8n's, or the
# process is killed before it finishes waiting.
SHUTDOWN_MARGIN_S = 15
ROLES = ("main", "webhook", "worker", "runner")
# Bull's lock on a running job (n8n: QUEUE_WORKER_LOCK_DURATION / _RENEW_TIME / _STALLED_INTERVAL, defaults
# 60 s / 10 s / 30 s). A worker renews it every RENEW; a job whose lock lapses is "stalled" and n8n fails its
# execution. A starved worker (CPU saturated, its timers late) misses renewals, so the lock must outlast the
# longest stall a busy worker can show: we take the longest execution scaled by the CPU headroom the plan
# leaves (1 / headroom), never below n8n's 60 s, at most an hour (a crashed worker's job is found only then).
LOCK_RENEW_S = 10
MIN_LOCK_S, MAX_LOCK_S = 60, 3600
DEFAULT_CPU_HEADROOM = 0.5  # the advisor plans hosts to at most half their CPU at the target rate
RUNNER_IDLE_SHUTDOWN_S = 15  # n8n's default, as tested: an idle runner stops, the next Code node waits ~2.7 s


def shutdown_seconds(longest_execution_s: int) -> tuple[int, int]:
    """(N8N_GRACEFUL_SHUTDOWN_TIMEOUT, stop grace period) in seconds, each above the one before."""
    n8n_s = max(DEFAULT_GRACEFUL_SHUTDOWN_S, longest_execution_s + SHUTDOWN_MARGIN_S)
    return n8n_s, n8n_s + SHUTDOWN_MARGIN_S


def shutdown_timeouts(setup: Setup) -> tuple[int, int]:
    """`shutdown_seconds` for a setup's longest execution: one host's stack and a cluster's hosts alike."""
    return shutdown_seconds(setup.longest_execution_s)


def stall_seconds(longest_execution_s: int, cpu_headroom: float = DEFAULT_CPU_HEADROOM) -> tuple[int, int, int]:
    """(lock duration, lock renew time, stalled-check interval) in seconds for queue-mode workers."""
    if not 0 < cpu_headroom <= 1:
        raise ValueError(f"cpu_headroom must be in (0, 1], not {cpu_headroom}")
    lock = min(MAX_LOCK_S, max(MIN_LOCK_S, math.ceil(longest_execution_s / cpu_headroom)))
    return lock, LOCK_RENEW_S, max(30, lock // 2)


class N8nShape(Frozen):
    """What the deployment decides for every n8n process, whichever way it is started."""

    mode: Literal["regular", "queue"]
    db: Literal["sqlite", "postgres"] = "postgres"
    concurrency: int
    runner_concurrency: int
    production_limit: int | None = None
    pool_main: int
    pool_webhook: int
    pool_worker: int
    longest_execution_s: int
    webhook_processors: int = 0  # > 0: main stops serving production webhooks, the processors do
    profile: Literal["bench", "production"] = "bench"
    domain: str | None = None
    behind_proxy: bool = False  # a load balancer in front: trust one X-Forwarded-For hop
    data_elsewhere: bool = False  # Postgres and Redis on another host, which boots in no order with this one
    cpu_headroom: float = DEFAULT_CPU_HEADROOM


def shape_of_setup(setup: Setup, profile: str = "bench", domain: str | None = None) -> N8nShape:
    """One host's stack: one pool for every process, Caddy in front in the production profile."""
    return N8nShape(
        mode=setup.mode,
        db=setup.db,
        concurrency=setup.concurrency,
        runner_concurrency=setup.runner_concurrency,
        production_limit=setup.production_limit,
        pool_main=setup.db_pool_size,
        pool_webhook=setup.db_pool_size,
        pool_worker=setup.db_pool_size,
        longest_execution_s=setup.longest_execution_s,
        profile=profile,
        domain=domain,
        behind_proxy=profile == "production",
    )


def shape_of_topology(t, profile: str = "bench", domain: str | None = None) -> N8nShape:
    """A cluster of several hosts (`bundle.topology.Topology`): queue mode, pools per role, data elsewhere."""
    return N8nShape(
        mode="queue",
        concurrency=t.concurrency,
        runner_concurrency=t.runner_concurrency,
        pool_main=t.db_pool_size.main,
        pool_webhook=t.db_pool_size.of("webhook"),
        pool_worker=t.db_pool_size.of("worker"),
        longest_execution_s=t.longest_execution_s,
        webhook_processors=t.total("webhook"),
        profile=profile,
        domain=domain,
        behind_proxy=profile == "production" or t.total("load_balancer") > 0,
        data_elsewhere=True,
    )


# Redis: n8n's own ACL user (Redis 6+: the pinned image is 7.4, Debian's redis-server 7.0). n8n 2.41.1 keeps
# Bull's keys and channels under QUEUE_BULL_PREFIX ("bull") and its own (pub/sub commands and worker answers,
# the cache, locks) under N8N_REDIS_KEY_PREFIX ("n8n"): `scaling/pubsub/*.service.js`, `cache.service.js`.
# Bull runs Lua scripts (EVALSHA), blocking pops and INFO (its version check, which is @dangerous); nothing
# else of @dangerous (KEYS, FLUSHALL, CONFIG, DEBUG, ACL, SHUTDOWN) is n8n's to run. A real queue-mode run
# under these rules left Redis' ACL LOG empty (tests/integration/test_localstack.py). The default user keeps
# REDIS_PASSWORD for the operator: healthchecks, telemetry and drills; n8n never gets that password.
REDIS_N8N_USER = "n8n"
REDIS_N8N_RULES = ("resetchannels", "~bull:*", "~n8n:*", "&bull:*", "&n8n:*", "+@all", "-@dangerous", "+info")
REDIS_N8N_PASSWORD_REF = "${REDIS_N8N_PASSWORD}"


def redis_acl_user(password: str) -> list[str]:
    """n8n's Redis user as the words of one `user` directive (a redis.conf line, or `redis-server --user ...`
    on the command line); `password` is the value or `${REDIS_N8N_PASSWORD}` for Compose."""
    return [REDIS_N8N_USER, "on", f">{password}", *REDIS_N8N_RULES]


class Wiring(Frozen):
    """How a process finds the others: addresses, ports and secrets (values, or `${VAR}` for Compose)."""

    postgres_host: str
    postgres_port: str = "5432"
    postgres_user: str = "n8n"
    postgres_password: str
    redis_host: str
    redis_port: str = "6379"
    redis_user: str | None = None  # n8n's ACL user (REDIS_N8N_USER); None: the default user (requirepass)
    redis_password: str
    encryption_key: str
    public_url: str
    runners: Literal["external", "internal"] = "external"
    runners_token: str = "${RUNNERS_AUTH_TOKEN}"
    broker_listen: str = "0.0.0.0"
    broker_port: str = "5679"
    drain_hook: str = COMPOSE_HOOK_PATH  # a webhook processor's drain hook (bundle/drain.py): this file's path


# What a container finds through Compose: service names and the .env's variables.
COMPOSE_WIRING = Wiring(
    postgres_host="n8n-postgres",
    postgres_password="${POSTGRES_PASSWORD}",
    redis_host="n8n-redis",
    redis_user=REDIS_N8N_USER,
    redis_password=REDIS_N8N_PASSWORD_REF,
    encryption_key="${N8N_ENCRYPTION_KEY}",
    public_url="${N8N_PUBLIC_URL}",
)

# Each of these made n8n reach a host on the internet (or would): telemetry, update checks, template and
# banner fetches, the community-node registry, the AI assistant and license renewal. A benchmark host carries
# no outside traffic; a production host keeps templates and community nodes, but sends no telemetry.
OUTBOUND_OFF = {
    "N8N_DIAGNOSTICS_ENABLED": "false",
    "N8N_VERSION_NOTIFICATIONS_ENABLED": "false",
    "N8N_VERSION_NOTIFICATIONS_WHATS_NEW_ENABLED": "false",
    "N8N_TEMPLATES_ENABLED": "false",
    "N8N_DYNAMIC_BANNERS_ENABLED": "false",
    "N8N_HIRING_BANNER_ENABLED": "false",
    "N8N_PERSONALIZATION_ENABLED": "false",
    "N8N_COMMUNITY_PACKAGES_ENABLED": "false",
    "N8N_UNVERIFIED_PACKAGES_ENABLED": "false",
    "N8N_MCP_COMMUNITY_NODE_DISCOVERY_ENABLED": "false",
    "N8N_REINSTALL_MISSING_PACKAGES": "false",
    "N8N_AI_ENABLED": "false",
    "N8N_LICENSE_AUTO_RENEW_ENABLED": "false",
    "EXTERNAL_FRONTEND_HOOKS_URLS": "",
    # Seen in the log of 2.41.1 with all of the above off: the MCP registry's refresh task fetched
    # api.n8n.io/api/mcp-servers at start; the community-packages module fetches vetted node types there.
    "N8N_DISABLED_MODULES": "mcp-registry,community-packages",
}
TELEMETRY_OFF = {"N8N_DIAGNOSTICS_ENABLED": "false", "N8N_VERSION_NOTIFICATIONS_ENABLED": "false"}

# Bench: keep every execution for the run: pruning on, no count cap (n8n 2.41.1 applies
# EXECUTIONS_DATA_PRUNE_MAX_COUNT only when > 0), a week's age limit. The ledger counts stored executions after
# a run, and n8n's default cap (10,000) would delete some during seed 000's default plan (5, 20, 50 req/s x
# 180 s = 13,500 executions). Production: 10,000 is only 18 minutes at 550/min (seed 000): size it.
EXECUTION_DATA = {
    "EXECUTIONS_DATA_PRUNE": "true",
    "EXECUTIONS_DATA_MAX_AGE": "168",
    "EXECUTIONS_DATA_PRUNE_MAX_COUNT": "0",
    "EXECUTIONS_DATA_SAVE_ON_SUCCESS": "all",
    "EXECUTIONS_DATA_SAVE_ON_ERROR": "all",
}
PRODUCTION_EXECUTION_DATA = {**EXECUTION_DATA, "EXECUTIONS_DATA_PRUNE_MAX_COUNT": "10000"}


def _database(shape: N8nShape, role: str, w: Wiring) -> dict[str, str]:
    if shape.db != "postgres":
        return {"DB_TYPE": "sqlite"}
    pool = {"main": shape.pool_main, "webhook": shape.pool_webhook, "worker": shape.pool_worker}[role]
    env = {
        "DB_TYPE": "postgresdb",  # exactly postgresdb: "postgres" silently falls back to SQLite (seed 000)
        "DB_POSTGRESDB_HOST": w.postgres_host,
        "DB_POSTGRESDB_PORT": w.postgres_port,
        "DB_POSTGRESDB_DATABASE": "n8n",
        "DB_POSTGRESDB_USER": w.postgres_user,
        "DB_POSTGRESDB_PASSWORD": w.postgres_password,
        "DB_POSTGRESDB_POOL_SIZE": str(pool),
    }
    if shape.data_elsewhere:
        # The data host boots in no order with this one (depends_on cannot cross hosts). n8n gives up after 5
        # failed Postgres attempts by default; 12 keep it trying for about 4 minutes, inside 30 x 10 s checks.
        env["DB_STARTUP_CONNECT_MAX_RETRIES"] = "12"
    return env


def _queue(shape: N8nShape, role: str, w: Wiring) -> dict[str, str]:
    if shape.mode != "queue":
        return {}
    env = {
        "QUEUE_BULL_REDIS_HOST": w.redis_host,
        "QUEUE_BULL_REDIS_PORT": w.redis_port,
        "QUEUE_BULL_REDIS_PASSWORD": w.redis_password,
        "N8N_DEFAULT_BINARY_DATA_MODE": "database",  # processes share no disk (seed 000, drill 5)
        **queue_keep_last_env(),
    }  # main never waits forever on a fast job (advisor/settings.py)
    if w.redis_user:
        env["QUEUE_BULL_REDIS_USERNAME"] = w.redis_user
    if shape.data_elsewhere:  # a Redis outage under 4 minutes is waited out instead of exiting after 10 s
        env["QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD"] = "240000"
    if role == "worker":
        lock_s, renew_s, stalled_s = stall_seconds(shape.longest_execution_s, shape.cpu_headroom)
        env.update(
            {
                "QUEUE_HEALTH_CHECK_ACTIVE": "true",  # workers answer /healthz, which their checks use
                "QUEUE_WORKER_LOCK_DURATION": str(lock_s * 1000),
                "QUEUE_WORKER_LOCK_RENEW_TIME": str(renew_s * 1000),
                "QUEUE_WORKER_STALLED_INTERVAL": str(stalled_s * 1000),
            }
        )
    return env


def _access(shape: N8nShape, w: Wiring) -> dict[str, str]:
    env = {"N8N_EDITOR_BASE_URL": w.public_url, "WEBHOOK_URL": w.public_url}
    if shape.profile == "production":
        env.update({"N8N_HOST": shape.domain or "", "N8N_PROTOCOL": "https"})
    else:
        env["N8N_SECURE_COOKIE"] = "false"  # the session cookie over plain HTTP
    if shape.behind_proxy:
        # The load balancer sets X-Forwarded-For; without a trusted hop main's rate limiter keys every client
        # as the load balancer's address (and logs express-rate-limit's ValidationError at the first request).
        env["N8N_PROXY_HOPS"] = "1"
    return env


def runner_env(shape: N8nShape, w: Wiring, broker_host: str) -> dict[str, str]:
    """A task runner sidecar (n8nio/runners) of main or a worker, external mode."""
    return {
        "N8N_RUNNERS_AUTH_TOKEN": w.runners_token,
        "N8N_RUNNERS_MAX_CONCURRENCY": str(shape.runner_concurrency),
        "N8N_RUNNERS_AUTO_SHUTDOWN_TIMEOUT": str(RUNNER_IDLE_SHUTDOWN_S),
        "N8N_RUNNERS_TASK_BROKER_URI": f"http://{broker_host}:{w.broker_port}",
    }


def role_env(shape: N8nShape, role: str, w: Wiring, *, broker_host: str = "") -> dict[str, str]:
    """Every n8n variable of one process: `role` main, webhook (`n8n webhook`), worker or runner (whose
    broker is on `broker_host`). Ordered as the rendered files show it; values are strings."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
    if role == "runner":
        return runner_env(shape, w, broker_host)
    if role == "webhook" and shape.mode != "queue":
        raise ValueError("webhook processors run in queue mode only")
    n8n_s, _ = shutdown_seconds(shape.longest_execution_s)
    env = {
        "EXECUTIONS_MODE": shape.mode,
        **_database(shape, role, w),
        **_queue(shape, role, w),
        "N8N_ENCRYPTION_KEY": w.encryption_key,  # one key for every n8n process on every host
        **_access(shape, w),
        "N8N_GRACEFUL_SHUTDOWN_TIMEOUT": str(n8n_s),  # above the longest execution; the stop grace longer
        **(EXECUTION_DATA if shape.profile == "bench" else PRODUCTION_EXECUTION_DATA),
        **(OUTBOUND_OFF if shape.profile == "bench" else TELEMETRY_OFF),
        "GENERIC_TIMEZONE": "UTC",
        "TZ": "UTC",
    }
    if shape.production_limit is not None and role != "webhook":
        env["N8N_CONCURRENCY_PRODUCTION_LIMIT"] = str(shape.production_limit)
    if role == "main":
        env["N8N_METRICS"] = "true"
        if shape.mode == "queue":  # main's /metrics carries the Bull queue gauges (seed 000)
            env.update({"N8N_METRICS_INCLUDE_QUEUE_METRICS": "true", "OFFLOAD_MANUAL_EXECUTIONS_TO_WORKERS": "true"})
        if shape.webhook_processors:  # production webhooks and forms go to the processors (the LB routes them)
            env["N8N_DISABLE_PRODUCTION_MAIN_PROCESS"] = "true"
    if role == "webhook":  # leaves the load balancer's rotation before n8n sees SIGTERM (bundle/drain.py)
        env.update(drain_env(w.drain_hook))
    if role == "worker":  # finishes every job Bull handed it before n8n stops its task runner (bundle/drain.py)
        env.update(worker_drain_env(w.drain_hook))
    if role != "webhook":  # `n8n webhook` starts no task broker, so it gets no runner
        env.update(
            {
                "N8N_RUNNERS_MODE": w.runners,
                "N8N_RUNNERS_BROKER_LISTEN_ADDRESS": w.broker_listen,
                "N8N_RUNNERS_BROKER_PORT": w.broker_port,
                "N8N_RUNNERS_MAX_CONCURRENCY": str(shape.runner_concurrency),
            }
        )
        if w.runners == "external":
            env["N8N_RUNNERS_AUTH_TOKEN"] = w.runners_token
    return env


POSTGRES_USER = "n8n"
POSTGRES_DATABASE = "n8n"
# Run by the postgres image's entrypoint on the first start of an empty volume (sourced: no `set -e` of its own).
# n8n's role owns its database and nothing else; the superuser is refused over TCP (pg_hba's first line), so
# it is reachable only from inside the container (`docker compose exec n8n-postgres psql -U postgres`).
# `$$` is Compose's escape for `$`: Compose interpolates configs' content too.
POSTGRES_INIT_SCRIPT = f"""\
# n8n-sizer: n8n's own Postgres role (least privilege); the superuser only for setup, over the socket.
psql -v ON_ERROR_STOP=1 --username "$$POSTGRES_USER" --dbname postgres --set pw="$$PG_ROLE_PASSWORD" <<'SQL'
CREATE ROLE {POSTGRES_USER} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION PASSWORD :'pw';
CREATE DATABASE {POSTGRES_DATABASE} OWNER {POSTGRES_USER};
REVOKE ALL ON DATABASE postgres, template1 FROM PUBLIC;
SQL
sed -i "1i host all $$POSTGRES_USER all reject" "$$PGDATA/pg_hba.conf"
"""


def postgres_init() -> dict[str, str]:
    """The Postgres container's side of n8n's role: its name and the init script that creates it."""
    return {"user": POSTGRES_USER, "database": POSTGRES_DATABASE, "script": POSTGRES_INIT_SCRIPT}


class N8nPorts(Frozen):
    """The TCP ports one n8n process listens on (all on 127.0.0.1)."""

    http: int  # main's N8N_PORT (workers get main's too, for WEBHOOK_URL)
    broker: int  # N8N_RUNNERS_BROKER_PORT: each process runs its own task broker
    health: int | None = None  # a worker's QUEUE_HEALTH_CHECK_PORT


def process_env(
    shape: N8nShape,
    role: str,
    wiring: Wiring,
    *,
    ports: N8nPorts,
    user_folder: Path,
    path: str,
    home: str,
    listen: str = "127.0.0.1",
    log_level: str = "info",
    extra: dict[str, str] | None = None,
) -> dict[str, str]:
    """`role_env` plus what a process started natively needs: its ports, folder, PATH and log settings."""
    env = {
        "PATH": path,
        "HOME": home,
        "LANG": "C.UTF-8",
        "N8N_USER_FOLDER": str(user_folder),
        "N8N_LISTEN_ADDRESS": listen,
        "N8N_HOST": listen,
        "N8N_PORT": str(ports.http),
        "N8N_PROTOCOL": "http",
        "N8N_ENFORCE_SETTINGS_FILE_PERMISSIONS": "true",
        "N8N_LOG_LEVEL": log_level,
        "N8N_LOG_OUTPUT": "console",
        **role_env(shape, role, wiring),
    }
    if role == "webhook":  # no broker of its own, but kept off the host's other processes' ports
        env["N8N_RUNNERS_BROKER_PORT"] = str(ports.broker)
    if role == "worker" and shape.mode == "queue":
        if ports.health is None:
            raise ValueError("a worker needs its own QUEUE_HEALTH_CHECK_PORT")
        env["QUEUE_HEALTH_CHECK_PORT"] = str(ports.health)
    env.update(extra or {})
    return env


def instance_owner_env(email: str, password_hash: str) -> dict[str, str]:
    """n8n creates its owner from these while it starts, before it serves a request (the lab uses it so that no
    local user can claim `/rest/owner/setup` on the lab's address first); the hash is bcrypt."""
    return {
        "N8N_INSTANCE_OWNER_MANAGED_BY_ENV": "true",
        "N8N_INSTANCE_OWNER_EMAIL": email,
        "N8N_INSTANCE_OWNER_PASSWORD_HASH": password_hash,
    }
