"""Prints `advise` cold-start time and the model's leave-one-out accuracy.

    flock /work/heavy.lock .venv/bin/python benchmarks/advise_bench.py [--runs 9] [--cold-start-only]

Cold start is the wall time of a fresh `advise` process (target < 0.3 s on a quiet machine) for a single-host
question, a multi-host search and an infeasible rate, measured beside a bare `python -c pass` in the same run, so the
ratio shows what the tool itself costs on a shared, noisy machine. Each command runs once first, not counted: it
writes the bytecode an installed package has anyway (the runs ignore PYTHONDONTWRITEBYTECODE for that reason) and
warms the page cache. The minimum over runs is the tool's own cost; the median shows what other work added. The
load average before and after, and this machine's speed probe (lab/speed.py, when n8n's Node.js is installed), are
printed beside the figures, so quiet and loaded sittings can be told apart.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

COMMANDS = (
    ["--rps", "40", "--vcpu", "4"],
    ["--rps", "200", "--json"],
    ["--rps", "1000", "--workload", "code-heavy"],
)


def wall_times(argv: list[str], runs: int) -> list[float]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(argv, check=True, capture_output=True, env=env)  # warm-up: bytecode and page cache
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, env=env)
        out.append(time.perf_counter() - t0)
    return out


def load_average() -> str:
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "n/a"


def speed_probe() -> str:
    """This machine's speed (CPU ms of lab/speed.py's workload, lower is faster), or why there is none."""
    try:
        from n8n_sizer.lab.speed import probe
        from n8n_sizer.native.install import find_installed

        node = find_installed()
        return "n/a (no n8n install found)" if node is None else f"{probe(node.node_bin)['ms']:.1f} ms"
    except Exception as exc:  # noqa: BLE001 - a benchmark prints what it could not measure and goes on
        return f"n/a ({type(exc).__name__})"


def cold_start(runs: int) -> None:
    entry = [sys.executable, "-c", "from n8n_sizer.cli import advise_main; advise_main()"]
    print(f"load average before: {load_average()}; speed probe before: {speed_probe()}")
    bare = wall_times([sys.executable, "-c", "pass"], runs)
    for args in COMMANDS:
        cold = wall_times(entry + args, runs)
        print(
            f"advise {' '.join(args):38s} cold start: min {min(cold):.3f} s, median {statistics.median(cold):.3f} s "
            f"over {runs} runs (target < 0.3 s quiet; advise / bare python = "
            f"{statistics.median(cold) / statistics.median(bare):.1f}x)"
        )
    print(f"bare python start: min {min(bare):.3f} s, median {statistics.median(bare):.3f} s")
    print(f"load average after: {load_average()}; speed probe after: {speed_probe()}")


def accuracy() -> None:
    from n8n_sizer.advisor.measurements import load_embedded
    from n8n_sizer.advisor.validate import leave_one_out

    t0 = time.perf_counter()
    v = leave_one_out(load_embedded())
    took = time.perf_counter() - t0
    print(
        f"leave-one-out over {len(v.points)} capacity points ({took:.1f} s): median |error| "
        f"{v.median_abs_pct_error:.1f}%, max |error| {v.max_abs_pct_error:.1f}% (targets <= 10%, <= 25%); "
        f"measured value inside the 90% interval for {v.interval_coverage:.0%}"
    )
    if v.demand:
        print(
            f"per-role demand rows ({len(v.demand)}): median |error| {v.demand_median_abs_pct_error:.1f}%, "
            f"max |error| {v.demand_max_abs_pct_error:.1f}%"
        )
    worst = max(v.points, key=lambda p: abs(p.error_pct))
    print(f"worst point: {worst.id} measured {worst.measured_per_s:.2f}/s, predicted {worst.predicted_per_s:.2f}/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="timed runs per command (after one warm-up)")
    parser.add_argument("--cold-start-only", action="store_true", help="skip the leave-one-out accuracy")
    args = parser.parse_args()
    cold_start(args.runs)
    if not args.cold_start_only:
        accuracy()


if __name__ == "__main__":
    main()
