"""`n8n-sizer history export URL --out history.json`: read an instance's history (n8n_sizer.history, docs/history.md)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer

HISTORY_HELP = """An n8n instance's execution history, read through its public API (timings only, no payloads).

Example: N8N_API_KEY=... n8n-sizer history export https://n8n.example.com --out history.json --anonymise
"""

EXPORT_HELP = """Read the instance's workflows and executions over the window (--since, default 7 days) and write
what sizing needs: per workflow its trigger, node types, execution counts by status and mode, rates (mean, busiest
minute, 99th-percentile second), durations and each node's time split into CPU and waiting. Never payloads,
parameters or credentials; --anonymise hashes the names. The API key comes from N8N_API_KEY or --api-key-file.
Then: advise --history history.json --vcpu 4.

Example: N8N_API_KEY=... n8n-sizer history export https://n8n.example.com --out history.json --since 2d
"""


def register(app: typer.Typer) -> None:
    group = typer.Typer(help=HISTORY_HELP, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
    group.command("export", help=EXPORT_HELP)(export)
    app.add_typer(group, name="history")


def export(
    url: str = typer.Argument(..., help="The instance's base URL, e.g. https://n8n.example.com"),
    out: Path = typer.Option(..., "--out", help="History file to write (never overwritten)."),
    anonymise: bool = typer.Option(
        False, "--anonymise", help="Hash workflow and node names and ids (a key made for this file and thrown away)."
    ),
    since: str | None = typer.Option(
        None, "--since", help="Start of the window: 7d (default), 36h, 90m or an ISO time."
    ),
    until: str | None = typer.Option(
        None, "--until", help="End of the window: an ISO time or a time ago (default now)."
    ),
    api_key_file: Path | None = typer.Option(
        None, "--api-key-file", help="File holding the API key on one line, chmod 600 (else N8N_API_KEY)."
    ),
    sample: int = typer.Option(20, "--sample", help="Executions read with their data per workflow, for node times."),
    max_pages: int = typer.Option(2000, "--max-pages", help="Most requests the read makes."),
    max_mb: int = typer.Option(1024, "--max-mb", help="Most MiB the read downloads in all."),
    max_page_mb: int = typer.Option(32, "--max-page-mb", help="Most MiB of one answer."),
    max_seconds: float = typer.Option(900.0, "--max-seconds", help="Most seconds the read takes."),
    timeout_s: float = typer.Option(30.0, "--timeout", help="Seconds to wait for one answer."),
    json_out: bool = typer.Option(False, "--json", help="Print what was written as one JSON object."),
) -> None:
    from n8n_sizer.history.file import write_history
    from n8n_sizer.safety.files import require_output_folder

    require_output_folder(out.parent if str(out.parent) else Path("."), "--out", fix="write into an existing folder")
    history = read_instance(
        url, api_key_file, since, until, sample, anonymise, max_pages, max_mb, max_page_mb, max_seconds, timeout_s
    )
    write_history(history, out)
    if json_out:
        import json

        t = history.total
        print(
            json.dumps(
                {
                    "written": str(out),
                    "workflows": len(history.workflows),
                    "executions": t.executions,
                    "per_s_mean": t.per_s_mean,
                    "busiest_minute_per_s": t.busiest_minute_per_s,
                    "p99_second_per_s": t.p99_second_per_s,
                    "anonymised": history.anonymised,
                    "read": history.read.model_dump(mode="json", exclude={"instance"}),
                    "notes": list(history.notes),
                },
                indent=2,
            )
        )
        return
    print(summary_line(history, out))
    for note in history.notes:
        print(f"note: {note}", file=sys.stderr)


def summary_line(history, out: Path) -> str:
    from n8n_sizer.history.window import span_text

    r = history.read
    return (
        f"wrote {out}: {len(history.workflows)} workflow(s), {history.total.executions:,} executions over "
        f"{span_text(r.window_end_s - r.window_start_s)} ({history.total.per_s_mean:.3g}/s on average, busiest minute "
        f"{history.total.busiest_minute_per_s:.3g}/s); {r.requests} requests, {r.bytes_read / 1e6:.1f} MB, "
        f"{r.seconds:.1f} s" + (" (anonymised)" if history.anonymised else "")
    )


def read_instance(
    url: str,
    api_key_file: Path | None,
    since: str | None,
    until: str | None,
    sample: int = 20,
    anonymise: bool = False,
    max_pages: int = 2000,
    max_mb: int = 1024,
    max_page_mb: int = 32,
    max_seconds: float = 900.0,
    timeout_s: float = 30.0,
    flag: str = "URL",
):
    """Check the inputs (one line each, exit 2), then read the instance (one line, exit 1, when it fails)."""
    from n8n_sizer.history.read import ReadRequest, read_history
    from n8n_sizer.history.window import window_from
    from n8n_sizer.n8n.api_key import read_api_key
    from n8n_sizer.n8n.public_api import ReadBounds
    from n8n_sizer.safety import numbers as n

    base = instance_url(url, flag)
    n.check_numbers(
        {
            "--sample": (sample, n.Range(0, 250, example="20")),
            "--max-pages": (max_pages, n.Range(1, 1_000_000, example="2000")),
            "--max-mb": (max_mb, n.Range(1, 65_536, example="1024")),
            "--max-page-mb": (max_page_mb, n.Range(1, 4096, example="32")),
            "--max-seconds": (max_seconds, n.Range(1, 7 * 86400, example="900")),
            "--timeout": (timeout_s, n.Range(1, 3600, example="30")),
        }
    )
    since_s, until_s = window_from(since, until, time.time())
    key = read_api_key(api_key_file)
    bounds = ReadBounds(
        max_pages=max_pages,
        max_total_bytes=max_mb << 20,
        max_page_bytes=min(max_page_mb, max_mb) << 20,
        max_seconds=max_seconds,
        timeout_s=timeout_s,
    )
    req = ReadRequest(url=base, since_s=since_s, until_s=until_s, sample=sample, anonymise=anonymise, bounds=bounds)
    with read_progress() as progress:
        return read_history(req, key, progress)


@contextmanager
def read_progress() -> Iterator:
    """A rich line on stderr, on a terminal only: requests made, MB read, time so far."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    display = Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=Console(stderr=True)
    )
    task = display.add_task("reading the instance", total=None)

    def update(path: str, requests: int, read_bytes: int) -> None:
        what = "executions" if "executions" in path else "workflows"
        display.update(task, description=f"reading {what}: {requests} requests, {read_bytes / 1e6:.1f} MB")

    with display:
        yield update


def instance_url(url: object, flag: str = "--from-n8n") -> str:
    """The instance's base URL by the one URL grammar (safety/urls.py, `InputError` naming `flag`), without a
    trailing slash: the API's paths are added to it."""
    from n8n_sizer.safety.urls import require_url

    return require_url(url, flag).text.rstrip("/")
