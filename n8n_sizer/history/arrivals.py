"""Rates from start times, and back: the mean, the busiest minute and the 99th-percentile second of a window.

    mean                 = executions / window seconds
    busiest minute       = the most executions that started in one whole minute of the window, / 60
    99th-percentile second = the smallest k such that at least 99% of the window's seconds saw at most k starts

Seconds and minutes are counted from the window's start, so the minutes of several workflows add up to the
instance's (`combine`), and scaling a workflow's load scales its minutes (`scaled_minutes`). Pure: no I/O.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable

from n8n_sizer.history.record import RateSummary

P99 = 0.99


def summarise(
    starts_s: Iterable[float], window_start_s: float, window_s: float, origin_s: float | None = None
) -> RateSummary:
    """The rate summary of executions started at `starts_s` (unix seconds) in [start, start + window_s]; minutes
    are counted from `origin_s` (default: the window's start), the instance's window start, so they add up."""
    origin = window_start_s if origin_s is None else origin_s
    per_second: Counter[int] = Counter()
    per_minute: Counter[int] = Counter()
    n = 0
    for t in starts_s:
        offset = t - window_start_s
        if offset < 0 or offset > window_s:
            continue
        n += 1
        per_second[int(offset)] += 1
        per_minute[int((t - origin) // 60)] += 1
    hist = Counter(per_second.values())
    return _summary(n, window_s, dict(hist), runs_of(per_minute))


def _summary(n: int, window_s: float, hist: dict[int, int], minutes: tuple[tuple[int, int, int], ...]) -> RateSummary:
    busiest, at = 0, None
    for first, count, _ in minutes:
        if count > busiest:
            busiest, at = count, first * 60.0
    # A window shorter than a minute: its busiest "minute" is the window itself.
    busiest_rate = busiest / 60.0 if window_s >= 60 else (n / window_s if window_s > 0 else 0.0)
    return RateSummary(
        window_s=window_s,
        executions=n,
        per_s_mean=n / window_s if window_s > 0 else 0.0,
        busiest_minute_per_s=busiest_rate,
        busiest_minute_offset_s=at,
        p99_second_per_s=float(p99_second(hist, window_s)),
        per_second_counts=dict(sorted(hist.items())),
        minutes=minutes,
    )


def runs_of(per_minute: Counter[int] | dict[int, int]) -> tuple[tuple[int, int, int], ...]:
    """{minute: count} as runs (first minute, count, minutes in a row), minutes with none left out."""
    out: list[list[int]] = []
    for minute in sorted(per_minute):
        count = per_minute[minute]
        if count <= 0:
            continue
        if out and out[-1][1] == count and out[-1][0] + out[-1][2] == minute:
            out[-1][2] += 1
        else:
            out.append([minute, count, 1])
    return tuple((a, b, c) for a, b, c in out)


def minutes_of(runs: Iterable[tuple[int, int, int]]) -> dict[int, float]:
    """The runs back as {minute: count}."""
    out: dict[int, float] = {}
    for first, count, length in runs:
        for m in range(first, first + length):
            out[m] = out.get(m, 0.0) + count
    return out


def p99_second(hist: dict[int, int], window_s: float) -> int:
    """The 99th percentile of starts per second over every second of the window (the empty ones included)."""
    seconds = max(int(math.ceil(window_s)), sum(hist.values()), 1)
    allowed = (1.0 - P99) * seconds  # at most this many seconds may be busier
    above = 0
    for k in sorted(hist, reverse=True):
        if above + hist[k] > allowed:
            return k
        above += hist[k]
    return 0


def busiest_minute(minutes: dict[int, float]) -> float:
    """The busiest minute's executions per second."""
    return max(minutes.values(), default=0.0) / 60.0


def combine(summaries: Iterable[tuple[RateSummary, float]], window_s: float) -> dict[int, float]:
    """The instance's minutes from its workflows' (each scaled by its factor)."""
    total: dict[int, float] = {}
    for summary, factor in summaries:
        for minute, count in minutes_of(summary.minutes).items():
            total[minute] = total.get(minute, 0.0) + count * factor
    return total
