"""The environment of one natively started n8n process (main or worker): a pure function of its inputs.

Everything that would call out of this machine is switched off (the machine reaches no host but the
package registries, and tests send traffic to 127.0.0.1 only). The names come from n8n's config
package (`@n8n/config`, 2.41.1) and from what the logs showed on start.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from n8n_sizer.advisor.settings import queue_keep_last_env
from n8n_sizer.advisor.setup import Setup

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

# Keep every execution, and never prune: the ledger counts stored executions after a run, and n8n's
# default pruning (EXECUTIONS_DATA_PRUNE_MAX_COUNT=10000) would delete some during seed 000's default
# plan (5, 20, 50 req/s x 180 s = 13,500 executions).
EXECUTION_DATA = {
    "EXECUTIONS_DATA_PRUNE": "false",
    "EXECUTIONS_DATA_SAVE_ON_SUCCESS": "all",
    "EXECUTIONS_DATA_SAVE_ON_ERROR": "all",
}


class StackSecrets(BaseModel):
    """Generated per stack, kept in a 0600 file, never printed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    encryption_key: str
    postgres_password: str
    redis_password: str
    # StackOptions.extra_env: it may carry a secret (a key, a token), so state.json shows only its keys.
    extra_env: dict[str, str] = {}


class N8nPorts(BaseModel):
    """The TCP ports one n8n process listens on (all on 127.0.0.1)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    http: int  # main's N8N_PORT (workers get main's too, for WEBHOOK_URL)
    broker: int  # N8N_RUNNERS_BROKER_PORT: each process runs its own task broker
    health: int | None = None  # a worker's QUEUE_HEALTH_CHECK_PORT


POSTGRES_USER = "n8n"
POSTGRES_DATABASE = "n8n"


def n8n_env(setup: Setup, *, role: str, ports: N8nPorts, user_folder: Path, secrets: StackSecrets,
            postgres_port: int | None, redis_port: int | None, path: str, home: str,
            log_level: str = "info", extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for `n8n start` (role "main") or `n8n worker` (role "worker")."""
    if role not in ("main", "worker"):
        raise ValueError(f"role must be main or worker, not {role!r}")
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
        "N8N_RUNNERS_MAX_CONCURRENCY": str(setup.runner_concurrency),
        "N8N_GRACEFUL_SHUTDOWN_TIMEOUT": str(setup.longest_execution_s),
        "N8N_CONCURRENCY_PRODUCTION_LIMIT": str(setup.production_limit if setup.production_limit else -1),
        **OUTBOUND_OFF,
        **EXECUTION_DATA,
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
            "DB_POSTGRESDB_POOL_SIZE": str(setup.db_pool_size),
        })
    else:
        env["DB_TYPE"] = "sqlite"
    if setup.mode == "queue":
        if redis_port is None:
            raise ValueError("queue mode needs a Redis port")
        env.update({
            "EXECUTIONS_MODE": "queue",
            "QUEUE_BULL_REDIS_HOST": "127.0.0.1",
            "QUEUE_BULL_REDIS_PORT": str(redis_port),
            "QUEUE_BULL_REDIS_PASSWORD": secrets.redis_password,
            **queue_keep_last_env(),  # as the rendered stacks do: main never waits forever on a fast job
        })
        if role == "main":
            # As the rendered compose stacks do: main's /metrics carries the Bull queue gauges (seed 000).
            env.update({"N8N_METRICS": "true", "N8N_METRICS_INCLUDE_QUEUE_METRICS": "true"})
        if role == "worker":
            if ports.health is None:
                raise ValueError("a worker needs its own QUEUE_HEALTH_CHECK_PORT")
            env.update({"QUEUE_HEALTH_CHECK_ACTIVE": "true", "QUEUE_HEALTH_CHECK_PORT": str(ports.health)})
    env.update(extra or {})
    return env


def n8n_argv(node_bin: Path, n8n_bin: Path, setup: Setup, role: str) -> list[str]:
    if role == "worker":
        return [str(node_bin), str(n8n_bin), "worker", f"--concurrency={setup.concurrency}"]
    return [str(node_bin), str(n8n_bin), "start"]
