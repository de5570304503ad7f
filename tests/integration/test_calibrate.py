"""`n8n-sizer calibrate` on real n8n: the local stack comes up, the workflow runs a few times at a low rate, and
each node's execution time is read back from n8n's execution data (includeData); the Code node's own JavaScript
is its time less the reference's trivial Code node. One short run (8 executions at 4/s)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from n8n_sizer.advisor.workflow_price.calibration import calibration_from_json

pytestmark = pytest.mark.integration

RUNS = 8
# A Code node with a fixed integer loop (a few tens of ms in Node 24 here), then a Set node that does little.
FLOW = {
    "name": "calibrate me",
    "nodes": [
        {
            "parameters": {"httpMethod": "POST", "path": "calibrate-me", "responseMode": "lastNode", "options": {}},
            "name": "Webhook",
            "type": "n8n-nodes-base.webhook",
            "typeVersion": 2,
            "position": [0, 0],
            "webhookId": "0e7c1c9e-2d1d-4a51-9c6a-3f1c4b0a0001",
            "id": "0e7c1c9e-2d1d-4a51-9c6a-3f1c4b0a0002",
        },
        {
            "parameters": {
                "jsCode": "let x = 0;\nfor (let i = 0; i < 8000000; i++) { x = (x * 31 + i) % 1000003; }\n"
                "return [{ json: { x, n: $input.first().json.body.n } }];"
            },
            "name": "Busy",
            "type": "n8n-nodes-base.code",
            "typeVersion": 2,
            "position": [220, 0],
            "id": "0e7c1c9e-2d1d-4a51-9c6a-3f1c4b0a0003",
        },
        {
            "parameters": {
                "assignments": {
                    "assignments": [
                        {
                            "id": "0e7c1c9e-2d1d-4a51-9c6a-3f1c4b0a0004",
                            "name": "done",
                            "value": "={{ $json.n + 1 }}",
                            "type": "number",
                        }
                    ]
                },
                "options": {},
            },
            "name": "Set",
            "type": "n8n-nodes-base.set",
            "typeVersion": 3.4,
            "position": [440, 0],
            "id": "0e7c1c9e-2d1d-4a51-9c6a-3f1c4b0a0005",
        },
    ],
    "connections": {
        "Webhook": {"main": [[{"node": "Busy", "type": "main", "index": 0}]]},
        "Busy": {"main": [[{"node": "Set", "type": "main", "index": 0}]]},
    },
    "settings": {"executionOrder": "v1"},
}


def test_calibrate_reads_per_node_times_from_real_executions(n8n_install, tmp_path: Path):
    flow, body, out = tmp_path / "flow.json", tmp_path / "body.json", tmp_path / "calibration.json"
    flow.write_text(json.dumps(FLOW))
    body.write_text('{"n": 41}')
    exe = Path(sys.executable).with_name("n8n-sizer")
    done = subprocess.run(
        [str(exe), "calibrate", str(flow), "--body", str(body), "--runs", str(RUNS), "--rate", "4", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Code nodes' own JavaScript" in done.stdout and f"written: {out}" in done.stdout

    cal = calibration_from_json(json.loads(out.read_text()))
    assert cal.executions == RUNS and cal.n8n_version == "2.41.1"
    assert {n.name: n.type for n in cal.nodes} == {
        "Webhook": "n8n-nodes-base.webhook",
        "Busy": "n8n-nodes-base.code",
        "Set": "n8n-nodes-base.set",
    }
    assert all(n.samples == RUNS for n in cal.nodes)
    busy, set_node = cal.timing("Busy"), cal.timing("Set")
    # The loop makes the Code node the slow one; what is left after the trivial Code node's time is its JS.
    assert busy.median_ms > set_node.median_ms and busy.median_ms > cal.code_round_trip_ms
    assert cal.code_time_ms == pytest.approx(busy.median_ms - cal.code_round_trip_ms, abs=0.01)
    # The task runner's CPU was read for both batches: the loop's workflow costs it more than the trivial Code node.
    assert cal.runner_cpu_ms is not None and cal.reference_runner_cpu_ms is not None
    assert cal.runner_cpu_ms > cal.reference_runner_cpu_ms
    assert cal.code_cpu_ms == pytest.approx(cal.runner_cpu_ms - cal.reference_runner_cpu_ms, abs=0.01)
