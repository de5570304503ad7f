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


def _worker_events(job_ms: int, count_at_ms: int, grace_s: int = 30, pause_hangs: bool = False) -> list[dict]:
    env = {"JOB_MS": str(job_ms), "COUNT_AT_MS": str(count_at_ms), "N8N_GRACEFUL_SHUTDOWN_TIMEOUT": str(grace_s)}
    return _run(WORKER_HARNESS, {**env, **({"PAUSE_HANGS": "1"} if pause_hangs else {})})


def test_a_stopping_worker_hands_over_once_n8n_counts_the_job_bull_gave_it() -> None:
    """The job Bull handed over in the instant of the stop: n8n's shutdown starts only once n8n counts it (its
    own drain then waits for it), not before, when n8n would stop the task runner under it."""
    events = _worker_events(job_ms=600, count_at_ms=150)
    assert [e["event"] for e in events] == ["sigterm", "counted", "n8n-sigterm", "job-done", "done"], events
    assert events[2]["paused"] == {"isLocal": True, "doNotWaitActive": True}  # as n8n pauses: no new job
    assert events[2]["running"] == 1 and events[-1]["n8nStops"] == 1


def test_a_job_done_before_n8n_counted_it_is_waited_for() -> None:
    events = _worker_events(job_ms=300, count_at_ms=-1)
    assert [e["event"] for e in events] == ["sigterm", "job-done", "n8n-sigterm", "done"], events


def test_a_job_longer_than_n8ns_drain_budget_does_not_hold_the_stop_back() -> None:
    """10 s, or 0.8 x N8N_GRACEFUL_SHUTDOWN_TIMEOUT (n8n's own drain budget) when shorter, bounds the wait."""
    events = _worker_events(job_ms=10_000, count_at_ms=-1, grace_s=1)
    assert [e["event"] for e in events] == ["sigterm", "n8n-sigterm", "done"], events


def test_a_pause_that_hangs_does_not_hold_the_stop_back() -> None:
    """Bull's pause waits on Redis; with Redis away it may not return: n8n's handler still runs at the budget."""
    events = _worker_events(job_ms=10_000, count_at_ms=-1, grace_s=1, pause_hangs=True)
    assert [e["event"] for e in events] == ["sigterm", "n8n-sigterm", "done"], events
