"""Load shapes (bench.shapes): the schedule's counts, order and rate integral, parsing, k6 stages, and the
driver sending at the schedule's times."""

from __future__ import annotations

import asyncio
import math
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from n8n_sizer.bench import shapes
from n8n_sizer.bench.plan import build_plan
from n8n_sizer.errors import InputError
from n8n_sizer.runs.stats import is_shaped, shaped_offered_per_s, step_rate, step_throughput

rates = st.floats(0.0, 50.0, allow_nan=False)
durations = st.floats(1.0, 120.0, allow_nan=False)


@st.composite
def any_shape(draw):
    kind = draw(st.sampled_from(["constant", "ramp", "burst"]))
    if kind == "constant":
        return shapes.constant(draw(st.floats(0.1, 50.0)))
    if kind == "ramp":
        a, b = draw(rates), draw(rates)
        return shapes.Shape(kind="ramp", from_per_s=a, to_per_s=max(b, 0.1) if a == 0 else b)
    base = draw(st.floats(0.0, 20.0))
    peak = base + draw(st.floats(0.1, 30.0))
    period = draw(st.floats(2.0, 60.0))
    burst = draw(st.floats(0.5, period - 0.5))
    return shapes.Shape(kind="burst", base_per_s=base, peak_per_s=peak, burst_s=burst, period_s=period)


@settings(max_examples=200, deadline=None)
@given(any_shape(), durations)
def test_schedule_counts_order_and_integral(shape, duration):
    times = shapes.arrival_times(shape, duration)
    total = shapes.expected_count(shape, duration, duration)
    assert len(times) == max(1, round(total))
    assert all(0.0 <= t < duration for t in times)
    assert all(a <= b for a, b in pairwise(times))
    # at every arrival and half-way between, the count so far follows the rate's integral within one request
    probes = times + [(a + b) / 2 for a, b in pairwise(times)] + [duration]
    for t in probes:
        assert abs(shapes.count_before(times, t) - shapes.expected_count(shape, t, duration)) <= 1.0 + 1e-6


def test_constant_is_the_old_schedule():
    times = shapes.arrival_times(shapes.constant(4.0), 10.0)
    assert times == pytest.approx([i / 4.0 for i in range(40)])


def test_burst_puts_its_peak_in_the_first_seconds_of_each_period():
    shape = shapes.parse_shape("burst:2:8:10:30")
    times = shapes.arrival_times(shape, 60.0)
    in_bursts = sum(1 for t in times if (t % 30.0) < 10.0)
    assert len(times) == 2 * (8 * 10 + 2 * 20)
    assert in_bursts == 2 * 80
    assert shapes.rate_at(shape, 5.0, 60.0) == 8.0 and shapes.rate_at(shape, 15.0, 60.0) == 2.0


def test_ramp_mean_and_k6_stages():
    shape = shapes.parse_shape("ramp:2:20")
    assert shapes.mean_rate(shape, 60.0) == pytest.approx(11.0)
    assert shapes.k6_stages(shape, 60.0) == (2.0, [(60.0, 20.0)])
    start, stages = shapes.k6_stages(shapes.parse_shape("burst:2:8:10:30"), 60.0)
    assert start == 8.0
    assert stages == [(10.0, 8.0), (0.0, 2.0), (20.0, 2.0), (0.0, 8.0), (10.0, 8.0), (0.0, 2.0), (20.0, 2.0)]


@pytest.mark.parametrize(
    "text, words",
    [
        ("square:1:2", "choose constant, ramp"),
        ("ramp:1", "2 numbers"),
        ("ramp:a:2", "'a' is not a number"),
        ("ramp:0:0", "both be 0"),
        ("burst:8:2:10:30", "must be above BASE"),
        ("burst:2:8:30:30", "shorter than"),
        ("burst:2:8:10:inf", "not a finite"),
        ("ramp:-1:5", "outside the allowed range"),
    ],
)
def test_bad_shapes_are_one_line(text, words):
    with pytest.raises(InputError) as err:
        shapes.parse_shape(text)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_plan_names_the_shaped_step_and_stats_read_it():
    plan = build_plan((5.0,), 60.0, shape=shapes.parse_shape("burst:2:8:10:30"))
    (step,) = plan.steps
    assert step.name == "burst-2-8-10-30" and step.rate_per_s == pytest.approx(4.0)
    assert is_shaped(step.name) and step_rate(step.name) is None
    assert not is_shaped("rate-20") and not is_shaped("c-10")


def _records(times, step, answered=lambda i: True, latency_ms=50.0):
    from n8n_sizer.runs.records import RequestRecord

    return [
        RequestRecord(
            seq=i,
            step=step,
            target="t",
            scheduled_s=1000.0 + t,
            sent_s=1000.0 + t,
            status=200 if answered(i) else None,
            latency_ms=latency_ms if answered(i) else None,
            error_class=None if answered(i) else "timeout",
        )
        for i, t in enumerate(times)
    ]


def test_step_throughput_of_a_burst_reads_its_mean_offered_rate():
    shape = shapes.parse_shape("burst:2:8:10:30")
    recs = _records(shapes.arrival_times(shape, 60.0), "burst-2-8-10-30")
    offered = shaped_offered_per_s(recs)
    assert offered == pytest.approx(4.0, rel=0.05)
    carried = step_throughput(recs, offered)
    assert carried.offered_per_s == pytest.approx(4.0, rel=0.05)
    assert carried.answered == 240 and not carried.saturated
    half = step_throughput(_records(shapes.arrival_times(shape, 60.0), "b", answered=lambda i: i % 2 == 0), offered)
    assert half.saturated and "failed" in half.why


def test_driver_sends_at_the_schedule(tmp_path):
    """The built-in driver against a real local HTTP server: one record per scheduled time, in order."""
    from n8n_sizer.bench.http_post import HttpPost
    from n8n_sizer.bench.load import run_open

    async def main():
        async def handle(reader, writer):
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    break
                length = int(
                    [l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0].split(b":")[1]
                )
                await reader.readexactly(length)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
                await writer.drain()
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        shape = shapes.parse_shape("burst:2:20:1:2")
        times = shapes.arrival_times(shape, 4.0)
        got = []
        client = HttpPost(f"http://127.0.0.1:{port}/x", b"{}", timeout_s=10)
        tally = await run_open(
            client,
            rate_per_s=shapes.mean_rate(shape, 4.0),
            duration_s=4.0,
            max_in_flight=50,
            step=shape.name,
            target="t",
            sink=got.append,
            times=times,
        )
        client.close()
        server.close()
        return times, got, tally

    times, got, tally = asyncio.run(main())
    assert tally.scheduled == len(times) == len(got) == 44
    got.sort(key=lambda r: r.seq)
    offsets = [r.scheduled_s - got[0].scheduled_s for r in got]
    assert offsets == pytest.approx(times, abs=1e-6)
    assert all(r.status == 200 for r in got)
    assert not math.isnan(tally.finished_s)


def test_k6_script_of_a_burst_uses_ramping_arrival_rate_and_the_same_schedule():
    import json
    import re

    from n8n_sizer.bench.k6 import render_script

    plan = build_plan((), 60.0, shape=shapes.parse_shape("burst:2:8:10:30"))
    script = render_script(plan.steps[0], "http://10.0.0.2:5678/webhook/x", b'{"number": 21}', plan, "cx23")
    assert "executor: 'ramping-arrival-rate'" in script and "startRate: 8000" in script
    stages = json.loads(re.search(r"stages: (\[.*?\]),", script).group(1))
    assert stages[:2] == [{"duration": "10000ms", "target": 8000}, {"duration": "0ms", "target": 2000}]
    due = json.loads(re.search(r"const DUE_MS = (\[.*?\]);", script).group(1))
    assert len(due) == 240 and due[:2] == [0.0, 125.0]
    constant_script = render_script(build_plan((5.0,), 60.0).steps[0], "http://h/x", b"{}", plan, "cx23")
    assert "constant-arrival-rate" in constant_script and "const DUE_MS = null;" in constant_script
