"""Every role's CPU per execution on real n8n, counted by the kernel: the campaign behind the embedded `cgq-` rows.

    sudo .venv/bin/python benchmarks/role_costs.py [--runs 3] [--step-seconds 20] [--rest-seconds 30] [--out DIR]
        [--lock FILE] [--only 3,4]

Runs `n8n-sizer bench --local` (as root, so `bench/accounting.py` puts every role's processes in a cgroup of its
own and reads `cpuacct`) over the setups below, `--runs` times each, the rounds interleaved so that a drift of the
machine spreads over every setup alike. Each run is bounded: a few steps of `--step-seconds` at rates under what the
setup carries on 2 cores, a drain of at most 60 s, and a rest window of `--rest-seconds` with no load after the
warm-up (each n8n process's idle CPU, a `-rest` row when embedded). With `--lock FILE` every run takes that file's lock first (a
shared machine: nothing else measures meanwhile). Prints, per setup and role, the CPU per execution (min, median,
max over every counted step of at least 2/s), Redis commands and Postgres transactions per execution, and the load
average around each run; then `scripts/embed_local_rows.py --counted --quiet-machine DIR/*/*` embeds them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from n8n_sizer.runs.stats import step_rate, step_throughput
from n8n_sizer.runs.store import RunStore

CLI = [sys.executable, "-c", "from n8n_sizer.cli import main; main()"]
MIN_RATE_PER_S = 2.0  # as scripts/embed_local_rows.py: below it an n8n process's idle CPU is most of the figure
# (label, bench options, rates): both packaged workloads, regular and queue, 0/1/2 webhook processors, 1/2 workers.
SETUPS = [
    ("light, regular", ["--mode", "regular", "--workflow", "light"], "5,10,15"),
    ("light, queue 1 worker", ["--mode", "queue", "--workers", "1", "--workflow", "light"], "5,10,15"),
    (
        "light, queue 1 worker, 1 webhook processor",
        ["--mode", "queue", "--workers", "1", "--webhook-processors", "1", "--workflow", "light"],
        "5,10,15",
    ),
    (
        "light, queue 1 worker, 2 webhook processors",
        ["--mode", "queue", "--workers", "1", "--webhook-processors", "2", "--workflow", "light"],
        "5,10",
    ),
    ("light, queue 2 workers", ["--mode", "queue", "--workers", "2", "--workflow", "light"], "5,10,15"),
    ("code-heavy, queue 1 worker", ["--mode", "queue", "--workers", "1", "--workflow", "code-heavy"], "2,3.5"),
]


def loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def run_one(
    options: list[str], rates: str, step_s: float, out: Path, lock: Path | None, rest_s: float = 0.0
) -> tuple[dict, float, float]:
    cmd = [
        *CLI,
        "bench",
        "--local",
        *options,
        "--rates",
        rates,
        "--step-seconds",
        f"{step_s:g}",
        "--warmup",
        "20",
        "--drain-seconds",
        "60",
        "--rest-seconds",
        f"{rest_s:g}",
        "--out",
        str(out),
        "--json",
    ]
    if lock is not None:
        cmd = ["flock", str(lock), *cmd]
    before = loadavg()
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    after = loadavg()
    if res.returncode != 0:
        return {"error": res.stderr.strip()[-300:]}, before, after
    return json.loads(res.stdout), before, after


def step_figures(run_dir: Path) -> list[dict]:
    """Per counted step of at least MIN_RATE_PER_S: role -> CPU ms per execution, commands and transactions."""
    store = RunStore.open(run_dir)
    records = store.read_requests()
    target = next(iter(store.manifest.hosts))
    steps = store.manifest.extra.get("steps", {}).get(target, {})
    out = []
    for step in sorted({r.step for r in records}, key=lambda s: step_rate(s) or 0):
        t = step_throughput([r for r in records if r.step == step], step_rate(step))
        c = steps.get(step, {})
        if t is None or not t.answered or c.get("cpu_source") != "cpuacct" or t.throughput_per_s < MIN_RATE_PER_S:
            continue
        fig = {role: ms / t.answered for role, ms in c["role_cpu_ms"].items()}
        for key in ("redis_commands", "postgres_transactions"):
            if c.get(key) is not None:
                fig[key] = c[key] / t.answered
        out.append(fig)
    return out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=3, help="runs per setup (rounds, interleaved)")
    p.add_argument("--step-seconds", type=float, default=20.0)
    p.add_argument("--out", type=Path, default=None, help="folder for the run folders (default: a new temp folder)")
    p.add_argument("--lock", type=Path, default=None, help="take this file's lock around each run (flock)")
    p.add_argument(
        "--rest-seconds",
        type=float,
        default=30.0,
        help="a window with no load after the warm-up: each process's idle CPU (bench --rest-seconds; 0: none)",
    )
    p.add_argument("--only", default=None, help="comma-separated setup numbers (1-based) to run")
    args = p.parse_args()
    chosen = [(i, *s) for i, s in enumerate(SETUPS, 1) if args.only is None or str(i) in args.only.split(",")]
    folder = args.out or Path(tempfile.mkdtemp(prefix="n8n-sizer-role-costs-"))
    console = Console()
    console.print(f"{len(chosen)} setups x {args.runs} runs, steps of {args.step_seconds:g} s; folder {folder}")
    figures: dict[str, list[dict]] = {label: [] for _, label, _, _ in chosen}
    loads: dict[str, list[float]] = {label: [] for _, label, _, _ in chosen}
    with Progress(console=console) as progress:
        task = progress.add_task("runs", total=len(chosen) * args.runs)
        for round_ in range(args.runs):
            for number, label, options, rates in chosen:
                out = folder / f"setup-{number}"
                summary, before, after = run_one(options, rates, args.step_seconds, out, args.lock, args.rest_seconds)
                loads[label] += [before, after]
                if "error" in summary:
                    console.print(f"[red]{label}, round {round_ + 1}: {summary['error']}")
                else:
                    figures[label] += step_figures(Path(summary["folder"]))
                progress.advance(task)
    table = Table(title="CPU ms per execution by role (kernel cpuacct), min / median / max over counted steps")
    for col in ("setup", "steps", "role", "min", "median", "max", "load avg"):
        table.add_column(col)
    for label, figs in figures.items():
        keys = sorted({k for f in figs for k in f})
        for k in keys:
            vals = [f[k] for f in figs if k in f]
            table.add_row(
                label,
                str(len(vals)),
                k,
                f"{min(vals):.1f}",
                f"{statistics.median(vals):.1f}",
                f"{max(vals):.1f}",
                f"{max(loads[label]):.1f}",
            )
    console.print(table)
    (folder / "summary.json").write_text(json.dumps({"figures": figures, "loads": loads}, indent=1))
    console.print(
        f"runs in {folder}; embed: scripts/embed_local_rows.py --counted --quiet-machine "
        f"--page docs/findings/role-costs-measured.md {folder}/setup-*/*/"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
