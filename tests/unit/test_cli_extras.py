"""A command that reaches a module of a missing extra: one line naming the install, exit 2 (cli._run).

The real thing, in a virtualenv without extras, is tests/infra/test_fresh_clone.py; this pins the mapping.
"""

from __future__ import annotations

import pytest
import typer

from n8n_sizer.cli import EXTRA_OF_MODULE, _run


def _app_raising(exc: BaseException) -> typer.Typer:
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

    @app.command("report")
    def report(run: str) -> None:
        raise exc

    @app.command("other")
    def other() -> None:
        raise exc

    return app


@pytest.mark.parametrize(
    "module, extra",
    [
        ("matplotlib.pyplot", "bench"),
        ("fabric", "bench"),
        ("paramiko.ssh_exception", "bench"),
        ("invoke", "bench"),
        ("pulumi", "fleet"),
        ("pulumi_gcp", "fleet"),
    ],
)
def test_a_missing_extra_module_is_one_line_naming_its_install(module, extra, capsys):
    app = _app_raising(ModuleNotFoundError(f"No module named '{module}'", name=module))
    with pytest.raises(SystemExit) as exited:
        _run(typer.main.get_command(app), "n8n-sizer", ["report", "results/x"])
    assert exited.value.code == 2
    top = module.split(".")[0]
    assert capsys.readouterr().err == (
        f"n8n-sizer: report needs the {extra} extra ({top} is not installed): .venv/bin/pip install '.[{extra}]'\n"
    )


def test_any_other_missing_module_is_a_bug_and_keeps_its_traceback(capsys):
    """A bug, not a missing extra: the last resort (issue 24) says so in one line, exit 70, and keeps the
    traceback in a private file."""
    from pathlib import Path

    app = _app_raising(ModuleNotFoundError("No module named 'nonexistent'", name="nonexistent"))
    with pytest.raises(SystemExit) as exit_:
        _run(typer.main.get_command(app), "n8n-sizer", ["other"])
    err = capsys.readouterr().err
    assert exit_.value.code == 70 and len(err.strip().splitlines()) == 1 and "internal error" in err
    saved = Path(err.split("the traceback is in ", 1)[1].split(";", 1)[0])
    assert "No module named 'nonexistent'" in saved.read_text()
    import shutil

    shutil.rmtree(saved.parent)


def test_every_mapped_extra_exists_in_pyproject():
    import tomllib
    from pathlib import Path

    extras = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert set(EXTRA_OF_MODULE.values()) <= set(extras)
