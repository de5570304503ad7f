"""`python -m n8n_sizer.remote.lab_data up`: the data role of a lab host (`lab.data`), run ON the host over SSH:
Debian's Postgres and Redis on its private address; prints the endpoints (no secrets) as JSON.

    python -m n8n_sizer.remote.lab_data up --state DIR --listen 10.89.0.10 --subnet 10.89.0.0/24
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from n8n_sizer.errors import InputError, RemoteError
from n8n_sizer.remote.protocol import serve

app = typer.Typer(help="Postgres and Redis of a lab's data host.", add_completion=False, pretty_exceptions_enable=False)


@app.callback()
def _group() -> None:
    """The data role of a lab host."""


@app.command("up", help="start Postgres and Redis in a fresh --state folder; print their endpoints")
def up(
    state: Path = typer.Option(...),
    listen: str = typer.Option(...),
    subnet: str = typer.Option(...),
    max_connections: int = typer.Option(100),
    clients: str = typer.Option("", help="comma-separated addresses that may reach the data ports"),
):
    from n8n_sizer.lab.data import start_data_services

    if state.exists():
        raise InputError(f"--state {state} exists; the data role starts in a fresh folder")
    return start_data_services(state, listen, subnet, max_connections, [c for c in clients.split(",") if c])


def main(argv: list[str] | None = None) -> int:
    return serve(app, "lab_data", argv, remote_errors=(RemoteError, OSError))


if __name__ == "__main__":
    sys.exit(main())
