"""README, --help and the code tell the same story."""

import re
from pathlib import Path

import typer

from n8n_sizer.cli import app

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
COMMANDS = typer.main.get_command(app).commands


def test_every_command_is_in_the_readme_with_an_example():
    assert len(COMMANDS) >= 9
    for name in COMMANDS:
        assert re.search(rf"(n8n-sizer {name}|^advise) ", README, re.M) or f"n8n-sizer {name}" in README, name


def test_every_command_has_help_with_an_example():
    for name, command in COMMANDS.items():
        assert command.help and "xample" in command.help, name


def test_the_readme_test_command_is_what_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "bash scripts/test.sh" in ci
    assert "\nbash scripts/test.sh\n" in README


def test_the_readme_main_job_command_installs_and_runs_advise():
    assert "pip install -q . && .venv/bin/advise --rps 40 --vcpu 4" in README
