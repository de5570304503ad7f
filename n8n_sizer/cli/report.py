"""`report`: run folders in, one Markdown report with PNG plots out."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    app.command("report", help=REPORT_HELP)(report)


REPORT_HELP = """Write a Markdown report with PNG plots for one or more bench, soak, find-max or drill runs.

It ends with what the advisor recommends for the rates tested, refitted on these runs.

Example: n8n-sizer report results/20261130T151500Z-1a2b3c --out report/
"""


def report(
    runs: list[Path] = typer.Argument(..., help="Run folders (results/<run-id>) to report on, one or more."),
    out: str | None = typer.Option(
        None, "--out", help="Folder for report.md and the PNGs (default: <first run>/report)."
    ),
    no_plots: bool = typer.Option(False, "--no-plots", help="Markdown only, no PNG plots."),
    json_out: bool = typer.Option(False, "--json", help="Print what was written as one JSON object."),
) -> None:
    from n8n_sizer.cli.args import check_run_folders
    from n8n_sizer.report.advice import advice_section
    from n8n_sizer.report.build import build_report
    from n8n_sizer.safety.files import require_output_folder

    check_run_folders(runs)
    out_dir = require_output_folder(
        out if out is not None else Path(runs[0]) / "report", "--out", fix="try --out report", writable=True
    )
    result = build_report(runs, out_dir, plots=not no_plots, extra_sections=[advice_section(runs)])
    if json_out:
        import json

        typer.echo(
            json.dumps(
                {
                    "report": str(result.markdown),
                    "plots": [str(i) for i in result.images],
                    "runs": [str(r) for r in runs],
                }
            )
        )
        return
    typer.echo(f"report: {result.markdown}")
    for image in result.images:
        typer.echo(f"plot:   {image}")
