"""find_max_rate against deterministic synthetic servers (a capacity with a queueing p95 curve)."""

from __future__ import annotations

import pytest

from n8n_sizer.bench.find_max import StepOutcome, find_max_rate, judge
from n8n_sizer.errors import InputError


def server(capacity: float, base_ms: float = 200.0, seen: list[float] | None = None):
    """p95 grows like an M/M/1 residence time as the rate nears capacity; above capacity, errors."""

    def measure(rate: float) -> StepOutcome:
        if seen is not None:
            seen.append(rate)
        fired = int(rate * 60)
        if rate >= capacity:
            return StepOutcome(rate_per_s=rate, fired=fired, errors=int((rate - capacity) * 60) + 1, p95_ms=120_000)
        return StepOutcome(rate_per_s=rate, fired=fired, errors=0, p95_ms=base_ms / (1 - rate / capacity))

    return measure


def test_finds_the_latency_bound_within_tolerance():
    # p95 <= 2000 ms  <=>  200 / (1 - r/40) <= 2000  <=>  r <= 36
    result = find_max_rate(server(40.0), 1, 64, p95_ms=2000, tolerance=0.5)
    assert 35.5 <= result.max_rate_per_s <= 36.0
    assert (
        result.first_failing_rate_per_s is not None and result.first_failing_rate_per_s - result.max_rate_per_s <= 0.5
    )
    assert result.confirmed and not result.at_upper_bound
    assert [s.outcome.rate_per_s for s in result.steps][:3] == [1, 64, 32.5]
    assert all(s.passed == (s.outcome.rate_per_s <= 36) for s in result.steps)


def test_error_budget_is_a_fraction_of_fired():
    def measure(rate: float) -> StepOutcome:  # 0.5% errors above 10 req/s, latency always fine
        fired = int(rate * 100)
        return StepOutcome(rate_per_s=rate, fired=fired, errors=int(fired * 0.005) if rate > 10 else 0, p95_ms=100)

    strict = find_max_rate(measure, 1, 40, p95_ms=1000, tolerance=0.25)
    lenient = find_max_rate(measure, 1, 40, p95_ms=1000, error_budget=0.01, tolerance=0.25)
    assert 9.75 <= strict.max_rate_per_s <= 10
    assert lenient.max_rate_per_s == 40 and lenient.at_upper_bound


def test_low_bound_failing_gives_none_with_evidence():
    seen: list[float] = []
    result = find_max_rate(server(2.0, seen=seen), 5, 50, p95_ms=2000)
    assert result.max_rate_per_s is None and result.first_failing_rate_per_s == 5
    assert seen == [5] and "errors" in result.steps[0].reason and result.confirmed is None


def test_confirmation_rerun_that_fails_is_reported():
    calls: list[float] = []

    def noisy(rate: float) -> StepOutcome:  # passes up to 20 req/s the first time, fails any repeat
        calls.append(rate)
        ok = rate <= 20 and calls.count(rate) == 1
        return StepOutcome(rate_per_s=rate, fired=100, errors=0 if ok else 3, p95_ms=100)

    result = find_max_rate(noisy, 1, 40, p95_ms=1000, tolerance=1)
    assert 19 <= result.max_rate_per_s <= 20 and result.confirmed is False
    assert calls[-1] == result.max_rate_per_s and calls.count(calls[-1]) == 2 and not result.steps[-1].passed
    steady = find_max_rate(server(40.0), 1, 64, p95_ms=2000, tolerance=0.5)
    assert steady.confirmed is True and steady.steps[-1].outcome.rate_per_s == steady.max_rate_per_s
    assert find_max_rate(server(40.0), 1, 64, p95_ms=2000, confirm=False).confirmed is None


def test_max_steps_bounds_the_work():
    seen: list[float] = []
    find_max_rate(server(40.0, seen=seen), 1, 64, p95_ms=2000, tolerance=1e-6, max_steps=5)
    assert len(seen) == 5 + 1  # five search steps and the confirmation


def test_judge_reasons():
    assert not judge(StepOutcome(rate_per_s=5, fired=0, errors=0, p95_ms=None), p95_ms=1, error_budget=0).passed
    step = judge(StepOutcome(rate_per_s=5, fired=300, errors=0, p95_ms=None), p95_ms=1000, error_budget=0)
    assert not step.passed and "no answer" in step.reason


@pytest.mark.parametrize(
    "kw, flag",
    [
        (dict(low=0, high=5, p95_ms=1), "rate bounds"),
        (dict(low=5, high=5, p95_ms=1), "rate bounds"),
        (dict(low=1, high=5, p95_ms=0), "--p95-ms"),
        (dict(low=1, high=5, p95_ms=1, error_budget=1.0), "--error-budget"),
        (dict(low=1, high=5, p95_ms=1, tolerance=0), "--tolerance"),
    ],
)
def test_bad_input_names_the_flag(kw, flag):
    with pytest.raises(InputError, match=flag):
        find_max_rate(server(10), **kw)


def test_step_outcome_from_records_counts_dropped_as_errors():
    from n8n_sizer.bench.find_max import step_outcome
    from n8n_sizer.runs.records import RequestRecord

    def rec(i, status, latency, cls=None):
        return RequestRecord(
            seq=i,
            step="rate-10",
            target="local",
            scheduled_s=100 + i / 10,
            sent_s=100 + i / 10,
            status=status,
            latency_ms=latency,
            error_class=cls,
        )

    records = [rec(i, 200, 100.0 + i) for i in range(18)] + [
        rec(18, None, None, "dropped"),
        rec(19, 503, 5.0, "non-2xx"),
    ]
    out = step_outcome(10, records)
    assert (
        out.fired == 20 and out.errors == 2 and out.answered_per_s == pytest.approx(18 / (2.0 + 0.017))
    )  # latency trailed 17 ms
    assert out.p95_ms == pytest.approx(100 + 17 * 0.95 + 0.0, abs=0.5)
    assert not judge(out, p95_ms=1000, error_budget=0.05).passed and judge(out, p95_ms=1000, error_budget=0.1).passed
