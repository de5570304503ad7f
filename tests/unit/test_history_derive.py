"""What a history derives, pure: rates (mean, busiest minute, 99th-percentile second), triggers and their rules,
the CPU/waiting split per node family, node timings with nesting and parked waits, anonymisation, the mix entries
and their what-if scaling, the window flags and the file's format check."""

from __future__ import annotations

import json
import random

import pytest

from n8n_sizer.advisor.workflow_price import load_node_costs
from n8n_sizer.errors import InputError
from n8n_sizer.history.anonymise import Anonymiser
from n8n_sizer.history.arrivals import busiest_minute, combine, minutes_of, p99_second, runs_of, summarise
from n8n_sizer.history.file import history_json, load_history
from n8n_sizer.history.mix_input import mix_entries, parse_scales, workflow_profile
from n8n_sizer.history.record import History, NodeInfo, ReadInfo, SeenTrigger, WorkflowHistory
from n8n_sizer.history.split import family_of, split_node_time
from n8n_sizer.history.timings import SampleTimings, durations
from n8n_sizer.history.trigger_seen import trigger_of
from n8n_sizer.history.window import parse_time, window_from
from n8n_sizer.n8n.history_api import ExecutionItem, NodeRun

T0 = 1_800_000_000.0
TABLE = load_node_costs()


# --- rates ---------------------------------------------------------------------------------------------------


def test_a_schedule_every_5_s_is_0_2_per_s_every_way():
    starts = [T0 + 5 * i for i in range(120)]  # 10 minutes
    r = summarise(starts, T0, 600.0)
    assert r.executions == 120
    assert r.per_s_mean == pytest.approx(0.2)
    assert r.busiest_minute_per_s == pytest.approx(12 / 60)
    assert r.p99_second_per_s == 1.0  # 20% of seconds see one start
    assert r.minutes == ((0, 12, 10),)  # one run: 12 a minute for 10 minutes
    assert r.per_second_counts == {1: 120}


def test_poisson_arrivals_give_a_p99_second_above_the_mean_and_a_busiest_minute_near_it():
    rnd = random.Random(7)
    t, starts = T0, []
    while t < T0 + 3600:
        t += rnd.expovariate(2.0)
        starts.append(t)
    r = summarise(starts, T0, 3600.0)
    assert r.per_s_mean == pytest.approx(2.0, rel=0.05)
    assert 5 <= r.p99_second_per_s <= 8  # Poisson(2): P(N >= 6) ~ 1.7%, P(N >= 7) ~ 0.45%
    assert 2.0 < r.busiest_minute_per_s < 2.8
    assert sum(r.per_second_counts.values()) <= 3600


def test_a_burst_minute_is_found_and_its_offset_named():
    starts = [T0 + 10 * i for i in range(60)] + [T0 + 300 + i * 0.25 for i in range(240)]  # 4/s in minute 5
    r = summarise(starts, T0, 600.0)
    assert r.busiest_minute_per_s == pytest.approx((240 + 6) / 60)
    assert r.busiest_minute_offset_s == 300.0


def test_p99_second_counts_the_empty_seconds():
    assert p99_second({1: 10}, 1000.0) == 0  # 1% of seconds busy: the 99th percentile second is empty
    assert p99_second({1: 11}, 1000.0) == 1
    assert p99_second({3: 5, 1: 20}, 1000.0) == 1


def test_minutes_round_trip_and_add_up_across_workflows():
    per_minute = {0: 3, 1: 3, 2: 3, 5: 1, 6: 2}
    runs = runs_of(per_minute)
    assert runs == ((0, 3, 3), (5, 1, 1), (6, 2, 1))
    assert minutes_of(runs) == per_minute
    a = summarise([T0 + 1, T0 + 61], T0, 120.0)
    b = summarise([T0 + 2, T0 + 3], T0, 120.0)
    total = combine([(a, 1.0), (b, 3.0)], 120.0)
    assert total == {0: 1 + 6, 1: 1}
    assert busiest_minute(total) == pytest.approx(7 / 60)


def test_starts_outside_the_window_are_not_counted():
    r = summarise([T0 - 1, T0 + 1, T0 + 200], T0, 100.0)
    assert r.executions == 1


# --- triggers ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("node_type", "params", "kind", "rule"),
    [
        ("n8n-nodes-base.webhook", {}, "webhook", None),
        ("n8n-nodes-base.formTrigger", {}, "form", None),
        ("@n8n/n8n-nodes-langchain.chatTrigger", {}, "chat", None),
        (
            "n8n-nodes-base.scheduleTrigger",
            {"rule": {"interval": [{"field": "seconds", "secondsInterval": 5}]}},
            "schedule",
            "every 5 seconds",
        ),
        (
            "n8n-nodes-base.scheduleTrigger",
            {"rule": {"interval": [{"field": "cronExpression", "expression": "*/5 * * * *"}]}},
            "schedule",
            "cron */5 * * * *",
        ),
        ("n8n-nodes-base.scheduleTrigger", {"rule": {"interval": [{}]}}, "schedule", "every 1 day"),
        ("n8n-nodes-base.interval", {"interval": 30, "unit": "minutes"}, "schedule", "every 30 minutes"),
        ("n8n-nodes-base.slackTrigger", {}, "app", None),
        ("n8n-nodes-base.manualTrigger", {}, "manual", None),
        ("n8n-nodes-base.executeWorkflowTrigger", {}, "sub-workflow", None),
        ("n8n-nodes-base.errorTrigger", {}, "error", None),
    ],
)
def test_trigger_kinds_and_rules(node_type, params, kind, rule):
    t = trigger_of([(node_type, False, params), ("n8n-nodes-base.set", False, {})])
    assert (t.kind, t.rule) == (kind, rule)


def test_a_disabled_trigger_does_not_count_and_the_webhook_wins_over_manual():
    assert trigger_of([("n8n-nodes-base.webhook", True, {})]).kind == "none"
    both = [("n8n-nodes-base.manualTrigger", False, {}), ("n8n-nodes-base.webhook", False, {})]
    assert trigger_of(both).kind == "webhook"


def test_a_hostile_schedule_rule_is_bounded():
    params = {"rule": {"interval": [{"field": "cronExpression", "expression": "x" * 10_000}] * 50}}
    rule = trigger_of([("n8n-nodes-base.scheduleTrigger", False, params)]).rule
    assert rule is not None and len(rule) <= 160


# --- the split -----------------------------------------------------------------------------------------------


def test_a_calling_node_waits_for_all_but_its_priced_cpu():
    row = TABLE.row("n8n-nodes-base.httpRequest").cpu.ms
    family, cpu, wait = split_node_time("n8n-nodes-base.httpRequest", 205.0, 1.0, TABLE)
    assert family == "call"
    assert cpu == pytest.approx(row)
    assert wait == pytest.approx(205.0 - row)


@pytest.mark.parametrize(
    ("node_type", "family", "all_cpu"),
    [
        ("n8n-nodes-base.code", "code", True),
        ("n8n-nodes-base.set", "cpu", True),
        ("n8n-nodes-base.wait", "wait", False),
        ("n8n-nodes-base.slack", "call", False),
        ("@n8n/n8n-nodes-langchain.lmChatOpenAi", "model", False),
        ("n8n-nodes-base.executeWorkflow", "sub-workflow", False),
        ("n8n-nodes-base.webhook", "trigger", False),
    ],
)
def test_families(node_type, family, all_cpu):
    got, cpu, wait = split_node_time(node_type, 1000.0, 1.0, TABLE)
    assert got == family == family_of(node_type)
    assert cpu + wait == pytest.approx(0.0 if family == "trigger" else 1000.0)
    assert (wait == 0.0) == (all_cpu or family == "trigger")


def test_a_call_faster_than_its_price_has_no_negative_wait():
    _, cpu, wait = split_node_time("n8n-nodes-base.httpRequest", 0.5, 1.0, TABLE)
    assert (cpu, wait) == (0.5, 0.0)


# --- node timings ----------------------------------------------------------------------------------------------


def _exec(i, runs, took_s, status="success"):
    return ExecutionItem(
        id=str(i),
        workflow_id="w",
        mode="webhook",
        status=status,
        started_s=T0 + i,
        stopped_s=T0 + i + took_s,
        wait_till_s=None,
        retry_of=None,
        runs=tuple(
            NodeRun(node=n, start_ms=(T0 + i) * 1000 + off, execution_ms=ms, status="success") for n, off, ms in runs
        ),
        node_types={
            "Webhook": "n8n-nodes-base.webhook",
            "Call": "n8n-nodes-base.httpRequest",
            "Agent": "@n8n/n8n-nodes-langchain.agent",
            "Model": "@n8n/n8n-nodes-langchain.lmChatOpenAi",
            "Wait": "n8n-nodes-base.wait",
            "Code": "n8n-nodes-base.code",
        },
    )


def test_timings_per_node_and_time_in_flight():
    sample = [
        _exec(i, [("Webhook", 0, 1), ("Call", 2, 200 + i), ("Code", 210, 10)], 0.215 + i / 1000) for i in range(10)
    ]
    t = SampleTimings(sample, {}, TABLE)
    assert t.sampled == 10
    call = next(x for x in t.node_timings if x.name == "Call")
    assert call.per_execution_ms == pytest.approx(204.5)
    assert call.wait_ms == pytest.approx(204.5 - TABLE.row("n8n-nodes-base.httpRequest").cpu.ms)
    assert t.running_ms == pytest.approx(219.5)
    assert t.parked_ms == 0


def test_a_model_inside_an_agent_is_counted_once():
    sample = [_exec(i, [("Webhook", 0, 1), ("Agent", 2, 1000), ("Model", 10, 900)], 1.01) for i in range(3)]
    t = SampleTimings(sample, {}, TABLE)
    model = next(x for x in t.node_timings if x.name == "Model")
    agent = next(x for x in t.node_timings if x.name == "Agent")
    assert model.inside == "Agent" and model.per_execution_ms == 0
    assert agent.per_execution_ms == pytest.approx(1000)


def test_a_parked_wait_is_not_running():
    # a Wait of 10 minutes: n8n parks it; the execution's duration holds it, no node run does
    parked = [_exec(i, [("Webhook", 0, 1), ("Wait", 2, 1), ("Code", 600_005, 5)], 600.01 + i / 1000) for i in range(4)]
    t = SampleTimings(parked, {}, TABLE)
    assert t.parked_ms == pytest.approx(600_000, rel=0.01)
    assert t.running_ms < 1000
    assert any("parked" in n for n in t.notes)
    # the same with the Wait's run holding the parked time
    long_wait = [_exec(i, [("Webhook", 0, 1), ("Wait", 2, 600_000), ("Code", 600_005, 5)], 600.01) for i in range(4)]
    t2 = SampleTimings(long_wait, {}, TABLE)
    assert t2.running_ms < 1000
    assert next(x for x in t2.node_timings if x.name == "Wait").parked_runs == 4


def test_durations_summary():
    d = durations([10.0, 20.0, 30.0, 40.0])
    assert (d.executions, d.mean_ms, d.p50_ms, d.max_ms) == (4, 25.0, 20.0, 40.0)
    assert durations([]).mean_ms is None


# --- a whole history --------------------------------------------------------------------------------------------


def _workflow(wid, name, rate, wait_ms=0.0, code_ms=0.0, nodes=None, window=600.0):
    starts = [T0 + i / rate for i in range(int(rate * window))]
    from n8n_sizer.history.record import NodeTime

    timings = [
        NodeTime(
            name="Call",
            type="n8n-nodes-base.httpRequest",
            family="call",
            runs_per_execution=1,
            per_execution_ms=wait_ms + 2,
            cpu_ms=2,
            wait_ms=wait_ms,
        ),
        NodeTime(
            name="Code",
            type="n8n-nodes-base.code",
            family="code",
            runs_per_execution=1,
            per_execution_ms=code_ms,
            cpu_ms=code_ms,
            wait_ms=0,
        ),
    ]
    return WorkflowHistory(
        id=wid,
        name=name,
        trigger=SeenTrigger(kind="webhook"),
        nodes=nodes
        or (
            NodeInfo(name="Webhook", type="n8n-nodes-base.webhook"),
            NodeInfo(name="Call", type="n8n-nodes-base.httpRequest"),
            NodeInfo(name="Code", type="n8n-nodes-base.code", expressions=2),
        ),
        rates=summarise(starts, T0, window),
        durations=durations([wait_ms + code_ms + 50]),
        node_timings=tuple(timings),
        running_ms=wait_ms + code_ms + 50,
    )


def _history(*workflows, window=600.0):
    starts = []
    for w in workflows:
        starts += [
            T0 + m * 60 + k * 60 / c for m0, c, n in w.rates.minutes for m in range(m0, m0 + n) for k in range(c)
        ]
    info = ReadInfo(
        instance="http://127.0.0.1:5678",
        read_at_s=T0 + window,
        since_s=T0,
        until_s=T0 + window,
        window_start_s=T0,
        window_end_s=T0 + window,
    )
    return History(read=info, total=summarise(starts, T0, window), workflows=workflows)


def test_a_workflow_profile_prices_its_nodes_and_takes_its_measured_waits():
    w = _workflow("1", "orders", 2.0, wait_ms=300.0, code_ms=22.47)
    profile, note = workflow_profile(w, TABLE)
    code_row = TABLE.row_by_id("code").cpu.ms
    assert profile.wait_ms == pytest.approx(300.0)
    assert profile.code_cpu_ms == pytest.approx(22.47 - code_row)
    assert profile.code_nodes == 1
    assert note == ""
    # the nodes' own price: one more Set with expressions costs more n8n overhead than without it
    more = _workflow("1", "orders", 2.0, wait_ms=300.0, code_ms=22.47)
    more = more.model_copy(
        update={"nodes": (*more.nodes, NodeInfo(name="Tag", type="n8n-nodes-base.set", expressions=4))}
    )
    bigger, _ = workflow_profile(more, TABLE)
    assert 0.3 < profile.overhead_ratio < bigger.overhead_ratio < 5.0


def test_mix_entries_and_what_if_scaling():
    h = _history(_workflow("1", "orders", 2.0, wait_ms=300.0), _workflow("2", "sync", 0.2))
    mix = mix_entries(h)
    assert [e.name for e in mix.entries] == ["orders", "sync"]
    assert sum(e.rate_per_s for e in mix.entries) == pytest.approx(2.2)
    assert mix.burst_per_s == pytest.approx(2.2, rel=0.02)
    scaled = mix_entries(h, ["3", "sync=5"])
    rates = {e.name: e.rate_per_s for e in scaled.entries}
    assert rates == pytest.approx({"orders": 6.0, "sync": 3.0})
    assert scaled.burst_per_s == pytest.approx(9.0, rel=0.02)
    by_id = mix_entries(h, ["2=5"])  # a workflow's id names it too
    assert {e.name: e.rate_per_s for e in by_id.entries}["sync"] == pytest.approx(1.0)
    with pytest.raises(InputError, match="no workflow of that name"):
        mix_entries(h, ["nosuch=2"])


@pytest.mark.parametrize("bad", ["0", "-1", "x", "=3", "a=b", "inf", "1e9"])
def test_bad_scales_are_one_line(bad):
    with pytest.raises(InputError, match="--scale"):
        parse_scales([bad])


def test_anonymise_hashes_names_stably_within_one_file_and_keeps_what_sizing_needs():
    h = _history(_workflow("1", "Payroll to ACME", 2.0, wait_ms=300.0), _workflow("2", "sync", 0.2))
    a = Anonymiser(b"k" * 32).history(h)
    text = history_json(a)
    assert "Payroll" not in text and "ACME" not in text and "127.0.0.1" not in text
    assert a.anonymised and a.read.instance is None
    w = a.workflows[0]
    assert w.name.startswith("wf-") and w.id.startswith("id-")
    # the same node name maps to the same hash in the node list and in the timings
    assert {n.name for n in w.nodes} >= {t.name for t in w.node_timings}
    # sizing sees the same numbers
    plain, anon = mix_entries(h), mix_entries(a)
    assert [e.rate_per_s for e in plain.entries] == [e.rate_per_s for e in anon.entries]
    assert [e.profile.model_dump(exclude={"name"}) for e in plain.entries] == [
        e.profile.model_dump(exclude={"name"}) for e in anon.entries
    ]
    # another file, another key: the same name gives another hash
    assert Anonymiser().history(h).workflows[0].name != w.name


def test_the_file_round_trips_and_refuses_another_format(tmp_path):
    h = _history(_workflow("1", "orders", 2.0))
    path = tmp_path / "h.json"
    path.write_text(history_json(h))
    assert load_history(path) == h
    doc = json.loads(history_json(h))
    doc["format"] = "n8n-sizer-history/9"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match="format"):
        load_history(path)
    doc["format"] = "n8n-sizer-history/1"
    doc["workflows"][0]["rates"]["executions"] = -3
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match="workflows.0.rates.executions"):
        load_history(path)
    doc["workflows"][0]["rates"]["executions"] = 3
    doc["workflows"][0]["payload"] = {"secret": 1}  # an undeclared field is refused, not carried
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match="payload"):
        load_history(path)


# --- the window flags ------------------------------------------------------------------------------------------


def test_since_and_until():
    now = T0
    assert parse_time("--since", "7d", now) == now - 7 * 86400
    assert parse_time("--since", "90m", now) == now - 5400
    from datetime import UTC, datetime

    assert parse_time("--since", "2027-01-15T08:00:00Z", now) == datetime(2027, 1, 15, 8, tzinfo=UTC).timestamp()
    assert parse_time("--since", "2027-01-15T08:00:00", now) == datetime(2027, 1, 15, 8, tzinfo=UTC).timestamp()
    assert window_from(None, None, now) == (now - 7 * 86400, now)
    assert window_from("1h", "30m", now) == (now - 3600, now - 1800)
    for since, until, match in (("yesterday", None, "neither"), ("1h", "2h", "not before"), ("999d", None, "400 days")):
        with pytest.raises(InputError, match=match):
            window_from(since, until, now)


# --- captured answers of a real n8n 2.41.1 (tests/data/n8n_api, 2026-12-03) ----------------------------------------


def _captured(name):
    from pathlib import Path

    return json.loads((Path(__file__).resolve().parents[1] / "data" / "n8n_api" / f"{name}.json").read_text())


def test_real_answers_parse_into_runs_and_workflows():
    from n8n_sizer.n8n.history_api import WorkflowItem

    http = ExecutionItem.from_wire(_captured("data_http")["data"][0], "test", with_data=True)
    assert http.status == "success" and http.mode == "webhook"
    assert {r.node: r.execution_ms for r in http.runs} == {"Webhook": 1, "Call": 257}
    assert http.node_types["Call"] == "n8n-nodes-base.httpRequest"
    assert http.stopped_s - http.started_s == pytest.approx(0.279)
    wait = ExecutionItem.from_wire(_captured("data_wait")["data"][0], "test", with_data=True)
    assert {r.node: r.execution_ms for r in wait.runs}["Wait"] == 1001
    park = ExecutionItem.from_wire(_captured("data_park")["data"][0], "test", with_data=True)
    assert park.status == "waiting" and park.wait_till_s - park.started_s == pytest.approx(70.0, abs=0.1)
    assert [r.status for r in park.runs if r.node == "Wait"] == ["waiting"]
    listed = [ExecutionItem.from_wire(e, "test") for e in _captured("execs")["data"]]
    assert [e.mode for e in listed][:3] == ["trigger"] * 3 and listed[0].runs is None
    workflow = WorkflowItem.from_wire(_captured("workflows")["data"][0], "test")
    assert [n.type for n in workflow.nodes] == ["n8n-nodes-base.webhook", "n8n-nodes-base.wait", "n8n-nodes-base.noOp"]
    assert workflow.active is True and workflow.created_s is not None


def test_real_answers_give_node_times_split_by_family():
    sample = [ExecutionItem.from_wire(e, "t", with_data=True) for e in _captured("data_http")["data"]]
    t = SampleTimings(sample, {}, TABLE)
    call = next(x for x in t.node_timings if x.name == "Call")
    assert call.family == "call" and call.wait_ms == pytest.approx(257 - TABLE.row("n8n-nodes-base.httpRequest").cpu.ms)
    parked = [ExecutionItem.from_wire(e, "t", with_data=True) for e in _captured("data_park")["data"]]
    assert SampleTimings(parked, {}, TABLE).sampled == 0  # still waiting: not finished, not counted


# --- the replay's synthesised workflows ------------------------------------------------------------------------


def test_replay_synthesises_each_workflow_in_the_same_shape():
    from n8n_sizer.history.record import NodeTime
    from n8n_sizer.history.replay import replay_plan

    w = _workflow("1", "orders", 2.0, wait_ms=300.0, code_ms=12.47)
    wait = NodeTime(
        name="Pause",
        type="n8n-nodes-base.wait",
        family="wait",
        runs_per_execution=1,
        per_execution_ms=1000.7,
        cpu_ms=0.7,
        wait_ms=1000.0,
    )
    w = w.model_copy(
        update={
            "nodes": (
                *w.nodes,
                NodeInfo(name="Pause", type="n8n-nodes-base.wait"),
                NodeInfo(name="Tidy", type="n8n-nodes-base.set", expressions=3),
            ),
            "node_timings": (*w.node_timings, wait),
        }
    )
    plan = replay_plan(_history(w, _workflow("2", "sync", 0.2)), "http://127.0.0.1:7000", 1000.0, "t1")
    first = plan.workflows[0]
    types = [n["type"].split(".")[-1] for n in first.definition["nodes"]]
    assert types == ["webhook", "httpRequest", "code", "wait", "set"]
    assert first.rate_per_s == pytest.approx(2.0) and first.webhook_path == "replay-w1-t1"
    assert first.routes_ms == {"/r/w1/n2": 300.0}
    http = first.definition["nodes"][1]
    assert http["parameters"]["url"] == "http://127.0.0.1:7000/r/w1/n2"
    loop = first.definition["nodes"][2]["parameters"]["jsCode"]
    assert f"const n = {round((12.47 - TABLE.row_by_id('code').cpu.ms) * 1000)};" in loop
    assert first.definition["nodes"][3]["parameters"]["amount"] == 1.0
    tidy = first.definition["nodes"][4]["parameters"]["assignments"]["assignments"]
    assert len(tidy) == 3 and all(a["value"].startswith("={{") for a in tidy)
    assert list(first.definition["connections"]) == [n["name"] for n in first.definition["nodes"][:-1]]
    with pytest.raises(ValueError):
        replay_plan(_history(w), "http://127.0.0.1:7000", 1000.0, "Bad Tag")


def test_nodes_one_after_another_are_not_nested():
    """n8n's times are whole milliseconds: a node that starts as the one before ends is next to it, not inside."""
    chain = [_exec(i, [("Webhook", 0, 1), ("Call", 1, 11), ("Code", 12, 0)], 0.02) for i in range(3)]
    t = SampleTimings(chain, {}, TABLE)
    assert all(x.inside is None for x in t.node_timings)
    at_once = [_exec(i, [("Webhook", 0, 0), ("Code", 0, 0)], 0.01) for i in range(3)]  # a schedule's NoOp, 0 ms
    assert all(x.inside is None for x in SampleTimings(at_once, {}, TABLE).node_timings)
    same_ms = [_exec(i, [("Webhook", 0, 1), ("Agent", 1, 900), ("Model", 1, 800)], 1.0) for i in range(3)]
    nested = {x.name: x.inside for x in SampleTimings(same_ms, {}, TABLE).node_timings}
    assert nested == {"Webhook": None, "Agent": None, "Model": "Agent"}
