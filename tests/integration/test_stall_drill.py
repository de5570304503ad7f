"""Issue 28's stall drill on real n8n 2.41.1 (native queue stack: Postgres, Redis, main, 2 workers): a worker
starved of CPU (SIGSTOP of the worker and its runner for a bounded 25 s, then SIGCONT) while it runs jobs.

With the lock the bundles render (`bundle.n8n_env.stall_seconds`: 60 s for a 25 s longest execution) no job is
failed as stalled and every execution succeeds. The control runs the same starvation with a 10 s lock (the
drills' FAST_STALL_ENV): Bull's stalled check on the other worker fails the starved jobs, so the drill can
tell the two apart. Bull's failed set (`bull:jobs:failed`; n8n keeps the last 1,000) counts the stalls.
"""

from __future__ import annotations

import signal
import subprocess
import time

import httpx
import pytest

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.bundle.n8n_env import stall_seconds
from n8n_sizer.n8n.client import set_up_instance
from n8n_sizer.n8n.workflows import deploy_workflow, read_workflow, webhook_path
from n8n_sizer.native.stack import LocalStack, StackOptions
from n8n_sizer.stack.handle import StackError, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

LONGEST_S = 25
STARVED_S = 25  # bounded: the worker is always continued, in a finally
JOB_S = 40  # each job waits this long on its worker (in-process: under n8n's 65 s offload)
JOBS = 3
SHORT_LOCK = {
    "QUEUE_WORKER_LOCK_DURATION": "10000",
    "QUEUE_WORKER_LOCK_RENEW_TIME": "2000",
    "QUEUE_WORKER_STALLED_INTERVAL": "5000",
}


def _failed_jobs(stack: LocalStack) -> int:
    out = subprocess.run(
        [
            "redis-cli",
            "-p",
            str(stack.redis_port),
            "--no-auth-warning",
            "-a",
            stack.secrets.redis_password,
            "zcard",
            "bull:jobs:failed",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    return int(out.strip() or 0)


def _starve_worker_1(stack: LocalStack, url: str, overrides: dict[str, str]) -> None:
    """Worker 2 away, JOBS long jobs taken by worker 1, worker 2 back (it runs Bull's stalled check), then worker
    1 stopped for STARVED_S and continued."""
    stack.stop_worker(2)
    stack.stop_worker(1)
    stack.start_worker(1, env_overrides=overrides)
    with httpx.Client(timeout=30) as http:
        for _ in range(JOBS):
            assert http.post(url, json={"seconds": JOB_S}).status_code == 200  # answered on receipt
    stack.start_worker(2, env_overrides=overrides)
    stack.signal("worker-1", signal.SIGSTOP)
    try:
        time.sleep(STARVED_S)
    finally:
        stack.signal("worker-1", signal.SIGCONT)


def _finished(client, workflow_id: str, total: int, timeout_s: float = 240) -> dict[str, int]:
    deadline = time.monotonic() + timeout_s
    counts: dict[str, int] = {}
    while time.monotonic() < deadline:
        counts = client.count_executions(workflow_id).by_status
        if sum(counts.values()) >= total and not counts.get("running") and not counts.get("new"):
            return counts
        time.sleep(2)
    return counts


def test_a_starved_worker_fails_no_execution_as_stalled_with_the_rendered_lock() -> None:
    setup = Setup(mode="queue", workers=2, longest_execution_s=LONGEST_S)
    lock_s = stall_seconds(LONGEST_S)[0]
    assert lock_s > STARVED_S + 10 > 10  # the rendered lock outlasts the starvation; the control's does not
    with LocalStack(setup, StackOptions(redis_persistence="aof")) as stack:
        session = set_up_instance(stack.main_url)
        with session.client(60) as client:
            workflow_id, _ = deploy_workflow(client, read_workflow("long-wait"))
            url = stack.main_url + webhook_path(read_workflow("long-wait"))
            before = _failed_jobs(stack)
            _starve_worker_1(stack, url, {})  # the worker's own environment: the rendered lock
            counts = _finished(client, workflow_id, JOBS)
            assert counts == {"success": JOBS}, counts
            assert _failed_jobs(stack) == before
            # control: the same starvation with a 10 s lock fails jobs as stalled
            _starve_worker_1(stack, url, SHORT_LOCK)
            # Bull's failed set only grows: polled, up to the JOB_S the control once slept, instead of sleeping it
            try:
                wait_until(lambda: _failed_jobs(stack) > before, JOB_S, "a job failed as stalled", poll_s=1.0)
            except StackError:
                pytest.fail("the control did not stall: the drill could not tell")
