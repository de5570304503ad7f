"""`python -m n8n_sizer.remote.install_n8n`: Node.js 24 and the pinned n8n into the n8n-sizer cache
(`native.install`, idempotent); prints the install's paths as JSON on the last line.

    python -m n8n_sizer.remote.install_n8n
    python -m n8n_sizer.remote.install_n8n --n8n-version 2.41.1 --cache /tmp/cache
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from n8n_sizer.remote.protocol import serve
from n8n_sizer.versions import N8N_VERSION

app = typer.Typer(
    help="Install Node 24 and n8n into the n8n-sizer cache (idempotent).",
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.command()
def install(
    n8n_version: str = typer.Option(N8N_VERSION, help=f"n8n version to install (default: the pin, {N8N_VERSION})"),
    cache: Path | None = typer.Option(None, help="cache folder (default: $N8N_SIZER_CACHE or ~/.cache/n8n-sizer)"),
):
    from n8n_sizer.native.install import install_n8n

    return install_n8n(n8n_version, cache)


def main(argv: list[str] | None = None) -> int:
    return serve(app, "install_n8n", argv)  # a failed npm or download step is a RemoteError: exit 1


if __name__ == "__main__":
    sys.exit(main())
