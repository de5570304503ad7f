"""What the local real-n8n stack costs on this machine: start times, idle RSS, one request's latency.

1. The code-heavy workflow's loop (48,000,000 iterations) timed with process.cpuUsage() in Node 24,
   outside n8n, --loops times: the CPU it stands for (seed 000's ~187 ms).
2. For regular (SQLite) and queue (1 worker, Postgres, Redis): start the stack, print seconds to ready
   per process, wait --idle seconds and print the RSS of every process (n8n, its task runner, Redis,
   Postgres with its backends), then set n8n up and time sequential requests to the light and the
   code-heavy workflow (first request reported apart: it warms the runner and the expression engine).

Run: .venv/bin/python benchmarks/localstack_figures.py [--requests 10] [--idle 20]
No asserts: it prints figures. Other work on the machine inflates them: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from pathlib import Path

import httpx

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.n8n.client import set_up_instance
from n8n_sizer.n8n.workflows import deploy_workflow, read_workflow
from n8n_sizer.native import services
from n8n_sizer.native.install import install_n8n
from n8n_sizer.native.stack import LocalStack

LOOP_JS = """
let samples = [];
for (let k = 0; k < %d; k++) {
  const before = process.cpuUsage();
  let x = 0;
  for (let i = 0; i < 48000000; i++) { x = (x * 31 + i) %% 1000003; }
  const used = process.cpuUsage(before);
  samples.push((used.user + used.system) / 1000);
}
console.log(JSON.stringify(samples));
"""


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def print_rss(stack: LocalStack) -> None:
    for name, proc in stack.processes.items():
        pids = services.family_pids(proc.pid)  # n8n with its runner, Postgres with its backends
        parts = [f"{rss_mib(pid):.0f}" for pid in pids]
        print(f"    {name:9s} {sum(rss_mib(pid) for pid in pids):7.0f} MiB  (per process: {' + '.join(parts)})")


def time_requests(url: str, body: dict, n: int) -> tuple[float, list[float]]:
    with httpx.Client(timeout=120) as http:

        def one() -> float:
            started = time.perf_counter()
            answer = http.post(url, json=body)
            answer.raise_for_status()
            return (time.perf_counter() - started) * 1000

        first = one()
        return first, [one() for _ in range(n)]


def measure(setup: Setup, label: str, requests: int, idle_s: float) -> None:
    print(f"\n{label}")
    started = time.monotonic()
    stack = LocalStack(setup).start()
    try:
        print(
            f"  stack ready in {time.monotonic() - started:.1f} s; per process (s to ready): "
            f"{json.dumps(stack.start_seconds)}"
        )
        print("  RSS right after ready:")
        print_rss(stack)
        time.sleep(idle_s)
        print(f"  RSS after {idle_s:.0f} s idle:")
        print_rss(stack)
        session = set_up_instance(stack.main_url)
        with session.client() as client:
            for template, body in (("light", {"number": 21}), ("code-heavy", {})):
                _, path = deploy_workflow(client, read_workflow(template))
                first, rest = time_requests(stack.main_url + path, body, requests)
                print(
                    f"  {template:10s} first {first:6.0f} ms, then median {statistics.median(rest):6.0f} ms "
                    f"(min {min(rest):.0f}, max {max(rest):.0f}, n={len(rest)}, sequential, keep-alive)"
                )
    finally:
        stopping = time.monotonic()
        stack.stop()
        print(f"  stop: {time.monotonic() - stopping:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10)
    parser.add_argument("--idle", type=float, default=20.0, help="seconds to wait before reading idle RSS")
    parser.add_argument("--loops", type=int, default=7)
    args = parser.parse_args()
    install = install_n8n(quiet=True)
    out = subprocess.run(
        [str(install.node_bin), "-e", LOOP_JS % args.loops], capture_output=True, text=True, check=True
    )
    samples = json.loads(out.stdout)
    print(
        f"code-heavy loop, Node {install.node_version}: median {statistics.median(samples):.0f} ms CPU "
        f"(min {min(samples):.0f}, max {max(samples):.0f}, n={len(samples)})"
    )
    measure(Setup(mode="regular", db="sqlite"), "regular, SQLite", args.requests, args.idle)
    measure(Setup(mode="queue", workers=1), "queue, 1 worker, Postgres + Redis", args.requests, args.idle)


if __name__ == "__main__":
    main()
