"""Soak buckets on synthetic records shaped like seed 004's run (one event every 5 s, a disk stall at 06:30)."""

from __future__ import annotations

import calendar

import pytest

from n8n_sizer.bench.soak import bucket_requests, render_soak_table, soak_table
from n8n_sizer.runs.records import RequestRecord, Sample

# seed 004's bucket table: label, fired, refused, p50, p95, worst (ms)
SEED_004 = [
    ("04:00", 253, 0, 521, 1728, 32831),
    ("04:30", 319, 0, 581, 796, 4032),
    ("05:00", 308, 4, 608, 782, 13100),
    ("05:30", 319, 0, 579, 783, 2445),
    ("06:00", 314, 0, 590, 2174, 5617),
    ("06:30", 273, 0, 715, 4727, 56726),
    ("07:00", 312, 0, 658, 1595, 4778),
    ("07:30", 317, 0, 612, 818, 2985),
    ("08:00", 289, 0, 680, 2363, 36194),
    ("08:30", 176, 0, 536, 965, 7669),
]
DAY = calendar.timegm((2026, 7, 20, 0, 0, 0))


def _latencies(n: int, p50: float, p95: float, worst: float) -> list[float]:
    """Sorted latencies whose 95th percentile (linear interpolation) is exactly p95, max is worst."""
    idx95 = int(0.95 * (n - 1))
    return [p50 * 0.9] * (n // 2) + [p50] * (idx95 - n // 2) + [p95] * (n - 1 - idx95) + [worst]


def seed_like_records() -> list[RequestRecord]:
    records, seq = [], 0
    for label, fired, refused, p50, p95, worst in SEED_004:
        hh, mm = map(int, label.split(":"))
        start = DAY + hh * 3600 + mm * 60
        lat = _latencies(fired - refused, p50, p95, worst)
        for i in range(fired):
            t = start + 1 + i * (1799 / fired)
            ok = i < len(lat)
            records.append(
                RequestRecord(
                    seq=seq,
                    step="soak-0.17",
                    target="e2-micro",
                    scheduled_s=t,
                    sent_s=t,
                    status=200 if ok else None,
                    latency_ms=lat[i] if ok else None,
                    error_class=None if ok else "reset",
                    error=None if ok else "Connection reset by peer",
                )
            )
            seq += 1
    return records


def seed_like_samples() -> list[Sample]:
    out = []
    for minute in range(4 * 60, 9 * 60, 1):
        t = DAY + minute * 60
        stall = 6 * 60 + 30 <= minute < 7 * 60  # packagekit, seed 004's sar table: 20 to 34% iowait
        out.append(
            Sample(
                metric="host_cpu_pct",
                value=34.2 if stall else 2.7,
                unit="%",
                labels={"host": "e2-micro", "state": "iowait"},
                time_s=t,
            )
        )
        out.append(
            Sample(
                metric="host_load_avg",
                value=2.72 if stall else 0.3,
                unit="tasks",
                labels={"host": "e2-micro", "window": "1m"},
                time_s=t,
            )
        )
        out.append(
            Sample(
                metric="host_mem_available_mib",
                value=396 if stall else 317,
                unit="MiB",
                labels={"host": "e2-micro"},
                time_s=t,
            )
        )
        out.append(
            Sample(
                metric="process_rss_mib",
                value=88 if stall else 252,
                unit="MiB",
                labels={"host": "e2-micro", "process": "main"},
                time_s=t,
            )
        )
        out.append(
            Sample(
                metric="process_rss_mib",
                value=100,
                unit="MiB",
                labels={"host": "e2-micro", "process": "main-runner"},
                time_s=t,
            )
        )
    return out


def test_buckets_match_seed_004_counts_and_flag_the_stall():
    buckets = bucket_requests(seed_like_records(), lost_seqs=set())
    assert [b.label for b in buckets] == [row[0] for row in SEED_004]
    assert [b.fired for b in buckets] == [row[1] for row in SEED_004]
    assert [b.refused for b in buckets] == [row[2] for row in SEED_004]
    assert sum(b.fired for b in buckets) == 2880 and sum(b.refused for b in buckets) == 4
    assert [b.worst_ms for b in buckets] == [row[5] for row in SEED_004]
    for b, row in zip(buckets, SEED_004, strict=True):
        assert row[3] * 0.9 <= b.p50_ms <= row[3]
        assert b.p95_ms == pytest.approx(row[4])
    assert [b.label for b in buckets if b.slow] == ["06:30"]
    assert all(b.undelivered == 0 for b in buckets)


def test_undelivered_unknown_without_matching_and_counted_with_it():
    records = seed_like_records()
    assert all(b.undelivered is None for b in bucket_requests(records))
    lost = {records[300].seq, records[301].seq}  # two accepted requests in the 04:30 bucket never stored
    counts = {b.label: b.undelivered for b in bucket_requests(records, lost_seqs=lost)}
    assert counts["04:30"] == 2 and sum(counts.values()) == 2


def test_telemetry_alongside_shows_iowait_not_cpu_or_memory():
    table = {b.label: b for b in soak_table(seed_like_records(), seed_like_samples())}
    stall, calm = table["06:30"], table["07:30"]
    assert stall.iowait_max_pct == pytest.approx(34.2) and calm.iowait_max_pct == pytest.approx(2.7)
    assert stall.load1_max == pytest.approx(2.72)
    assert stall.mem_available_min_mib > calm.mem_available_min_mib  # seed 004: free memory ROSE in the stall
    assert calm.stack_ram_max_mib == pytest.approx(352) and stall.stack_ram_max_mib == pytest.approx(188)


def test_gap_bucket_and_empty():
    records = seed_like_records()
    gap = [r for r in records if not (DAY + 5 * 3600 <= r.scheduled_s < DAY + 5 * 3600 + 1800)]
    buckets = bucket_requests(gap)
    assert buckets[2].label == "05:00" and buckets[2].fired == 0 and buckets[2].p50_ms is None
    assert bucket_requests([]) == []


def test_markdown_table_marks_slow_bucket():
    text = render_soak_table(soak_table(seed_like_records(), seed_like_samples()))
    line = next(row for row in text.splitlines() if row.startswith("| 06:30"))
    assert "56,726" in line and "34.2" in line and line.rstrip().endswith("| slow |")
    assert text.count("slow |") == 1
