"""`n8n-sizer render` and `check` through the installed entry point: outputs, exit codes, bad inputs."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

CLI = Path(sys.executable).parent / "n8n-sizer"
DATA = Path(__file__).resolve().parent.parent / "data" / "compose"


def run(*args: str) -> subprocess.CompletedProcess:
    command = [str(CLI)] if CLI.exists() else [sys.executable, "-c", "from n8n_sizer.cli import main; main()"]
    return subprocess.run(
        [*command, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
    )


def test_render_then_check_passes(tmp_path: Path) -> None:
    out = tmp_path / "stack"
    proc = run("render", "--mode", "queue", "--workers", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "new secret(s)" in proc.stdout and proc.stderr == ""
    assert stat.S_IMODE((out / ".env").stat().st_mode) == 0o600
    key = next(
        line.split("=", 1)[1]
        for line in (out / ".env").read_text().splitlines()
        if line.startswith("N8N_ENCRYPTION_KEY=")
    )
    assert key not in proc.stdout
    checked = run("check", str(out / "docker-compose.yml"), "--env", str(out / ".env"), "--vcpu", "4")
    assert checked.returncode == 0, checked.stdout
    assert "0 failed" in checked.stdout
    again = run("render", "--mode", "queue", "--workers", "2", "--out", str(out))
    assert again.returncode == 0 and "kept 5 existing secret(s)" in again.stdout and key not in again.stdout


def test_check_fails_with_exit_1_and_names_the_rule() -> None:
    proc = run("check", str(DATA / "broken-db-type.yml"), "--env", str(DATA / "good.env"))
    assert proc.returncode == 1
    assert any(line.startswith("FAIL") and "db-type" in line for line in proc.stdout.splitlines())
    assert "fix: set DB_TYPE: postgresdb" in proc.stdout


def test_check_json() -> None:
    proc = run("check", str(DATA / "broken-redis-appendonly.yml"), "--env", str(DATA / "good.env"), "--json")
    assert proc.returncode == 1
    results = json.loads(proc.stdout)
    failed = [r["rule"] for r in results if r["status"] == "fail"]
    assert failed == ["redis-appendonly"]
    assert set(results[0]) == {"rule", "status", "message", "fix"}


@pytest.mark.parametrize(
    "args, needle",
    [
        (["render", "--mode", "queue", "--workers", "0"], "--workers"),
        (["render", "--mode", "queue", "--concurrency", "0"], "--concurrency"),
        (["render", "--mode", "regular", "--n8n-version", "2.41"], "--n8n-version"),
        (["render", "--mode", "regular", "--n8n-version", "latest"], "--n8n-version"),
        (["render", "--mode", "sideways"], "--mode"),
        (["render", "--mode", "queue", "--pool", "10", "--workers", "4", "--max-connections", "20"], "= 61"),
        (["render", "--mode", "regular", "--profile", "production"], "--domain"),
        (["render", "--workers", "2"], "--mode"),
        (["check", "/nonexistent/compose.yml"], "FILE"),
        (["check", str(DATA / "good-queue.yml"), "--vcpu", "0"], "--vcpu"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], needle: str) -> None:
    if args[0] == "render":
        args = [*args, "--out", str(tmp_path / "stack")]
    proc = run(*args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "stack").exists()


def test_unwritable_out_is_one_line_and_exit_2(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    proc = run("render", "--mode", "regular", "--out", str(blocker / "stack"))
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "--out" in proc.stderr
    assert "is a file, not a folder" in proc.stderr
