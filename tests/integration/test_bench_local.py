"""`n8n-sizer bench --local` on real n8n (SQLite, the fastest start): Ctrl-C mid-step stops the stack it started,
keeps every request recorded so far, marks the step interrupted, and says so in one line (exit 2). Before the step,
`--rest-seconds` counts the stack's CPU with no load (its idle CPU) from the kernel's per-role accounting."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from n8n_sizer.hosts.cgroups import available_mounts
from tests.integration.test_bench_ssh import CLI, read_run

pytestmark = pytest.mark.integration


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_ctrl_c_stops_the_local_stack_and_keeps_the_records(tmp_path):
    out = tmp_path / "results"
    proc = subprocess.Popen(
        [
            CLI,
            "bench",
            "--local",
            "--db",
            "sqlite",
            "--rates",
            "4",
            "--step-seconds",
            "120",
            "--warmup",
            "5",
            "--rest-seconds",
            "3",
            "--out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pids: dict[str, int] = {}
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            runs = list(out.glob("*/run.json"))
            if runs:
                manifest = json.loads(runs[0].read_text())
                pids = manifest["hosts"].get("local", {}).get("pids", pids)
                if (
                    manifest.get("extra", {}).get("steps", {}).get("local", {}).get("rate-4", {}).get("status")
                    == "running"
                ):
                    break
            time.sleep(0.2)
        assert pids and proc.poll() is None, proc.communicate()
        # a dozen requests of the step recorded, however fast or slow this machine is today
        requests_file = runs[0].parent / "requests.jsonl"
        while time.monotonic() < deadline and _step_requests(requests_file, "rate-4") < 12:
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 2, err
        assert len(err.strip().splitlines()) == 1 and "interrupted" in err and "Traceback" not in err
        manifest, requests, _ = read_run(next(out.iterdir()))
        step = manifest.extra["steps"]["local"]["rate-4"]
        assert step["status"] == "interrupted" and step["seq_end"] == len(requests) >= 8
        assert all(r.status == 200 or r.error_class == "other" for r in requests)
        assert not [name for name, pid in pids.items() if _alive(pid)], "the stack must be stopped"
        rest = manifest.hosts["local"]["rest"]
        if available_mounts():  # the kernel's per-role counts (root, cgroup v1): the idle window was counted
            assert rest["counted_s"] >= 3.0 and rest["role_cpu_ms"]["main"] > 0.0, rest
            # n8n idles well below a core: 3 s of no load is far from 3,000 ms of main's CPU
            assert rest["role_cpu_ms"]["main"] < 0.5 * 1000.0 * rest["counted_s"], rest
        else:
            assert "skipped" in rest, rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        for pid in pids.values():  # a failed test must not leave n8n behind
            if _alive(pid):
                subprocess.run(["kill", "-9", str(pid)], check=False)


def _step_requests(path: Path, step: str) -> int:
    """Requests of `step` already recorded in requests.jsonl (a line being written is not counted)."""
    if not path.is_file():
        return 0
    return sum(1 for line in path.read_text().splitlines() if line.endswith("}") and f'"step":"{step}"' in line)
