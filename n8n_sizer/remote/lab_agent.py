"""`python -m n8n_sizer.remote.lab_agent COMMAND`: the drills' hands on a lab host (`lab.host_agent`), run ON the
host over SSH, inside its network namespace; each command prints one JSON result.

    python -m n8n_sizer.remote.lab_agent ps
    python -m n8n_sizer.remote.lab_agent stop --pid 4711 --snapshot DIR/worker-1.json --signal TERM --grace 35
    python -m n8n_sizer.remote.lab_agent start --snapshot DIR/worker-1.json --ready-http URL
    python -m n8n_sizer.remote.lab_agent signal --pid 4711 --signal KILL
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from n8n_sizer.errors import InputError, RemoteError
from n8n_sizer.lab import host_agent
from n8n_sizer.remote.protocol import serve

app = typer.Typer(
    help="The drills' hands on a lab host.", add_completion=False, pretty_exceptions_enable=False, no_args_is_help=True
)
PID = typer.Option(..., "--pid", help="a process of this host")
SNAPSHOT = typer.Option(..., "--snapshot", help="the process's 0600 snapshot file")
SIGNAL = typer.Option("TERM", "--signal", help=f"one of {', '.join(sorted(host_agent.SIGNALS))}")
READY_HTTP = typer.Option(None, "--ready-http", help="an n8n or Caddy URL that answers 200 once ready")
READY_REDIS = typer.Option(None, "--ready-redis", help="the cluster's secrets file (redis_password) to PING with")


def _signal(name: str) -> str:
    if name not in host_agent.SIGNALS:
        raise InputError(f"--signal {name!r} is not one of {', '.join(sorted(host_agent.SIGNALS))}; try --signal TERM")
    return name


@app.command("ps", help="every process of this host but its sshd")
def ps() -> list:
    return host_agent.host_processes()


@app.command("save", help="snapshot a running process so it can be started again")
def save(pid: int = PID, snapshot: Path = SNAPSHOT) -> dict:
    return host_agent.save(pid, snapshot)


@app.command("stop", help="snapshot, signal, wait up to --grace, then SIGKILL what is left")
def stop(
    pid: int = PID,
    snapshot: Path = SNAPSHOT,
    signal: str = SIGNAL,
    grace: float = typer.Option(35.0, "--grace", help="seconds before SIGKILL"),
) -> dict:
    return host_agent.stop(pid, snapshot, _signal(signal), grace)


@app.command("start", help="start a snapshot's process again and wait until it is ready")
def start(
    snapshot: Path = SNAPSHOT,
    ready_http: str | None = READY_HTTP,
    ready_redis: str | None = READY_REDIS,
    timeout: float = typer.Option(300.0, "--timeout", help="seconds to wait until it is ready"),
) -> dict:
    return host_agent.start(snapshot, ready_http, ready_redis, timeout)


@app.command("signal", help="send one signal to a process of this host")
def send(pid: int = PID, signal: str = SIGNAL) -> dict:
    return host_agent.send(pid, _signal(signal))


@app.command("ready", help="one readiness check, no waiting")
def ready(ready_http: str | None = READY_HTTP, ready_redis: str | None = READY_REDIS) -> dict:
    return {"ready": host_agent.ready(ready_http, ready_redis)}


def main(argv: list[str] | None = None) -> int:
    return serve(app, "lab_agent", argv, remote_errors=(RemoteError, OSError))


if __name__ == "__main__":
    sys.exit(main())
