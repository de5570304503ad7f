"""The n8n environment for a setup and a role, in one place.

`n8n_settings(setup, role)` gives what follows from the setup alone (mode, pool, runner limit, production
limit, graceful-shutdown timeout, Bull retention, metrics): the compose template renders these values and the
native stack starts its processes with them, so the two cannot drift. `n8n_env` adds what a natively started
process needs on this machine (ports, folders, secrets, addresses).

Everything that would call out of this machine is switched off (the machine reaches no host but the
package registries, and tests send traffic to 127.0.0.1 only). The names come from n8n's config
package (`@n8n/config`, 2.41.1) and from what the logs showed on start.
"""

from __future__ import annotations

from pathlib import Path


from n8n_sizer.advisor.settings import queue_keep_last_env
from n8n_sizer.advisor.setup import DEFAULT_GRACEFUL_SHUTDOWN_S, Setup
from n8n_sizer.safety.frozen import Frozen

# n8n's own timeout must exceed the longest execution (seed 000, drill 6: 50 s runs were cut at 30 s),
# and the stop grace period (Docker's, or the native stack's SIGKILL deadline) must exceed n8n's, or the
# process is killed before it finishes waiting.
SHUTDOWN_MARGIN_S = 15
ROLES = ("main", "worker")


def shutdown_seconds(longest_execution_s: int) -> tuple[int, int]:
    """(N8N_GRACEFUL_SHUTDOWN_TIMEOUT, stop grace period) in seconds, each above the one before."""
    n8n_s = max(DEFAULT_GRACEFUL_SHUTDOWN_S, longest_execution_s + SHUTDOWN_MARGIN_S)
    return n8n_s, n8n_s + SHUTDOWN_MARGIN_S


def shutdown_timeouts(setup: Setup) -> tuple[int, int]:
    """`shutdown_seconds` for a setup's longest execution: one host's stack and a cluster's hosts alike."""
    return shutdown_seconds(setup.longest_execution_s)


def n8n_settings(setup: Setup, role: str) -> dict[str, str]:
    """The variables that follow from the setup alone, for `role` "main" or "worker"."""
    if role not in ROLES:
        raise ValueError(f"role must be main or worker, not {role!r}")
    env = {
        "EXECUTIONS_MODE": setup.mode,
        "N8N_RUNNERS_MAX_CONCURRENCY": str(setup.runner_concurrency),
        "N8N_GRACEFUL_SHUTDOWN_TIMEOUT": str(shutdown_timeouts(setup)[0]),
    }
    if setup.production_limit is not None:
        env["N8N_CONCURRENCY_PRODUCTION_LIMIT"] = str(setup.production_limit)
    if setup.db == "postgres":
        env["DB_POSTGRESDB_POOL_SIZE"] = str(setup.db_pool_size)
    if setup.mode == "queue":
        env.update(queue_keep_last_env())  # main never waits forever on a fast job (README)
        if role == "main":  # main's /metrics carries the Bull queue gauges (seed 000)
            env.update({"N8N_METRICS": "true", "N8N_METRICS_INCLUDE_QUEUE_METRICS": "true"})
        else:
            env["QUEUE_HEALTH_CHECK_ACTIVE"] = "true"  # workers answer /healthz, which their checks use
    return env

# Each of these made n8n reach a host on the internet (or would): telemetry, update checks, template and
# banner fetches, the community-node registry, the AI assistant and license renewal.
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

# Keep every execution for the run, as the rendered bench profile does: pruning on, no count cap (n8n 2.41.1
# applies EXECUTIONS_DATA_PRUNE_MAX_COUNT only when > 0), a week's age limit. The ledger counts stored
# executions after a run, and n8n's default cap (10,000) would delete some during seed 000's default plan
# (5, 20, 50 req/s x 180 s = 13,500 executions).
EXECUTION_DATA = {
    "EXECUTIONS_DATA_PRUNE": "true",
    "EXECUTIONS_DATA_MAX_AGE": "168",
    "EXECUTIONS_DATA_PRUNE_MAX_COUNT": "0",
    "EXECUTIONS_DATA_SAVE_ON_SUCCESS": "all",
    "EXECUTIONS_DATA_SAVE_ON_ERROR": "all",
}


class StackSecrets(Frozen):
    """Generated per stack, kept in a 0600 file, never printed."""

    encryption_key: str
    postgres_password: str
    redis_password: str
    # StackOptions.extra_env: it may carry a secret (a key, a token), so state.json shows only its keys.
    extra_env: dict[str, str] = {}


class N8nPorts(Frozen):
    """The TCP ports one n8n process listens on (all on 127.0.0.1)."""

    http: int  # main's N8N_PORT (workers get main's too, for WEBHOOK_URL)
    broker: int  # N8N_RUNNERS_BROKER_PORT: each process runs its own task broker
    health: int | None = None  # a worker's QUEUE_HEALTH_CHECK_PORT


POSTGRES_USER = "n8n"
POSTGRES_DATABASE = "n8n"


def n8n_env(setup: Setup, *, role: str, ports: N8nPorts, user_folder: Path, secrets: StackSecrets,
            postgres_port: int | None, redis_port: int | None, path: str, home: str,
            log_level: str = "info", extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for `n8n start` (role "main") or `n8n worker` (role "worker"): `n8n_settings` plus what a
    process started natively on this machine needs."""
    env = {
        "PATH": path,
        "HOME": home,
        "LANG": "C.UTF-8",
        "N8N_USER_FOLDER": str(user_folder),
        "N8N_ENCRYPTION_KEY": secrets.encryption_key,
        "N8N_LISTEN_ADDRESS": "127.0.0.1",
        "N8N_HOST": "127.0.0.1",
        "N8N_PORT": str(ports.http),
        "N8N_PROTOCOL": "http",
        "WEBHOOK_URL": f"http://127.0.0.1:{ports.http}/",
        "N8N_SECURE_COOKIE": "false",  # the session cookie over plain HTTP on 127.0.0.1
        "N8N_ENFORCE_SETTINGS_FILE_PERMISSIONS": "true",
        "N8N_LOG_LEVEL": log_level,
        "N8N_LOG_OUTPUT": "console",
        # Internal runners: the launcher of external mode is not in the npm package (notes/real-n8n.md).
        "N8N_RUNNERS_MODE": "internal",
        "N8N_RUNNERS_BROKER_LISTEN_ADDRESS": "127.0.0.1",
        "N8N_RUNNERS_BROKER_PORT": str(ports.broker),
        **OUTBOUND_OFF,
        **EXECUTION_DATA,
        **n8n_settings(setup, role),
    }
    if setup.db == "postgres":
        if postgres_port is None:
            raise ValueError("db=postgres needs a Postgres port")
        env.update({
            "DB_TYPE": "postgresdb",
            "DB_POSTGRESDB_HOST": "127.0.0.1",
            "DB_POSTGRESDB_PORT": str(postgres_port),
            "DB_POSTGRESDB_DATABASE": POSTGRES_DATABASE,
            "DB_POSTGRESDB_USER": POSTGRES_USER,
            "DB_POSTGRESDB_PASSWORD": secrets.postgres_password,
        })
    else:
        env["DB_TYPE"] = "sqlite"
    if setup.mode == "queue":
        if redis_port is None:
            raise ValueError("queue mode needs a Redis port")
        env.update({
            "QUEUE_BULL_REDIS_HOST": "127.0.0.1",
            "QUEUE_BULL_REDIS_PORT": str(redis_port),
            "QUEUE_BULL_REDIS_PASSWORD": secrets.redis_password,
        })
        if role == "worker":
            if ports.health is None:
                raise ValueError("a worker needs its own QUEUE_HEALTH_CHECK_PORT")
            env["QUEUE_HEALTH_CHECK_PORT"] = str(ports.health)
    env.update(extra or {})
    return env


def n8n_argv(node_bin: Path, n8n_bin: Path, setup: Setup, role: str) -> list[str]:
    if role == "worker":
        return [str(node_bin), str(n8n_bin), "worker", f"--concurrency={setup.concurrency}"]
    return [str(node_bin), str(n8n_bin), "start"]
