"""`advise --workflow FILE`: a workflow export priced from its nodes and answered like a packaged workload."""

import json
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ADVISE = [sys.executable, "-c", "from n8n_sizer.cli import advise_main; advise_main()"]
LIGHT = ROOT / "n8n_sizer" / "templates" / "workflows" / "light.json"


def advise(*args):
    p = subprocess.run(ADVISE + [str(a) for a in args], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def _export(tmp_path: Path, name: str, *nodes: dict) -> Path:
    webhook = {
        "name": "Webhook",
        "type": "n8n-nodes-base.webhook",
        "typeVersion": 2,
        "parameters": {"path": name, "responseMode": "lastNode"},
    }
    chain = [webhook, *nodes]
    connections = {a["name"]: {"main": [[{"node": b["name"], "type": "main", "index": 0}]]} for a, b in pairwise(chain)}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"name": name, "nodes": chain, "connections": connections}))
    return path


SET_TWO_EXPRESSIONS = {
    "name": "Set",
    "type": "n8n-nodes-base.set",
    "typeVersion": 3.4,
    "parameters": {
        "assignments": {
            "assignments": [
                {"name": "a", "value": "={{ $json.body.a }}", "type": "string"},
                {"name": "b", "value": "={{ $json.body.number * 2 }}", "type": "number"},
            ]
        }
    },
}


def _capacity(*args) -> dict:
    code, out, err = advise("--rps", "2", "--vcpu", "4", "--json", *args)
    assert code == 0, err
    return json.loads(out)


def test_the_packaged_light_workflow_priced_from_its_nodes_carries_what_light_carries():
    priced = _capacity("--workflow", LIGHT)
    light = _capacity()
    assert priced["capacity_per_s"]["mid"] == pytest.approx(light["capacity_per_s"]["mid"], rel=0.02)
    assert priced["workflow_price"]["overhead_ratio_to_light"][0] == pytest.approx(1.0, abs=1e-6)
    assert (
        priced["capacity_per_s"]["high"] / priced["capacity_per_s"]["low"]
        > light["capacity_per_s"]["high"] / light["capacity_per_s"]["low"]
    )  # the price's own uncertainty


def test_webhook_set_within_20_percent_of_the_measured_ratio_to_light(tmp_path):
    # docs/workflow-price.md: Webhook -> Set (two expressions) measured 1.02x light's throughput here
    priced = _capacity("--workflow", _export(tmp_path, "set-two", SET_TWO_EXPRESSIONS))
    light = _capacity()
    ratio = priced["capacity_per_s"]["mid"] / light["capacity_per_s"]["mid"]
    assert abs(ratio / 1.02 - 1) <= 0.20, ratio


def test_unknown_node_types_are_named_and_waiting_moves_concurrency(tmp_path):
    http = {
        "name": "Call",
        "type": "n8n-nodes-base.httpRequest",
        "typeVersion": 4.2,
        "parameters": {"url": "http://127.0.0.1:9/", "method": "POST"},
    }
    odd = {"name": "Odd", "type": "n8n-nodes-community.something", "typeVersion": 1, "parameters": {}}
    path = _export(tmp_path, "calls", http, odd)
    code, out, err = advise("--rps", "30", "--workflow", path, "--wait-ms", "3000", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert any("n8n-nodes-community.something" in w for w in data["warnings"])
    assert data["workflow_price"]["wait_ms"] == pytest.approx(3000)
    assert data["request"]["workflow"] == str(path)
    if data["mode"] == "queue":
        assert data["concurrency"] > 10  # 3 s of waiting per execution needs slots, not workers
    assert any("N8N_EXPRESSION_ENGINE=legacy" in w for w in data["warnings"])  # the lever, offered, not switched


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--items", "3"], "--items"),
        (["--expression-engine", "legacy"], "--expression-engine"),
        (["--workflow", "WF", "--workload", "light"], "two workflows"),
        (["--workflow", "WF", "--expression-engine", "fast"], "--expression-engine"),
        (["--workflow", "WF", "--items", "0"], "--items"),
        (["--workflow", "nowhere.json"], "--workflow"),
        (["--workflow", "NOTWF"], "--workflow"),
    ],
)
def test_bad_workflow_input_is_one_line_exit_2(tmp_path, args, needle):
    wf = _export(tmp_path, "ok", SET_TWO_EXPRESSIONS)
    (tmp_path / "not.json").write_text(json.dumps({"nodes": "no"}))
    args = [str(wf) if a == "WF" else str(tmp_path / "not.json") if a == "NOTWF" else a for a in args]
    code, _, err = advise("--rps", "5", *args)
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert needle in err, err
