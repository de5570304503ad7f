"""Small pure helpers over a run's records, shared by the report, alerts and soak tables."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence

from n8n_sizer.runs.records import RequestRecord, Sample

# Metrics whose sum at one tick is the RAM of the whole stack: processes (--local) or containers (fleet).
RAM_METRICS = ("process_rss_mib", "container_mem_mib")
CPU_METRICS = ("process_cpu_cores", "container_cpu_cores")


def percentile(values: Sequence[float], q: float) -> float | None:
    """q-th percentile (0..100), linear interpolation between closest ranks; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def is_ok(r: RequestRecord) -> bool:
    return r.status is not None and 200 <= r.status < 300


def answered_latencies(records: Iterable[RequestRecord]) -> list[float]:
    return [r.latency_ms for r in records if is_ok(r) and r.latency_ms is not None]


def error_kind(r: RequestRecord) -> str | None:
    """"503", "500", "timeout", "reset", "refused", "other"; None for a 2xx."""
    if is_ok(r):
        return None
    if r.status is not None:
        return str(r.status)
    return r.error_class or "other"


def select(samples: Iterable[Sample], metric: str, **labels: str) -> list[Sample]:
    return [s for s in samples if s.metric == metric and all(s.labels.get(k) == v for k, v in labels.items())]


def within(samples: Iterable[Sample], start_s: float, end_s: float) -> list[Sample]:
    return [s for s in samples if start_s <= s.time_s < end_s]


def per_label(samples: Iterable[Sample], label: str) -> dict[str, list[Sample]]:
    groups: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        groups[s.labels.get(label, "?")].append(s)
    return dict(groups)


def stack_ram_by_tick(samples: Iterable[Sample]) -> list[tuple[float, float]]:
    """(time, MiB) of all processes/containers summed per host and tick (one sampler tick shares a time)."""
    ticks: dict[tuple[str, float], float] = defaultdict(float)
    for s in samples:
        if s.metric in RAM_METRICS:
            ticks[(s.labels.get("host", "?"), s.time_s)] += s.value
    return sorted((t, v) for (_, t), v in ticks.items())


def peak_stack_ram_mib(samples: Iterable[Sample]) -> float | None:
    values = [v for _, v in stack_ram_by_tick(samples)]
    return max(values) if values else None


def step_windows(records: Iterable[RequestRecord]) -> dict[str, tuple[float, float]]:
    """Each load step's span from its requests' schedule: first scheduled to last scheduled (+ one
    interarrival for a rate step), i.e. while load was offered, not the answers' tail."""
    spans: dict[str, tuple[float, float]] = {}
    for r in records:
        lo, hi = spans.get(r.step, (r.scheduled_s, r.scheduled_s))
        spans[r.step] = (min(lo, r.scheduled_s), max(hi, r.scheduled_s))
    return {step: (lo, hi + (1 / rate if (rate := step_rate(step)) else 0.0)) for step, (lo, hi) in spans.items()}


def step_rate(step: str) -> float | None:
    """The offered rate of a constant-arrival step named "rate-20", "rate-2.5" or "rate-20-confirm"
    (a find-max re-run), else None."""
    m = re.fullmatch(r"rate-(\d+(?:\.\d+)?)(?:-.*)?", step)
    return float(m.group(1)) if m else None


def step_concurrency(step: str) -> int | None:
    """The users of a closed-model step named "c-10" (seed 002's sweep), else None."""
    m = re.fullmatch(r"c-(\d+)(?:-.*)?", step)
    return int(m.group(1)) if m else None
