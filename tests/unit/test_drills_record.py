"""Drill plumbing without n8n: verdicts, the run.json a drill writes, log marks, Redis replies, CLI errors."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from n8n_sizer import drills
from n8n_sizer.advisor.setup import Setup
from n8n_sizer.drills.common import DrillFailed, DrillOutcome, check, counts, iso_seconds
from n8n_sizer.errors import InputError
from n8n_sizer.native.redis import RedisError, read_reply
from n8n_sizer.report.build import render_drill
from n8n_sizer.report.model import load_run
from n8n_sizer.stack.handle import FileLogMark


def _outcome(*matches: bool) -> DrillOutcome:
    checks = [check(f"saw {i}", f"seed {i}", ok, "" if ok else f"because {i}") for i, ok in enumerate(matches)]
    return DrillOutcome(
        drill="kill-worker",
        checks=checks,
        observed={"n": 1},
        timings_s={"t": 1.5},
        log_lines={"main": ["line"]},
        settings={"K": "V"},
    )


def test_check_verdict_says_why_it_differs() -> None:
    assert check("a", "b", True).verdict == "matches"
    assert check("a", "b", False, "only 3 of 4").verdict == "differs: only 3 of 4"
    assert check("a", "b", False).verdict == "differs"


def test_outcome_verdict_is_differs_when_any_check_differs() -> None:
    assert _outcome(True, True).verdict == "matches"
    assert _outcome(True, False).verdict == "differs"


def test_outcome_extra_has_what_the_report_reads() -> None:
    extra = drills.outcome_extra(_outcome(True, False))
    assert extra["drill"] == "kill-worker" and extra["verdict"] == "differs"
    assert [c["verdict"] for c in extra["checks"]] == ["matches", "differs: because 1"]
    assert set(extra["checks"][0]) == {"observation", "expected", "verdict", "matches"}
    assert extra["observed"] == {"n": 1} and extra["timings_s"] == {"t": 1.5} and extra["settings"] == {"K": "V"}


class _Stack:
    """The facts run_drill reads from a stack, without starting one."""

    name = "t-queue"
    setup = Setup(mode="queue", workers=2)


class _Ctx:
    stack = _Stack()
    request_sink = None

    def __init__(self) -> None:
        self.restored = 0

    def restore(self) -> list[str]:
        self.restored += 1
        return []


def test_run_drill_writes_a_drill_run_the_report_renders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(drills.DRILLS, "kill-worker", lambda ctx: _outcome(True, False))
    ctx = _Ctx()
    store = drills.run_drill("kill-worker", ctx, tmp_path)
    manifest = json.loads((store.folder / "run.json").read_text())
    assert manifest["kind"] == "drill" and manifest["finished_s"] >= manifest["created_s"]
    assert manifest["spec"]["target"] == "t-queue"
    assert manifest["extra"]["verdict"] == "differs"
    assert ctx.restored == 1 and ctx.request_sink is None
    table = render_drill(load_run(store.folder))
    assert "| saw 0 | seed 0 | matches |" in table
    assert "| saw 1 | seed 1 | differs: because 1 |" in table


def test_a_drill_that_fails_midway_is_recorded_incomplete(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(ctx):
        raise DrillFailed("4 executions running on worker-1: not reached within 30 s")

    monkeypatch.setitem(drills.DRILLS, "kill-worker", broken)
    with pytest.raises(DrillFailed):
        drills.run_drill("kill-worker", _Ctx(), tmp_path)
    (folder,) = list(tmp_path.iterdir())
    extra = json.loads((folder / "run.json").read_text())["extra"]
    assert extra["verdict"] == "incomplete"
    assert "not reached within 30 s" in extra["checks"][0]["observation"]


def test_unknown_drill_names_the_choices(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="try one of kill-worker"):
        drills.run_drill("kill-everything", _Ctx(), tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_log_mark_sees_only_lines_written_after_it(tmp_path: Path) -> None:
    log = tmp_path / "main.log"
    log.write_text("Lost Redis connection (old)\n")
    mark = FileLogMark(log, log.stat().st_size)
    with open(log, "a") as handle:
        handle.write("Enqueued execution 3 (job 3)\n\nLost Redis connection. Trying to reconnect in 1s...\n")
    assert mark.lines() == ["Enqueued execution 3 (job 3)", "Lost Redis connection. Trying to reconnect in 1s..."]
    assert mark.find(r"Lost Redis") == ["Lost Redis connection. Trying to reconnect in 1s..."]
    assert FileLogMark(tmp_path / "missing.log", 0).lines() == []


def test_redis_replies_are_parsed() -> None:
    assert read_reply(io.BytesIO(b":20\r\n")) == 20
    assert read_reply(io.BytesIO(b"+OK\r\n")) == "OK"
    assert read_reply(io.BytesIO(b"$-1\r\n")) is None
    assert read_reply(io.BytesIO(b"*2\r\n$10\r\nappendonly\r\n$3\r\nyes\r\n")) == ["appendonly", "yes"]
    with pytest.raises(RedisError, match="WRONGTYPE"):
        read_reply(io.BytesIO(b"-WRONGTYPE Operation against a key\r\n"))


def test_counts_and_timestamps() -> None:
    assert counts({"1": "error", "2": "error", "3": "success"}) == {"error": 2, "success": 1}
    assert iso_seconds("1970-01-01T00:01:40.500Z") == 100.5
    assert iso_seconds(None) is None


@pytest.mark.parametrize(
    "args, message",
    [
        (["drill", "kill-everything", "--local"], "drill 'kill-everything' is unknown; try one of kill-worker"),
        (["drill", "kill-worker"], "no target given; try --local"),
        (
            ["drill", "redis-restart", "--local", "--persistence", "rdb"],
            "--persistence rdb: unknown; try aof, none or both",
        ),
        (["drill", "kill-worker", "--local", "--target", "cx33-queue"], "--local and --inventory/--stack/--target"),
        (["drill", "kill-worker", "--inventory", "inv.json"], "--target is missing"),
        (["drill", "kill-worker", "--target", "cx33-queue"], "--target cx33-queue: no fleet given; add --inventory"),
        (["drill", "kill-worker", "--inventory", "inv.json", "--stack", "single", "--target", "x"], "pick one"),
        (
            ["drill", "kill-worker", "--inventory", "/nonexistent/inv.json", "--target", "x"],
            "--inventory /nonexistent/inv.json: no such file",
        ),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(args: list[str], message: str, capsys: pytest.CaptureFixture) -> None:
    import typer

    from n8n_sizer.cli import _run, app

    with pytest.raises(SystemExit) as exited:
        _run(typer.main.get_command(app), "n8n-sizer", args)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def _inventory(path: Path) -> Path:
    base = {
        "provider": "hetzner",
        "size": "cx33",
        "vcpu": 4,
        "arch": "x86",
        "public_ip": "192.0.2.10",
        "private_ip": None,
        "ssh_user": "root",
    }
    hosts = {
        "loadgen": {**base, "name": "loadgen", "role": "loadgen", "setup": None},
        "cx33-regular": {**base, "name": "cx33-regular", "role": "target", "setup": {"mode": "regular", "workers": 0}},
        "cx33-queue1": {**base, "name": "cx33-queue1", "role": "target", "setup": {"mode": "queue", "workers": 1}},
    }
    path.write_text(
        json.dumps(
            {"stack": "t", "provider": "hetzner", "location": "nbg1", "expires_at": "2099-01-01t00-00z", "hosts": hosts}
        )
    )
    return path


@pytest.mark.parametrize(
    "target, message",
    [
        ("cx99", "--target cx99: not a target host of the inventory; try one of cx33-queue1, cx33-regular"),
        ("loadgen", "--target loadgen: not a target host"),
        (
            "cx33-regular",
            "--target cx33-regular: runs regular mode with 0 workers; the drills need a queue-mode target",
        ),
        ("cx33-queue1", "--target cx33-queue1: runs queue mode with 1 workers; the drills need a queue-mode target"),
    ],
)
def test_fleet_targets_are_checked_before_any_connection(
    tmp_path: Path, target: str, message: str, capsys: pytest.CaptureFixture
) -> None:
    """192.0.2.10 is TEST-NET-1: a check that tried to connect would hang or fail with another message."""
    import typer

    from n8n_sizer.cli import _run, app

    inv = _inventory(tmp_path / "inventory.json")
    with pytest.raises(SystemExit) as exited:
        _run(
            typer.main.get_command(app),
            "n8n-sizer",
            ["drill", "kill-worker", "--inventory", str(inv), "--target", target, "--out", str(tmp_path / "out")],
        )
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()
