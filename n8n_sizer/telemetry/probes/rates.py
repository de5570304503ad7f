"""Cumulative counters -> rates, from two consecutive readings. Pure.

CPU time is cumulative in /proc and cgroups; a rate over a 1 s interval is "cores used" (CPU seconds per
second), the unit seed 000 speaks in ("the runner at 100% of one core", "3.5 of 4 cores").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from n8n_sizer.runs.records import Sample

# counter metric -> (rate metric, unit, factor applied to delta/dt)
RATE_OF: dict[str, tuple[str, str, float]] = {
    "host_cpu_seconds_total": ("host_cpu_cores", "cores", 1.0),
    "process_cpu_seconds_total": ("process_cpu_cores", "cores", 1.0),
    "container_cpu_seconds_total": ("container_cpu_cores", "cores", 1.0),
    "container_cpu_throttled_seconds_total": ("container_cpu_throttled_pct", "%", 100.0),
    "disk_read_bytes_total": ("disk_read_mib_per_s", "MiB/s", 1 / 2**20),
    "disk_write_bytes_total": ("disk_write_mib_per_s", "MiB/s", 1 / 2**20),
    "disk_io_seconds_total": ("disk_busy_pct", "%", 100.0),
}


def _key(s: Sample) -> tuple[str, tuple[tuple[str, str], ...]]:
    return s.metric, tuple(sorted(s.labels.items()))


def is_counter(s: Sample) -> bool:
    return s.metric in RATE_OF


def _kernel_dt(before: dict, current: Sequence[Sample]) -> float | None:
    """Seconds between two readings by the kernel's own clock: all-CPU jiffies elapsed / online CPUs.

    Our timestamps are when the probe command returned, which jitters by tens of ms on a busy host (a fork,
    an SSH round trip); dividing kernel counters by that jitter gave 2.6 "cores" on a 2-core machine.
    """
    cpus = next((s.value for s in current if s.metric == "host_cpus"), None)
    if not cpus:
        return None
    total = 0.0
    for s in current:
        if s.metric == "host_cpu_seconds_total":
            old = before.get(_key(s))
            if old is None:
                return None
            total += s.value - old.value
    return total / cpus if total > 0 else None


def counters_to_rates(previous: Iterable[Sample], current: Iterable[Sample]) -> list[Sample]:
    """Rates for every counter present in both readings, stamped at the current reading's time.

    `current` may hold non-counter samples too: `host_cpus` there lets every rate use the kernel's clock
    (see `_kernel_dt`) instead of the readings' timestamps. A counter that went backwards (the process
    restarted, a PID was reused) gives no rate for that interval rather than a negative one.
    `host_cpu_seconds_total{state}` also yields `host_cpu_pct{state}`, each state's share of all CPU
    time in the interval (sar's %user, %iowait, %idle).
    """
    current = list(current)
    before = {_key(s): s for s in previous if is_counter(s)}
    kernel_dt = _kernel_dt(before, current)
    out: list[Sample] = []
    cpu_deltas: dict[tuple[tuple[str, str], ...], list[tuple[Sample, float]]] = {}
    for s in current:
        if not is_counter(s):
            continue
        old = before.get(_key(s))
        if old is None:
            continue
        dt, delta = kernel_dt or (s.time_s - old.time_s), s.value - old.value
        if dt <= 0 or delta < 0:
            continue
        metric, unit, factor = RATE_OF[s.metric]
        out.append(Sample(metric=metric, value=delta / dt * factor, unit=unit, labels=dict(s.labels), time_s=s.time_s))
        if s.metric == "host_cpu_seconds_total":
            rest = tuple(sorted((k, v) for k, v in s.labels.items() if k != "state"))
            cpu_deltas.setdefault(rest, []).append((s, delta))
    for group in cpu_deltas.values():
        total = sum(d for _, d in group)
        if total > 0:
            for s, d in group:
                out.append(
                    Sample(
                        metric="host_cpu_pct", value=100 * d / total, unit="%", labels=dict(s.labels), time_s=s.time_s
                    )
                )
    return out


def busy_cores(rates: Sequence[Sample]) -> float | None:
    """Cores doing work (everything but idle and iowait) from one interval's `host_cpu_cores` samples."""
    values = [s for s in rates if s.metric == "host_cpu_cores"]
    if not values:
        return None
    return sum(s.value for s in values if s.labels.get("state") not in ("idle", "iowait"))
