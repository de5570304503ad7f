"""How long `build_report` takes, and how much memory, on a long run folder.

    .venv/bin/python benchmarks/report_bench.py [MINUTES] [SAMPLES_PER_TICK]

Writes a synthetic run folder (RunStore, records models): one 5 req/s step per 10 minutes of load and a
sampler tick every second with SAMPLES_PER_TICK samples (the local queue stack gives about 54), then
times `build_report` with and without plots and prints the peak RSS of this process.
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from pathlib import Path

from n8n_sizer.report.build import build_report
from n8n_sizer.runs.records import RequestRecord, RunManifest, Sample
from n8n_sizer.runs.store import RunStore

T0 = 1_796_000_000.0


def write_run(out: Path, minutes: int, per_tick: int) -> Path:
    setup = {"mode": "queue", "workers": 2, "concurrency": 10, "db": "postgres"}
    store = RunStore.create(
        out,
        RunManifest(
            run_id="bench-report", created_s=T0, setup=setup, hosts={"local": {"setup": setup, "facts": {"vcpu": 2}}}
        ),
    )
    seq = 0
    for i in range(minutes * 60 * 5):  # 5 req/s
        t = T0 + i / 5
        store.append_request(
            RequestRecord(
                seq=seq,
                step=f"rate-5-{int(i / 3000)}",
                target="local",
                scheduled_s=t,
                sent_s=t,
                status=200,
                latency_ms=80.0 + i % 50,
            )
        )
        seq += 1
    procs = [f"p{k}" for k in range(max(1, per_tick // 2))]
    for sec in range(minutes * 60):
        t = T0 + sec
        batch = []
        for p in procs:
            batch.append(
                Sample(
                    metric="process_cpu_cores",
                    value=0.3,
                    unit="cores",
                    labels={"host": "local", "process": p},
                    time_s=t,
                )
            )
            batch.append(
                Sample(
                    metric="process_rss_mib", value=300.0, unit="MiB", labels={"host": "local", "process": p}, time_s=t
                )
            )
        store.append_samples(batch)
    store.close()
    return store.folder


def main(minutes: int = 60, per_tick: int = 54) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        folder = write_run(Path(tmp), minutes, per_tick)
        print(
            f"wrote {minutes} min: {minutes * 300:,} requests, {minutes * 60 * per_tick:,} samples "
            f"in {time.perf_counter() - started:.1f} s"
        )
        for plots in (False, True):
            started = time.perf_counter()
            build_report([folder], Path(tmp) / f"report-{plots}", plots=plots)
            print(f"build_report(plots={plots}): {time.perf_counter() - started:.1f} s")
    print(f"peak RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MiB")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
