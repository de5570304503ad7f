"""The pricer: workflow exports priced from the embedded per-node cost table (n8n_sizer/data/node_costs.json)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import pytest

from n8n_sizer.advisor.workflow_price import MAX_NODES, load_node_costs, price_workflow
from n8n_sizer.advisor.workflow_price.calibration import calibration_from_json, node_times, summarize
from n8n_sizer.errors import InputError
from n8n_sizer.n8n.workflows import read_workflow

TABLE = load_node_costs()


def _export(*nodes: dict) -> dict:
    """Webhook -> the nodes, in a chain (the pricer walks the connections: an unconnected node does not run)."""
    hook = {
        "name": "Webhook",
        "type": "n8n-nodes-base.webhook",
        "typeVersion": 2,
        "parameters": {"httpMethod": "POST", "path": "x"},
    }
    chain = [hook, *nodes]
    connections = {a["name"]: {"main": [[{"node": b["name"], "type": "main", "index": 0}]]} for a, b in pairwise(chain)}
    return {"name": "t", "nodes": chain, "connections": connections}


def _node(name: str, type_: str, **params) -> dict:
    return {"name": name, "type": type_, "typeVersion": 1, "parameters": params}


def test_table_is_measured_on_the_pinned_n8n_and_has_every_required_node_type():
    from n8n_sizer.versions import N8N_VERSION

    assert TABLE.about["n8n_version"] == N8N_VERSION
    types = {row.type.removeprefix("n8n-nodes-base.") for row in TABLE.nodes}
    assert {
        "respondToWebhook",
        "set",
        "if",
        "switch",
        "filter",
        "merge",
        "noOp",
        "code",
        "httpRequest",
        "wait",
        "dateTime",
        "crypto",
        "splitOut",
        "aggregate",
        "executeWorkflow",
    } <= types
    for row in TABLE.nodes:  # every figure carries its spread and the runs it came from
        assert row.cpu.low_ms <= row.cpu.ms <= row.cpu.high_ms and len(row.cpu.per_round) >= 3 and row.runs
    assert TABLE.base.ms > 0 and set(TABLE.per_expression_ms) == {"default", "legacy"}


def test_light_is_one_by_construction_and_priced_from_its_two_nodes():
    price = price_workflow(read_workflow("light"), TABLE)
    assert price.overhead_ratio_to_light[0] == pytest.approx(1.0)
    low, high = price.overhead_ratio_to_light[1:]
    assert low < 1.0 < high and 0 < price.relative_uncertainty < 1
    assert [(line.name, line.row_id) for line in price.lines] == [("Webhook", "base"), ("Double", "code")]
    assert price.overhead_ms[0] == pytest.approx(price.light_ms)
    assert price.unknown_types == () and price.wait_ms == 0 and price.code_cpu_ms == 0
    assert any("--cpu-ms" in note for note in price.notes)  # its Code node's own JS is not guessed


def test_code_heavy_is_priced_from_its_nodes_its_wait_and_its_javascript():
    price = price_workflow(read_workflow("code-heavy"), TABLE, code_cpu_ms=187.0)
    rows = {line.name: line.row_id for line in price.lines}
    assert rows == {"Webhook": "base", "Loop": "code", "Wait": "wait", "Set": "set"}
    assert price.wait_ms == pytest.approx(500.0)  # Wait 1.1, amount 0.5, unit's default: seconds
    assert price.code_cpu_ms == 187.0
    set_line = next(line for line in price.lines if line.name == "Set")
    assert set_line.expressions == 1  # "={{ $execution.id }}"
    expected = TABLE.base.ms + sum(line.cost_ms for line in price.lines)
    assert price.overhead_ms[0] == pytest.approx(expected, abs=0.01)
    assert price.overhead_ratio_to_light[0] == pytest.approx(expected / price.light_ms, abs=1e-3)


def test_an_unknown_node_type_is_named_and_widens_the_interval():
    known = price_workflow(_export(_node("Set", "n8n-nodes-base.set")), TABLE)
    with_unknown = price_workflow(
        _export(_node("Set", "n8n-nodes-base.set"), _node("Odd", "n8n-nodes-community.odd")), TABLE
    )
    assert with_unknown.unknown_types == ("n8n-nodes-community.odd",)
    line = next(line for line in with_unknown.lines if line.name == "Odd")
    assert line.row_id == "unknown" and line.low_ms == 0 and line.high_ms > line.cost_ms
    width = lambda p: p.overhead_ratio_to_light[2] - p.overhead_ratio_to_light[1]  # noqa: E731
    # the unknown node adds its whole range (less what it shares, in quadrature, with the method's own error)
    assert width(with_unknown) > width(known) + 0.5 * line.high_ms / known.light_ms
    assert with_unknown.relative_uncertainty > known.relative_uncertainty


def test_items_expressions_and_waits_add_what_the_table_says():
    set_two = _node(
        "Set",
        "n8n-nodes-base.set",
        assignments={
            "assignments": [
                {"name": "a", "value": "={{ $json.body.n }}"},
                {"name": "b", "value": "={{ $json.body.n * 2 }}"},
            ]
        },
    )
    one = price_workflow(_export(set_two), TABLE, items=1)
    ten = price_workflow(_export(set_two), TABLE, items=10)
    per_expr, per_item = TABLE.per_expression_ms["default"].ms, TABLE.per_item_ms.ms
    line1, line10 = one.lines[1], ten.lines[1]
    assert line1.expressions == 2
    assert line10.cost_ms - line1.cost_ms == pytest.approx(max(0, 2 * per_expr * 9 + per_item * 9), abs=0.01)
    http = _node("Call", "n8n-nodes-base.httpRequest", url="http://127.0.0.1:1/")
    wait_v1 = {"name": "Pause", "type": "n8n-nodes-base.wait", "typeVersion": 1, "parameters": {"amount": 2}}
    priced = price_workflow(_export(http, wait_v1), TABLE, items=3, wait_ms_per_call=100.0)
    assert priced.wait_ms == pytest.approx(3 * 100.0)  # one call per item
    assert priced.parked_ms == pytest.approx(2 * 3600 * 1000.0)  # version 1's unit default is hours: parked
    unset = price_workflow(_export(http), TABLE)
    assert unset.wait_ms == pytest.approx(500.0)  # the HTTP family's default, with its source
    assert any("waiting per execution" in note and "slow API call" in note for note in unset.notes)


def test_the_legacy_engine_is_priced_from_its_own_measured_base():
    default = price_workflow(read_workflow("light"), TABLE)
    legacy = price_workflow(read_workflow("light"), TABLE, engine="legacy")
    assert legacy.base_ms == TABLE.legacy_base.ms
    assert legacy.light_ms == default.light_ms  # ratios stay relative to light on the default engine
    with pytest.raises(InputError, match="expression engine"):
        price_workflow(read_workflow("light"), TABLE, engine="fast")


def test_notes_and_disabled_nodes_cost_nothing():
    note = _node("Note", "n8n-nodes-base.stickyNote", content="hello")
    off = _node("Off", "n8n-nodes-base.slack") | {"disabled": True}
    price = price_workflow(_export(note, off), TABLE)
    assert price.unknown_types == () and price.overhead_ms[0] == pytest.approx(TABLE.base.ms)


@pytest.mark.parametrize(
    "export, says",
    [
        ([], "got list"),
        ("nodes", "got str"),
        (None, "got NoneType"),
        ({"nodes": {}, "connections": {}}, "no `nodes` list"),
        ({"nodes": [], "connections": {}}, "empty"),
        ({"nodes": [{"name": "a", "type": "n8n-nodes-base.set"}]}, "no `connections`"),
        ({"nodes": ["a"], "connections": {}}, "nodes[0] is str"),
        ({"nodes": [{"name": 7, "type": "n8n-nodes-base.set"}], "connections": {}}, "nodes[0] has a `name` that is"),
        ({"nodes": [{"type": "n8n-nodes-base.set"}], "connections": {}}, "no node has a `name`"),
        ({"nodes": [{"name": "a", "type": 7}], "connections": {}}, "no string `type`"),
        ({"nodes": [{"name": "a", "type": "x", "parameters": []}], "connections": {}}, "`parameters` is list"),
        ({"nodes": [{"name": "a", "type": "x", "typeVersion": "2"}], "connections": {}}, "`typeVersion` is not"),
        ({"nodes": [{"name": "a", "type": "x", "disabled": "yes"}], "connections": {}}, "`disabled` is not"),
    ],
)
def test_anything_but_an_export_is_refused_in_one_line(export, says):
    with pytest.raises(InputError) as caught:
        price_workflow(export, TABLE)
    message = str(caught.value)
    assert says in message and "\n" not in message and "Download" in message


def test_a_huge_or_deeply_nested_export_is_refused_before_it_is_priced():
    node = {"name": "n", "type": "n8n-nodes-base.noOp", "parameters": {}}
    huge = {"nodes": [dict(node, name=f"n{i}") for i in range(100_000)], "connections": {}}
    with pytest.raises(InputError, match=f"{MAX_NODES:,}-node limit"):
        price_workflow(huge, TABLE)
    deep: dict = {}
    cursor = deep
    for _ in range(200):
        cursor["x"] = {}
        cursor = cursor["x"]
    with pytest.raises(InputError, match="nested deeper"):
        price_workflow(_export({"name": "d", "type": "n8n-nodes-base.set", "parameters": deep}), TABLE)


@pytest.mark.parametrize(
    "kwargs, flag",
    [
        ({"items": 0}, "--items"),
        ({"items": True}, "--items"),
        ({"items": 10**9}, "--items"),
        ({"code_cpu_ms": -1}, "--cpu-ms"),
        ({"code_cpu_ms": 1e308}, "--cpu-ms"),
        ({"code_cpu_ms": 700_000}, "--cpu-ms"),  # the same bound as without --workflow
        ({"wait_ms_per_call": float("nan")}, "--wait-ms"),
        ({"wait_ms_per_call": 1e300}, "--wait-ms"),
    ],
)
def test_bad_numbers_are_refused_naming_the_flag(kwargs, flag):
    with pytest.raises(InputError, match=flag):
        price_workflow(read_workflow("light"), TABLE, **kwargs)


def _execution(times: dict[str, list[float]]) -> dict:
    return {
        "data": {"resultData": {"runData": {name: [{"executionTime": t} for t in ts] for name, ts in times.items()}}}
    }


def test_a_calibration_reads_n8n_execution_data_and_subtracts_the_code_round_trip():
    executions = [_execution({"Webhook": [0], "Work": [40 + i], "Set": [1]}) for i in range(5)]
    reference = [_execution({"Webhook": [0], "Double": [8]}) for _ in range(5)]
    types = {"Webhook": "n8n-nodes-base.webhook", "Work": "n8n-nodes-base.code", "Set": "n8n-nodes-base.set"}
    cal = summarize("flow.json", types, executions, reference, "Double", "2026-12-01T00:00:00Z", "2.41.1")
    assert cal.timing("Work").median_ms == 42 and cal.code_round_trip_ms == 8
    assert cal.code_cpu_ms == cal.code_time_ms == pytest.approx(34.0)  # only Code nodes, less the trivial one's
    again = calibration_from_json(json.loads(cal.model_dump_json()))
    assert again == cal
    # With the task runner's CPU read: that, less the reference's once per Code node (times hold waiting too).
    by_cpu = summarize(
        "flow.json", types, executions, reference, "Double", "t", None, runner_cpu_ms=40.0, reference_runner_cpu_ms=9.0
    )
    assert by_cpu.code_cpu_ms == pytest.approx(31.0) and by_cpu.code_time_ms == pytest.approx(34.0)
    assert node_times({"data": None}) == {} and node_times(_execution({"a": [-1]})) == {}
    with pytest.raises(InputError, match="not a calibration") as caught:
        calibration_from_json({"workflow": "x"})
    assert "\n" not in str(caught.value)
    with pytest.raises(InputError, match="no node execution times"):
        summarize("flow.json", types, [], reference, "Double", "t", None)


def test_calibrate_refuses_a_bad_file_in_one_line_before_starting_anything(tmp_path: Path):
    bad = tmp_path / "flow.json"
    bad.write_text(json.dumps({"nodes": "no"}))
    exe = Path(sys.executable).with_name("n8n-sizer")
    for args, says in (
        ([str(bad)], "no `nodes` list"),
        ([str(tmp_path / "none.json")], "no such file"),
        ([str(bad), "--runs", "0"], "--runs"),
    ):
        done = subprocess.run(
            [str(exe), "calibrate", *args, "--out", str(tmp_path / "c.json")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, done.stderr
        assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "c.json").exists()


def test_pricing_does_not_change_the_export():
    export = read_workflow("code-heavy")
    before = copy.deepcopy(export)
    price_workflow(export, TABLE, items=5)
    assert export == before


def test_the_docs_show_the_embedded_table_as_node_costs_py_prints_it():
    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "benchmarks"))
    try:
        import node_costs
    finally:
        sys.path.remove(str(root / "benchmarks"))
    page = (root / "docs" / "workflow-price.md").read_text(encoding="utf-8")
    shown = page.split("<!-- node-costs:start -->\n", 1)[1].split("<!-- node-costs:end -->", 1)[0]
    doc = json.loads((root / "n8n_sizer" / "data" / "node_costs.json").read_text(encoding="utf-8"))
    assert shown.strip() == node_costs.markdown(doc).strip(), "regenerate: benchmarks/node_costs.py --show"
