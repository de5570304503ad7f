"""The drain hook itself (templates/n8n-drain-hook.js), run by the real Node.js of the n8n install with a
harness that stands in for n8n's express app and its own SIGTERM handler (tests/data/drain/harness.js)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from n8n_sizer.bundle.drain import HOOK_TEMPLATE
from n8n_sizer.native.install import find_installed

HARNESS = Path(__file__).resolve().parents[1] / "data" / "drain" / "harness.js"


def _run(harness: Path, env: dict[str, str]) -> list[dict]:
    """The harness's events: the hook run by the install's Node.js with `env`."""
    install = find_installed()
    if install is None:
        pytest.skip("n8n (and its Node.js) is installed by scripts/test.sh")
    proc = subprocess.run(
        [str(install.node_bin), str(harness), str(HOOK_TEMPLATE)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def events() -> list[dict]:
    return _run(HARNESS, {"SIZER_DRAIN_S": "1"})


def test_the_drain_path_answers_like_readiness_while_serving_and_503_once_sigterm_arrives(events) -> None:
    probes = {e["label"]: e["code"] for e in events if e["event"] == "probe"}
    assert probes == {"serving": 200, "draining": 503}


def test_n8n_gets_sigterm_only_after_the_check_failed_and_only_once(events) -> None:
    order = [e["event"] if e["event"] != "probe" else e["label"] for e in events]
    assert order == ["serving", "draining", "n8n-sigterm", "done"], events
    assert events[-1]["n8nStops"] == 1  # the second SIGTERM during the drain was not passed on again
    assert [e["drainAnswer"] for e in events if e["event"] == "n8n-sigterm"] == [503]


WORKER_HARNESS = HARNESS.parent / "worker" / "harness.js"


def _worker_events(job_ms: int, grace_s: int) -> list[dict]:
    return _run(WORKER_HARNESS, {"JOB_MS": str(job_ms), "N8N_GRACEFUL_SHUTDOWN_TIMEOUT": str(grace_s)})


def test_a_stopping_worker_pauses_bull_and_lets_n8n_stop_only_after_the_jobs_it_was_handed() -> None:
    """The job n8n had not yet counted finishes before n8n's own shutdown (which stops the task runner) starts."""
    events = _worker_events(job_ms=400, grace_s=30)
    assert [e["event"] for e in events] == ["sigterm", "job-done", "n8n-sigterm", "done"], events
    assert events[2]["paused"] is True  # Bull was paused locally (no new job) before the wait
    assert events[-1]["n8nStops"] == 1


def test_a_job_longer_than_n8ns_drain_budget_does_not_hold_the_stop_back() -> None:
    """0.8 x N8N_GRACEFUL_SHUTDOWN_TIMEOUT (n8n's own drain budget) bounds the hook's wait."""
    events = _worker_events(job_ms=10_000, grace_s=1)
    assert [e["event"] for e in events] == ["sigterm", "n8n-sigterm", "done"], events
