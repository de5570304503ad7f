"""Small pure helpers over a run's records, shared by the report, alerts and soak tables."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

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
    """ "503", "500", "timeout", "reset", "refused", "other"; None for a 2xx."""
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
    """The stack's peak RAM: on several hosts (a lab's cluster, each host sampled on its own clock), at each tick
    the sum of every host's latest total at that time, so the figure is the cluster's, not its largest host's."""
    per_host: dict[str, list[tuple[float, float]]] = defaultdict(list)
    ticks: dict[tuple[str, float], float] = defaultdict(float)
    for s in samples:
        if s.metric in RAM_METRICS:
            ticks[(s.labels.get("host", "?"), s.time_s)] += s.value
    for (host, t), v in ticks.items():
        per_host[host].append((t, v))
    if not per_host:
        return None
    latest: dict[str, float] = {}
    peak = 0.0
    for _t, host, v in sorted((t, h, v) for h, rows in per_host.items() for t, v in rows):
        latest[host] = v
        peak = max(peak, sum(latest.values()))
    return peak


def step_windows(records: Iterable[RequestRecord]) -> dict[str, tuple[float, float]]:
    """Each load step's span from its requests' schedule: first scheduled to last scheduled (+ one
    interarrival for a rate step), i.e. while load was offered, not the answers' tail."""
    spans: dict[str, tuple[float, float]] = {}
    counts: dict[str, int] = defaultdict(int)
    for r in records:
        lo, hi = spans.get(r.step, (r.scheduled_s, r.scheduled_s))
        spans[r.step] = (min(lo, r.scheduled_s), max(hi, r.scheduled_s))
        counts[r.step] += 1

    def tail(step: str, lo: float, hi: float) -> float:
        if (rate := step_rate(step)) is not None:
            return 1 / rate
        if is_shaped(step) and counts[step] > 1:  # a ramp or burst: one mean interarrival
            return (hi - lo) / (counts[step] - 1)
        return 0.0

    return {step: (lo, hi + tail(step, lo, hi)) for step, (lo, hi) in spans.items()}


def is_shaped(step: str) -> bool:
    """A step whose offered rate moves (bench.shapes): "ramp-2-20", "burst-2-8-10-30"."""
    return re.fullmatch(r"(ramp|burst)-[\d.]+(-[\d.]+)+", step) is not None


def shaped_offered_per_s(records: Sequence[RequestRecord]) -> float | None:
    """A shaped step's mean offered rate: scheduled requests over their window (first to last + one mean
    interarrival, so a constant schedule reads as its rate exactly); None for fewer than two requests."""
    times = [r.scheduled_s for r in records]
    if len(times) < 2 or max(times) <= min(times):
        return None
    span = max(times) - min(times)
    return len(times) / (span + span / (len(times) - 1))


def step_rate(step: str) -> float | None:
    """The offered rate of a constant-arrival step named "rate-20", "rate-2.5" or "rate-20-confirm"
    (a find-max re-run), else None."""
    m = re.fullmatch(r"rate-(\d+(?:\.\d+)?)(?:-.*)?", step)
    return float(m.group(1)) if m else None


def step_concurrency(step: str) -> int | None:
    """The users of a closed-model step named "c-10" (seed 002's sweep), else None."""
    m = re.fullmatch(r"c-(\d+)(?:-.*)?", step)
    return int(m.group(1)) if m else None


def per_second(records: Sequence[RequestRecord]) -> list[tuple[int, int, int, int]]:
    """(second from the step's first scheduled request, scheduled, answered 2xx, refused or failed) per whole
    second: the offered shape against what was answered, by when it was due and when its answer came."""
    if not records:
        return []
    t0 = min(r.scheduled_s for r in records)
    scheduled: dict[int, int] = defaultdict(int)
    answered: dict[int, int] = defaultdict(int)
    failed: dict[int, int] = defaultdict(int)
    for r in records:
        scheduled[int(r.scheduled_s - t0)] += 1
        done = int(_completed_s(r) - t0)
        if is_ok(r) and r.latency_ms is not None:
            answered[done] += 1
        else:
            failed[done] += 1
    last = max([*scheduled, *answered, *failed])
    return [(s, scheduled[s], answered[s], failed[s]) for s in range(last + 1)]


# A step saturated when what it answered fell this far below what was offered, with latency growing through it
# (a queue building), or when this share of what it sent failed.
SATURATION_SHARE = 0.9
FAILED_SHARE = 0.05
LATENCY_GROWTH = 2.0  # last third's median latency over the first third's


@dataclass(frozen=True)
class StepThroughput:
    """What a constant-rate step really carried: answered (2xx) requests over the span they needed.

    The span is the schedule's window stretched by how much later the step's last answers came than its first
    ones, so a step that fell behind (answers trailing long after the load stopped) is not read as answered =
    offered, while a step that kept up reads as its offered rate.
    `in_window` counts the answers that arrived while load was offered, as k6 counts a stage's iterations.
    """

    offered_per_s: float
    sent: int
    answered: int
    in_window: int
    window_s: float  # first scheduled to last scheduled + one interarrival
    span_s: float  # the window plus how much the answers trailed (see above)
    failed: int
    saturated: bool
    why: str  # in words: why it counts as saturated, or "kept up"

    @property
    def throughput_per_s(self) -> float:
        return self.answered / self.span_s


def _completed_s(r: RequestRecord) -> float:
    return r.scheduled_s + (r.latency_ms or 0.0) / 1000.0


def step_throughput(records: Sequence[RequestRecord], rate_per_s: float) -> StepThroughput | None:
    """The step's throughput and whether it saturated (see `StepThroughput`); None for a step with no request."""
    sent = [r for r in records if r.error_class != "dropped"]
    if not records or rate_per_s <= 0:
        return None
    start = min(r.scheduled_s for r in records)
    window_end = max(r.scheduled_s for r in records) + 1.0 / rate_per_s
    # offered = what was scheduled over the window: the constant rate itself, a ramp's or burst's mean rate
    rate_per_s = len(records) / (window_end - start)
    ok = sorted((r for r in sent if is_ok(r) and r.latency_ms is not None), key=lambda r: r.scheduled_s)
    in_window = sum(1 for r in ok if _completed_s(r) <= window_end)
    failed = len(sent) - len(ok) + (len(records) - len(sent))  # not sent (in-flight cap full) is not carried
    # The answers' span: the window, stretched by how much later the last answers came than the first ones
    # (median latency of the last twentieth over the first twentieth). A step that kept up, however jittery its
    # latency, reads as its offered rate; one where a queue built reads as what it served.
    tenth = max(1, len(ok) // 20)  # a twentieth: enough answers for a median, close enough to the ends
    head = percentile([r.latency_ms for r in ok[:tenth]], 50) if ok else None
    tail = percentile([r.latency_ms for r in ok[-tenth:]], 50) if ok else None
    trailing_s = max(0.0, (tail - head) / 1000.0) if head is not None and tail is not None else 0.0
    span = max(window_end - start + trailing_s, 1e-9)
    throughput = len(ok) / span
    third = len(ok) // 3
    first = percentile([r.latency_ms for r in ok[:third]], 50) if third else None
    last = percentile([r.latency_ms for r in ok[-third:]], 50) if third else None
    growing = first is not None and last is not None and last > LATENCY_GROWTH * first + 100.0
    if records and failed > FAILED_SHARE * len(records):
        why = f"{failed} of {len(records)} requests failed or were not sent"
    elif throughput < SATURATION_SHARE * rate_per_s and growing:
        why = (
            f"answered {throughput:.2f}/s of {rate_per_s:g}/s offered while latency grew "
            f"(median {first:,.0f} -> {last:,.0f} ms)"
        )
    elif throughput < SATURATION_SHARE * rate_per_s and not ok:
        why = "nothing was answered"
    else:
        why = "kept up"
    return StepThroughput(
        offered_per_s=rate_per_s,
        sent=len(sent),
        answered=len(ok),
        in_window=in_window,
        window_s=window_end - start,
        span_s=span,
        failed=failed,
        saturated=why != "kept up",
        why=why,
    )


# The roles a process or container plays, by its name: the local stack's process names (main, worker-1,
# main-runner, webhook-1, postgres, redis, caddy) and the compose stacks' container names (n8n-main,
# runner-worker-1, n8n-postgres, ...).
ROLES = ("main", "webhook", "worker", "runner", "postgres", "redis", "load_balancer")


def role_of(name: str) -> str | None:
    """The role of a process or container named `name`, or None for one that is not part of the stack."""
    n = name.lower()
    if "runner" in n:
        return "runner"
    for role, marks in (
        ("postgres", ("postgres",)),
        ("redis", ("redis",)),
        ("load_balancer", ("caddy", "nginx", "lb")),
        ("webhook", ("webhook",)),
        ("worker", ("worker",)),
        ("main", ("main",)),
    ):
        if any(m in n for m in marks):
            return role
    return None


def role_cpu_seconds(samples: Iterable[Sample], start_s: float, end_s: float) -> dict[str, float]:
    """CPU seconds each role used in [start, end): each process' mean cores over the window times its length."""
    per_process: dict[tuple[str, str], list[float]] = defaultdict(list)
    for s in within(samples, start_s, end_s):
        if s.metric in CPU_METRICS:
            name = s.labels.get("process") or s.labels.get("container") or ""
            per_process[(s.labels.get("host", ""), name)].append(s.value)
    out: dict[str, float] = defaultdict(float)
    for (_, name), values in per_process.items():
        role = role_of(name)
        if role is not None and values:
            out[role] += sum(values) / len(values) * (end_s - start_s)
    return dict(out)


def role_demands_ms(samples: Iterable[Sample], start_s: float, end_s: float, executions: int) -> dict[str, float]:
    """CPU milliseconds per execution for each role, by the utilisation law (busy CPU / executions done) over the
    step's window; {} when nothing was executed or nothing was sampled."""
    if executions <= 0 or end_s <= start_s:
        return {}
    busy = role_cpu_seconds(samples, start_s, end_s)
    return {role: busy[role] * 1000.0 / executions for role in ROLES if role in busy}
