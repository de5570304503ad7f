"""Load plans: constant-arrival-rate steps (open model) and a closed-concurrency sweep.

Defaults are seed 000's method (5, 20 and 50 req/s for 3 minutes each, 120 s client timeout, at most
1,000 requests in flight) and seed 002's sweep (1, 10, 25 and 50 concurrent, after a 200-request warm-up).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from n8n_sizer.bench.shapes import Shape
from n8n_sizer.errors import InputError
from n8n_sizer.safety.frozen import Frozen

DEFAULT_RATES_PER_S = (5.0, 20.0, 50.0)  # seed 000, "Load"
DEFAULT_STEP_S = 180.0  # seed 000: 3 minutes per rate
DEFAULT_TIMEOUT_S = 120.0  # seed 000: 120 s client timeout
DEFAULT_MAX_IN_FLIGHT = 1000  # seed 000: at most 1,000 requests in flight
DEFAULT_SWEEP = (1, 10, 25, 50)  # seed 002: concurrent requests
DEFAULT_WARMUP_REQUESTS = 200  # seed 002 and notes/real-n8n.md: 200-request warm-up, excluded from results
DEFAULT_DRAIN_S = 60.0  # after the last step, how long stored executions may take to catch up
MAX_REST_S = 600.0  # a rest window longer than 10 minutes measures nothing a shorter one does not


# Upper bounds: the CLI's own ranges (safety.numbers), so a run.json edited by hand reads back within them.
MAX_STEP_S = 30 * 86_400.0  # --soak's longest (a soak is one step); --step-seconds stops at a day


class RateStep(Frozen):
    kind: Literal["rate"] = "rate"
    rate_per_s: float = Field(gt=0, le=100_000)
    duration_s: float = Field(gt=0, le=MAX_STEP_S)
    # a name of its own, e.g. "rate-17.5-max3" for the third --find-max measurement
    label: str | None = Field(None, min_length=1, max_length=200)
    # A ramp or a burst (bench.shapes); then `rate_per_s` is the shape's mean rate over the step. None: constant.
    shape: Shape | None = None

    @property
    def name(self) -> str:
        if self.label:
            return self.label
        return self.shape.name if self.shape is not None else f"rate-{self.rate_per_s:g}"


class ConcurrencyStep(Frozen):
    kind: Literal["concurrency"] = "concurrency"
    users: int = Field(ge=1, le=10_000)
    duration_s: float = Field(gt=0, le=MAX_STEP_S)

    @property
    def name(self) -> str:
        return f"c-{self.users}"


Step = Annotated[RateStep | ConcurrencyStep, Field(discriminator="kind")]


class LoadPlan(Frozen):
    """What to offer each target, in order. Warm-up requests are sent first and never recorded."""

    steps: tuple[Step, ...] = Field(max_length=10_000)
    timeout_s: float = Field(DEFAULT_TIMEOUT_S, gt=0, le=3600)
    max_in_flight: int = Field(DEFAULT_MAX_IN_FLIGHT, ge=1, le=100_000)
    warmup_requests: int = Field(DEFAULT_WARMUP_REQUESTS, ge=0, le=1_000_000)
    drain_s: float = Field(DEFAULT_DRAIN_S, ge=0, le=86_400)
    # `--rest-seconds`: after the warm-up, a window with no load whose per-role CPU (the kernel's counts) is each
    # process's idle CPU, measured rather than inferred from steps at several rates. 0: none.
    rest_s: float = Field(0.0, ge=0, le=MAX_REST_S)

    def step_names(self) -> list[str]:
        return [s.name for s in self.steps]

    @property
    def duration_s(self) -> float:
        return sum(s.duration_s for s in self.steps)


def parse_rates(text: str) -> tuple[float, ...]:
    """`"5,20,50"` -> (5.0, 20.0, 50.0); an empty string -> (). Bad input names the flag."""
    return tuple(_parse_list(text, "--rates", float, "5,20,50"))


def parse_sweep(text: str) -> tuple[int, ...]:
    return tuple(_parse_list(text, "--concurrency-sweep", int, "1,10,25,50"))


def _parse_list(text: str, flag: str, kind, example: str) -> list:
    items = [t.strip() for t in text.split(",") if t.strip()]
    values = []
    for item in items:
        try:
            value = kind(item)
        except ValueError:
            raise InputError(f"{flag} {text!r}: {item!r} is not a number; try {flag} {example}") from None
        if value <= 0:
            raise InputError(f"{flag} {text!r}: every value must be > 0; try {flag} {example}")
        values.append(value)
    if len(set(values)) != len(values):
        raise InputError(f"{flag} {text!r} repeats a value; each step needs its own; try {flag} {example}")
    return values


def build_plan(
    rates: tuple[float, ...] = DEFAULT_RATES_PER_S,
    step_s: float = DEFAULT_STEP_S,
    sweep: tuple[int, ...] = (),
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    warmup_requests: int = DEFAULT_WARMUP_REQUESTS,
    drain_s: float = DEFAULT_DRAIN_S,
    shape: Shape | None = None,
    rest_s: float = 0.0,
) -> LoadPlan:
    """Rate steps first, then the concurrency sweep, each `step_s` long. A `shape` (ramp or burst) is one step
    of its own instead of the rate steps."""
    if step_s <= 0:
        raise InputError(f"--step-seconds {step_s:g} must be > 0; try --step-seconds 180")
    if not 0 <= rest_s <= MAX_REST_S:
        raise InputError(f"--rest-seconds {rest_s:g} must be between 0 and {MAX_REST_S:g}; try --rest-seconds 60")
    if shape is not None:
        from n8n_sizer.bench.shapes import mean_rate

        step = RateStep(rate_per_s=mean_rate(shape, step_s), duration_s=step_s, shape=shape)
        steps_shaped: list = [step] + [ConcurrencyStep(users=c, duration_s=step_s) for c in sweep]
        return LoadPlan(
            steps=tuple(steps_shaped),
            timeout_s=timeout_s,
            max_in_flight=max_in_flight,
            warmup_requests=warmup_requests,
            drain_s=drain_s,
            rest_s=rest_s,
        )
    if not rates and not sweep:
        raise InputError("nothing to run: --rates and --concurrency-sweep are both empty; try --rates 5,20,50")
    steps: list = [RateStep(rate_per_s=r, duration_s=step_s) for r in rates]
    steps += [ConcurrencyStep(users=c, duration_s=step_s) for c in sweep]
    return LoadPlan(
        steps=tuple(steps),
        timeout_s=timeout_s,
        max_in_flight=max_in_flight,
        warmup_requests=warmup_requests,
        drain_s=drain_s,
        rest_s=rest_s,
    )


class FindMax(Frozen):
    """`--find-max`: bisect the highest constant rate in [low, high] within the error budget and p95 target."""

    low_per_s: float = Field(gt=0, le=100_000)
    high_per_s: float = Field(gt=0, le=100_000)
    p95_ms: float = Field(gt=0, le=3_600_000)
    error_budget: float = Field(0.0, ge=0, lt=1)
    tolerance_per_s: float = Field(1.0, gt=0, le=100_000)
    step_s: float = Field(gt=0, le=86_400)


def parse_duration(text: str, flag: str = "--soak") -> float:
    """`"4h"`, `"30m"`, `"90s"`, `"1h30m"` or plain seconds -> seconds."""
    import re

    raw = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", raw):
        seconds = float(raw)
    else:
        parts = re.findall(r"(\d+(?:\.\d+)?)([hms])", raw)
        if not parts or "".join(n + u for n, u in parts) != raw:
            raise InputError(f"{flag} {text!r} is not a duration; try {flag} 4h, {flag} 30m or {flag} 90s")
        seconds = sum(float(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in parts)
    if seconds <= 0:
        raise InputError(f"{flag} {text!r} must be longer than 0; try {flag} 4h")
    return seconds
