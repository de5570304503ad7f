"""`python -m n8n_sizer.remote.native_stack COMMAND --state DIR`: the native local stack (`native.stack`) as
commands, for use over SSH; each prints its result as JSON on the last line (`remote.protocol`).

    python -m n8n_sizer.remote.native_stack up --mode queue --workers 1 --state /tmp/stack
    python -m n8n_sizer.remote.native_stack up --mode queue --workers 1 --webhook-processors 2 --state /tmp/stack
    python -m n8n_sizer.remote.native_stack signal --state /tmp/stack --process worker-1 --signal KILL
    python -m n8n_sizer.remote.native_stack start-process --state /tmp/stack --process worker-1 --env KEY=VALUE
    python -m n8n_sizer.remote.native_stack redis --state /tmp/stack LLEN bull:jobs:wait
    python -m n8n_sizer.remote.native_stack down --state /tmp/stack
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import typer
from pydantic import ValidationError

from n8n_sizer.errors import InputError
from n8n_sizer.remote.protocol import ExitWith, serve

app = typer.Typer(
    help="Start, inspect and stop a native n8n stack on 127.0.0.1.",
    add_completion=False,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
)
STATE = typer.Option(..., "--state", help="the stack's folder (logs, data, state.json)")
PROCESS = typer.Option(..., "--process", help="main, worker-N, webhook-N, caddy, redis or postgres")


def _choice(value: str | None, flag: str, allowed: tuple[str, ...]) -> str | None:
    if value is not None and value not in allowed:
        raise InputError(f"{flag} {value!r} is not one of {', '.join(allowed)}; try {flag} {allowed[0]}")
    return value


def _env_pairs(pairs: list[str]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InputError(f"--env {pair!r} is not KEY=VALUE; try --env N8N_LOG_LEVEL=debug")
        env[key] = value
    return env


def _attach(state: Path):
    from n8n_sizer.native.stack import LocalStack

    return LocalStack.attach(state)


def _state_json(stack) -> dict:
    state = json.loads(stack.state().model_dump_json())
    state["running"] = {name: stack.is_running(name) for name in stack.processes}
    return state


@app.command("up", help="start the stack detached and print its state as JSON")
def up(
    state: Path = STATE,
    mode: str = typer.Option("regular", help="regular or queue"),
    workers: int = typer.Option(1, help="workers in queue mode (default 1)"),
    db: str = typer.Option("postgres", help="sqlite or postgres"),
    concurrency: int = typer.Option(10, help="worker --concurrency (default 10)"),
    runner_concurrency: int = typer.Option(5, help="N8N_RUNNERS_MAX_CONCURRENCY (default 5)"),
    production_limit: int | None = typer.Option(None, help="N8N_CONCURRENCY_PRODUCTION_LIMIT"),
    db_pool_size: int = typer.Option(2, help="DB_POSTGRESDB_POOL_SIZE (default 2)"),
    webhook_processors: int = typer.Option(0, help="queue mode: `n8n webhook` processes behind Caddy"),
    redis_persistence: str = typer.Option("aof", help="aof or none"),
    cpus: int | None = typer.Option(None, help="pin every process to cores 0..K-1 (taskset)"),
    env: list[str] = typer.Option([], help="KEY=VALUE for every n8n process (repeatable)"),
    start_timeout: float = typer.Option(180.0, help="seconds to wait for each process"),
) -> dict:
    from n8n_sizer.advisor.setup import Setup
    from n8n_sizer.native.stack import LocalStack, StackOptions

    _choice(mode, "--mode", ("regular", "queue"))
    _choice(db, "--db", ("postgres", "sqlite"))
    _choice(redis_persistence, "--redis-persistence", ("aof", "none"))
    try:
        setup = Setup(
            mode=mode,
            workers=workers if mode == "queue" else 0,
            db=db,
            concurrency=concurrency,
            runner_concurrency=runner_concurrency,
            production_limit=production_limit,
            db_pool_size=db_pool_size,
        )
        options = StackOptions(
            redis_persistence=redis_persistence,
            pin_cpus=cpus,
            extra_env=_env_pairs(env),
            start_timeout_s=start_timeout,
            webhook_processors=webhook_processors,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        flag = (
            "--" + "-".join(str(p) for p in first["loc"]).replace("_", "-") if first["loc"] else "--mode/--workers/--db"
        )
        raise InputError(f"{flag}: {first['msg'].removeprefix('Value error, ')}") from None
    return _state_json(LocalStack(setup, options, stack_dir=state).start())


@app.command("down", help="stop every process of the stack by PID")
def down(state: Path = STATE) -> dict:
    stack = _attach(state)
    stack.stop()
    return {"stopped": sorted(stack.processes), "state": str(state)}


@app.command("status", help="print the state with which processes run; exit 1 unless all run and are healthy")
def status(state: Path = STATE) -> ExitWith:
    from n8n_sizer.native.services import http_ok

    stack = _attach(state)
    doc = _state_json(stack)
    names = ["main", *stack.webhook_names, *(["caddy"] if stack.uses_load_balancer else []), *stack.worker_names]
    doc["healthy"] = {name: http_ok(stack.health_url(name)) for name in names if stack.is_running(name)}
    return ExitWith(doc, 0 if all(doc["running"].values()) and all(doc["healthy"].values()) else 1)


@app.command("signal", help="send a signal to one process and its children")
def send_signal(
    state: Path = STATE,
    process: str = PROCESS,
    signal_name: str = typer.Option("KILL", "--signal", help="signal name (default KILL)"),
    no_group: bool = typer.Option(False, "--no-group", help="only the process, not its children"),
) -> dict:
    try:
        sig = signal.Signals[f"SIG{signal_name.upper().removeprefix('SIG')}"]
    except KeyError:
        raise InputError(f"--signal {signal_name!r} is not a signal name; try --signal TERM") from None
    sent = _attach(state).signal(process, sig, whole_group=not no_group)
    return {"process": process, "signal": sig.name, "sent": sent}


@app.command("stop-process", help="stop one process (TERM; Postgres INT), SIGKILL after --timeout")
def stop_process(
    state: Path = STATE,
    process: str = PROCESS,
    timeout: float | None = typer.Option(None, help="seconds before SIGKILL"),
) -> dict:
    forced = _attach(state).stop_process(process, timeout)
    return {"process": process, "stopped": True, "forced": forced}


@app.command("start-process", help="start one stopped process again on its ports and data")
def start_process(
    state: Path = STATE,
    process: str = PROCESS,
    env: list[str] = typer.Option([], help="KEY=VALUE overriding the n8n environment"),
    no_wait: bool = typer.Option(False, "--no-wait", help="do not wait until it is ready"),
    redis_persistence: str | None = typer.Option(None, help="aof or none"),
) -> dict:
    _choice(redis_persistence, "--redis-persistence", ("aof", "none"))
    stack = _attach(state)
    proc = stack.start_process(process, _env_pairs(env), wait=not no_wait, redis_persistence=redis_persistence)
    return {"process": process, "pid": proc.pid, "port": proc.port, "start_seconds": stack.start_seconds.get(process)}


@app.command("wait-ready", help="wait until one process serves (readiness, health, PING, pg_isready)")
def wait_ready(
    state: Path = STATE,
    process: str = PROCESS,
    timeout: float | None = typer.Option(None, help="seconds (default: the stack's start timeout)"),
) -> dict:
    seconds = _attach(state).wait_ready(process, timeout)
    return {"process": process, "ready_after_s": round(seconds, 2)}


@app.command("redis", help='one command on the stack\'s Redis (after AUTH); prints {"reply": ...}')
def redis(
    args: list[str] = typer.Argument(..., help="the command and its arguments, e.g. LLEN bull:jobs:wait"),
    state: Path = STATE,
) -> dict:
    from n8n_sizer.native.redis import RedisError, redis_command
    from n8n_sizer.native.services import ServiceError

    stack = _attach(state)
    try:
        reply = redis_command(stack.redis_port, stack.secrets.redis_password, *args)
    except (RedisError, OSError) as exc:
        raise ServiceError(f"redis {' '.join(args[:2])}: {exc}") from None
    return {"reply": reply}


def _restarted(stack, name: str) -> dict:
    return {"process": name, "pid": stack.pid(name), "start_seconds": stack.start_seconds.get(name)}


@app.command("restart-redis", help="SIGKILL Redis and start it again")
def restart_redis(state: Path = STATE, redis_persistence: str | None = typer.Option(None, help="aof or none")) -> dict:
    _choice(redis_persistence, "--redis-persistence", ("aof", "none"))
    stack = _attach(state)
    stack.restart_redis(redis_persistence)
    return _restarted(stack, "redis")


@app.command("restart-postgres", help="fast-shutdown Postgres and start it again")
def restart_postgres(state: Path = STATE) -> dict:
    stack = _attach(state)
    stack.restart_postgres()
    return _restarted(stack, "postgres")


def main(argv: list[str] | None = None) -> int:
    from n8n_sizer.errors import RemoteError
    from n8n_sizer.native.services import ServiceError

    return serve(app, "native_stack", argv, remote_errors=(RemoteError, ServiceError))


if __name__ == "__main__":
    sys.exit(main())
