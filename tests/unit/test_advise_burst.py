"""advise --burst: the fluid-queue math (advisor/answer/burst.py) and the CLI's JSON and refusals."""

from __future__ import annotations

import json

import pytest
import typer

from n8n_sizer.advisor.answer.burst import burst_advice
from n8n_sizer.cli import _run, app


def test_backlog_drain_and_p95_follow_the_laws():
    b = burst_advice(10.0, 4.0, 60.0, capacity_per_s=30.0, service_p95_ms=50.0, mode="queue")
    assert b.peak_per_s == 40.0
    assert b.backlog_max == pytest.approx((40 - 30) * 60)  # 600 jobs
    assert b.drain_s == pytest.approx(600 / (30 - 10))  # 30 s
    assert b.queue_wait_p95_ms == pytest.approx(0.95 * 600 / 30 * 1000)  # Little's law: W = L / throughput
    assert b.p95_ms == pytest.approx(50.0 + 19_000.0)
    assert (
        "Redis" in b.where
        and "Respond: Immediately" in b.advice
        and "answered no earlier" in b.advice
        and "buffer in front" in b.advice
    )


def test_a_burst_under_capacity_builds_nothing():
    b = burst_advice(5.0, 2.0, 60.0, capacity_per_s=30.0, service_p95_ms=None, mode="regular")
    assert b.backlog_max == 0 and b.drain_s == 0 and b.queue_wait_p95_ms == 0
    assert b.p95_ms is None  # an unknown p95 stays unknown
    assert "fits" in b.advice


def test_no_buffer_advice_at_or_below_three_times_baseline():
    b = burst_advice(10.0, 3.0, 30.0, capacity_per_s=20.0, service_p95_ms=40.0, mode="queue")
    assert (
        b.backlog_max == pytest.approx(300) and "Respond: Immediately" in b.advice and "answered no earlier" in b.advice
    )
    assert "buffer" not in b.advice


def test_never_drains_when_capacity_is_at_or_below_the_base_rate():
    b = burst_advice(30.0, 2.0, 10.0, capacity_per_s=30.0, service_p95_ms=40.0, mode="queue")
    assert b.drain_s is None and not b.drains and "never" in b.advice and "infinite" in b.advice


def _cli(args, capsys):
    with pytest.raises(SystemExit) as done:
        _run(typer.main.get_command(app), "n8n-sizer", ["advise", *args])
    out = capsys.readouterr()
    return done.value.code, out.out, out.err


def test_advise_json_carries_burst(capsys):
    code, out, _ = _cli(["--rps", "10", "--vcpu", "4", "--burst", "4", "--burst-seconds", "60", "--json"], capsys)
    assert code == 0
    data = json.loads(out)
    burst = data["burst"]
    assert {"peak_per_s", "backlog_max", "drain_s", "p95_ms", "advice"} <= set(burst)
    capacity = data["capacity_per_s"]["mid"]
    assert burst["peak_per_s"] == 40.0
    assert burst["backlog_max"] == pytest.approx(max(0.0, 40.0 - capacity) * 60)
    if burst["backlog_max"] > 0:
        assert burst["drain_s"] == pytest.approx(burst["backlog_max"] / (capacity - 10.0))
    code, out, _ = _cli(["--rps", "10", "--vcpu", "4", "--json"], capsys)
    assert "burst" not in json.loads(out)


@pytest.mark.parametrize(
    "args, words",
    [
        (["--burst", "4"], "go together"),
        (["--burst-seconds", "60"], "go together"),
        (["--burst", "0.5", "--burst-seconds", "60"], "--burst"),
        (["--burst", "4", "--burst-seconds", "inf"], "--burst-seconds"),
        (["--burst", "nan", "--burst-seconds", "60"], "--burst"),
    ],
)
def test_bad_burst_input_is_one_line_exit_2(args, words, capsys):
    code, out, err = _cli(["--rps", "10", "--vcpu", "4", *args], capsys)
    assert code == 2 and out == ""
    assert words in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def _advise(*args):
    import json
    import subprocess
    import sys

    p = subprocess.run(
        [sys.executable, "-c", "from n8n_sizer.cli import advise_main; advise_main()", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return p.returncode, (json.loads(p.stdout) if p.returncode == 0 and "--json" in args else p.stdout), p.stderr


def test_a_drain_target_sizes_the_answer_for_the_burst():
    code, data, err = _advise("--rps", "10", "--burst", "4", "--burst-seconds", "60", "--drain-seconds", "10", "--json")
    assert code == 0, err
    assert data["request"]["rps"] == 10 and data["request"]["sized_for_rps"] > 10
    assert data["burst"]["drain_s"] <= 10 and data["warnings"][0].startswith("sized for")
    code, plain, err = _advise("--rps", "10", "--burst", "4", "--burst-seconds", "60", "--json")
    assert code == 0 and "sized_for_rps" not in plain["request"]  # no target: the base rate's answer
    assert plain["capacity_per_s"]["mid"] < data["capacity_per_s"]["mid"]


def test_one_server_first_is_not_resized_but_says_it_does_not_absorb_the_burst():
    code, data, err = _advise(
        "--rps", "10", "--vcpu", "4", "--burst", "4", "--burst-seconds", "60", "--drain-seconds", "10", "--json"
    )
    assert code == 0, err
    assert data["one_host"]["vcpu"] == 4 and any("does not absorb" in w for w in data["warnings"])


def test_drain_seconds_needs_a_burst():
    code, _, err = _advise("--rps", "10", "--drain-seconds", "10")
    assert code == 2 and "--drain-seconds" in err and len(err.strip().splitlines()) == 1


def test_misses_name_the_target_that_misses_in_its_own_figures():
    from n8n_sizer.advisor.answer.burst import absorbs, misses

    # drains in 30 s, well within 60 s, but the p95 during the burst (19 s) is far above 3 s: the p95 misses
    b = burst_advice(10.0, 4.0, 60.0, capacity_per_s=30.0, service_p95_ms=50.0, mode="queue")
    missed = misses(b, 3000, 60)
    assert len(missed) == 1 and "p95" in missed[0] and "19,050 ms" in missed[0] and "drain" not in missed[0]
    missed = misses(b, None, 10)
    assert len(missed) == 1 and "drains in about 30 s, past --drain-seconds 10" in missed[0]
    assert len(misses(b, 3000, 10)) == 2 and not absorbs(b, 3000, 10) and absorbs(b, 20_000, 60)
    never = burst_advice(30.0, 2.0, 10.0, capacity_per_s=30.0, service_p95_ms=40.0, mode="queue")
    assert "never drains" in misses(never, None, None)[0]


def test_a_burst_below_capacity_has_the_p95_of_its_peak_rate():
    b = burst_advice(5.0, 2.0, 60.0, capacity_per_s=30.0, service_p95_ms=80.0, mode="queue", peak_p95_ms=120.0)
    assert b.backlog_max == 0 and b.p95_ms == 120.0
    past = burst_advice(10.0, 4.0, 60.0, capacity_per_s=30.0, service_p95_ms=80.0, mode="queue", peak_p95_ms=None)
    assert past.p95_ms == pytest.approx(80.0 + 19_000.0)  # past capacity: the base rate's p95 plus the queue wait


def test_a_sized_answer_is_judged_at_the_rate_asked_and_says_what_missed():
    code, data, err = _advise("--rps", "10", "--burst", "4", "--burst-seconds", "60", "--p95-ms", "3000", "--json")
    assert code == 0, err
    sized, mid = data["request"]["sized_for_rps"], data["capacity_per_s"]["mid"]
    assert data["request"]["rps"] == 10 and sized > 10
    assert data["headroom"] == pytest.approx(mid / 10 - 1)  # at 10/s, not at the rate it was sized for
    assert data["comfortable"] == (10 <= 0.7 * mid) and data["p95_ms"] < 3000
    first = data["warnings"][0]
    assert first.startswith(f"sized for {sized:.3g}/s, not 10/s") and "its p95 during the burst" in first
    assert "drain" not in first.split("targets:")[1]  # the p95 missed, not the drain time
    assert data["burst"]["p95_ms"] <= 3000


def test_one_server_first_names_the_p95_when_it_is_the_p95_that_misses():
    code, data, err = _advise(
        "--rps", "10", "--vcpu", "4", "--burst", "4", "--burst-seconds", "60", "--p95-ms", "3000", "--json"
    )
    assert code == 0, err
    note = next(w for w in data["warnings"] if "does not absorb" in w)
    assert data["burst"]["drains"] and "p95 during the burst" in note and "--drain-seconds" not in note
