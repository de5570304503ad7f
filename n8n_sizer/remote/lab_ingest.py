"""`python -m n8n_sizer.remote.lab_ingest up`: the ingest host's load balancer in a lab (`lab.ingest`): Debian's
Caddy running the Caddyfile `render --topology` wrote, run ON the host over SSH; prints the process as JSON.

    python -m n8n_sizer.remote.lab_ingest up --state DIR --config Caddyfile --listen 10.89.0.11
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from n8n_sizer.errors import RemoteError
from n8n_sizer.remote.protocol import serve

app = typer.Typer(
    help="The load balancer of a lab's ingest host.", add_completion=False, pretty_exceptions_enable=False
)


@app.callback()
def _group() -> None:
    """The load balancer of a lab's ingest host."""


@app.command("up", help="start Caddy with --config and wait until it routes to main")
def up(state: Path = typer.Option(...), config: Path = typer.Option(...), listen: str = typer.Option(...)):
    from n8n_sizer.lab.ingest import start_caddy

    return start_caddy(state, config, listen)


def main(argv: list[str] | None = None) -> int:
    return serve(app, "lab_ingest", argv, remote_errors=(RemoteError, OSError))


if __name__ == "__main__":
    sys.exit(main())
