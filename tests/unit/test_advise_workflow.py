"""`advise --workflow FILE`: a workflow export priced from its nodes and answered like a packaged workload."""

import json
import shlex
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


def _write(tmp_path: Path, name: str, doc) -> Path:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return path


def _hostile(tmp_path: Path) -> dict[str, Path]:
    hook = {"name": "Webhook", "type": "n8n-nodes-base.webhook", "typeVersion": 2, "parameters": {"path": "h"}}

    def wf(node: dict) -> dict:
        return {"nodes": [hook, node], "connections": {"Webhook": {"main": [[{"node": node["name"], "index": 0}]]}}}

    def wait(params: dict) -> dict:
        return wf({"name": "W\x1b[31m", "type": "n8n-nodes-base.wait", "typeVersion": 1.1, "parameters": params})

    deep_params = json.dumps(wf({"name": "D", "type": "n8n-nodes-base.set", "parameters": {"x": "DEEP"}}))
    deep_params = deep_params.replace('"DEEP"', '{"x": ' * 800 + "1" + "}" * 800)
    return {
        "unit-list": _write(tmp_path, "unit-list", wait({"amount": 5, "unit": ["seconds"]})),
        "unit-dict": _write(tmp_path, "unit-dict", wait({"amount": 5, "unit": {"x": 1}})),
        "amount-1e38": _write(tmp_path, "amount", wait({"amount": 1e38, "unit": "days"})),
        "escape-type": _write(tmp_path, "escape", wf({"name": "X", "type": "n8n-nodes-base.set\x1b]0;pwned\x07"})),
        "deep": _write(tmp_path, "deep", '{"nodes": [' + "[" * 3000 + "]" * 3000 + "]}"),
        "deep-params": _write(tmp_path, "deep-params", deep_params),
        "bad-connections": _write(tmp_path, "conn", {"nodes": [hook], "connections": {"Webhook": {"main": "x"}}}),
        "calibration": _write(
            tmp_path,
            "calibration",
            {
                "workflow": "x",
                "measured_at": "t",
                "executions": 1,
                "code_round_trip_ms": 1,
                "nodes": [],
                "code_cpu_ms": 1e38,
                "code_time_ms": 1,
            },
        ),
    }


@pytest.mark.parametrize(
    "args",
    [
        ["--workflow", "unit-list"],
        ["--workflow", "unit-dict"],
        ["--workflow", "amount-1e38"],
        ["--workflow", "escape-type"],
        ["--workflow", "deep"],
        ["--workflow", "deep-params"],
        ["--workflow", "bad-connections"],
        ["--workflow", "OK", "--cpu-ms", "1e308"],
        ["--workflow", "OK", "--wait-ms", "1e300"],
        ["--workflow", "OK", "--cpu-ms", "700000"],  # refused without --workflow too: the same bound
        ["--workflow", "OK", "--calibration", "calibration"],
        ["--workflow", "OK", "--wait", "Set"],
        ["--workflow", "OK", "--wait", "Set=1e300"],
        ["--workflow", "OK", "--wait", "Set=nan"],
        ["--workflow", "OK", "--branch", "Set=2"],
        ["--workflow", "OK", "--branch", "\x1b[2JNope=0.5"],
        ["--wait", "Set=5"],
        ["--branch", "Set=0.5"],
    ],
)
def test_hostile_exports_and_options_are_one_line_exit_2_nothing_raw(tmp_path, args, monkeypatch, capsys):
    from n8n_sizer.cli import main

    files = _hostile(tmp_path)
    ok = _export(tmp_path, "ok", SET_TWO_EXPRESSIONS)
    argv = ["n8n-sizer", "advise", "--rps", "5"] + [str(files.get(a, ok if a == "OK" else a)) for a in args]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exit_:
        main()
    out, err = capsys.readouterr()
    assert exit_.value.code == 2, (args, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err + out, err
    assert "\x1b" not in err + out and "\x07" not in err + out, err


def test_a_wait_that_asks_more_than_1000_slots_is_answered_not_refused(tmp_path):
    # Webhook -> Wait 30 s at 40/s: ~1,200 executions waiting at once (Little's law), an answer with its reason
    wait = {"name": "Wait", "type": "n8n-nodes-base.wait", "typeVersion": 1.1, "parameters": {"amount": 30}}
    code, out, err = advise("--rps", "40", "--workflow", _export(tmp_path, "wait30", wait), "--json")
    assert code == 0, err
    data = json.loads(out)
    slots = data["concurrency"] * data["workers"] if data["mode"] == "queue" else data["production_limit"]
    assert slots >= 1000 and data["workflow_price"]["wait_ms"] == pytest.approx(30_000)


def test_the_text_answer_shows_the_pricing_notes_and_every_suggested_command_runs(tmp_path):
    agent = ROOT / "tests" / "data" / "workflows" / "chat-agent-memory-tool.json"
    code, out, err = advise("--rps", "30", "--vcpu", "2", "--workflow", agent, "--wait", "OpenAI Chat Model=2000")
    assert code == 0, err
    assert "a Chat trigger is a webhook" in out and "model calls 2 x 2 s" in out
    code, out, err = advise("--rps", "30", "--vcpu", "2", "--workflow", agent, "--json")
    data = json.loads(out)
    commands = [a["advise_command"] for a in data.get("alternatives", [])]
    assert commands and all("--workload priced:" not in c and "--workflow" in c for c in commands)
    first = shlex.split(commands[0].removesuffix(" --json > advice.json"))
    assert first[0] == "advise"
    code, _, err = advise(*first[1:])
    assert code == 0, err


def test_a_schedule_only_workflow_is_sized_for_its_own_rate_without_rps():
    weekly = ROOT / "tests" / "data" / "workflows" / "schedule-weekly-cron.json"
    p = subprocess.run(ADVISE + ["--workflow", str(weekly)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "scheduled, not started by a webhook" in p.stdout and "sized for that rate" in p.stdout
    hook = ROOT / "tests" / "data" / "workflows" / "webhook-set.json"
    p = subprocess.run(ADVISE + ["--workflow", str(hook)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "--rps is required" in p.stderr and len(p.stderr.strip().splitlines()) == 1
