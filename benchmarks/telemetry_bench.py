"""What 1 s telemetry costs on this machine: time per sampler tick and CPU spent sampling.

    .venv/bin/python benchmarks/telemetry_bench.py [TICKS]

Samples this machine's /proc (host probes) plus N processes (this Python and a few sleepers standing in
for main, workers, runners) through `LocalHost`, one batched shell command per tick, and prints the tick
duration (mean, p95, max) and the CPU the sampling used per second of run (the shell and `cat`s it forks,
plus parsing in this process). The target: a tick well under the 1 s interval and under 5% of one core.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from n8n_sizer.hosts.host import LocalHost
from n8n_sizer.runs.stats import percentile
from n8n_sizer.telemetry.probes.host import host_probes
from n8n_sizer.telemetry.sampler import Sampler


def main(ticks: int = 30) -> None:
    sleepers = [subprocess.Popen(["sleep", "600"]) for _ in range(5)]
    try:
        processes = {"bench": os.getpid(), **{f"proc-{i}": p.pid for i, p in enumerate(sleepers)}}
        with tempfile.TemporaryDirectory() as tmp:
            sampler = Sampler(LocalHost(), Path(tmp) / "samples.jsonl", host_probes(), processes=processes)
            durations = []
            cpu0 = _cpu_s()
            wall0 = time.perf_counter()
            for _ in range(ticks):
                started = time.perf_counter()
                sampler.tick()
                durations.append((time.perf_counter() - started) * 1000)
                time.sleep(max(0.0, 1.0 - (time.perf_counter() - started)))
            wall = time.perf_counter() - wall0
            cpu = _cpu_s() - cpu0
            lines = (Path(tmp) / "samples.jsonl").read_text().count("\n")
    finally:
        for p in sleepers:
            p.kill()
            p.wait()
    print(
        f"ticks: {ticks}, probes per tick: {len(host_probes()) + 2 * len(processes)} "
        f"(4 host + {len(processes)} processes and their children lists)"
    )
    print(
        f"tick duration ms: mean {sum(durations) / len(durations):.1f}, p95 {percentile(durations, 95):.1f}, "
        f"max {max(durations):.1f}"
    )
    print(f"sampling CPU: {cpu / wall * 100:.1f}% of one core ({cpu:.2f} s CPU over {wall:.1f} s)")
    print(f"samples written: {lines} ({lines / ticks:.0f} per tick)")


def _cpu_s() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
