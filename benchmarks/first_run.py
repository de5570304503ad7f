"""A user's first run, answered, then checked: issue 36's "prove it on my workflow" on this machine.

    sudo .venv/bin/python benchmarks/first_run.py [--workflow FILE --body FILE] [--rates 4,8,12,16]
        [--step-seconds 40] [--sweep 16] [--out DIR] [--from DIR]

1. The first run, as a new user makes it: `bench --local --mode regular --rates 4,8,12,16` of a workflow that fed
   neither the cost table nor the model (default: benchmarks/workflows/held-out-orders.json, Webhook -> Code -> Set),
   no step saturating.
2. What the tool then says about this machine: `advise --rps 10 --vcpu V --results DIR --json` (the one host it
   answers for, and its capacity with the 90% interval), and the model refitted on that run asked directly for
   regular mode, queue mode with 1 worker and with 2 workers on this host.
3. What this machine carries, measured: a saturating closed-loop step (`--concurrency-sweep N`, N requests in flight,
   the five-VPS benchmark's method) of the same workflow in each of the three setups.
4. A table: predicted (interval) against measured, the error, whether the interval covers it, and whether the three
   setups are predicted in the measured order. Bounded: every bench step has a fixed length, every run a drain cap.

Run it on a quiet machine (nothing else measuring); `--from DIR` re-reads the runs of an earlier sitting.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-c", "from n8n_sizer.cli import main; main()"]
ADVISE = [sys.executable, "-c", "from n8n_sizer.cli import advise_main; advise_main()"]
HELD_OUT = ROOT / "benchmarks" / "workflows" / "held-out-orders.json"
HELD_OUT_BODY = ROOT / "benchmarks" / "workflows" / "held-out-orders.body.json"
SETUPS = {
    "regular": ["--mode", "regular"],
    "queue 1 worker": ["--mode", "queue", "--workers", "1"],
    "queue 2 workers": ["--mode", "queue", "--workers", "2"],
}


def bench(args: list[str], out: Path, console: Console) -> Path:
    """One `bench --local` run into `out`; its run folder."""
    cmd = CLI + ["bench", "--local", "--out", str(out), "--drain-seconds", "30", *args]
    console.print(f"[dim]$ n8n-sizer {' '.join(cmd[3:])}[/]")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        raise SystemExit(f"bench failed ({p.returncode}): {p.stderr.strip()[-800:]}")
    runs = sorted(d for d in out.iterdir() if (d / "run.json").is_file())
    return runs[-1]


def closed_capacity(run: Path) -> float:
    """Executions per second of the run's closed-loop step (the sweep), from what it answered."""
    from n8n_sizer.runs.fit_input import measurements_from_run

    rows = [m for m in measurements_from_run(run) if m.load.kind == "closed"]
    if not rows:
        raise SystemExit(f"{run}: no closed-loop step")
    return max(m.results.throughput_per_s for m in rows)


def predictions(first: Path, workflow: str) -> dict[str, tuple[float, float, float]]:
    """The model refitted on the first run, asked for each setup on the first run's host."""
    from n8n_sizer.advisor.engine import build_advisor
    from n8n_sizer.advisor.fit import host_of
    from n8n_sizer.advisor.profiles import user_profile
    from n8n_sizer.advisor.setup import Setup
    from n8n_sizer.runs.fit_input import load_results

    rows = load_results(first)
    advisor = build_advisor(rows)
    host = host_of(next(m for m in rows if m.workflow == workflow))
    profile = user_profile(workflow)
    setups = {
        "regular": Setup(mode="regular"),
        "queue 1 worker": Setup(mode="queue", workers=1),
        "queue 2 workers": Setup(mode="queue", workers=2),
    }
    return {name: advisor.fitted.throughput_interval(profile, s, host) for name, s in setups.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workflow", type=Path, default=HELD_OUT)
    ap.add_argument("--body", type=Path, default=HELD_OUT_BODY)
    ap.add_argument("--rates", default="4,8,12,16")
    ap.add_argument("--step-seconds", type=float, default=40.0)
    ap.add_argument("--sweep", type=int, default=16, help="requests in flight in the saturating closed-loop step")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--from", dest="source", type=Path, default=None, help="the folder of an earlier sitting")
    a = ap.parse_args()
    console = Console()
    out = a.source or a.out or Path(tempfile.mkdtemp(prefix="first-run-"))
    workflow = a.workflow.stem
    first_dir, sat_dir = out / "first", out / "saturating"
    if a.source is None:
        first_dir.mkdir(parents=True, exist_ok=True)
        from n8n_sizer.lab.speed import probe
        from n8n_sizer.native.install import find_installed

        install = find_installed()
        if install is None:
            raise SystemExit("n8n is not installed: run `bash scripts/test.sh --collect-only -q` once")
        node = install.node_bin
        console.print(f"speed probe before: {probe(node)['ms']:.1f} ms")
        wf = ["--workflow", str(a.workflow), "--body", str(a.body)]
        bench(["--mode", "regular", *wf, "--rates", a.rates, "--step-seconds", str(a.step_seconds)], first_dir, console)
        for name, opts in SETUPS.items():
            d = sat_dir / name.replace(" ", "-")
            d.mkdir(parents=True, exist_ok=True)
            bench(
                [
                    *opts,
                    *wf,
                    "--rates",
                    "2",
                    "--step-seconds",
                    str(a.step_seconds),
                    "--concurrency-sweep",
                    str(a.sweep),
                ],
                d,
                console,
            )
        console.print(f"speed probe after: {probe(node)['ms']:.1f} ms")
    first_run = sorted(d for d in first_dir.iterdir() if (d / "run.json").is_file())[-1]
    measured = {name: closed_capacity(sorted((sat_dir / name.replace(" ", "-")).iterdir())[-1]) for name in SETUPS}
    p = subprocess.run(
        ADVISE + ["--rps", "10", "--vcpu", "2", "--results", str(first_run), "--workload", workflow, "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if p.returncode != 0:
        raise SystemExit(f"advise --results failed: {p.stderr.strip()}")
    answer = json.loads(p.stdout)
    one = answer.get("one_host") or answer
    cap = one["capacity_per_s"]
    console.print(
        f"advise --rps 10 --vcpu 2 --results (first run only): {one.get('mode')} on this host carries "
        f"{cap['mid']:.1f}/s ({cap['low']:.1f}-{cap['high']:.1f})"
    )
    table = Table(title=f"{workflow}: predicted from the first run, measured saturating, this machine")
    for col in ("setup", "predicted /s (90%)", "measured /s", "error", "covered"):
        table.add_column(col)
    pred = predictions(first_run, workflow)
    errors = []
    for name in SETUPS:
        low, mid, high = pred[name]
        m = measured[name]
        err = 100.0 * (mid - m) / m
        errors.append(abs(err))
        table.add_row(
            name, f"{mid:.1f} ({low:.1f}-{high:.1f})", f"{m:.1f}", f"{err:+.1f}%", "yes" if low <= m <= high else "no"
        )
    console.print(table)
    order_pred = sorted(SETUPS, key=lambda n: pred[n][1])
    order_meas = sorted(SETUPS, key=lambda n: measured[n])
    regular_err = 100.0 * (cap["mid"] - measured["regular"]) / measured["regular"]
    print(
        f"advise's answer for this machine {regular_err:+.1f}% from the saturating regular run; setups: max |error| "
        f"{max(errors):.1f}%, order right: {'yes' if order_pred == order_meas else 'no'}; runs in {out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
