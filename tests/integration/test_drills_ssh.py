"""`n8n-sizer drill ... --inventory FILE --target NAME` through Fabric over a real sshd on 127.0.0.1.

The inventory's target is a loopback host, so the drill starts a queue stack there over SSH (`python -m
n8n_sizer.native.stack up`, real n8n 2.41.1, Debian's Postgres and Redis, 2 workers), acts on it with one
SSH command per action and reaches n8n through an SSH tunnel, then stops the stack. What a fleet host's Docker
actions would be is checked in tests/unit/test_drills_remote.py (no Docker engine runs here).

This test is about the SSH path, so it runs the drills that between them send every kind of remote action the
drills have (`stack/remote.py`'s `SshNativeHandle`), each at least once:
- kill-worker: `signal` SIGKILL to a process group, `stop-process` with a timeout, `start-process --no-wait`,
  `wait-ready`, a log read (main's), the stack's `up --env` (the stall settings);
- wrong-key: `start-process --env`, `status` (running, healthy), the host's own temp folder (`mktemp` over SSH),
  log reads;
- redis-restart --persistence none: `start-process --redis-persistence` (to none and back to aof),
  `restart-redis`, Redis commands (LLEN of Bull's list), main stopped and started;
- postgres-restart: `restart-postgres`, load through the SSH tunnel;
- redis-blip: `signal --no-group` SIGSTOP / SIGCONT, the Redis command CLIENT KILL.
What the other drills assert runs on this machine's stack in tests/integration/test_drills.py, where every drill
runs: binary-filesystem and graceful-shutdown (their remote actions are `stop-process` and `start-process
--env`, sent here by the drills above) and redis-restart with AOF (the same commands as without persistence).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from n8n_sizer.report.build import render_drill
from n8n_sizer.report.model import load_run
from tests.integration.ssh_fixtures import sshd  # noqa: F401
from tests.integration.test_bench_ssh import _pids_alive, inventory

pytestmark = pytest.mark.integration

# Every remote action kind at least once (the docstring); the rest runs in test_drills.py.
OVER_SSH = ["kill-worker", "wrong-key", "redis-restart", "postgres-restart", "redis-blip"]

CLI = str(Path(sys.executable).parent / "n8n-sizer")


def _drill_states() -> set[Path]:
    return set(Path("/tmp").glob("n8n-sizer-drill-t-queue-*"))


def test_drills_on_a_host_over_ssh(sshd, tmp_path):  # noqa: F811
    inv = tmp_path / "inventory.json"
    inv.write_text(
        json.dumps(
            inventory(
                sshd, {"t-queue": {"mode": "queue", "workers": 2}, "t-regular": {"mode": "regular", "workers": 0}}
            )
        )
    )
    out = tmp_path / "results"
    base = [
        CLI,
        "drill",
        "--inventory",
        str(inv),
        "--ssh-key",
        str(sshd.client_key),
        "--ssh-port",
        str(sshd.port),
        "--out",
        str(out),
    ]

    refused = subprocess.run(
        [*base[:2], "kill-worker", *base[2:], "--target", "t-regular"], capture_output=True, text=True, timeout=120
    )
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "queue-mode target with at least 2 workers" in refused.stderr and len(refused.stderr.splitlines()) == 1

    before = _drill_states()
    try:
        res = subprocess.run(
            [*base[:2], *OVER_SSH, *base[2:], "--persistence", "none", "--target", "t-queue", "--json"],
            capture_output=True,
            text=True,
            timeout=1500,
        )
        assert res.returncode == 0, (res.stdout[-2000:], res.stderr[-3000:])
        lines = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
        by = {item["drill"]: item for item in lines}
        assert list(by) == OVER_SSH
        assert all(item["target"] == "t-queue" for item in lines)
        runs = {name: load_run(Path(item["folder"])) for name, item in by.items()}
        extra = {name: run.manifest.extra for name, run in runs.items()}
        assert all(run.manifest.spec["target"] == "t-queue" for run in runs.values())

        # kill-worker: SIGKILL over SSH; the 4 Wait executions end as error, none retried, worker-2 serves
        kill = extra["kill-worker"]
        assert kill["observed"]["statuses"] == {"error": 4}, kill["checks"]
        assert kill["observed"]["retried_on_worker_2"] == []
        assert kill["observed"]["light_statuses_after_kill"][-3:] == [200, 200, 200]
        assert kill["settings"]["QUEUE_WORKER_LOCK_DURATION"] == "10000"  # the --env the stack was started with
        assert any("stalled" in line or "too many times" in line for line in kill["log_lines"]["main"])

        # wrong-key: both variants exit, their log lines read over SSH from the host's log file
        wrong = extra["wrong-key"]
        assert wrong["observed"]["fresh folder"]["state"] == "exited"
        assert wrong["observed"]["own folder"]["state"] == "exited"
        assert any("signing.hmac" in line for line in wrong["log_lines"]["worker-2 (fresh folder)"])
        assert any("Mismatching" in line for line in wrong["log_lines"]["worker-2 (own folder)"])
        assert wrong["observed"]["light_statuses"] == [200, 200, 200]

        # redis-restart: Bull's wait list counted over SSH before and after the SIGKILL; without persistence
        # none is left (and main's queue recovery marks them crashed); AOF's 20 of 20: test_drills.py
        assert list(extra["redis-restart"]["observed"]) == ["none"]
        assert extra["redis-restart"]["settings"]["redis_persistence"] == "none"
        none = extra["redis-restart"]["observed"]["none"]
        assert (none["waiting_before"], none["waiting_after"]) == (20, 0), extra["redis-restart"]["checks"]
        assert none["statuses"] == {"crashed": 20}

        # postgres-restart: 4 req/s through the SSH tunnel; only what arrived while main was not ready failed
        pg = extra["postgres-restart"]
        assert pg["observed"]["requests"] == 120
        assert pg["observed"]["failed"] <= round((pg["timings_s"]["main_ready_s"] + 2) * 4), pg["observed"]
        assert set(pg["observed"]["failed_by_kind"]) <= {"503", "500", "timeout"}, pg["observed"]
        # every process that lost its connection logged its recovery (main always does: it answered 503s);
        # one whose only connection was busy in a query when Postgres went may not notice at all
        assert "main" in pg["observed"]["recovered_logged_after_s"], pg["observed"]
        assert set(pg["observed"]["lost_connection"]) <= set(pg["observed"]["recovered_logged_after_s"]), pg["observed"]

        # redis-blip: SIGSTOP/SIGCONT and CLIENT KILL over SSH; both workers take jobs again
        blip = extra["redis-blip"]["observed"]
        for kind in ("pause", "drop"):
            assert blip[kind]["executions"] == {"success": 20}, extra["redis-blip"]["checks"]
            assert all(n > 0 for n in blip[kind]["taken_per_worker"].values())

        table = render_drill(runs["kill-worker"])
        assert table.startswith("Drill `kill-worker` on `t-queue`.") and "4 of 4 running executions" in table
        assert not (out / "logins").exists()  # a stack started for the drills: its login dies with it
    finally:
        new = _drill_states() - before
        for state_dir in new:  # a failed run may have left its stack: stop it by its PIDs, then its folder
            if (state_dir / "state.json").exists() and _pids_alive(str(state_dir)):
                subprocess.run(
                    [sys.executable, "-m", "n8n_sizer.remote.native_stack", "down", "--state", str(state_dir)],
                    capture_output=True,
                    timeout=180,
                )
    assert len(new) == 1
    (state_dir,) = new
    assert not _pids_alive(str(state_dir)), "the drill stops the stack it started on the host"
    subprocess.run(["rm", "-rf", str(state_dir)], check=True)


def test_a_fleet_hosts_login_is_reused_or_asked_for(regular_stack, tmp_path):
    """A fleet host that a bench run set up has an owner: the drill uses the login that run saved, and without
    it says which file to pass instead of failing somewhere inside n8n's API."""
    from n8n_sizer.hosts.host import HostError
    from n8n_sizer.n8n.link import _save_session, saved_or_new_session

    login = tmp_path / "logins" / "cx33-queue.json"
    with pytest.raises(HostError, match=r"set up already.*--n8n-login results/<run>/secrets/cx33-queue.json"):
        saved_or_new_session(regular_stack.main_url, login, "cx33-queue")
    assert not login.exists()
    _save_session(login, regular_stack.session)  # what `bench` writes to results/<run>/secrets/<target>.json
    session = saved_or_new_session(regular_stack.main_url, login, "cx33-queue")
    assert session.api_key.get_secret_value() == regular_stack.api_key
    workflow_id, _ = regular_stack.deploy("light")
    with session.client() as client:  # the saved API key works against the instance
        assert client.list_executions(workflow_id) == []
