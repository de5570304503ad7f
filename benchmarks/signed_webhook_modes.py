"""signed-webhook's two response modes side by side on the local stack: the same burst and malformed share.

For each of `--respond last-node`, `immediately` and `received`: one `n8n-sizer bench --local` run (a fresh queue
stack, 1 worker) with --shape (default burst:2:8:10:30 for 60 s) and --malformed 0.08; then prints, per mode,
requests, valid accepted, refused by class, accepted then lost, throughput (answered per second over the
answers' span) and p50/p95/p99 of the accepted answers, from the run's own records and ledger.

Run: .venv/bin/python benchmarks/signed_webhook_modes.py [--shape burst:2:8:10:30] [--seconds 60] [--out DIR]
No asserts: it prints figures. Each run starts and stops its own stack; other work on the machine skews them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from n8n_sizer.runs.fit_input import find_runs
from n8n_sizer.runs.stats import answered_latencies, percentile, shaped_offered_per_s, step_throughput
from n8n_sizer.runs.store import RunStore


def run_mode(mode: str, shape: str, seconds: int, out: Path) -> Path:
    folder = out / mode
    cmd = [
        str(Path(sys.executable).with_name("n8n-sizer")),
        "bench",
        "--local",
        "--mode",
        "queue",
        "--workers",
        "1",
        "--workflow",
        "signed-webhook",
        "--respond",
        mode,
        "--shape",
        shape,
        "--malformed",
        "0.08",
        "--step-seconds",
        str(seconds),
        "--warmup",
        "20",
        "--drain-seconds",
        "90",
        "--out",
        str(folder),
        "--json",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{mode}: bench failed: {done.stderr.strip()[-400:]}")
    return Path(json.loads(done.stdout)["folder"])


def figures(folder: Path) -> dict:
    store = RunStore.open(folder)
    records = store.read_requests()
    ledger = store.manifest.ledgers["local"]
    carried = step_throughput(records, shaped_offered_per_s(records) or 1.0)
    lat = answered_latencies(records)
    refused = {c: t.refused_as_expected for c, t in (ledger.by_class or {}).items() if c != "valid"}
    return {
        "requests": len(records),
        "accepted": ledger.accepted,
        "refused_by_class": refused,
        "lost": ledger.accepted_then_lost,
        "throughput_per_s": round(carried.throughput_per_s, 2),
        "p50_ms": round(percentile(lat, 50)),
        "p95_ms": round(percentile(lat, 95)),
        "p99_ms": round(percentile(lat, 99)),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="burst:2:8:10:30")
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--out", type=Path, default=Path("/tmp/n8n-sizer-signed-modes"))
    ap.add_argument("--existing", action="store_true", help="only read runs already under --out/<mode>")
    args = ap.parse_args()
    for mode in ("last-node", "immediately", "received"):
        folder = (
            sorted(find_runs(args.out / mode))[-1]
            if args.existing
            else run_mode(mode, args.shape, args.seconds, args.out)
        )
        print(f"{mode:<12} {json.dumps(figures(folder))}")


if __name__ == "__main__":
    main()
