"""Load shapes: how the offered rate moves over one step, and the arrival times that follow from it.

`--shape constant` (the rate steps of `--rates`), `--shape ramp:FROM:TO` (the rate moves linearly from FROM to TO
req/s over the step, as the webhook-ingest benchmark's 50 -> 400 req/s ramp) and
`--shape burst:BASE:PEAK:BURST_S:PERIOD_S` (BASE req/s, and PEAK req/s for the first BURST_S seconds of every
PERIOD_S). Every shape is a piecewise-linear rate r(t); request i is due when the rate's integral
R(t) = integral of r from 0 to t reaches i (request 0 at t = 0), so a constant rate gives i / rate exactly as the
open-model driver always did, and the count over any span [0, t) is R(t) rounded either way. The built-in driver
sends at these times; the k6 script gets the same rate as `ramping-arrival-rate` stages and the same times for
its records. Pure: no I/O.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from typing import Literal

from pydantic import Field

from n8n_sizer.errors import InputError
from n8n_sizer.safety import numbers as n
from n8n_sizer.safety.frozen import Frozen

SHAPE_EXAMPLE = "--shape burst:2:8:10:30"
MAX_REQUESTS_PER_STEP = 5_000_000  # a schedule this long is a typo (and would not fit in memory as times)


class Shape(Frozen):
    """One step's rate over time. Rates in req/s, times in seconds from the step's start."""

    kind: Literal["constant", "ramp", "burst"]
    rate_per_s: float | None = Field(None, gt=0, le=100_000)  # constant
    from_per_s: float | None = Field(None, ge=0, le=100_000)  # ramp
    to_per_s: float | None = Field(None, ge=0, le=100_000)
    base_per_s: float | None = Field(None, ge=0, le=100_000)  # burst
    peak_per_s: float | None = Field(None, gt=0, le=100_000)
    burst_s: float | None = Field(None, gt=0, le=86_400)
    period_s: float | None = Field(None, gt=0, le=86_400)

    @property
    def name(self) -> str:
        """The step's name; runs.stats reads shaped steps by these prefixes ("ramp-", "burst-")."""
        if self.kind == "constant":
            return f"rate-{self.rate_per_s:g}"
        if self.kind == "ramp":
            return f"ramp-{self.from_per_s:g}-{self.to_per_s:g}"
        return f"burst-{self.base_per_s:g}-{self.peak_per_s:g}-{self.burst_s:g}-{self.period_s:g}"


def constant(rate_per_s: float) -> Shape:
    return Shape(kind="constant", rate_per_s=rate_per_s)


def parse_shape(text: str) -> Shape | None:
    """`constant` -> None (the --rates steps), `ramp:FROM:TO`, `burst:BASE:PEAK:BURST_S:PERIOD_S`; bad input is one
    line naming the flag and the fix."""
    raw = text.strip().lower()
    if raw == "constant":
        return None
    kind, _, rest = raw.partition(":")
    want = {"ramp": ("FROM", "TO"), "burst": ("BASE", "PEAK", "BURST_S", "PERIOD_S")}.get(kind)
    if want is None:
        raise InputError(
            f"--shape {text!r}: choose constant, ramp:FROM:TO or burst:BASE:PEAK:BURST_S:PERIOD_S; try {SHAPE_EXAMPLE}"
        )
    parts = rest.split(":") if rest else []
    if len(parts) != len(want):
        raise InputError(
            f"--shape {text!r}: {kind} takes {':'.join(want)} ({len(want)} numbers, got "
            f"{len(parts)}); try --shape {'ramp:2:20' if kind == 'ramp' else 'burst:2:8:10:30'}"
        )
    values = []
    for label, item in zip(want, parts, strict=True):
        try:
            value = float(item)
        except ValueError:
            raise InputError(f"--shape {text!r}: {label} {item!r} is not a number; try {SHAPE_EXAMPLE}") from None
        allowed = n.SECONDS if label.endswith("_S") else n.Range(0, n.RATE_PER_S.high, example="2")
        n.check_number(f"--shape {kind} {label}", value, allowed)
        values.append(value)
    if kind == "ramp":
        if max(values) <= 0:
            raise InputError(f"--shape {text!r}: FROM and TO cannot both be 0; try --shape ramp:2:20")
        return Shape(kind="ramp", from_per_s=values[0], to_per_s=values[1])
    base, peak, burst_s, period_s = values
    if peak <= base:
        raise InputError(f"--shape {text!r}: PEAK {peak:g} must be above BASE {base:g}; try {SHAPE_EXAMPLE}")
    if burst_s >= period_s:
        raise InputError(
            f"--shape {text!r}: BURST_S {burst_s:g} must be shorter than PERIOD_S {period_s:g}; try {SHAPE_EXAMPLE}"
        )
    return Shape(kind="burst", base_per_s=base, peak_per_s=peak, burst_s=burst_s, period_s=period_s)


# A piece: (start_s, end_s, rate at start, rate at end); the rate is linear in between.
Piece = tuple[float, float, float, float]


def pieces(shape: Shape, duration_s: float) -> list[Piece]:
    """The shape over [0, duration_s) as linear pieces, in order, covering the whole step."""
    if duration_s <= 0:
        raise InputError(f"a step of {duration_s:g} s: the duration must be > 0; try --step-seconds 60")
    if shape.kind == "constant":
        return [(0.0, duration_s, shape.rate_per_s, shape.rate_per_s)]
    if shape.kind == "ramp":
        return [(0.0, duration_s, shape.from_per_s, shape.to_per_s)]
    out: list[Piece] = []
    start = 0.0
    while start < duration_s:
        burst_end = min(start + shape.burst_s, duration_s)
        out.append((start, burst_end, shape.peak_per_s, shape.peak_per_s))
        period_end = min(start + shape.period_s, duration_s)
        if burst_end < period_end:
            out.append((burst_end, period_end, shape.base_per_s, shape.base_per_s))
        start += shape.period_s
    return out


def rate_at(shape: Shape, t_s: float, duration_s: float) -> float:
    """The offered rate r(t), req/s, at `t_s` seconds into the step."""
    for start, end, r0, r1 in pieces(shape, duration_s):
        if start <= t_s < end:
            return r0 + (r1 - r0) * (t_s - start) / (end - start)
    return 0.0


def expected_count(shape: Shape, t_s: float, duration_s: float) -> float:
    """R(t): the rate's integral from the step's start to `t_s` (capped at the step's end)."""
    total = 0.0
    for start, end, r0, r1 in pieces(shape, duration_s):
        if t_s <= start:
            break
        span = min(t_s, end) - start
        slope = (r1 - r0) / (end - start)
        total += r0 * span + slope * span * span / 2.0
    return total


def mean_rate(shape: Shape, duration_s: float) -> float:
    return expected_count(shape, duration_s, duration_s) / duration_s


def arrival_times(shape: Shape, duration_s: float) -> list[float]:
    """Seconds from the step's start at which each request is due: request i when R(t) = i, for
    i < round(R(duration)), at least one request. Non-decreasing, inside [0, duration_s)."""
    plan = pieces(shape, duration_s)
    total = expected_count(shape, duration_s, duration_s)
    count = max(1, round(total))
    if count > MAX_REQUESTS_PER_STEP:
        raise InputError(
            f"this step schedules {count:,} requests; at most {MAX_REQUESTS_PER_STEP:,} per step; "
            f"lower the rates or --step-seconds"
        )
    times: list[float] = []
    done = 0.0  # R at the current piece's start
    piece = 0
    for i in range(count):
        target = min(float(i), total)
        while piece < len(plan) - 1:
            start, end, r0, r1 = plan[piece]
            area = (r0 + r1) / 2.0 * (end - start)
            if done + area > target:
                break
            done += area
            piece += 1
        start, end, r0, r1 = plan[piece]
        need = target - done
        k = (r1 - r0) / (end - start)
        # solve r0 s + k s^2 / 2 = need for s >= 0 in the form that stays exact when k is 0 or negative
        root = math.sqrt(max(r0 * r0 + 2.0 * k * need, 0.0))
        s = 0.0 if need <= 0 else (2.0 * need / (r0 + root) if r0 + root > 0 else end - start)
        times.append(min(start + s, math.nextafter(duration_s, 0.0)))
    return times


def count_before(times: list[float], t_s: float) -> int:
    """How many of the (sorted) `times` are due before `t_s`."""
    return bisect_right(times, t_s - 1e-12)


def k6_stages(shape: Shape, duration_s: float) -> tuple[float, list[tuple[float, float]]]:
    """k6's `ramping-arrival-rate`: (startRate, [(duration_s, target rate)]); k6 moves the rate linearly over
    each stage, and a stage of 0 s jumps (a burst's edges)."""
    plan = pieces(shape, duration_s)
    stages: list[tuple[float, float]] = []
    current = plan[0][2]
    for start, end, r0, r1 in plan:
        if r0 != current:
            stages.append((0.0, r0))
        stages.append((end - start, r1))
        current = r1
    return plan[0][2], stages
