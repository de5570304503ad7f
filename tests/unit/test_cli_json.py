"""Every subcommand answers --json with one object: what was written, estimated, found or deleted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import typer

from n8n_sizer.cli import app

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[2]


def _leaves(cmd, prefix=""):
    """Every runnable command, subcommands of a group (`lab up`) included."""
    subs = getattr(cmd, "commands", None)
    if subs:
        for name, sub in subs.items():
            yield from _leaves(sub, f"{prefix} {name}".strip())
    else:
        yield prefix, cmd


def test_every_subcommand_takes_json():
    leaves = dict(_leaves(typer.main.get_command(app)))
    assert {"advise", "render", "check", "bench", "report", "drill", "cost", "teardown", "reap", "lab up"} <= set(
        leaves
    )
    missing = [name for name, cmd in leaves.items() if not any("--json" in p.opts for p in cmd.params)]
    assert not missing, missing


def _json(args: list[str], cwd: Path) -> dict:
    proc = subprocess.run([str(BIN / "n8n-sizer"), *args, "--json"], cwd=cwd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_render_json_lists_the_files_and_never_a_secret(tmp_path):
    out = _json(["render", "--mode", "queue", "--workers", "2", "--out", "stack"], tmp_path)
    assert out["files"] == [".env", "cloud-init.yaml", "docker-compose.yml"] and out["messages"]
    env = (tmp_path / "stack" / ".env").read_text()
    key = next(line.split("=", 1)[1] for line in env.splitlines() if line.startswith("N8N_ENCRYPTION_KEY="))
    assert key not in json.dumps(out)


def test_cost_json_is_the_estimate():
    out = _json(["cost", "--stack", "single", "--hours", "2"], ROOT)
    assert (
        out["stack"] == "single" and out["hours"] == 2 and out["total_eur"] == sum(h["total_eur"] for h in out["hosts"])
    )
