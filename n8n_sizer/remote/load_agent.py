"""`python -m n8n_sizer.remote.load_agent`: one load generator's share of a rate step (`bench.agent`), run ON the
generator host over SSH with the built-in driver; writes its RequestRecords to `--out` (0600, never
overwritten) and prints the step's tally as JSON.

    python -m n8n_sizer.remote.load_agent --url http://10.89.0.11:5678/webhook/PATH --rate 2 --duration 15 \\
        --seq-start 1040 --step rate-4 --target cluster --generator gen-1 --out /tmp/FILE.jsonl --deadline-s 45
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from n8n_sizer.errors import InputError
from n8n_sizer.remote.protocol import serve

app = typer.Typer(
    help="One load generator's share of a rate step.", add_completion=False, pretty_exceptions_enable=False
)


@app.command()
def share(
    url: str = typer.Option(...),
    body_file: Path = typer.Option(...),
    rate: float = typer.Option(...),
    duration: float = typer.Option(...),
    seq_start: int = typer.Option(...),
    step: str = typer.Option(...),
    target: str = typer.Option(...),
    generator: str = typer.Option(...),
    out: Path = typer.Option(...),
    timeout: float = typer.Option(120.0),
    max_in_flight: int = typer.Option(1000),
    deadline_s: float = typer.Option(..., "--deadline-s"),
) -> dict:
    from n8n_sizer.bench.agent import run_agent
    from n8n_sizer.safety.urls import require_url

    return run_agent(
        url=require_url(url, "--url").text,
        body=body_file.read_bytes(),
        rate_per_s=rate,
        duration_s=duration,
        seq_start=seq_start,
        step=step,
        target=target,
        generator=generator,
        out=out,
        timeout_s=timeout,
        max_in_flight=max_in_flight,
        deadline_s=deadline_s,
    )


def main(argv: list[str] | None = None) -> int:
    # a body file that cannot be read or a records file that exists: the input is refused (exit 2)
    return serve(app, "load_agent", argv, input_errors=(InputError, OSError))


if __name__ == "__main__":
    sys.exit(main())
