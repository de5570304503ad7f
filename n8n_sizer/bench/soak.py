"""`--soak`: seed 004's table, 30-minute buckets of a long steady run, with host telemetry alongside.

Seed 004 held 0.17 req/s for 4 h 42 min; one bucket (06:30) had a 56.7 s request while %user stayed at
4% and free memory rose, and only iowait (34%) explained it. So each bucket carries fired, refused,
undelivered, p50, p95, worst AND the worst iowait, load and lowest available memory in that half hour.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Sequence

from n8n_sizer.runs.records import RequestRecord, Sample
from n8n_sizer.runs.stats import answered_latencies, is_ok, peak_stack_ram_mib, percentile, select, within
from n8n_sizer.safety.frozen import Frozen

BUCKET_S = 1800.0  # seed 004's 30-minute buckets
# A bucket whose p95 is over 3x the median bucket's p95 is flagged slow: in seed 004 that picks the
# 06:30 bucket alone (4,727 ms against a median of about 1,300 ms), the apt/packagekit disk stall.
SLOW_P95_FACTOR = 3.0


class SoakBucket(Frozen):
    start_s: float
    label: str  # UTC HH:MM of the bucket's start, as seed 004's table
    fired: int
    refused: int  # no 2xx: the client saw an error (timeout, reset, refused, non-2xx)
    undelivered: int | None  # accepted but no execution stored; None when executions were not matched
    p50_ms: float | None
    p95_ms: float | None
    worst_ms: float | None
    iowait_max_pct: float | None = None
    load1_max: float | None = None
    mem_available_min_mib: float | None = None
    stack_ram_max_mib: float | None = None
    slow: bool = False


def bucket_requests(
    records: Iterable[RequestRecord],
    *,
    bucket_s: float = BUCKET_S,
    start_s: float | None = None,
    lost_seqs: Collection[int] | None = None,
) -> list[SoakBucket]:
    """Requests grouped by scheduled time into buckets aligned to the clock (04:00, 04:30...).

    `lost_seqs`: sequence numbers of accepted requests with no stored execution, when the ledger
    matched them one by one; without it `undelivered` stays None (unknown, not zero).
    """
    records = sorted(records, key=lambda r: r.scheduled_s)
    if not records:
        return []
    first = start_s if start_s is not None else (records[0].scheduled_s // bucket_s) * bucket_s
    groups: dict[int, list[RequestRecord]] = {}
    for r in records:
        groups.setdefault(int((r.scheduled_s - first) // bucket_s), []).append(r)
    out = []
    for index in range(max(groups) + 1):
        rows = groups.get(index, [])
        lat = answered_latencies(rows)
        start = first + index * bucket_s
        lost = None if lost_seqs is None else sum(1 for r in rows if is_ok(r) and r.seq in lost_seqs)
        out.append(
            SoakBucket(
                start_s=start,
                label=time.strftime("%H:%M", time.gmtime(start)),
                fired=len(rows),
                refused=sum(1 for r in rows if not is_ok(r)),
                undelivered=lost,
                p50_ms=percentile(lat, 50),
                p95_ms=percentile(lat, 95),
                worst_ms=max(lat) if lat else None,
            )
        )
    return flag_slow(out)


def flag_slow(buckets: Sequence[SoakBucket], factor: float = SLOW_P95_FACTOR) -> list[SoakBucket]:
    p95s = [b.p95_ms for b in buckets if b.p95_ms is not None]
    median = percentile(p95s, 50)
    if median is None:
        return list(buckets)
    return [b.model_copy(update={"slow": b.p95_ms is not None and b.p95_ms > factor * median}) for b in buckets]


def add_telemetry(
    buckets: Sequence[SoakBucket], samples: Sequence[Sample], *, bucket_s: float = BUCKET_S
) -> list[SoakBucket]:
    """Each bucket's worst iowait %, highest 1-minute load, lowest available memory and peak stack RAM."""

    def worst(values: list[float], pick) -> float | None:
        return pick(values) if values else None

    out = []
    for b in buckets:
        window = within(samples, b.start_s, b.start_s + bucket_s)
        out.append(
            b.model_copy(
                update={
                    "iowait_max_pct": worst([s.value for s in select(window, "host_cpu_pct", state="iowait")], max),
                    "load1_max": worst([s.value for s in select(window, "host_load_avg", window="1m")], max),
                    "mem_available_min_mib": worst([s.value for s in select(window, "host_mem_available_mib")], min),
                    "stack_ram_max_mib": peak_stack_ram_mib(window),
                }
            )
        )
    return out


def soak_table(records: Iterable[RequestRecord], samples: Sequence[Sample], **kw) -> list[SoakBucket]:
    """`bucket_requests` then `add_telemetry`: the table the report prints for a soak run."""
    bucket_s = kw.get("bucket_s", BUCKET_S)
    return add_telemetry(bucket_requests(records, **kw), samples, bucket_s=bucket_s)


def _ms(v: float | None) -> str:
    return "n/a" if v is None else f"{v:,.0f}"


def _num(v: float | None, fmt: str) -> str:
    return "n/a" if v is None else format(v, fmt)


def render_soak_table(buckets: Sequence[SoakBucket]) -> str:
    """Markdown table in seed 004's column order, telemetry to the right, slow buckets marked."""
    head = (
        "| bucket (UTC) | fired | refused | undelivered | p50 ms | p95 ms | worst ms | iowait max % | load 1m max "
        "| mem available min MiB | stack RAM max MiB | |\n" + "|---" * 12 + "|\n"
    )
    rows = []
    for b in buckets:
        rows.append(
            f"| {b.label} | {b.fired:,} | {b.refused:,} | {'n/a' if b.undelivered is None else b.undelivered} "
            f"| {_ms(b.p50_ms)} | {_ms(b.p95_ms)} | {_ms(b.worst_ms)} | {_num(b.iowait_max_pct, '.1f')} "
            f"| {_num(b.load1_max, '.2f')} | {_num(b.mem_available_min_mib, ',.0f')} "
            f"| {_num(b.stack_ram_max_mib, ',.0f')} | {'slow' if b.slow else ''} |"
        )
    return head + "\n".join(rows) + "\n"
