"""The report from synthetic-but-realistic run folders, written with the records models and RunStore.

The synthetic servers follow seed 000's shapes: regular mode answers ~215/min at its ceiling with 500/503
errors beyond it; queue mode with 2 workers ~519/min; overload builds a backlog whose latency grows until
the 120 s client timeout.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from n8n_sizer.bench.find_max import StepOutcome, find_max_rate
from n8n_sizer.report.build import build_report
from n8n_sizer.report.model import load_run, setup_label, step_rows
from n8n_sizer.runs.records import Ledger, RequestRecord, RunManifest, Sample
from n8n_sizer.runs.store import RunStore

T0 = 1_796_000_000.0
STEP_S = 40
TIMEOUT_MS = 120_000


def _requests(
    target: str, capacity: float, rates=(5, 20, 50), step_s=STEP_S, fail_503_above=None
) -> list[RequestRecord]:
    out, seq, t = [], 0, T0
    for rate in rates:
        backlog_s = 0.0  # seconds of work queued ahead of the next arrival
        n = int(rate * step_s)
        for i in range(n):
            sched = t + i / rate
            backlog_s = max(0.0, backlog_s - 1 / rate) + 1 / capacity
            latency = 900 + backlog_s * 1000 if rate > capacity else 900 + (i % 10) * 20
            kw: dict = dict(seq=seq, step=f"rate-{rate:g}", target=target, scheduled_s=sched, sent_s=sched + 0.001)
            if fail_503_above and rate > fail_503_above and i % 7 == 0:
                rec = RequestRecord(
                    **kw,
                    status=503,
                    latency_ms=30.0,
                    error_class="non-2xx",
                    error="HTTP 503",
                    body_snippet='{"code":503,"message":"Database is not ready!"}',
                )
            elif latency > TIMEOUT_MS:
                rec = RequestRecord(
                    **kw, status=None, latency_ms=None, error_class="timeout", error="ReadTimeout: timed out"
                )
            else:
                rec = RequestRecord(**kw, status=200, latency_ms=latency)
            out.append(rec)
            seq += 1
        t += step_s
    return out


def _samples(host: str, queue: bool, rates=(5, 20, 50), step_s=STEP_S) -> list[Sample]:
    out = [Sample(metric="host_cpus", value=4, unit="count", labels={"host": host}, time_s=T0)]
    waiting = 0.0
    for k, rate in enumerate(rates):
        for sec in range(step_s):
            t = T0 + k * step_s + sec + 0.5
            lab = {"host": host}
            runner = min(1.0, rate * 0.187) if not queue else min(1.0, rate * 0.187 / 2)
            procs = {
                "main": (0.2 + rate / 200, 400 + (0 if queue else 0.5 * rate * (k * step_s + sec))),
                "main-runner": (runner, 146),
            }
            if queue:
                procs.update(
                    {
                        "worker-1": (0.4, 310),
                        "worker-1-runner": (runner, 150),
                        "worker-2": (0.4, 305),
                        "worker-2-runner": (runner, 150),
                        "redis": (0.02, 4),
                    }
                )
                waiting = max(0.0, waiting + rate - 8.6)
                out.append(
                    Sample(
                        metric="n8n_scaling_mode_queue_jobs_waiting", value=waiting, unit="jobs", labels=lab, time_s=t
                    )
                )
                out.append(
                    Sample(
                        metric="n8n_scaling_mode_queue_jobs_active",
                        value=min(20, rate),
                        unit="jobs",
                        labels=lab,
                        time_s=t,
                    )
                )
            for name, (cores, rss) in procs.items():
                pl = {**lab, "process": name}
                out.append(Sample(metric="process_cpu_cores", value=cores, unit="cores", labels=pl, time_s=t))
                out.append(Sample(metric="process_rss_mib", value=rss, unit="MiB", labels=pl, time_s=t))
            out.append(
                Sample(
                    metric="host_cpu_pct", value=1.5 + (sec % 5), unit="%", labels={**lab, "state": "iowait"}, time_s=t
                )
            )
            if (
                sec % 5 == 0 and not queue and rate == 50 and sec % 10 == 0
            ):  # regular at 50 req/s: the editor call times out
                out.append(
                    Sample(
                        metric="probe_error",
                        value=1,
                        unit="count",
                        time_s=t,
                        labels={**lab, "probe": "editor", "exit_code": "none", "error": "ReadTimeout: timed out"},
                    )
                )
            elif sec % 5 == 0:
                out.append(
                    Sample(
                        metric="editor_get_workflow_ms",
                        value=40 + rate * (300 if not queue else 4),
                        unit="ms",
                        labels=lab,
                        time_s=t,
                    )
                )
    return out


def write_run(out: Path, run_id: str, kind: str, setup: dict, host: str, requests, samples, extra=None) -> Path:
    manifest = RunManifest(
        run_id=run_id,
        kind=kind,
        created_s=T0 - 30,
        finished_s=T0 + 200,
        setup=setup,
        hosts={host: {"setup": setup, "facts": {"vcpu": 4, "ram_mib": 7884, "cpu_model": "EPYC"}}},
        extra=extra or {},
    )
    store = RunStore.create(out, manifest)
    for r in requests:
        store.append_request(r)
    store.append_samples(samples)
    ok = sum(1 for r in requests if r.status == 200)
    store.update_manifest(
        ledgers={
            host: Ledger(
                fired=len(requests), accepted=ok, refused=len(requests) - ok, accepted_then_lost=0, executions_stored=ok
            )
        }
    )
    store.close()
    return store.folder


REGULAR = {"mode": "regular", "workers": 0, "db": "postgres", "production_limit": -1}
QUEUE = {"mode": "queue", "workers": 2, "concurrency": 10, "db": "postgres"}


@pytest.fixture
def runs(tmp_path: Path) -> list[Path]:
    out = tmp_path / "results"
    regular = write_run(
        out,
        "20261130T150000Z-aaaaaa",
        "bench",
        REGULAR,
        "cx33",
        _requests("cx33", capacity=5.5, fail_503_above=20),
        _samples("cx33", queue=False),
    )
    queue = write_run(
        out,
        "20261130T160000Z-bbbbbb",
        "bench",
        QUEUE,
        "cx33-q",
        _requests("cx33-q", capacity=8.65),
        _samples("cx33-q", queue=True),
    )
    return [regular, queue]


def _row(rows, step):
    return next(r for r in rows if r.step == step)


def test_step_rows_match_the_synthetic_servers(runs):
    regular, queue = (step_rows(load_run(r)) for r in runs)
    assert [r.step for r in regular] == ["rate-5", "rate-20", "rate-50"]
    low = _row(regular, "rate-5")
    assert low.fired == 200 and low.errors == {} and low.answered_per_min == pytest.approx(300, rel=0.01)
    assert low.p50_ms == pytest.approx(990, abs=20) and low.peak_stack_ram_mib is not None
    # regular at 50 req/s: 503s every 7th request, the rest queue behind a 5.5 req/s ceiling until the
    # 120 s client timeout; "answered within 120 s per minute of load", as seed 000 counts
    high = _row(regular, "rate-50")
    assert high.errors["503"] == len(range(0, 2000, 7)) and high.errors["timeout"] > 500
    assert high.answered + sum(high.errors.values()) == high.fired == 2000
    assert 60_000 < high.p99_ms <= TIMEOUT_MS
    assert _row(queue, "rate-20").p95_ms < _row(regular, "rate-20").p95_ms  # more capacity, shorter backlog
    assert high.peak_stack_ram_mib > _row(regular, "rate-5").peak_stack_ram_mib  # main's backlog grows its RSS
    assert _row(regular, "rate-20").editor_p95_ms > 10 * _row(queue, "rate-20").editor_p95_ms
    assert high.editor_failed == STEP_S // 10 and _row(queue, "rate-50").editor_failed == 0


def test_markdown_report_has_tables_ledger_alerts_and_extra_sections(runs, tmp_path):
    extra = "## What the advisor now recommends\n\nqueue, 2 workers for 20 req/s.\n"
    result = build_report(runs, tmp_path / "report", extra_sections=[extra], plots=False)
    text = result.markdown.read_text()
    assert result.images == []
    assert "| regular, postgres | cx33 (4 vCPU, 7.7 GiB) | rate-5 | 200 | 300 | 0 |" in text
    assert re.search(r"\| queue, 2 workers \(c=10\) \| cx33-q .*\| rate-50 \|", text)
    assert "286 503" in text  # errors by type
    assert "15.0 s (4 failed) |" in text  # editor p95 and the editor calls that timed out
    assert "### Ledger" in text and "| cx33 | 3,000 |" in text
    # 40 s of those 503s: reported, but under the minute the monitoring guide waits for before it pages
    assert '503 "Database is not ready!" sustained for 1 min | quiet |  | 286 such 503s over 40 s' in text
    assert text.rstrip().endswith("queue, 2 workers for 20 req/s.")


def test_drill_find_max_and_soak_runs_render(tmp_path):
    out = tmp_path / "results"
    drill = write_run(
        out,
        "drill-1",
        "drill",
        QUEUE,
        "local",
        [],
        [],
        extra={
            "drill": "redis-restart",
            "checks": [
                {
                    "observation": "20 of 20 waiting jobs after the restart",
                    "expected": "AOF kept all 20",
                    "verdict": "as seed 000",
                },
                {"observation": "0 crashed", "expected": "all 20 ran, success", "verdict": "as seed 000"},
                {"observation": "log: a | b", "expected": "n/a", "verdict": "matches"},
            ],
            "verdict": "matches",
        },
    )
    search = find_max_rate(
        lambda r: StepOutcome(rate_per_s=r, fired=int(r * 60), errors=0 if r <= 8 else 5, p95_ms=900),
        1,
        16,
        p95_ms=2000,
        tolerance=1,
    )
    # as `bench --find-max` writes it: extra.find_max[target] = SearchResult (RunStore.put_extra)
    fm = write_run(
        out,
        "fm-1",
        "find-max",
        QUEUE,
        "local",
        _requests("local", 8.65, rates=(8,), step_s=20),
        [],
        extra={"find_max": {"local": search.model_dump(mode="json")}},
    )
    soak_reqs = [
        RequestRecord(
            seq=i,
            step="soak-0.2",
            target="local",
            scheduled_s=T0 + 5 * i,
            sent_s=T0 + 5 * i,
            status=200,
            latency_ms=600.0 + (56_000 if i == 400 else 0),
        )
        for i in range(720)
    ]
    soak = write_run(out, "soak-1", "soak", REGULAR, "local", soak_reqs, [])
    text = build_report([drill, fm, soak], tmp_path / "r", plots=False).markdown.read_text()
    assert "| 20 of 20 waiting jobs after the restart | AOF kept all 20 | as seed 000 |" in text
    assert "| log: a \\| b | n/a | matches |" in text and "Verdict: **matches**" in text  # a pipe stays in its cell
    assert re.search(r"Highest rate within p95 <= 2,000 ms and errors <= 0\.00%: \*\*7\.\d+ req/s\*\*", text)
    assert "| 1 | 1 | 60 | 0 | 900 ms | pass" in text and "#### local" in text
    single = write_run(out, "fm-2", "find-max", QUEUE, "local", [], [], extra={"search": search.model_dump()})
    assert "**7." in build_report([single], tmp_path / "r2", plots=False).markdown.read_text()
    assert "### Soak buckets, local" in text and "56,600" in text


def test_setup_labels():
    assert setup_label(QUEUE) == "queue, 2 workers (c=10)"
    assert setup_label({"mode": "queue", "workers": 1}) == "queue, 1 worker"
    assert setup_label({"mode": "regular", "db": "postgres", "production_limit": 10}) == "regular, postgres, limit 10"
    assert setup_label({}) == "unknown setup"


def test_step_rate_names():
    from n8n_sizer.runs.stats import step_rate

    assert [step_rate(n) for n in ("rate-20", "rate-2.5", "rate-20-confirm", "c-10", "soak-0.2", "rate-x")] == [
        20.0,
        2.5,
        20.0,
        None,
        None,
        None,
    ]


def test_plot_series_beyond_nine_are_summed():
    from n8n_sizer.report.plots import _top_series

    groups = {
        f"p{i}": [Sample(metric="m", value=float(i), unit="x", time_s=float(t)) for t in range(3)] for i in range(12)
    }
    out = dict(_top_series(groups))
    assert len(out) == 9 and "p11" in out and "p4" in out and "p3" not in out  # the 8 busiest kept
    assert out["4 others, summed"] == [(0.0, 6.0), (1.0, 6.0), (2.0, 6.0)]  # p0 + p1 + p2 + p3
    assert dict(_top_series({k: groups[k] for k in ("p1", "p2")})) == {
        "p1": [(t, 1.0) for t in (0.0, 1.0, 2.0)],
        "p2": [(t, 2.0) for t in (0.0, 1.0, 2.0)],
    }


def closed_sweep_requests(target: str = "cx23", step_s: float = 10.0) -> list[RequestRecord]:
    """Seed 002's CX23 sweep shape: ~15 executions/s at most, median = users / throughput."""
    out, seq, t = [], 0, T0
    for users in (1, 10, 25, 50):
        throughput = min(users / 0.104, 15.0)
        latency = users / throughput * 1000
        for i in range(int(throughput * step_s)):
            sched = t + i / throughput
            out.append(
                RequestRecord(
                    seq=seq,
                    step=f"c-{users}",
                    target=target,
                    scheduled_s=sched,
                    sent_s=sched,
                    status=200,
                    latency_ms=latency,
                )
            )
            seq += 1
        t += step_s + latency / 1000
    return out


def test_closed_sweep_rows(tmp_path):
    folder = write_run(tmp_path / "results", "sweep", "bench", REGULAR, "cx23", closed_sweep_requests(), [])
    rows = {r.step: r for r in step_rows(load_run(folder))}
    assert [rows[s].concurrency for s in ("c-1", "c-10", "c-25", "c-50")] == [1, 10, 25, 50]
    assert all(r.offered_rate_per_s is None for r in rows.values())
    assert rows["c-50"].p50_ms == pytest.approx(50 / 15 * 1000)
    assert rows["c-10"].answered_per_min == pytest.approx(15 * 60, rel=0.12)
