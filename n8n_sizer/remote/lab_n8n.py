"""`python -m n8n_sizer.remote.lab_n8n up`: one n8n process of a lab host (`lab.n8n_role`: main, a webhook
processor or a worker), run ON the host over SSH, with the environment `render --topology` wrote for that role;
prints the process (no secrets) as JSON once it is ready.

    python -m n8n_sizer.remote.lab_n8n up --role worker --name worker-1 --state DIR --data 10.89.0.10 \\
        --listen 10.89.0.12 --main 10.89.0.11 --secrets FILE --topology FILE
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from n8n_sizer.errors import InputError, RemoteError
from n8n_sizer.remote.protocol import serve

app = typer.Typer(help="An n8n process of a lab host.", add_completion=False, pretty_exceptions_enable=False)
ROLES = ("main", "webhook", "worker")


@app.callback()
def _group() -> None:
    """An n8n process of a lab host."""


@app.command("up", help="start one n8n process of --role and wait until it is ready")
def up(
    role: str = typer.Option(..., help="main, webhook or worker"),
    name: str = typer.Option(...),
    state: Path = typer.Option(...),
    data: str = typer.Option(...),
    listen: str = typer.Option(...),
    main: str = typer.Option(...),
    secrets: Path = typer.Option(...),
    topology: Path = typer.Option(...),
    index: int = typer.Option(1),
    owner: Path | None = typer.Option(None),
):
    from n8n_sizer.lab.n8n_role import start_n8n_role

    if role not in ROLES:
        raise InputError(f"--role {role!r} is not one of {', '.join(ROLES)}; try --role worker")
    if os.stat(secrets).st_mode & 0o077:
        raise InputError(f"--secrets {secrets} is readable by others; chmod 600 it")
    return start_n8n_role(role, name, state, data, listen, main, secrets, topology, index, owner)


def main(argv: list[str] | None = None) -> int:
    return serve(app, "lab_n8n", argv, remote_errors=(RemoteError, OSError))


if __name__ == "__main__":
    sys.exit(main())
