"""How often a queue-mode webhook never answers, with n8n's Bull retention (0) and with the stacks' (1,000).

n8n 2.41.1 deletes a finished Bull job at once (N8N_EXECUTIONS_QUEUE_KEEP_LAST_COMPLETED=0). Main waits
for a job with Bull's `job.finished()`, which asks Redis whether the job is in the completed set and
otherwise listens for its completion event; a job that a worker finishes before main asks is neither, and
the webhook hangs until the client gives up (see `queue_keep_last_env` in n8n_sizer/advisor/settings.py).

For each retention value this starts the local queue stack (1 worker, Postgres, Redis), deploys the light
workflow and sends webhooks one after another for --seconds. To make main late more often, as a busy
server does, it pins main (and its runner) to core 0, everything else to core 1, and runs --burners
busy loops on core 0 (nice -5). It prints per value: answered, hung (no answer within --timeout s), the
executions the public API lists by status (it leaves a hung one out: main still counts it as running)
and latency p50/p99/max.

Run: .venv/bin/python benchmarks/queue_webhook_hang.py [--seconds 240] [--burners 3] [--timeout 12]
(the README's figures: --seconds 600)
No asserts: it prints figures. Needs 2 cores for the pinning; the burners and stacks are stopped by PID.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import time

import httpx
from rich.progress import Progress

from n8n_sizer.advisor.settings import QUEUE_KEEP_LAST_ENV
from n8n_sizer.advisor.setup import Setup
from n8n_sizer.n8n.client import set_up_instance
from n8n_sizer.n8n.workflows import deploy_workflow, read_workflow, with_webhook_path
from n8n_sizer.native import services
from n8n_sizer.native.stack import LocalStack
from n8n_sizer.native.state import StackOptions


def pin(stack: LocalStack) -> bool:
    """main's process group on core 0, every other process of the stack on core 1; False on one core."""
    if len(os.sched_getaffinity(0)) < 2:
        return False
    for name, proc in stack.processes.items():
        for pid in services.family_pids(proc.pid):  # n8n with its runner, Postgres with its backends
            subprocess.run(["taskset", "-acp", "0" if name == "main" else "1", str(pid)], capture_output=True)
    return True


def start_burners(count: int) -> list[subprocess.Popen]:
    return [
        subprocess.Popen(["taskset", "-c", "0", "nice", "-n", "-5", "sh", "-c", "while :; do :; done"])
        for _ in range(count)
    ]


def stop_burners(burners: list[subprocess.Popen]) -> None:
    for proc in burners:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


def hammer(url: str, seconds: float, timeout_s: float, label: str) -> tuple[list[float], list[int]]:
    latencies, hung = [], []
    until = time.monotonic() + seconds
    with httpx.Client(timeout=timeout_s) as http, Progress(transient=True) as progress:
        task = progress.add_task(f"{label}: webhooks", total=seconds)
        number = 0
        while time.monotonic() < until:
            started = time.monotonic()
            try:
                http.post(url, json={"number": number}).raise_for_status()
                latencies.append(time.monotonic() - started)
            except httpx.TimeoutException:
                hung.append(number)
            number += 1
            progress.update(task, completed=min(seconds, seconds - (until - time.monotonic())))
    return latencies, hung


def measure(keep_last: str, seconds: float, burners: int, timeout_s: float) -> None:
    options = StackOptions(extra_env={name: keep_last for name in QUEUE_KEEP_LAST_ENV})
    stack = LocalStack(Setup(mode="queue", workers=1), options=options)
    stack.start()
    running: list[subprocess.Popen] = []
    try:
        session = set_up_instance(stack.main_url)
        workflow = with_webhook_path(read_workflow("light"), f"hang-{keep_last}")
        with session.client() as client:
            workflow_id, path = deploy_workflow(client, workflow)
        pinned = pin(stack)
        running = start_burners(burners) if pinned else []
        latencies, hung = hammer(f"{stack.main_url}{path}", seconds, timeout_s, f"keep last {keep_last}")
        stop_burners(running)
        running = []
        with session.client() as client:
            stored = client.count_executions(workflow_id)
        sent = len(latencies) + len(hung)
        q = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [0.0] * 99
        one_in = f" (1 in {sent // len(hung):,})" if hung else ""
        print(
            f"keep last {keep_last:>5}: {sent:,} sent, {len(latencies):,} answered, {len(hung)} hung{one_in}; "
            f"p50 {q[49] * 1000:.0f} ms, p99 {q[98] * 1000:.0f} ms, max {max(latencies):.2f} s"
            f"{'' if pinned else '  (one core: not pinned, no burners)'}"
        )
        print(
            f"    the API lists {stored.total:,} executions: {stored.by_status}"
            f"{'; hung requests: ' + ', '.join(map(str, hung)) if hung else ''}"
        )
    finally:
        stop_burners(running)
        stack.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=240.0)
    parser.add_argument("--burners", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=12.0)
    parser.add_argument("--values", default="0,1000", help="retention values to compare (default 0,1000)")
    args = parser.parse_args()
    for value in args.values.split(","):
        measure(value.strip(), args.seconds, args.burners, args.timeout)


if __name__ == "__main__":
    main()
