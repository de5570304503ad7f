"""`python -m n8n_sizer.localstack COMMAND --state DIR`: the local stack as commands, for use over SSH.

`up` starts the stack detached (every process in its own session, stdio to log files, so closing the
SSH session does not stop it), writes DIR/state.json and prints the state (no secrets) as JSON.
`down` stops everything by PID; `status` says what runs. The single-process commands are what the
drills need on a host they reach only over SSH.

    python -m n8n_sizer.localstack up --mode queue --workers 1 --state /tmp/stack
    python -m n8n_sizer.localstack up --mode queue --workers 1 --webhook-processors 2 --state /tmp/stack
    python -m n8n_sizer.localstack signal --state /tmp/stack --process worker-1 --signal KILL
    python -m n8n_sizer.localstack start-process --state /tmp/stack --process worker-1 --env N8N_ENCRYPTION_KEY=other
    python -m n8n_sizer.localstack redis --state /tmp/stack LLEN bull:jobs:wait
    python -m n8n_sizer.localstack down --state /tmp/stack
"""

from __future__ import annotations

import argparse
import json
import signal
from pathlib import Path

from pydantic import ValidationError

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.localstack.stack import LocalStack, StackOptions
from n8n_sizer.localstack.services import ServiceError, http_ok
from n8n_sizer.errors import InputError, exit_code


def _env_pairs(pairs: list[str]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InputError(f"--env {pair!r} is not KEY=VALUE; try --env N8N_LOG_LEVEL=debug")
        env[key] = value
    return env


def _state_json(stack: LocalStack) -> dict:
    state = json.loads(stack.state().model_dump_json())
    state["running"] = {name: stack.is_running(name) for name in stack.processes}
    return state


def _up(args: argparse.Namespace) -> int:
    try:
        setup = Setup(mode=args.mode, workers=args.workers if args.mode == "queue" else 0,
                      db=args.db, concurrency=args.concurrency, runner_concurrency=args.runner_concurrency,
                      production_limit=args.production_limit, db_pool_size=args.db_pool_size)
        options = StackOptions(redis_persistence=args.redis_persistence, pin_cpus=args.cpus,
                               extra_env=_env_pairs(args.env), start_timeout_s=args.start_timeout,
                               webhook_processors=args.webhook_processors)
    except ValidationError as exc:
        first = exc.errors()[0]
        flag = "--" + "-".join(str(p) for p in first["loc"]).replace("_", "-") if first["loc"] else "--mode/--workers/--db"
        raise InputError(f"{flag}: {first['msg'].removeprefix('Value error, ')}") from None
    stack = LocalStack(setup, options, stack_dir=args.state).start()
    print(json.dumps(_state_json(stack), indent=2))
    return 0


def _down(args: argparse.Namespace) -> int:
    stack = LocalStack.attach(args.state)
    stack.stop()
    print(json.dumps({"stopped": sorted(stack.processes), "state": str(args.state)}))
    return 0


def _status(args: argparse.Namespace) -> int:
    stack = LocalStack.attach(args.state)
    state = _state_json(stack)
    names = ["main", *stack.webhook_names, *(["caddy"] if stack.uses_load_balancer else []), *stack.worker_names]
    state["healthy"] = {name: http_ok(stack.health_url(name)) for name in names
                        if stack.is_running(name)}
    print(json.dumps(state, indent=2))
    return 0 if all(state["running"].values()) and all(state["healthy"].values()) else 1


def _signal(args: argparse.Namespace) -> int:
    sig = signal.Signals[f"SIG{args.signal.upper().removeprefix('SIG')}"]
    sent = LocalStack.attach(args.state).signal(args.process, sig, whole_group=not args.no_group)
    print(json.dumps({"process": args.process, "signal": sig.name, "sent": sent}))
    return 0


def _stop_process(args: argparse.Namespace) -> int:
    LocalStack.attach(args.state).stop_process(args.process, args.timeout)
    print(json.dumps({"process": args.process, "stopped": True}))
    return 0


def _start_process(args: argparse.Namespace) -> int:
    stack = LocalStack.attach(args.state)
    proc = stack.start_process(args.process, _env_pairs(args.env), wait=not args.no_wait,
                               redis_persistence=args.redis_persistence)
    print(json.dumps({"process": args.process, "pid": proc.pid, "port": proc.port,
                      "start_seconds": stack.start_seconds.get(args.process)}))
    return 0


def _wait_ready(args: argparse.Namespace) -> int:
    seconds = LocalStack.attach(args.state).wait_ready(args.process, args.timeout)
    print(json.dumps({"process": args.process, "ready_after_s": round(seconds, 2)}))
    return 0


def _redis(args: argparse.Namespace) -> int:
    from n8n_sizer.localstack.redis import RedisError, redis_command

    stack = LocalStack.attach(args.state)
    try:
        reply = redis_command(stack.redis_port, stack.secrets.redis_password, *args.args)
    except (RedisError, OSError) as exc:
        raise ServiceError(f"redis {' '.join(args.args[:2])}: {exc}") from None
    print(json.dumps({"reply": reply}))
    return 0


def _restart(args: argparse.Namespace) -> int:
    stack = LocalStack.attach(args.state)
    if args.command == "restart-redis":
        stack.restart_redis(args.redis_persistence)
    else:
        stack.restart_postgres()
    name = "redis" if args.command == "restart-redis" else "postgres"
    print(json.dumps({"process": name, "pid": stack.pid(name), "start_seconds": stack.start_seconds.get(name)}))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m n8n_sizer.localstack",
                                     description="Start, inspect and stop a native n8n stack on 127.0.0.1.")
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help_text: str, handler) -> argparse.ArgumentParser:
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        cmd.add_argument("--state", type=Path, required=True, help="the stack's folder (logs, data, state.json)")
        cmd.set_defaults(handler=handler)
        return cmd

    up = command("up", "start the stack detached and print its state as JSON", _up)
    up.add_argument("--mode", choices=["regular", "queue"], default="regular")
    up.add_argument("--workers", type=int, default=1, help="workers in queue mode (default 1)")
    up.add_argument("--db", choices=["sqlite", "postgres"], default="postgres")
    up.add_argument("--concurrency", type=int, default=10, help="worker --concurrency (default 10)")
    up.add_argument("--runner-concurrency", type=int, default=5, help="N8N_RUNNERS_MAX_CONCURRENCY (default 5)")
    up.add_argument("--production-limit", type=int, default=None, help="N8N_CONCURRENCY_PRODUCTION_LIMIT")
    up.add_argument("--db-pool-size", type=int, default=2, help="DB_POSTGRESDB_POOL_SIZE (default 2)")
    up.add_argument("--webhook-processors", type=int, default=0,
                    help="queue mode: `n8n webhook` processes behind Caddy on the stack's port (default 0)")
    up.add_argument("--redis-persistence", choices=["aof", "none"], default="aof")
    up.add_argument("--cpus", type=int, default=None, help="pin every process to cores 0..K-1 (taskset)")
    up.add_argument("--env", action="append", default=[], help="KEY=VALUE for every n8n process (repeatable)")
    up.add_argument("--start-timeout", type=float, default=180.0, help="seconds to wait for each process")
    command("down", "stop every process of the stack by PID", _down)
    command("status", "print the state with which processes run; exit 1 unless all run and are healthy", _status)
    sig = command("signal", "send a signal to one process and its children", _signal)
    sig.add_argument("--process", required=True, help="main, worker-N, webhook-N, caddy, redis or postgres")
    sig.add_argument("--signal", default="KILL", help="signal name (default KILL)")
    sig.add_argument("--no-group", action="store_true", help="only the process, not its children")
    stop = command("stop-process", "stop one process (TERM; Postgres INT), SIGKILL after --timeout", _stop_process)
    stop.add_argument("--process", required=True)
    stop.add_argument("--timeout", type=float, default=None, help="seconds before SIGKILL")
    start = command("start-process", "start one stopped process again on its ports and data", _start_process)
    start.add_argument("--process", required=True)
    start.add_argument("--env", action="append", default=[], help="KEY=VALUE overriding the n8n environment")
    start.add_argument("--no-wait", action="store_true", help="do not wait until it is ready")
    start.add_argument("--redis-persistence", choices=["aof", "none"], default=None)
    redis = command("restart-redis", "SIGKILL Redis and start it again", _restart)
    redis.add_argument("--redis-persistence", choices=["aof", "none"], default=None)
    command("restart-postgres", "fast-shutdown Postgres and start it again", _restart)
    ready = command("wait-ready", "wait until one process serves (readiness, health, PING, pg_isready)", _wait_ready)
    ready.add_argument("--process", required=True)
    ready.add_argument("--timeout", type=float, default=None, help="seconds (default: the stack's start timeout)")
    rcmd = command("redis", "one command on the stack's Redis (after AUTH); prints {\"reply\": ...}", _redis)
    rcmd.add_argument("args", nargs="+", help="the command and its arguments, e.g. LLEN bull:jobs:wait")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return exit_code("localstack", lambda: args.handler(args), remote=(ServiceError,))
