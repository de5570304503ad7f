"""`n8n-sizer bench` bad input: one line on stderr, exit 2, no traceback, no run folder. Nothing here starts n8n."""

from __future__ import annotations

import json

import pytest
import typer

from n8n_sizer.cli import _run, app


def run_cli(args: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_:
        _run(typer.main.get_command(app), "n8n-sizer", ["bench", *args])
    out, err = capsys.readouterr()
    return exit_.value.code, out, err


def one_line_exit_2(args, capsys, expect: str) -> str:
    code, _, err = run_cli(args, capsys)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert expect in err, err
    return err


def test_where_to_run_is_required(capsys, tmp_path):
    one_line_exit_2(["--out", str(tmp_path)], capsys, "exactly one of --stack NAME, --inventory FILE or --local")
    one_line_exit_2(["--local", "--inventory", "x.json"], capsys, "got --inventory and --local")


def test_stack_needs_pulumi(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no pulumi on PATH, as on this machine
    one_line_exit_2(["--stack", "single"], capsys, "--stack single: the pulumi CLI is not installed")


def test_workflow_without_webhook_node(capsys, tmp_path):
    flow = tmp_path / "no-hook.json"
    flow.write_text(
        json.dumps(
            {"name": "cron", "nodes": [{"type": "n8n-nodes-base.scheduleTrigger", "parameters": {}}], "connections": {}}
        )
    )
    body = tmp_path / "body.json"
    body.write_text("{}")
    out = tmp_path / "results"
    one_line_exit_2(
        ["--local", "--workflow", str(flow), "--body", str(body), "--out", str(out)], capsys, "has no Webhook node"
    )
    assert not out.exists() or not any(out.iterdir())


def test_own_workflow_needs_a_body_and_a_post_webhook(capsys, tmp_path):
    flow = tmp_path / "hook.json"
    node = {"type": "n8n-nodes-base.webhook", "parameters": {"path": "p", "httpMethod": "POST"}}
    flow.write_text(json.dumps({"name": "h", "nodes": [node], "connections": {}}))
    one_line_exit_2(["--local", "--workflow", str(flow)], capsys, "needs --body FILE")
    node["parameters"]["httpMethod"] = "GET"
    flow.write_text(json.dumps({"name": "h", "nodes": [node], "connections": {}}))
    one_line_exit_2(["--local", "--workflow", str(flow), "--body", str(flow)], capsys, "HTTP Method to POST")
    one_line_exit_2(["--local", "--workflow", str(tmp_path / "missing.json")], capsys, "no such file")


def test_bad_inventories(capsys, tmp_path):
    inv = tmp_path / "inv.json"
    one_line_exit_2(["--inventory", str(inv)], capsys, "no such file")
    inv.write_text("{not json")
    one_line_exit_2(["--inventory", str(inv)], capsys, "not JSON")
    only_loadgen = {
        "stack": "s",
        "provider": "hetzner",
        "location": "hel1",
        "expires_at": "x",
        "hosts": {
            "loadgen": {
                "name": "loadgen",
                "role": "loadgen",
                "provider": "hetzner",
                "size": "cx23",
                "vcpu": 2,
                "arch": "x86",
                "public_ip": "203.0.113.9",
                "ssh_user": "root",
            }
        },
    }
    inv.write_text(json.dumps(only_loadgen))
    one_line_exit_2(["--inventory", str(inv)], capsys, f"--inventory {inv}: inventory")


def test_bad_flags(capsys, tmp_path):
    one_line_exit_2(["--local", "--rates", "5,x"], capsys, "--rates")
    one_line_exit_2(["--local", "--mode", "queue", "--db", "sqlite"], capsys, "queue mode needs Postgres")
    one_line_exit_2(["--local", "--mode", "regular", "--workers", "2"], capsys, "try --mode queue --workers 2")
    one_line_exit_2(["--local", "--step-seconds", "0"], capsys, "--step-seconds")
    one_line_exit_2(["--inventory", "x.json", "--ssh-key", str(tmp_path / "nokey")], capsys, "--ssh-key")


def test_resume_of_an_unknown_or_finished_run(capsys, tmp_path):
    one_line_exit_2(["--resume", "nope", "--out", str(tmp_path)], capsys, "no run.json")
    run = tmp_path / "r1"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"run_id": "r1", "created_s": 1.0, "finished_s": 2.0}))
    one_line_exit_2(["--resume", "r1", "--out", str(tmp_path)], capsys, "nothing left to run")
    assert json.loads((run / "run.json").read_text())["finished_s"] == 2.0  # untouched


def test_find_max_and_soak_flags(capsys):
    one_line_exit_2(["--local", "--find-max", "--rates", "5,20,50"], capsys, "--rates LOW,HIGH")
    one_line_exit_2(["--local", "--find-max", "--soak", "1h", "--rate", "1"], capsys, "choose one")
    one_line_exit_2(["--local", "--soak", "1h"], capsys, "add --rate R")
    one_line_exit_2(["--local", "--soak", "soon", "--rate", "1"], capsys, "not a duration")
    one_line_exit_2(["--local", "--rate", "3"], capsys, "--rate goes with --soak")


def test_find_max_run_cannot_be_resumed(capsys, tmp_path):
    run = tmp_path / "r2"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"run_id": "r2", "kind": "find-max", "created_s": 1.0}))
    one_line_exit_2(["--resume", "r2", "--out", str(tmp_path)], capsys, "cannot be resumed")
