"""Run folder store, ledger arithmetic, load plans and step summaries."""

from __future__ import annotations

import json

import pytest

from n8n_sizer.bench.plan import build_plan, parse_rates, parse_sweep
from n8n_sizer.errors import InputError
from n8n_sizer.runs.ledger import build_ledger, format_ledger
from n8n_sizer.runs.records import RequestRecord, RunManifest, StepTally
from n8n_sizer.runs.store import RunStore, new_run_id, summarize_step


def rec(seq, status=200, latency=10.0, cls=None, step="rate-5", target="t1"):
    return RequestRecord(
        seq=seq,
        step=step,
        target=target,
        scheduled_s=1000 + seq * 0.2,
        sent_s=1000 + seq * 0.2 + 0.001,
        status=status,
        latency_ms=latency if status else None,
        error_class=cls,
        error=None if cls is None else f"{cls} details",
    )


def test_store_creates_exclusively_appends_and_reopens(tmp_path):
    run_id = new_run_id()
    store = RunStore.create(tmp_path, RunManifest(run_id=run_id, created_s=1.0))
    store.append_request(rec(0))
    store.append_request(rec(1, status=503, cls="non-2xx"))
    store.mark_step("t1", "rate-5", "running")
    store.mark_step("t1", "rate-5", "done", seq_end=2)
    store.close()
    with pytest.raises(InputError, match="never overwritten"):
        RunStore.create(tmp_path, RunManifest(run_id=run_id, created_s=2.0))
    again = RunStore.open(run_id, tmp_path)
    assert [r.seq for r in again.read_requests()] == [0, 1]
    assert again.finished_steps("t1") == ["rate-5"] and again.next_seq("t1") == 2 and again.next_seq("x") == 0
    assert again.manifest.extra["steps"]["t1"]["rate-5"]["attempts"] == 1
    assert json.loads((tmp_path / run_id / "run.json").read_text())["run_id"] == run_id


def test_a_line_cut_by_a_crash_is_dropped_on_resume_and_skipped_at_the_end_other_bad_lines_fail(tmp_path):
    store = RunStore.create(tmp_path, RunManifest(run_id="r1", created_s=1.0))
    store.append_request(rec(0))
    store.close()
    with open(tmp_path / "r1" / "requests.jsonl", "a") as f:
        f.write('{"seq": 1, "step": "rat')  # killed mid-write
    store = RunStore.open(tmp_path / "r1")
    store.append_request(rec(2))
    assert [r.seq for r in store.read_requests()] == [0, 2]
    store.close()
    with open(tmp_path / "r1" / "requests.jsonl", "a") as f:
        f.write('{"seq": 3, "step": "rat')  # killed mid-write again, and not resumed: the last line, skipped
    assert [r.seq for r in RunStore.open(tmp_path / "r1").read_requests()] == [0, 2]
    path = tmp_path / "r1" / "requests.jsonl"
    lines = path.read_text().split("\n")
    path.write_text("\n".join([lines[0], '{"seq": 1, "step": "rat', *lines[1:]]))  # a cut line in the middle
    with pytest.raises(InputError, match="requests.jsonl:2 .*damaged"):
        RunStore.open(tmp_path / "r1").read_requests()
    import json

    nan = json.dumps({**json.loads(lines[1]), "latency_ms": float("nan")})  # Python's json writes NaN
    assert "NaN" in nan
    path.write_text("\n".join([lines[0], nan]) + "\n")
    with pytest.raises(InputError, match="requests.jsonl:2 .*finite"):  # a NaN latency is broken, not a figure
        RunStore.open(tmp_path / "r1").read_requests()
    with open(tmp_path / "r1" / "requests.jsonl", "w") as f:
        f.write(lines[0] + '\n{"seq": -1}\n')
    with pytest.raises(InputError, match="requests.jsonl:2"):
        store.read_requests()
    with pytest.raises(InputError, match="no run.json"):
        RunStore.open("nope", tmp_path)


def test_ledger_reports_raw_numbers():
    records = [
        rec(0),
        rec(1),
        rec(2, status=None, cls="timeout"),
        rec(3, status=500, cls="non-2xx"),
        rec(4, status=None, cls="dropped"),
    ]
    ledger = build_ledger(records, executions_stored=4, executions_succeeded=3)
    assert (ledger.fired, ledger.accepted, ledger.refused, ledger.not_sent) == (4, 2, 2, 1)
    assert ledger.accepted_then_lost == -1  # more successes stored than acknowledged: shown, not masked
    assert build_ledger(records, None, None).accepted_then_lost is None
    assert "accepted then lost" in format_ledger("t1", ledger) and "n/a" in format_ledger(
        "t", build_ledger([], None, None)
    )


def test_plan_parsing_and_defaults():
    plan = build_plan()
    assert plan.step_names() == ["rate-5", "rate-20", "rate-50"] and plan.duration_s == 540
    assert (plan.timeout_s, plan.max_in_flight, plan.warmup_requests) == (120, 1000, 200)
    plan = build_plan(parse_rates("2.5"), 10, parse_sweep("1,10"))
    assert plan.step_names() == ["rate-2.5", "c-1", "c-10"]
    for bad, match in (("5,x", "not a number"), ("5,5", "repeats"), ("0", "> 0")):
        with pytest.raises(InputError, match=match):
            parse_rates(bad)
    with pytest.raises(InputError, match="--step-seconds"):
        build_plan(step_s=0)
    with pytest.raises(InputError, match="nothing to run"):
        build_plan(rates=(), sweep=())


def test_step_summary_counts_classes_and_percentiles():
    records = [rec(i, latency=float(i + 1)) for i in range(100)] + [rec(100, status=None, cls="reset")]
    outcome = StepTally(
        step="rate-5", started_s=1000.0, finished_s=1020.2, scheduled=101, sent=101, last_sent_s=1000 + 100 * 0.2
    )
    samples = {(s.metric, s.labels.get("class")): s.value for s in summarize_step(records, outcome, "t1", "rate", 5.0)}
    assert samples[("answered", None)] == 100 and samples[("requests", None)] == 101
    assert samples[("errors", "reset")] == 1 and samples[("errors", "timeout")] == 0
    assert samples[("latency_p50", None)] == pytest.approx(50.5) and samples[("latency_p99", None)] == pytest.approx(
        99.01
    )
    assert samples[("achieved_rate", None)] == pytest.approx(5.0, rel=0.01)


def test_durations_and_step_labels():
    from n8n_sizer.bench.plan import RateStep, parse_duration

    assert parse_duration("4h") == 14400 and parse_duration("1h30m") == 5400 and parse_duration("90") == 90
    for bad in ("4x", "h", "0s", "1h 30m"):
        with pytest.raises(InputError, match="--soak"):
            parse_duration(bad)
    assert RateStep(rate_per_s=17.5, duration_s=60, label="rate-17.5-max3").name == "rate-17.5-max3"
    from n8n_sizer.runs.stats import step_rate

    assert step_rate("rate-17.5-max3") == 17.5  # the reports read the rate back from the name


def test_ledger_matches_accepted_requests_to_stored_executions_by_id():
    ok = [rec(i).model_copy(update={"execution_id": str(100 + i)}) for i in range(4)]
    records = ok + [rec(4, status=500, cls="non-2xx")]
    ledger = build_ledger(
        records, executions_stored=5, executions_succeeded=3, success_ids={"100", "101", "103", "999"}
    )
    assert ledger.lost_seqs == [2]  # answered 200, but execution 102 was never stored as successful
    assert ledger.accepted_then_lost == 1
    # one accepted answer without an id (a user's own workflow): no one-by-one claim, only the counts
    partial = records + [rec(5)]
    assert build_ledger(partial, 6, 4, {"100", "101", "103"}).lost_seqs is None
    assert build_ledger(records, 5, 3).lost_seqs is None


def test_execution_id_is_read_from_n8n_answers():
    from n8n_sizer.bench.http_post import execution_id_of

    assert execution_id_of(b'{"doubled": 42, "executionId": "1234"}') == "1234"
    assert execution_id_of(b'[{"done": true, "executionId": 77}]') == "77"
    assert execution_id_of(b'{"doubled": 42}') is None
    assert execution_id_of(b'not json "executionId"') is None
