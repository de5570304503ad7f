"""`calibrate`: measure a workflow's per-node times on the local stack, without a load test."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    app.command("calibrate", help=CALIBRATE_HELP)(calibrate)


CALIBRATE_HELP = """Run your workflow a few dozen times at a low rate on n8n started here and write each node's
median execution time, read from n8n's execution data; the Code nodes' own JavaScript CPU is what
`advise --workflow FILE --calibration calibration.json` uses. Its calls out (HTTP, OpenAI, Telegram...) go to
local stand-ins that wait the assumed time; never to the real services.

Example: n8n-sizer calibrate my-flow.json --body my-body.json --runs 30 --rate 2 --out calibration.json
"""


def calibrate(
    workflow: Path = typer.Argument(..., help="The workflow JSON n8n's editor downloads (a POST Webhook trigger)."),
    body: Path | None = typer.Option(None, "--body", help="JSON request body the webhook expects (default {})."),
    runs: int = typer.Option(30, "--runs", help="Executions to read (after 3 warm-up ones)."),
    rate: float = typer.Option(2.0, "--rate", help="Requests per second: low, so times are work, not queueing."),
    out: Path = typer.Option(Path("calibration.json"), "--out", help="Where to write the calibration JSON."),
    json_out: bool = typer.Option(False, "--json", help="Print the calibration as JSON instead of a table."),
    swap_calls: bool = typer.Option(
        False,
        "--swap-calls",
        help="Replace calls no stand-in can be put in front of (an app whose host is fixed, a remote vector store, a sub-workflow not in the file) by an HTTP call to a local stand-in waiting the assumed time; without it such a workflow is refused.",
    ),
) -> None:
    from n8n_sizer.bench.calibrate import calibrate_workflow
    from n8n_sizer.safety.files import require_output_folder
    from n8n_sizer.safety.write import write_atomic

    require_output_folder(
        out.parent if str(out.parent) else Path("."), "--out", fix="try --out calibration.json", writable=True
    )
    result = calibrate_workflow(
        workflow, body, runs=runs, rate=rate, say=lambda text: typer.echo(text, err=True), swap_calls=swap_calls
    )
    text = result.model_dump_json(indent=2)
    write_atomic(out, text + "\n", private=False, what=f"--out {out}")
    if json_out:
        typer.echo(text)
        return
    typer.echo(f"calibration of {result.workflow}: {result.executions} executions, n8n {result.n8n_version or '?'}")
    typer.echo(f"{'node':30s} {'type':34s} {'median ms':>10s} {'p90 ms':>8s}")
    for node in result.nodes:
        typer.echo(f"{node.name[:30]:30s} {node.type[:34]:34s} {node.median_ms:10.1f} {node.p90_ms:8.1f}")
    if result.runner_cpu_ms is not None and result.reference_runner_cpu_ms is not None:
        typer.echo(
            f"Code nodes' own JavaScript: {result.code_cpu_ms:.1f} ms CPU per execution (task runner: "
            f"{result.runner_cpu_ms:.1f} ms, less {result.reference_runner_cpu_ms:.1f} ms per Code node "
            f"for a trivial one)"
        )
    else:
        typer.echo(f"Code nodes' own JavaScript: {result.code_cpu_ms:.1f} ms per execution")
    typer.echo(
        f"from execution times: {result.code_time_ms:.1f} ms (their time less a trivial Code node's "
        f"{result.code_round_trip_ms:.1f} ms; on a busy machine this holds waiting for a core too)"
    )
    typer.echo(f"written: {out}")
