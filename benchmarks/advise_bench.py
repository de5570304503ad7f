"""Prints `advise` cold-start time and the model's leave-one-out accuracy.

    .venv/bin/python benchmarks/advise_bench.py

Cold start is the wall time of a fresh `advise` process (target < 0.5 s) for a single-host question, a
multi-host search and an infeasible rate, measured beside a bare `python -c pass` in the same run, so the
ratio shows what the tool itself costs on a shared, noisy machine.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

RUNS = 7


def wall_times(argv: list[str]) -> list[float]:
    out = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    entry = [sys.executable, "-c", "from n8n_sizer.cli import advise_main; advise_main()"]
    bare = wall_times([sys.executable, "-c", "pass"])
    for args in (
        ["--rps", "40", "--vcpu", "4"],
        ["--rps", "200", "--json"],
        ["--rps", "1000", "--workload", "code-heavy"],
    ):
        cold = wall_times(entry + args)
        print(
            f"advise {' '.join(args):38s} cold start: median {statistics.median(cold):.3f} s, min {min(cold):.3f} s "
            f"over {RUNS} runs (target < 0.5 s; advise / bare python = "
            f"{statistics.median(cold) / statistics.median(bare):.1f}x)"
        )
    print(f"bare python start: median {statistics.median(bare):.3f} s")

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


if __name__ == "__main__":
    main()
