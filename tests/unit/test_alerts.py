"""Seed 000's alerts on synthetic series shaped like its runs (regular mode's pinned runner, a rising
backlog at 20 req/s, 4 workers' 503s) and on healthy ones."""

from __future__ import annotations

from n8n_sizer.runs.records import RequestRecord, Sample
from n8n_sizer.telemetry.alerts import (
    database_not_ready,
    evaluate_alerts,
    main_memory_growing,
    queue_waiting_rising,
    role_cpu_pinned,
    runner_cpu_pinned,
    server_cpu_high,
    sustained,
)

H = {"host": "cx33"}


def s(metric, value, t, **labels):
    return Sample(metric=metric, value=value, unit="x", labels={**H, **labels}, time_s=float(t))


def waiting(values_by_second):
    return [s("n8n_scaling_mode_queue_jobs_waiting", v, t) for t, v in values_by_second]


def test_queue_rising_for_five_minutes_fires():
    backlog = waiting((t, 1 + t * 3) for t in range(0, 400, 20))  # climbing toward ~1,000 as in seed 000
    alert = queue_waiting_rising(backlog)
    assert alert.status == "fired" and alert.first_s == 0 and "rose from 1 to" in alert.summary


def test_queue_that_drains_is_quiet():
    drains = waiting((t, 500 if t % 120 < 60 else 0) for t in range(0, 900, 10))  # spikes, back to 0
    assert queue_waiting_rising(drains).status == "quiet"
    flat_high = waiting((t, 20) for t in range(0, 900, 10))  # busy but not rising (workers full)
    assert queue_waiting_rising(flat_high).status == "quiet"


def test_queue_short_run_or_regular_mode_is_not_evaluated():
    assert queue_waiting_rising(waiting((t, t) for t in range(1, 180))).status == "not evaluated"
    assert queue_waiting_rising([]).status == "not evaluated"
    bull = [s("bull_jobs", 1 + t, t, state="waiting") for t in range(0, 400, 10)]  # Redis LLEN works too
    assert queue_waiting_rising(bull).status == "fired"


def _cpu_run(runner_cores, idle_cores, seconds=420, cpus=4):
    out = [s("host_cpus", cpus, 0)]
    for t in range(seconds):
        out.append(s("process_cpu_cores", runner_cores, t, process="main-runner"))
        out.append(s("process_cpu_cores", 0.3, t, process="main"))
        out.append(s("host_cpu_cores", idle_cores, t, state="idle"))
    return out


def test_runner_pinned_with_idle_cores_fires():
    alert = runner_cpu_pinned(_cpu_run(runner_cores=0.99, idle_cores=2.6))  # seed 000's regular mode
    assert alert.status == "fired" and "main-runner" in alert.summary and "2.6 of 4" in alert.summary


def test_runner_busy_but_server_full_is_quiet():
    assert runner_cpu_pinned(_cpu_run(runner_cores=0.99, idle_cores=0.3)).status == "quiet"  # add cores, not workers
    assert runner_cpu_pinned(_cpu_run(runner_cores=0.6, idle_cores=2.0)).status == "quiet"
    assert runner_cpu_pinned(_cpu_run(0.99, 2.6, seconds=200)).status == "not evaluated"
    assert runner_cpu_pinned([s("host_cpus", 4, 0)]).status == "not evaluated"


def test_runner_dip_resets_the_window():
    run = [x for x in _cpu_run(0.99, 2.6) if not (x.metric == "process_cpu_cores" and x.time_s == 200)]
    run.append(s("process_cpu_cores", 0.2, 200, process="main-runner"))
    assert runner_cpu_pinned(run).status == "quiet"  # 0-199 and 201-419 are each under 5 min


def test_sustained_breaks_on_gaps():
    series = [(float(t), 1.0) for t in range(0, 200)] + [(float(t), 1.0) for t in range(260, 400)]
    assert sustained(series, lambda v: v > 0.5, 300) is None
    assert sustained(series, lambda v: v > 0.5, 100) == (0.0, 100.0)


def req(seq, status, body=None):
    return RequestRecord(
        seq=seq,
        step="rate-50",
        target="cx33",
        scheduled_s=1000.0 + seq,
        sent_s=1000.0 + seq,
        status=status,
        latency_ms=40.0,
        error_class=None if status == 200 else "non-2xx",
        body_snippet=body,
    )


DB_BODY = '{"code":503,"message":"Database is not ready!"}'


def test_database_not_ready_fires_only_when_sustained_for_a_minute():
    # 4 workers overloading 4 vCPU: those 503s every 2 s for 90 s, between answered requests
    overloaded = [req(t, 503, DB_BODY) if t % 2 else req(t, 200) for t in range(0, 91)]
    alert = database_not_ready(overloaded)
    assert alert.status == "fired" and alert.first_s == 1001 and alert.summary.startswith("45 requests over 88 s")
    # a Postgres restart: 3 s of them, then none -- reported, not fired (today's single 503 no longer fires)
    restart = [req(0, 200), req(1, 503, DB_BODY), req(2, 503, DB_BODY), req(4, 503, DB_BODY), req(6, 200)]
    quiet = database_not_ready(restart)
    assert quiet.status == "quiet" and quiet.summary.startswith("3 such 503s over 3 s")
    # two bursts a minute apart, each short, with a 40 s silence between: never a minute on end
    bursts = [req(t, 503, DB_BODY) for t in [*range(0, 20, 2), *range(60, 80, 2)]]
    assert database_not_ready(bursts).status == "quiet"
    assert (
        database_not_ready([req(0, 200), req(1, 500, "Error in workflow"), req(5, 503, "Service Unavailable")]).summary
        == "none"
    )


def _rss(values_by_second, host="ingest", process="main"):
    return [s("process_rss_mib", v, t, host=host, process=process) for t, v in values_by_second]


def test_main_memory_growing_like_regular_mode_holding_its_backlog():
    leak = _rss((t, 354 + t * 36) for t in range(0, 200, 5))  # seed 000: 0.35 GB to 6.9 GB in about 3 min
    alert = main_memory_growing(leak)
    assert alert.status == "fired" and alert.summary.startswith("ingest: main grew from 354")
    healthy = _rss((t, 440 + (t % 150)) for t in range(0, 900, 5))  # queue mode's main: 440 to 590 MB
    assert main_memory_growing(healthy).status == "quiet"
    slow = _rss((t, 300 + t) for t in range(0, 900, 5))  # +50% but over 10 min, not within 3
    assert main_memory_growing(slow).status == "quiet"
    worker = _rss(((t, 354 + t * 36) for t in range(0, 200, 5)), process="worker-1")  # main's rule only
    assert main_memory_growing(worker).status == "not evaluated"


def _lab_run(pinned_cores, idle_cores, seconds=420, cpus=4):
    out = []
    for host in ("ingest", "worker-1"):
        out.append(s("host_cpus", cpus, 0, host=host))
        for t in range(0, seconds, 2):
            out.append(s("host_cpu_cores", idle_cores, t, host=host, state="idle"))
    for t in range(0, seconds, 2):
        out.append(s("process_cpu_cores", pinned_cores, t, host="ingest", process="webhook-1", role="webhook"))
        out.append(s("process_cpu_cores", 0.2, t, host="worker-1", process="worker-1-worker-1", role="worker"))
    return out


def test_a_role_pinned_at_one_core_on_a_host_with_idle_cores():
    alert = role_cpu_pinned(_lab_run(0.97, 2.5))
    assert alert.status == "fired" and alert.summary.startswith("ingest: webhook-1 (webhook) at >= 0.9 core")
    assert role_cpu_pinned(_lab_run(0.97, 0.4)).status == "quiet"  # the host is full: more cores, not more processes
    assert role_cpu_pinned(_lab_run(0.5, 2.5)).status == "quiet"
    assert role_cpu_pinned(_lab_run(0.97, 2.5, seconds=120)).status == "not evaluated"
    assert role_cpu_pinned(_cpu_run(0.99, 2.6)).status == "not evaluated"  # no role labels: the runner rule applies


def test_queue_rising_is_read_per_host():
    # the data host's Bull backlog climbs while another host's gauge reads 0: fired, naming the data host
    rising = [s("bull_jobs", 1 + t, t, host="data", state="waiting") for t in range(0, 400, 10)]
    zero = [s("bull_jobs", 0, t, host="ingest", state="waiting") for t in range(0, 400, 10)]
    alert = queue_waiting_rising(zero + rising)
    assert alert.status == "fired" and alert.summary.startswith("data:")


def _server_run(busy_cores, seconds=420, cpus=4):
    out = [s("host_cpus", cpus, 0)]
    for t in range(seconds):
        out.append(s("host_cpu_cores", busy_cores * 0.8, t, state="user"))
        out.append(s("host_cpu_cores", busy_cores * 0.2, t, state="system"))
        out.append(s("host_cpu_cores", 0.1, t, state="iowait"))
        out.append(s("host_cpu_cores", cpus - busy_cores - 0.1, t, state="idle"))
    return out


def test_server_cpu_high_queue_mode_form():
    assert server_cpu_high(_server_run(3.6)).status == "fired"  # 4 workers on 4 vCPU: 90%, errors began
    fired = server_cpu_high(_server_run(3.6))
    assert "above 85% of 4 cores" in fired.summary and "peak 90%" in fired.summary
    assert server_cpu_high(_server_run(3.2)).status == "quiet"  # 2 workers at 80%: no errors in seed 000
    assert server_cpu_high(_server_run(3.6, seconds=100)).status == "not evaluated"
    assert server_cpu_high([]).status == "not evaluated"


def test_evaluate_all():
    alerts = evaluate_alerts(_cpu_run(0.99, 2.6), [req(0, 200)])
    assert [a.status for a in alerts] == ["not evaluated", "fired", "not evaluated", "quiet", "not evaluated"]
    lab = evaluate_alerts(_lab_run(0.97, 2.5) + _rss((t, 500) for t in range(0, 420, 2)), [req(0, 200)])
    assert [a.rule.split()[0] for a in lab] == ["queue", "a", "whole", "503", "main's"]
    assert [a.status for a in lab] == ["not evaluated", "fired", "not evaluated", "quiet", "quiet"]
