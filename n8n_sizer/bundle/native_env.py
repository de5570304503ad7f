"""The wiring, secrets and command line of an n8n process started outside Docker: the native stack (`bench --local`)
and the lab's hosts. `n8n_env` here is `n8n_env.process_env` (role_env plus ports and folders) with the native
wiring (addresses on 127.0.0.1 or a lab host's, ports picked at start, secrets as values from the stack's 0600
file), so these processes get exactly what `render` writes for the same role."""

from __future__ import annotations

from pathlib import Path

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.bundle.drain import HOOK_TEMPLATE
from n8n_sizer.bundle.n8n_env import POSTGRES_USER, REDIS_N8N_USER, N8nPorts, Wiring, process_env, shape_of_setup
from n8n_sizer.safety.frozen import Frozen


class NativeSecrets(Frozen):
    """A native stack's secrets (local stack, lab): generated per stack, kept in a 0600 file, never printed. The
    rendered bundles' secrets are `bundle.secrets.StackSecrets`."""

    def __repr__(self) -> str:  # never let a secret reach a log line or a traceback
        return "NativeSecrets(<hidden>)"

    __str__ = __repr__

    encryption_key: str
    postgres_password: str
    redis_password: str  # the default user's: the operator's (PING, telemetry, drills), never n8n's
    redis_n8n_password: str  # n8n's ACL user (REDIS_N8N_USER)
    # StackOptions.extra_env: it may carry a secret (a key, a token), so state.json shows only its keys.
    extra_env: dict[str, str] = {}


def native_wiring(
    secrets: NativeSecrets,
    *,
    http_port: int,
    broker_port: int,
    postgres_port: int | None,
    redis_port: int | None,
    host: str = "127.0.0.1",
    public_url: str | None = None,
) -> Wiring:
    """A process started natively on one host: everything on `host`, runners internal (the launcher of
    external mode is not in the npm package, notes/real-n8n.md)."""
    return Wiring(
        postgres_host=host,
        postgres_port=str(postgres_port or ""),
        postgres_user=POSTGRES_USER,
        postgres_password=secrets.postgres_password,
        redis_host=host,
        redis_port=str(redis_port or ""),
        redis_user=REDIS_N8N_USER,
        redis_password=secrets.redis_n8n_password,
        encryption_key=secrets.encryption_key,
        public_url=public_url or f"http://{host}:{http_port}/",
        runners="internal",
        runners_token="",
        broker_listen="127.0.0.1",
        broker_port=str(broker_port),
        drain_hook=str(HOOK_TEMPLATE),  # the package's own file: the lab runs from the same tree
    )


def n8n_env(
    setup: Setup,
    *,
    role: str,
    ports: N8nPorts,
    user_folder: Path,
    secrets: NativeSecrets,
    postgres_port: int | None,
    redis_port: int | None,
    path: str,
    home: str,
    log_level: str = "info",
    extra: dict[str, str] | None = None,
    webhook_processors: int = 0,
    public_url: str | None = None,
) -> dict[str, str]:
    """Environment for `n8n start` (role "main"), `n8n worker` ("worker") or `n8n webhook` ("webhook") of the
    native stack on this machine: `role_env` of the setup, wired to 127.0.0.1. With `webhook_processors`, main
    leaves production webhooks to them and every process gives out `public_url` (the load balancer's), as the
    cluster's rendered files do."""
    if setup.db == "postgres" and postgres_port is None:
        raise ValueError("db=postgres needs a Postgres port")
    if setup.mode == "queue" and redis_port is None:
        raise ValueError("queue mode needs a Redis port")
    wiring = native_wiring(
        secrets,
        http_port=ports.http,
        broker_port=ports.broker,
        postgres_port=postgres_port,
        redis_port=redis_port,
        public_url=public_url,
    )
    return process_env(
        shape_of_setup(setup).model_copy(
            update={"webhook_processors": webhook_processors, "behind_proxy": webhook_processors > 0}
        ),
        role,
        wiring,
        ports=ports,
        user_folder=user_folder,
        path=path,
        home=home,
        log_level=log_level,
        extra=extra,
    )


def n8n_argv(node_bin: Path, n8n_bin: Path, setup: Setup, role: str) -> list[str]:
    if role == "worker":
        return [str(node_bin), str(n8n_bin), "worker", f"--concurrency={setup.concurrency}"]
    return [str(node_bin), str(n8n_bin), "start"]
