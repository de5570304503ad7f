"""The cost table refined by the user's bench runs (advisor/workflow_price/refit.py, runs/price_points.py), and the
queue-mode figures a queue answer is priced from."""

import json
from itertools import pairwise
from pathlib import Path

import pytest

from n8n_sizer.advisor.workflow_price import load_node_costs, price_workflow
from n8n_sizer.advisor.workflow_price.refit import Observation, refine_table
from n8n_sizer.bench.accounting import Reading, step_counters
from n8n_sizer.runs.records import Sample
from n8n_sizer.runs.store import RunStore
from tests.unit.test_advise_workflow import _export, advise
from tests.unit.test_evidence import STEP_S, _bench_run

SUB = {
    "name": "Sub",
    "type": "n8n-nodes-base.executeWorkflow",
    "typeVersion": 1.2,
    "parameters": {"source": "database", "workflowId": "1"},
}
SET = {"name": "Set", "type": "n8n-nodes-base.set", "typeVersion": 3.4, "parameters": {}}
LIGHT_PATH = Path(__file__).resolve().parents[2] / "n8n_sizer/templates/workflows/light.json"


def _chained(nodes: list[dict]) -> dict:
    """Connections that chain `nodes` in order (the pricer runs what the trigger reaches)."""
    return {a["name"]: {"main": [[{"node": b["name"], "type": "main", "index": 0}]]} for a, b in pairwise(nodes)}


LIGHT = json.loads(LIGHT_PATH.read_text())


def _run(out: Path, run_id: str, name: str, definition: dict, cpu_ms_per_execution: float, mode: str = "regular"):
    """A bench run as bench writes it (RunStore, one steady step), with the workflow it ran and the kernel's
    per-role CPU over the step: `cpu_ms_per_execution` of main and Postgres together."""
    folder = _bench_run(out, run_id, name, 20, [4.0], 0)
    store = RunStore.open(folder)
    store.update_manifest(spec={"workflow_resolved": {"name": name, "definition": definition}})
    if mode != "regular":
        hosts = {"local": {**store.manifest.hosts["local"], "setup": {"mode": mode, "workers": 1, "db": "postgres"}}}
        store.update_manifest(hosts=hosts)
    start = min(r.scheduled_s for r in store.read_requests())
    store.append_samples(
        [
            Sample(
                metric="process_cpu_cores",
                value=0.3,
                unit="cores",
                time_s=start + t,
                labels={"target": "local", "process": "main"},
            )
            for t in range(STEP_S)
        ]
    )
    answered = 80  # 4/s for 20 s
    main_ns = int(cpu_ms_per_execution * 0.8 * answered * 1e6)
    pg_ns = int(cpu_ms_per_execution * 0.2 * answered * 1e6)
    store.mark_step(
        "local",
        "rate-4",
        "done",
        started_s=start,
        finished_s=start + STEP_S,
        **step_counters(
            Reading(0.0, {("local", "main"): 0, ("local", "postgres"): 0}, None, None),
            Reading(20.0, {("local", "main"): main_ns, ("local", "postgres"): pg_ns}, None, None),
        ).model_dump(mode="json", exclude_none=True),
    )
    store.close()
    return folder


def _flow(tmp_path: Path) -> tuple[Path, dict]:
    path = _export(tmp_path, "my-flow", SUB, SET)
    return path, json.loads(path.read_text())


def test_a_measured_ratio_moves_the_price_toward_it_and_narrows_its_interval(tmp_path):
    from n8n_sizer.cli.advise.workflow import refined_table

    path, export = _flow(tmp_path)
    results = tmp_path / "results"
    results.mkdir()
    _run(results, "20261201T100000Z-aaaaaa", "light", LIGHT, 60.0)
    _run(results, "20261201T100500Z-bbbbbb", "my-flow", export, 90.0)  # measured: 1.5x light
    table = load_node_costs()
    before = price_workflow(export, table)
    refined, report = refined_table(table, results, "my-flow", 1, 0.0)
    after = price_workflow(export, refined)
    (mid0, lo0, hi0), (mid1, lo1, hi1) = before.overhead_ratio_to_light, after.overhead_ratio_to_light
    assert mid0 > 1.8  # the table prices a sub-workflow call as a whole execution more
    assert abs(mid1 - 1.5) < abs(mid0 - 1.5) - 0.1  # toward the measurement
    assert hi1 - lo1 < hi0 - lo0  # and surer of it
    assert lo1 < mid1 < hi1 and mid1 > 1.5  # between the table and the measurement (both 10% errors)
    assert report.used and "my-flow" in report.used[0]
    assert after.refined_from == report.used
    # light itself stays light: the base and the Code row are what every ratio divides by
    light = price_workflow(LIGHT, refined).overhead_ratio_to_light
    assert light[0] == pytest.approx(1.0, abs=1e-6)


def test_no_light_beside_a_run_on_another_machine_is_named_not_used(tmp_path):
    from n8n_sizer.cli.advise.workflow import refined_table

    _, export = _flow(tmp_path)
    results = tmp_path / "results"
    results.mkdir()
    _run(results, "20261201T100500Z-bbbbbb", "my-flow", export, 90.0)
    table = load_node_costs()
    refined, report = refined_table(table, results, "my-flow", 1, 0.0)
    assert refined is table and not report.used
    assert any("bench --workflow light" in why for why in report.skipped)


def test_queue_runs_refine_the_queue_figures_only(tmp_path):
    from n8n_sizer.cli.advise.workflow import refined_table

    _, export = _flow(tmp_path)
    results = tmp_path / "results"
    results.mkdir()
    _run(results, "20261201T100000Z-aaaaaa", "light", LIGHT, 60.0, mode="queue")
    _run(results, "20261201T100500Z-bbbbbb", "my-flow", export, 90.0, mode="queue")
    table = load_node_costs()
    regular, report = refined_table(table, results, "my-flow", 1, 0.0)
    assert regular is table and not report.used  # queue runs say nothing of regular mode's figures
    as_queue = table.for_mode("queue").model_copy(update={"mode": "queue"})  # whether or not measured yet
    queue, report = refined_table(as_queue, results, "my-flow", 1, 0.0)
    assert report.used and queue.mode == "queue" and queue.posterior is not None


def test_the_refit_is_a_bayesian_update_the_measured_workflow_moves_most():
    """A run pins its own workflow's effect (what the figures do not explain of it) and moves the shared figures by
    their spread only: a workflow that shares its rows moves less; the same evidence again narrows further."""
    table = load_node_costs()
    nodes = [{"name": "W", "type": "n8n-nodes-base.webhook", "parameters": {}}, SUB, SET]
    sub = {"name": "x", "nodes": nodes, "connections": _chained(nodes)}
    other = {"name": "y", "nodes": nodes[:2], "connections": _chained(nodes[:2])}
    ob = Observation(run_ids=("r",), workflow="x", definition=sub, ratio_to_light=1.5)
    refined, report = refine_table(table, [ob])
    moved_sub = (
        price_workflow(sub, table).overhead_ratio_to_light[0] - price_workflow(sub, refined).overhead_ratio_to_light[0]
    )
    moved_other = (
        price_workflow(other, table).overhead_ratio_to_light[0]
        - price_workflow(other, refined).overhead_ratio_to_light[0]
    )
    assert moved_sub > 0.2 and 0 <= moved_other < moved_sub / 2
    twice, _ = refine_table(refined, [ob])
    once_lo, once_hi = price_workflow(sub, refined).overhead_ratio_to_light[1:]
    lo, hi = price_workflow(sub, twice).overhead_ratio_to_light[1:]
    assert hi - lo <= once_hi - once_lo + 1e-9


def test_advise_workflow_with_results_says_the_table_was_refined(tmp_path):
    path, export = _flow(tmp_path)
    results = tmp_path / "results"
    results.mkdir()
    _run(results, "20261201T100000Z-aaaaaa", "light", LIGHT, 60.0)
    _run(results, "20261201T100500Z-bbbbbb", "my-flow", export, 90.0)
    code, out, err = advise("--rps", "2", "--vcpu", "4", "--json", "--workflow", path, "--results", results)
    assert code == 0, err
    data = json.loads(out)
    assert data["workflow_price"]["refined_from"]
    assert any("refined by your runs" in w for w in data["warnings"])
    code, out, err = advise("--rps", "2", "--vcpu", "4", "--json", "--workflow", path)
    plain = json.loads(out)
    assert data["workflow_price"]["overhead_ratio_to_light"][0] < plain["workflow_price"]["overhead_ratio_to_light"][0]


def test_validate_lists_the_workflow_price_points_each_with_its_error_and_the_summary(advise_validate):
    from n8n_sizer.advisor.workflow_price.validation import validate_prices

    v = validate_prices()
    assert len(v.points) >= 6 and v.campaigns
    for p in v.points:  # each error is the price against what ran, recomputed from the table as it is
        assert p.error_pct == pytest.approx((p.predicted / p.measured_rate_ratio - 1) * 100, abs=0.06)
        assert p.low <= p.predicted <= p.high and p.rounds >= 3 and p.runs
    assert v.max_abs_pct_error <= 20.0  # issue 26's bar: every validation workflow within 20%
    code, out, err = advise_validate["text"]  # `advise --validate`, its fit shared (tests/unit/conftest.py)
    assert code == 0, err
    assert "set-subworkflow-set" in out and "workflow prices: median |error|" in out
    code, out, err = advise_validate["json"]
    assert code == 0, err
    data = json.loads(out)["workflow_price_points"]
    assert [p["key"] for p in data["points"]] == [p.key for p in v.points]
    assert data["median_abs_pct_error"] == v.median_abs_pct_error


def _queue_raw(campaign: str, rounds: int = 3) -> list[dict]:
    """Runs as `node_costs.py --mode queue` records them: per-role CPU per execution, per round."""
    base = {"main": 20.0, "worker": 40.0, "runner": 0.0, "postgres": 8.0, "redis": 2.0}
    per_node = {"set": {"worker": 0.5}, "code": {"worker": 1.0, "runner": 2.0}}
    raw = []
    for r in range(1, rounds + 1):
        flows = {"base": base, "light": {**base, "worker": 41.0, "runner": 2.0}}
        for kind, extra in per_node.items():
            for k in (1, 8):
                flows[f"{kind}-k{k}"] = {role: ms + k * extra.get(role, 0.0) + r * 0.1 for role, ms in base.items()}
        flows["respond"] = {**base, "main": 25.0}
        flows["expr1"] = {**base, "worker": 41.0}
        flows["expr16"] = {**base, "worker": 41.0 + 15 * 0.8}
        for i, (key, roles) in enumerate(flows.items()):
            raw.append(
                {
                    "id": f"{campaign}/r{r}/{i + 1}/{key}",
                    "round": r,
                    "key": key,
                    "role_ms": roles,
                    "cpu_ms": sum(roles.values()),
                    "main_ms": roles["main"],
                    "postgres_ms": roles["postgres"],
                }
            )
    return raw


def test_the_queue_campaign_derives_each_nodes_cost_and_role_shares_and_a_queue_answer_prices_from_them(monkeypatch):
    root = Path(__file__).resolve().parents[2]
    monkeypatch.syspath_prepend(str(root / "benchmarks"))
    import nodecost_queue

    kinds = {"set": "n8n-nodes-base.set", "code": "n8n-nodes-base.code"}
    raw = _queue_raw("nodecostq-a") + _queue_raw("nodecostq-b", rounds=2)  # two chunks add up
    t = nodecost_queue.derive_queue(raw, kinds, 8)
    assert t["base"]["ms"] == pytest.approx(70.0) and t["base"]["roles"]["worker"] == pytest.approx(40.0)
    rows = {row["id"]: row for row in t["nodes"]}
    assert rows["set"]["cpu"]["ms"] == pytest.approx(0.5) and rows["set"]["roles"]["worker"] == pytest.approx(0.5)
    assert rows["code"]["roles"]["runner"] == pytest.approx(2.0) and len(rows["code"]["cpu"]["per_round"]) == 5
    assert rows["respondToWebhook"]["cpu"]["ms"] == pytest.approx(5.0)
    assert t["per_expression_ms"]["default"]["ms"] == pytest.approx(0.8)
    assert t["campaigns"] == ["nodecostq-a", "nodecostq-b"]
    assert nodecost_queue.queue_markdown(
        {
            "table": t,
            "rounds": raw,
            "about": {"date": "d", "n8n_version": "2.41.1", "concurrency": 8, "requests_per_run": 60, "k_high": 8},
        }
    )
    # a table with that queue part: the queue answer's figures, regular rows for what was not measured
    from n8n_sizer.advisor.workflow_price.table import table_from_doc

    doc = json.loads((root / "n8n_sizer/data/node_costs.json").read_text())
    doc["queue"] = {"table": t, "about": {"mode": "queue"}, "rounds": raw}
    table = table_from_doc(doc)
    q = table.for_mode("queue")
    assert q.mode == "queue" and q.base.ms == pytest.approx(70.0) and q.row("n8n-nodes-base.set").cpu.ms == 0.5
    assert q.row("n8n-nodes-base.if") == table.row("n8n-nodes-base.if")  # not measured in queue: the regular row
    price = price_workflow(LIGHT, table, mode="queue")
    assert price.mode == "queue" and price.overhead_ratio_to_light[0] == pytest.approx(1.0, abs=1e-6)
    assert price.role_ms["worker"] == pytest.approx(41.0, abs=0.01)  # base's 40 + the Code row's 1
    nodes = [LIGHT["nodes"][0], SET, {**SET, "name": "If", "type": "n8n-nodes-base.if"}]
    flow = {"name": "f", "nodes": nodes, "connections": _chained(nodes)}
    assert any(
        "regular-mode rows" in n and "n8n-nodes-base.if" in n for n in price_workflow(flow, table, mode="queue").notes
    )


def test_a_queue_mode_answer_is_priced_from_the_queue_figures():
    table = load_node_costs()
    assert table.queue is not None and table.queue.base.roles["worker"] > table.queue.base.roles["main"]
    code, out, err = advise("--rps", "60", "--json", "--workflow", LIGHT_PATH)
    assert code == 0, err
    data = json.loads(out)
    assert data["mode"] == "queue"  # 60/s of light: the search's answer is queue mode
    price = data["workflow_price"]
    assert data["request"]["priced_mode"] == price["mode"] == "queue"
    assert price["overhead_ratio_to_light"][0] == pytest.approx(1.0, abs=1e-6)  # light against light, in queue mode
    assert price["role_ms"]["worker"] > price["role_ms"]["main"]  # the worker runs the execution
    code, out, err = advise("--rps", "2", "--vcpu", "2", "--json", "--workflow", LIGHT_PATH)
    data = json.loads(out)
    assert data["mode"] != "queue" and data["request"]["priced_mode"] == "regular"
