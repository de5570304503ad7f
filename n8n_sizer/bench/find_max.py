"""`--find-max`: the highest constant arrival rate that stays within the error budget and the p95 target.

PerfKitBenchmarker style: measure at the bounds, then bisect. Each step is a full constant-rate run
(long enough to reach steady state: the caller's `measure` decides its duration), and every step's
outcome is kept as evidence, so the answer can be checked against what was actually measured.

The search assumes "passes" is monotonic in rate (a server that fails at r fails above r). Seed 000's
repeat runs moved by up to 25%, so by default the found rate is measured once more; a confirmation that
fails is reported (`confirmed=False`), not hidden.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pydantic import Field, model_validator

from n8n_sizer.errors import InputError
from n8n_sizer.runs.records import RequestRecord
from n8n_sizer.runs.stats import answered_latencies, percentile, step_throughput
from n8n_sizer.safety.frozen import Frozen


class StepOutcome(Frozen):
    """What one constant-rate step measured."""

    # bounds: bench's own ranges (safety.numbers), so a hand-edited run.json cannot report a negative rate
    rate_per_s: float = Field(gt=0, le=100_000)
    fired: int = Field(ge=0, le=10**12)
    errors: int = Field(ge=0, le=10**12)  # any failure: non-2xx, timeout, reset, refused
    p95_ms: float | None = Field(ge=0, le=86_400_000)  # None when nothing was answered
    answered_per_s: float | None = Field(None, ge=0, le=100_000)

    @model_validator(mode="after")
    def _errors_of_fired(self) -> StepOutcome:
        if self.errors > self.fired:
            raise ValueError(f"errors {self.errors} are more than the {self.fired} requests fired")
        return self


class SearchStep(Frozen):
    outcome: StepOutcome
    passed: bool
    reason: str  # why it passed or failed, in words


class SearchResult(Frozen):
    """The highest passing rate measured (None if even `low` failed), and every step as evidence."""

    max_rate_per_s: float | None = Field(gt=0, le=100_000)
    first_failing_rate_per_s: float | None = Field(gt=0, le=100_000)  # the lowest rate that failed, None if none
    p95_target_ms: float = Field(gt=0, le=3_600_000)
    error_budget: float = Field(ge=0, le=1)  # a fraction of fired requests
    tolerance_per_s: float = Field(ge=0, le=100_000)
    at_upper_bound: bool  # `high` itself passed: the true maximum may be higher
    confirmed: bool | None  # the found rate passed again when re-measured; None when not re-measured
    steps: list[SearchStep] = Field(max_length=1000)


def step_outcome(rate_per_s: float, records: Sequence[RequestRecord]) -> StepOutcome:
    """One step's records -> its outcome. Every request without a 2xx counts as an error, "dropped" ones
    (not sent: the in-flight cap was full) included: a rate the client could not even offer is not
    sustainable. p95 is over answered requests."""
    lat = answered_latencies(records)
    carried = step_throughput(records, rate_per_s)  # answered over the span the answers needed
    return StepOutcome(
        rate_per_s=rate_per_s,
        fired=len(records),
        errors=len(records) - len(lat),
        p95_ms=percentile(lat, 95),
        answered_per_s=carried.throughput_per_s if carried else None,
    )


def judge(outcome: StepOutcome, *, p95_ms: float, error_budget: float) -> SearchStep:
    """Pass when errors / fired <= budget and p95 <= target."""
    allowed = error_budget * outcome.fired
    if outcome.fired == 0:
        return SearchStep(outcome=outcome, passed=False, reason="no request was fired")
    if outcome.errors > allowed:
        return SearchStep(
            outcome=outcome, passed=False, reason=f"{outcome.errors} errors of {outcome.fired} (budget {allowed:.0f})"
        )
    if outcome.p95_ms is None or outcome.p95_ms > p95_ms:
        seen = "no answer" if outcome.p95_ms is None else f"{outcome.p95_ms:,.0f} ms"
        return SearchStep(outcome=outcome, passed=False, reason=f"p95 {seen} > {p95_ms:,.0f} ms target")
    return SearchStep(
        outcome=outcome,
        passed=True,
        reason=f"{outcome.errors} errors, p95 {outcome.p95_ms:,.0f} ms <= {p95_ms:,.0f} ms",
    )


def find_max_rate(
    measure: Callable[[float], StepOutcome],
    low: float,
    high: float,
    *,
    p95_ms: float,
    error_budget: float = 0.0,
    tolerance: float = 1.0,
    max_steps: int = 12,
    confirm: bool = True,
) -> SearchResult:
    """Binary search of the highest constant rate (req/s) in [low, high] that passes `judge`.

    `measure(rate)` runs one constant-rate step and returns its outcome. Stops when the bracket is
    narrower than `tolerance` req/s or after `max_steps` measurements; with `confirm`, the found rate is
    then measured once more (one extra step).
    """
    if not 0 < low < high:
        raise InputError(f"rate bounds must satisfy 0 < low < high, got low={low:g} high={high:g}; try --rates 1,50")
    if p95_ms <= 0:
        raise InputError(f"--p95-ms must be > 0, got {p95_ms:g}; try --p95-ms 2000")
    if not 0 <= error_budget < 1:
        raise InputError(f"--error-budget is a fraction of requests in [0, 1), got {error_budget:g}; try 0 or 0.001")
    if tolerance <= 0:
        raise InputError(f"--tolerance must be > 0 req/s, got {tolerance:g}; try 1")
    if max_steps < 2:
        raise InputError(f"max_steps must be >= 2, got {max_steps}")

    steps: list[SearchStep] = []

    def run(rate: float) -> bool:
        step = judge(measure(rate), p95_ms=p95_ms, error_budget=error_budget)
        steps.append(step)
        return step.passed

    good: float | None = None
    bad: float | None = None
    if not run(low):
        bad = low
    elif run(high):
        good = high
    else:
        good, bad = low, high
        while bad - good > tolerance and len(steps) < max_steps:
            mid = (good + bad) / 2
            if run(mid):
                good = mid
            else:
                bad = mid
    confirmed = run(good) if confirm and good is not None else None
    failed = sorted(s.outcome.rate_per_s for s in steps if not s.passed)
    return SearchResult(
        max_rate_per_s=good,
        first_failing_rate_per_s=failed[0] if failed else None,
        p95_target_ms=p95_ms,
        error_budget=error_budget,
        tolerance_per_s=tolerance,
        at_upper_bound=good == high,
        confirmed=confirmed,
        steps=steps,
    )
