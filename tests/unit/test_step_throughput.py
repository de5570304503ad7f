"""A step's throughput is what it carried: answered over the span the answers needed, saturation from their timing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from n8n_sizer.runs.records import RequestRecord
from n8n_sizer.runs.stats import step_throughput


def _queue(
    rate: float, capacity: float, seconds: float, base_ms: float = 100.0, fail_every: int = 0, jitter_ms: float = 0.0
) -> list[RequestRecord]:
    """A single-server queue fed at `rate`: each request waits for the ones before it (FIFO at `capacity`/s)."""
    out, free_at = [], 0.0
    for i in range(int(rate * seconds)):
        arrive = 1000.0 + i / rate
        start = max(arrive, free_at)
        free_at = start + 1 / capacity
        latency = (free_at - arrive) * 1000 + base_ms + (i % 7) * jitter_ms
        failed = fail_every and i % fail_every == 0
        out.append(
            RequestRecord(
                seq=i,
                step=f"rate-{rate:g}",
                target="t",
                scheduled_s=arrive,
                sent_s=arrive,
                status=500 if failed else 200,
                latency_ms=latency,
                error_class="non-2xx" if failed else None,
            )
        )
    return out


def test_the_saturated_step_of_the_issue_reads_as_what_it_carried():
    # 12/s offered for 40 s to a workflow that serves ~9.1/s: 480 answers over ~53 s, not "12/s"
    carried = step_throughput(_queue(12, 9.1, 40), 12)
    assert carried.answered == 480 and carried.saturated
    assert carried.throughput_per_s == pytest.approx(9.1, rel=0.03)
    assert carried.span_s == pytest.approx(480 / 9.1, rel=0.03)
    assert carried.in_window < 480 and "latency grew" in carried.why


def test_a_step_that_kept_up_reads_as_its_offered_rate_despite_jitter():
    carried = step_throughput(_queue(5, 50, 40, base_ms=900, jitter_ms=30), 5)
    assert not carried.saturated and carried.why == "kept up"
    assert carried.throughput_per_s == pytest.approx(5, rel=0.01)


def test_failures_mark_a_step_saturated_even_when_the_rest_kept_up():
    carried = step_throughput(_queue(8, 50, 20, fail_every=4), 8)
    assert carried.saturated and "failed" in carried.why and carried.failed == 40


def test_no_request_no_figure():
    assert step_throughput([], 5) is None


@settings(max_examples=60, deadline=None, derandomize=True)
@given(rate=st.floats(1, 40), ratio=st.floats(0.2, 3.0), seconds=st.integers(5, 60))
def test_throughput_never_exceeds_the_offered_rate_nor_the_capacity(rate, ratio, seconds):
    capacity = rate * ratio
    carried = step_throughput(_queue(rate, capacity, seconds), rate)
    assert carried.throughput_per_s <= rate * 1.0001
    assert carried.throughput_per_s <= capacity * 1.05 + 1 / seconds
    if ratio >= 1.2:  # comfortably under capacity: kept up
        assert not carried.saturated
    if ratio <= 0.7 and seconds >= 10:  # far over capacity for a while: a queue built
        assert carried.saturated


def test_role_demands_by_the_utilisation_law():
    from n8n_sizer.runs.records import Sample
    from n8n_sizer.runs.stats import role_demands_ms, role_of

    assert [
        role_of(n)
        for n in (
            "main",
            "n8n-main",
            "worker-2",
            "runner-worker-1",
            "main-runner",
            "webhook-1",
            "n8n-postgres",
            "redis",
            "caddy",
            "sshd",
        )
    ] == ["main", "main", "worker", "runner", "runner", "webhook", "postgres", "redis", "load_balancer", None]
    # 10 s at 0.5 cores (main) and 1.2 cores (worker, averaged over two processes' samples), 100 executions
    samples = [
        Sample(metric="process_cpu_cores", value=v, unit="cores", labels={"process": p}, time_s=t)
        for t in range(100, 110)
        for p, v in (("main", 0.5), ("worker-1", 1.0), ("worker-2", 0.2))
    ]
    demands = role_demands_ms(samples, 100.0, 110.0, 100)
    assert demands == {"main": 50.0, "worker": 120.0}
    assert role_demands_ms(samples, 100.0, 110.0, 0) == {}
