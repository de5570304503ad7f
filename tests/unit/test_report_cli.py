"""`n8n-sizer report` through the CLI runner: output, exit codes, one-line errors."""

from __future__ import annotations

import pytest
import typer

from n8n_sizer.cli import _run
from n8n_sizer.cli import report as report_cli
from tests.unit.test_report import runs  # noqa: F401  (synthetic run folders)


def invoke(args: list[str]) -> int:
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    report_cli.register(app)
    app.command("noop", hidden=True)(lambda: None)  # keep `report` a subcommand, as in the real app
    with pytest.raises(SystemExit) as exc:
        _run(typer.main.get_command(app), "n8n-sizer", args)
    return exc.value.code


def test_report_writes_markdown_and_prints_paths(runs, tmp_path, capsys):
    out = tmp_path / "rep"
    assert invoke(["report", *map(str, runs), "--out", str(out), "--no-plots"]) == 0
    printed = capsys.readouterr().out
    assert printed.strip() == f"report: {out / 'report.md'}"
    assert "## Results per setup and step" in (out / "report.md").read_text()


def test_report_default_out_is_inside_the_first_run(runs, capsys):
    assert invoke(["report", str(runs[0]), "--no-plots"]) == 0
    assert (runs[0] / "report" / "report.md").is_file()
    assert (runs[0] / "run.json").is_file()  # the run itself untouched beside it


def test_report_on_a_folder_that_is_not_a_run_is_one_line_exit_2(tmp_path, capsys):
    assert invoke(["report", str(tmp_path), "--no-plots"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err
        == f"n8n-sizer: {tmp_path} is not a run folder (no run.json in it); try one of the folders in results/ that `n8n-sizer bench` wrote"
    )
    assert not (tmp_path / "report").exists()


def test_report_json_names_what_it_wrote(runs, tmp_path, capsys):
    import json

    out = tmp_path / "rep"
    assert invoke(["report", *map(str, runs), "--out", str(out), "--no-plots", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["report"] == str(out / "report.md") and (out / "report.md").is_file()
    assert printed["plots"] == [] and printed["runs"] == [str(r) for r in runs]


def test_a_run_without_request_records_is_named_in_the_report(runs, tmp_path, capsys):
    (runs[0] / "requests.jsonl").write_text("")
    out = tmp_path / "rep"
    assert invoke(["report", *map(str, runs), "--out", str(out), "--no-plots"]) == 0
    text = (out / "report.md").read_text()
    assert "**Warning:** no request records in `20261130T150000Z-aaaaaa`" in text
    assert "20261130T150000Z-aaaaaa | cx33" not in text.split("## Run")[0]  # no row from the empty run
