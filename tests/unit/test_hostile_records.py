"""Run records as an attacker (or a bad editor) leaves them (issue 40): `report` and `advise --results` refuse a
run.json, a ledger, a request or a sample line whose types are wrong or whose figures are impossible, in one line
that names the file and the field (exit 2); they never crash (exit 70) and never answer nonsense.

The base is a real run (tests/data/hostile/run: `bench --local` of n8n 2.41.1 on this machine, trimmed to two
steps). Each test damages one thing in a copy.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from n8n_sizer.errors import InputError
from n8n_sizer.report.model import load_run, step_rows
from n8n_sizer.runs.fit_input import measurements_from_run
from n8n_sizer.runs.records import RequestRecord, Sample
from n8n_sizer.runs.store import RunStore
from tests.unit.hostile_cases import BASE_RUN, clean, report_nonsense, run_cli


@pytest.fixture
def run(tmp_path) -> Path:
    folder = tmp_path / "run"
    shutil.copytree(BASE_RUN, folder)
    return folder


def edit(run: Path, change) -> None:
    doc = json.loads((run / "run.json").read_text())
    change(doc)
    (run / "run.json").write_text(json.dumps(doc))


def refused(run: Path, *needles: str) -> str:
    """`report` and the reading half of `advise --results` refuse the run in one line naming every needle."""
    code, out, err = run_cli("report", run, "--no-plots", "--out", run.parent / "report")
    assert clean(code, out, err) is None, err
    assert code == 2, (out, err)
    for needle in needles:
        assert needle in err, err
    with pytest.raises(InputError) as caught:
        measurements_from_run(run)
    assert "\n" not in str(caught.value)
    return err


def test_the_base_run_reads_and_reports(run) -> None:
    rows = step_rows(load_run(run))
    assert [r.step for r in rows] == ["rate-4", "rate-8"]
    assert all(r.p50_ms and r.p50_ms > 0 and r.answered_per_min and r.answered_per_min < 8 * 60 for r in rows)
    assert len(measurements_from_run(run)) == 2


# the crashes issue 40 found, each now one line naming run.json and the field
@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d["spec"].update(workflow_resolved=["a"]), "spec.workflow_resolved"),
        (lambda d: d["spec"].update(workflow_resolved="light"), "spec.workflow_resolved"),
        (lambda d: d["hosts"]["local"].update(setup="regular"), "hosts.local.setup"),
        (lambda d: d["hosts"]["local"].update(facts=[2]), "hosts.local.facts"),
        (lambda d: d["hosts"]["local"]["facts"].update(vcpu="2"), "hosts.local.facts.vcpu"),
        (lambda d: d["hosts"]["local"]["facts"].update(vcpu=-2), "hosts.local.facts.vcpu"),
        (lambda d: d["extra"].update(steps=[1]), "extra.steps"),
        (lambda d: d["extra"]["steps"].update(local="done"), "extra.steps.local"),
        (lambda d: d["extra"]["steps"]["local"].update({"rate-4": "done"}), "extra.steps.local.rate-4"),
        (lambda d: d["extra"]["steps"]["local"]["rate-4"].update(started_s="soon"), "started_s"),
        (lambda d: d["extra"]["steps"]["local"]["rate-4"].update(finished_s=[1]), "finished_s"),
        (lambda d: d["extra"]["steps"]["local"]["rate-4"].update(finished_s=1.0), "before started_s"),
        (lambda d: d["extra"]["steps"]["local"]["rate-4"].update(role_cpu_ms={"main": -1}), "role_cpu_ms.main"),
        (lambda d: d["extra"].update(find_max=[1]), "extra.find_max"),
        (lambda d: d["extra"].update(checks="all good"), "extra.checks"),
        (lambda d: d["hosts"]["local"]["setup"].update(workers=-1), "hosts.local.setup.workers"),
        (lambda d: d["hosts"]["local"]["setup"].update(mode="turbo"), "hosts.local.setup.mode"),
        (lambda d: d["hosts"]["local"].update(rest={"role_cpu_ms": {"main": 1e30}}), "hosts.local.rest.role_cpu_ms"),
        (lambda d: d["hosts"]["local"].update(webhook_path="x/../../y?z"), "hosts.local.webhook_path"),
        (lambda d: d.update(created_s=-1), "created_s"),
        (lambda d: d.update(finished_s=1.0), "finished_s"),
        (lambda d: d.update(run_id="../../etc"), "run_id"),
        (lambda d: d["ledgers"]["local"].update(accepted=10**6), "ledgers.local"),
        (lambda d: d["ledgers"]["local"].update(refused=-5), "ledgers.local.refused"),
        (lambda d: d.update(setup={"local": "regular"}), "setup"),
    ],
)
def test_a_wrong_type_or_an_impossible_value_in_run_json_is_one_line_naming_the_field(run, change, field) -> None:
    edit(run, change)
    refused(run, "run.json", field)


@pytest.mark.parametrize("raw", ["NaN", "Infinity", "1e999", "9" * 400])
def test_numbers_json_cannot_hold_are_refused_in_run_json(run, raw) -> None:
    text = (run / "run.json").read_text()
    (run / "run.json").write_text(text.replace('"vcpu": 2', f'"vcpu": {raw}', 1))
    refused(run, "run.json")


def test_a_negative_latency_is_refused_not_reported(run) -> None:
    """Issue 40: one request with latency_ms -5 gave p50/p95/p99 of -5 ms and 60,000,000,000 answered per minute."""
    lines = (run / "requests.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    (run / "requests.jsonl").write_text(json.dumps({**first, "latency_ms": -5}) + "\n")
    refused(run, "requests.jsonl:1", "latency_ms")


def test_one_request_answered_in_no_time_is_no_rate(run) -> None:
    """A closed step with one request answered in 0 ms: no measurable span, so no answered/min (n/a), never 6e10."""
    first = json.loads((run / "requests.jsonl").read_text().splitlines()[0])
    one = {**first, "step": "c-1", "latency_ms": 0.0, "sent_s": first["scheduled_s"]}
    (run / "requests.jsonl").write_text(json.dumps(one) + "\n")
    edit(run, lambda d: d["extra"].pop("steps") and d["hosts"]["local"].pop("facts"))  # no refit: it takes seconds
    (row,) = step_rows(load_run(run))
    assert row.answered == 1 and row.answered_per_min is None
    code, out, err = run_cli("report", run, "--no-plots", "--out", run.parent / "report")
    assert code == 0, err
    assert report_nonsense((run.parent / "report" / "report.md").read_text()) is None


def test_a_schedule_denser_than_its_rate_is_refused(run) -> None:
    """2,000 requests "at rate-4" scheduled in one instant: more than the step could send."""
    first = json.loads((run / "requests.jsonl").read_text().splitlines()[0])
    dense = [{**first, "seq": i, "sent_s": first["scheduled_s"]} for i in range(2000)]
    (run / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in dense))
    refused(run, "requests.jsonl", "rate-4", "more than its 4/s could send")


def test_a_closed_step_faster_than_its_users_could_go_is_refused(run) -> None:
    """Little's law: one user finishing 10,000 requests of 1 ms each within 2 ms is not a measurement."""
    first = json.loads((run / "requests.jsonl").read_text().splitlines()[0])
    t0 = first["scheduled_s"]
    rows = [
        {**first, "step": "c-1", "seq": i, "scheduled_s": t0 + i * 1e-7, "sent_s": t0 + i * 1e-7, "latency_ms": 1.0}
        for i in range(10_000)
    ]
    (run / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    refused(run, "requests.jsonl", "c-1", "more than it could send")


def test_a_rate_bench_cannot_send_is_refused(run) -> None:
    first = json.loads((run / "requests.jsonl").read_text().splitlines()[0])
    (run / "requests.jsonl").write_text(json.dumps({**first, "step": "rate-100000000"}) + "\n")
    refused(run, "requests.jsonl", "rate-100000000")


@pytest.mark.parametrize(
    ("metric", "value", "needle"),
    [
        ("answered_per_min", 1e12, "answered_per_min"),
        ("answered", 1e6, "answered"),
        ("offered_rate", 1e9, "offered_rate"),
        ("latency_p50", 1e7, "percentiles"),
        ("saturated", 7, "bool"),
        ("latency_p95", -3, "latency_p95"),
    ],
)
def test_a_load_summary_that_contradicts_itself_is_refused(run, metric, value, needle) -> None:
    rows = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    for r in rows:
        if r["metric"] == metric and r["labels"].get("step") == "rate-4":
            r["value"] = value
    (run / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    refused(run, "samples.jsonl", needle)


def test_a_process_busier_than_its_host_is_refused(run) -> None:
    rows = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    cpu = next(r for r in rows if r["metric"] == "process_cpu_cores")
    cpu["value"] = 500.0
    (run / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    refused(run, "samples.jsonl", "2 vCPUs")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("seq", -1),
        ("seq", "3"),
        ("status", 999),
        ("status", "200"),
        ("latency_ms", "fast"),
        ("latency_ms", 1e12),
        ("scheduled_s", -1),
        ("sent_s", 0.0),
        ("step", ""),
        ("step", ["rate-4"]),
        ("error_class", "catastrophe"),
        ("surprise", 1),
    ],
)
def test_a_request_line_of_the_wrong_shape_names_its_line_and_field(run, field, value) -> None:
    lines = (run / "requests.jsonl").read_text().splitlines()
    lines[3] = json.dumps({**json.loads(lines[3]), field: value})
    (run / "requests.jsonl").write_text("\n".join(lines) + "\n")
    refused(run, "requests.jsonl:4", field)


def test_an_escape_sequence_in_a_name_is_refused_without_reaching_the_terminal(run) -> None:
    """A target, step or host name is echoed by report, advise and bench: plain text only, refused at the boundary
    (the refusal quotes it escaped, so the terminal never sees the sequence)."""
    rows = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    for r in rows:
        r["target"] = "local\x1b]0;pwned\x07\x1b[2J"
    (run / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    err = refused(run, "requests.jsonl:1", "target", "control characters")
    assert "\x1b" not in err and "\x07" not in err


def test_free_text_of_a_run_reaches_the_report_printable(run) -> None:
    """A drill's observations quote log lines (n8n colours its log): kept, but printable in the report."""
    edit(
        run,
        lambda d: (
            d.update(kind="drill")
            or d["extra"].update(
                drill="kill-worker",
                verdict="pass\x1b[2J",
                checks=[{"observation": "\x1b[31mworker died\x1b[0m | restarted", "expected": "x", "verdict": "ok"}],
            )
        ),
    )
    code, out, err = run_cli("report", run, "--no-plots", "--out", run.parent / "report")
    assert clean(code, out, err) is None and code == 0, err
    text = (run.parent / "report" / "report.md").read_text()
    assert report_nonsense(text) is None and "worker died \\| restarted" in text


def test_records_hold_their_bounds_when_written_too() -> None:
    with pytest.raises(ValueError):
        RequestRecord(seq=0, step="rate-1", target="t", scheduled_s=10.0, sent_s=5.0, status=200, latency_ms=1.0)
    with pytest.raises(ValueError):
        Sample(metric="process_cpu_cores", value=-0.5, unit="cores", time_s=1.0)
    with pytest.raises(ValueError):
        Sample(metric="saturated", value=0.5, unit="bool", time_s=1.0)


def test_the_bench_resume_path_refuses_a_damaged_spec(run) -> None:
    edit(run, lambda d: d.update(finished_s=None) or d["spec"].update(source="fleet", body=5))
    with pytest.raises(InputError) as caught:
        RunStore.open(run)
    assert "spec.body" in str(caught.value)


def test_a_key_twice_in_run_json_is_refused(run) -> None:
    """JSON readers disagree on which of two equal keys counts (Python's keeps the last): refused, as in YAML."""
    text = (run / "run.json").read_text()
    (run / "run.json").write_text(text.replace('"finished_s":', '"finished_s": 1.0, "finished_s":', 1))
    refused(run, "run.json", "'finished_s' appears twice")
