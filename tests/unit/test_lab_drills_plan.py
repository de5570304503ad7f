"""The cluster drills' pure parts (partition rules, request windows, verdict rules), the host agent on this
machine's own processes, and the CLI's refusals for a lab inventory: no lab, no root needed."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

from n8n_sizer.bundle.topology import parse_topology
from n8n_sizer.errors import InputError
from n8n_sizer.lab import host_agent as labagent
from n8n_sizer.lab.drills.judge import (
    PROMISES,
    answered_after,
    iptables_command,
    nothing_lost,
    partition_outcome_matches,
    partition_rules,
    ran_on,
    window,
)
from n8n_sizer.lab.plan import plan_lab
from n8n_sizer.lab.state import LabState, lab_inventory
from n8n_sizer.runs.records import Ledger, RequestRecord

TOPOLOGY = {
    "topology": [
        {"name": "dr-data", "provider": "hetzner", "size": "cx33", "roles": {"postgres": 1, "redis": 1}},
        {
            "name": "dr-ingest",
            "provider": "hetzner",
            "size": "cx33",
            "roles": {"main": 1, "webhook": 2, "load_balancer": 1},
        },
        {"name": "dr-worker", "provider": "hetzner", "size": "cx33", "count": 2, "roles": {"workers": 1}},
    ],
    "subnet": "10.213.8.0/24",
}


def _rec(seq: int, sent: float, status: int | None, error_class: str | None = None, ex: str | None = None):
    return RequestRecord(
        seq=seq,
        step="rate-2",
        target="lab",
        scheduled_s=sent,
        sent_s=sent,
        status=status,
        latency_ms=None if status is None else 10.0,
        error_class=error_class,
        execution_id=ex,
    )


def test_partition_rules_drop_both_directions_for_the_peer_only_and_carry_the_drills_tag():
    rules = partition_rules("10.213.8.10", "abc123-0f0f")
    assert rules == [
        ["INPUT", "-s", "10.213.8.10/32", "-m", "comment", "--comment", "n8n-sizer drill abc123-0f0f", "-j", "DROP"],
        ["OUTPUT", "-d", "10.213.8.10/32", "-m", "comment", "--comment", "n8n-sizer drill abc123-0f0f", "-j", "DROP"],
    ]
    # Inserted and deleted by the same spec: only the action differs.
    assert (
        iptables_command("-I", rules[0])
        == "iptables -w 5 -I INPUT -s 10.213.8.10/32 -m comment --comment 'n8n-sizer drill abc123-0f0f' -j DROP"
    )
    assert iptables_command("-D", rules[1]).replace(" -D ", " -I ") == iptables_command("-I", rules[1])
    with pytest.raises(ValueError):
        iptables_command("-F", rules[0])  # never a flush: only the drill's own rules
    with pytest.raises(ValueError):
        partition_rules("10.213.8.10", "x; reboot")


def test_window_counts_what_was_sent_in_it_by_outcome():
    records = [
        _rec(0, 9.9, 200),
        _rec(1, 10.0, 200),
        _rec(2, 10.5, 502),
        _rec(3, 11.0, None, "reset"),
        _rec(4, 11.5, None, "dropped"),
        _rec(5, 12.0, 200),
    ]
    assert window(records, 10.0, 12.0) == {
        "sent": 3,
        "answered": 1,
        "failed": 2,
        "failures": {"HTTP 502": 1, "reset": 1},
    }
    assert window(records, 12.0, None) == {"sent": 1, "answered": 1, "failed": 0, "failures": {}}
    assert answered_after(records, 10.5) == (1, 3)  # the dropped one was never sent


def _ledger(**kw) -> Ledger:
    base = {
        "fired": 10,
        "accepted": 8,
        "refused": 2,
        "accepted_then_lost": 0,
        "executions_stored": 9,
        "executions_succeeded": 8,
        "lost_seqs": [],
    }
    return Ledger(**{**base, **kw})


def test_nothing_lost_needs_every_accepted_request_matched():
    assert nothing_lost(_ledger())
    assert not nothing_lost(_ledger(lost_seqs=[4], accepted_then_lost=1))
    assert nothing_lost(_ledger(accepted_then_lost=-1))  # a refused request that still ran is not a loss
    assert not nothing_lost(_ledger(lost_seqs=None, accepted_then_lost=None))  # not counted: not proven
    assert not nothing_lost(_ledger(lost_seqs=None, accepted_then_lost=2))


def test_ran_on_attributes_executions_to_the_host_whose_worker_logged_them():
    by_host = {"dr-worker-1": {"1", "2"}, "dr-worker-2": {"3"}}
    assert ran_on(["1", "3", "3", "9"], by_host) == {"(no log line)": 1, "dr-worker-1": 1, "dr-worker-2": 2}


@pytest.mark.parametrize(
    "cut, exited, after, ready, ok",
    [
        (12.0, False, None, True, True),  # rode it out, ready after the heal
        (12.0, False, None, False, False),  # survived but never ready again
        (12.0, True, 10.5, False, True),  # gave up after n8n's 10 s window: as promised
        (12.0, True, 3.0, False, False),  # gave up too early
        (6.0, True, 9.5, False, False),  # the partition was shorter than the window
    ],
)
def test_partition_verdict_follows_the_10_s_reconnect_window(cut, exited, after, ready, ok):
    assert partition_outcome_matches(cut, exited, after, ready)[0] is ok


def test_every_cluster_drill_states_what_n8n_promises():
    from n8n_sizer.lab.drills.cluster_drills import LAB_DRILLS

    assert (
        set(PROMISES)
        == set(LAB_DRILLS)
        == {"stop-worker-host", "kill-webhook", "restart-redis", "partition", "rolling-restart"}
    )


def test_the_agent_lists_stops_and_starts_a_process_of_this_host_as_it_was(tmp_path):
    env = {"PATH": os.environ["PATH"], "DRILL_MARK": "kept-secret"}
    log = tmp_path / "sleeper.log"
    with open(log, "ab") as out:
        child = subprocess.Popen(
            ["sleep", "120"], env=env, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    new_pid = None
    try:
        listed = {p["pid"]: p for p in labagent.host_processes()}
        assert listed[child.pid]["exe"] == "sleep" and listed[child.pid]["pgid"] == child.pid
        assert os.getpid() not in listed  # the agent's own chain is not the host's
        snap = tmp_path / "drills" / "sleeper.json"
        snap.parent.mkdir()
        res = labagent.stop(child.pid, snap, "TERM", grace_s=10)
        assert res["forced"] is False and child.wait(timeout=5) == -signal.SIGTERM
        assert stat.S_IMODE(snap.stat().st_mode) == 0o600  # the environment may hold secrets
        saved = json.loads(snap.read_text())
        assert saved["argv"] == ["sleep", "120"] and saved["env"]["DRILL_MARK"] == "kept-secret"
        assert saved["cwd"] == str(tmp_path) and saved["log"] == str(log)
        started = labagent.start(snap, None, None, 10)
        new_pid = started["pid"]
        assert not snap.exists()
        environ = Path(f"/proc/{new_pid}/environ").read_bytes()
        assert b"DRILL_MARK=kept-secret" in environ and os.readlink(f"/proc/{new_pid}/cwd") == str(tmp_path)
        assert "starting sleep" in log.read_text()  # the same log, appended
    finally:
        for pid in (child.pid, new_pid):
            if pid is not None:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if new_pid is not None:
            from n8n_sizer.native.services import reap

            time.sleep(0.2)
            reap()


def test_the_agent_refuses_a_pid_that_is_not_there():
    with pytest.raises(InputError, match="no such process"):
        labagent.send(2**22 + 17, "CONT")
    from n8n_sizer.remote.lab_agent import main

    assert main(["signal"]) == 2


def _lab_json(tmp_path: Path) -> Path:
    plan = plan_lab(parse_topology(TOPOLOGY), 1, "a1b2c3")
    state = LabState(
        lab_id="a1b2c3",
        bridge="n8nsz-a1b2c3",
        subnet="10.213.8.0/24",
        folder=str(tmp_path / "lab"),
        client_key=str(tmp_path / "lab" / "client_key"),
        topology=TOPOLOGY,
    )
    path = tmp_path / "lab.json"
    path.write_text(lab_inventory(plan, parse_topology(TOPOLOGY), state).model_dump_json())
    return path


@pytest.mark.parametrize(
    "args, message",
    [
        (["partition"], "is not deployed"),
        (["kill-worker"], "drill 'kill-worker' is not a cluster drill; on a lab try one of stop-worker-host"),
        (["partition", "--target", "dr-worker-1"], "--target: not for a lab inventory"),
    ],
)
def test_cli_refuses_bad_input_for_a_lab_in_one_line(tmp_path, capsys, args, message):
    import typer

    from n8n_sizer.cli import _run, app

    lab = _lab_json(tmp_path)
    with pytest.raises(SystemExit) as exited:
        _run(
            typer.main.get_command(app),
            "n8n-sizer",
            ["drill", *args, "--inventory", str(lab), "--out", str(tmp_path / "results")],
        )
    err = capsys.readouterr().err
    assert exited.value.code == 2, err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_redis_that_rewrote_its_title_is_snapshotted_with_its_config(tmp_path):
    import shutil

    from n8n_sizer.native import services
    from n8n_sizer.native.redis import redis_ping

    if shutil.which("redis-server") is None:
        pytest.skip("Debian's redis-server is not installed")
    port = services.free_port()
    conf = tmp_path / "redis.conf"
    services.write_redis_config(conf, tmp_path, port, "pw-unit", "aof")
    proc = services.start_redis(conf, port, tmp_path / "redis.log")
    try:
        services.wait_redis(proc, "pw-unit", 20)
        title = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        saved = labagent.snapshot(proc.pid)
        assert saved["argv"] == ["redis-server", str(conf)], title
        assert redis_ping(port, "pw-unit")
        # Stopped and started again from the snapshot, ready once it answers PING with the cluster's password.
        secrets_file = tmp_path / "cluster-secrets.json"
        secrets_file.write_text(json.dumps({"redis_password": "pw-unit"}))
        assert labagent.stop(proc.pid, tmp_path / "redis.json", "TERM", 10)["forced"] is False
        assert not redis_ping(port, "pw-unit")
        again = labagent.start(tmp_path / "redis.json", None, str(secrets_file), 20)
        proc = services.RunningProcess(
            name="redis",
            pid=again["pid"],
            port=port,
            log_path=tmp_path / "redis.log",
            start_ticks=services.process_start_ticks(again["pid"]),
        )
        assert redis_ping(port, "pw-unit")
    finally:
        services.stop_process(proc, 5)
