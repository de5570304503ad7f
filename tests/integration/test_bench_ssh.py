"""`n8n-sizer bench --inventory` through Fabric over a real sshd on 127.0.0.1, against real n8n, Postgres and
Redis that the run starts over SSH (`python -m n8n_sizer.remote.native_stack up`) and stops at the end.

- regular: two short steps; the SSH sessions are killed during the second step; the run exits 2 with a one-line
  message naming `--resume RUN`; `--resume` keeps the finished step, re-runs the cut one, and the ledger matches
  every 200 with a stored execution.
- queue with 1 worker: one short step, every 200 matched, result files parse.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from n8n_sizer.runs.records import RequestRecord, RunManifest, Sample
from tests.integration.ssh_fixtures import sshd  # noqa: F401

pytestmark = pytest.mark.integration

CLI = str(Path(sys.executable).parent / "n8n-sizer")


def inventory(server, setups: dict[str, dict]) -> dict:
    base = {
        "provider": "hetzner",
        "size": "cx23",
        "vcpu": 2,
        "arch": "x86",
        "public_ip": "127.0.0.1",
        "private_ip": None,
        "ssh_user": server.user,
    }
    hosts = {"loadgen": {**base, "name": "loadgen", "role": "loadgen", "setup": None}}
    for name, setup in setups.items():
        hosts[name] = {**base, "name": name, "role": "target", "setup": setup}
    return {
        "stack": "ssh-test",
        "provider": "hetzner",
        "location": "local",
        "expires_at": "2099-01-01t00-00z",
        "hosts": hosts,
    }


def bench(args: list[str], server, timeout: float = 600) -> subprocess.CompletedProcess:
    cmd = [CLI, "bench", "--ssh-key", str(server.client_key), "--ssh-port", str(server.port), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def read_run(folder: Path):
    manifest = RunManifest.model_validate_json((folder / "run.json").read_text())
    requests = [RequestRecord.model_validate_json(l) for l in (folder / "requests.jsonl").read_text().splitlines()]
    samples = [Sample.model_validate_json(l) for l in (folder / "samples.jsonl").read_text().splitlines()]
    return manifest, requests, samples


def _pids_alive(state_dir: str) -> list[int]:
    state = json.loads((Path(state_dir) / "state.json").read_text())
    alive = []
    for proc in state["processes"].values():
        try:
            stat = Path(f"/proc/{proc['pid']}/stat").read_text()
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[0] != "Z":  # a zombie has exited (PID 1 here may reap late)
            alive.append(proc["pid"])
    return alive


def _down(out: Path) -> None:
    """Stop any stack a failed test left behind (by its state file's PIDs, through native_stack down)."""
    for run_json in out.glob("*/run.json"):
        for info in json.loads(run_json.read_text()).get("hosts", {}).values():
            state_dir = info.get("stack_dir")
            if state_dir and (Path(state_dir) / "state.json").exists():
                subprocess.run(
                    [sys.executable, "-m", "n8n_sizer.remote.native_stack", "down", "--state", state_dir],
                    capture_output=True,
                    timeout=180,
                )
            if state_dir:
                shutil.rmtree(state_dir, ignore_errors=True)


def test_regular_run_cut_mid_step_then_resume(sshd, tmp_path):  # noqa: F811
    inv = tmp_path / "inventory.json"
    inv.write_text(json.dumps(inventory(sshd, {"t-regular": {"mode": "regular", "workers": 0}})))
    out = tmp_path / "results"
    cut = {}

    def cut_during_second_step():
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline and "n" not in cut:
            for run_json in out.glob("*/run.json"):
                steps = json.loads(run_json.read_text()).get("extra", {}).get("steps", {}).get("t-regular", {})
                if steps.get("rate-3", {}).get("status") == "running":
                    # a few requests of the step recorded before the cut, however busy the machine is
                    requests_file = run_json.parent / "requests.jsonl"
                    while (
                        time.monotonic() < deadline
                        and sum('"step":"rate-3"' in line for line in requests_file.read_text().splitlines()) < 6
                    ):
                        time.sleep(0.2)
                    cut["n"] = sshd.cut_connections()
                    return
            time.sleep(0.2)

    watcher = threading.Thread(target=cut_during_second_step, daemon=True)
    watcher.start()
    try:
        first = bench(
            [
                "--inventory",
                str(inv),
                "--rates",
                "2,3",
                "--step-seconds",
                "8",
                "--warmup",
                "10",
                "--drain-seconds",
                "30",
                "--out",
                str(out),
            ],
            sshd,
        )
        watcher.join(timeout=5)
        assert cut.get("n", 0) >= 1, (first.stdout, first.stderr)
        assert first.returncode == 1, (first.stdout, first.stderr)
        err = first.stderr.strip()
        assert len(err.splitlines()) == 1 and "Traceback" not in err and "dropped" in err
        (folder,) = out.iterdir()
        run_id = folder.name
        assert f"--resume {run_id}" in err
        manifest, requests, _ = read_run(folder)
        state_dir = manifest.hosts["t-regular"]["stack_dir"]
        steps = manifest.extra["steps"]["t-regular"]
        assert steps["rate-2"]["status"] == "done" and steps["rate-3"]["status"] == "interrupted"
        kept = [r for r in requests if r.step == "rate-2"]
        assert len(kept) == 16 and manifest.finished_s is None and not manifest.ledgers
        assert _pids_alive(state_dir), "the stack must keep running for --resume"
        before = (folder / "requests.jsonl").read_bytes()

        second = bench(["--resume", run_id, "--out", str(out), "--json"], sshd)
        assert second.returncode == 0, (second.stdout, second.stderr)
        summary = json.loads(second.stdout)
        assert summary["run_id"] == run_id and Path(summary["folder"]) == folder
        assert (folder / "requests.jsonl").read_bytes().startswith(before)  # appended, nothing rewritten
        manifest, requests, samples = read_run(folder)
        steps = manifest.extra["steps"]["t-regular"]
        assert steps["rate-2"]["attempts"] == 1 and steps["rate-3"]["attempts"] == 2
        assert all(s["status"] == "done" for s in steps.values()) and manifest.finished_s is not None
        assert len([r for r in requests if r.step == "rate-2"]) == 16  # the finished step did not run again
        done3 = [
            r
            for r in requests
            if r.step == "rate-3" and steps["rate-3"]["seq_start"] <= r.seq < steps["rate-3"]["seq_end"]
        ]
        assert len(done3) == 24
        ledger = manifest.ledgers["t-regular"]
        assert ledger.fired == len(requests) and ledger.accepted == sum(r.status == 200 for r in requests)
        assert ledger.accepted_then_lost == 0 and ledger.executions_succeeded == ledger.accepted
        assert summary["ledgers"]["t-regular"]["accepted_then_lost"] == 0
        assert {s.labels["step"] for s in samples if s.metric == "achieved_rate"} == {"rate-2", "rate-3"}
        assert manifest.hosts["t-regular"]["facts"]["vcpu"] == os.cpu_count()
        assert not _pids_alive(state_dir), "the resumed run stops the stack it started"
    finally:
        _down(out)


def test_queue_one_worker_every_200_has_an_execution(sshd, tmp_path):  # noqa: F811
    inv = tmp_path / "inventory.json"
    inv.write_text(json.dumps(inventory(sshd, {"t-queue": {"mode": "queue", "workers": 1}})))
    out = tmp_path / "results"
    res = bench(
        [
            "--inventory",
            str(inv),
            "--rates",
            "3",
            "--step-seconds",
            "8",
            "--concurrency-sweep",
            "2",
            "--warmup",
            "10",
            "--drain-seconds",
            "30",
            "--out",
            str(out),
        ],
        sshd,
    )
    folder = next(out.iterdir(), None)
    try:
        assert res.returncode == 0, (res.stdout, res.stderr)
        assert "ledger t-queue" in res.stdout and "rate-3" in res.stdout and "c-2" in res.stdout
        manifest, requests, samples = read_run(folder)
        state_dir = manifest.hosts["t-queue"]["stack_dir"]
        rate = [r for r in requests if r.step == "rate-3"]
        closed = [r for r in requests if r.step == "c-2"]
        assert len(rate) == 24 and len(closed) >= 4 and all(r.status == 200 for r in requests)
        assert all(r.sent_s - r.scheduled_s < 0.05 for r in closed)  # closed model: sent when due
        ledger = manifest.ledgers["t-queue"]
        n = len(requests)
        assert (ledger.fired, ledger.accepted, ledger.refused) == (n, n, 0)
        assert ledger.executions_succeeded == n and ledger.accepted_then_lost == 0
        assert manifest.hosts["t-queue"]["warmups"] == [{"sent": 12, "ok": 12, "errors": {}, "first_error": None}]
        assert manifest.setup["t-queue"]["mode"] == "queue" and manifest.versions["n8n_version"]
        by = {s.metric: s.value for s in samples if s.labels.get("step") == "rate-3" and s.metric != "errors"}
        assert by["answered"] == 24 and by["latency_p50"] > 0
        assert {s.labels["step"] for s in samples if s.metric == "concurrency"} == {"c-2"}
        assert any(s.metric == "process_rss_mib" and s.labels.get("target") == "t-queue" for s in samples)
        assert not (folder / "secrets" / "t-queue.json").stat().st_mode & 0o077
        assert not _pids_alive(state_dir)
    finally:
        _down(out)
