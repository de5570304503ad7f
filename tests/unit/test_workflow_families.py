"""Workflows as people write them, priced: node families, triggers and their rates, branches walked as paths, waits
(held and parked), AI nodes with their models, and hostile exports (tests/data/workflows/: hand-written look-alikes
of shapes seen in public collections, docs/workflow-price.md#the-corpus)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from n8n_sizer.advisor.workflow_price import load_node_costs, price_workflow
from n8n_sizer.advisor.workflow_price.families import family_of
from n8n_sizer.advisor.workflow_price.triggers import cron_rate
from n8n_sizer.advisor.workflow_price.waits import DEFAULTS, PARK_THRESHOLD_MS
from n8n_sizer.errors import InputError

DATA = Path(__file__).resolve().parents[1] / "data" / "workflows"
TABLE = load_node_costs()


def _load(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text())


def _price(name: str, **kwargs):
    return price_workflow(_load(name), TABLE, **kwargs)


def _line(price, name: str):
    return next(line for line in price.lines if line.name == name)


def test_the_look_alikes_are_priced_and_at_most_a_tenth_of_their_nodes_is_not():
    files = sorted(DATA.glob("*.json"))
    assert len(files) >= 30
    nodes = unpriced = 0
    for path in files:
        price = price_workflow(json.loads(path.read_text()), TABLE)
        for line in price.lines:
            if line.priced_by in ("trigger", "none"):
                continue
            nodes += 1
            unpriced += line.priced_by == "unknown"
    assert nodes > 80 and unpriced / nodes <= 0.10, (unpriced, nodes)


@pytest.mark.parametrize(
    "node_type, family",
    [
        ("n8n-nodes-base.googleSheets", "app"),
        ("n8n-nodes-base.googleSheetsTool", "ai.tool-call"),
        ("n8n-nodes-base.gmailTrigger", "trigger.poll"),
        ("n8n-nodes-base.telegramTrigger", "trigger.app-webhook"),
        ("n8n-nodes-base.cron", "trigger.schedule"),
        ("n8n-nodes-base.interval", "trigger.schedule"),
        ("n8n-nodes-base.start", "trigger.manual"),
        ("n8n-nodes-base.executeWorkflowTrigger", "trigger.subworkflow"),
        ("n8n-nodes-base.errorTrigger", "trigger.error"),
        ("@n8n/n8n-nodes-langchain.chatTrigger", "trigger.chat"),
        ("n8n-nodes-base.formTrigger", "trigger.form"),
        ("n8n-nodes-base.function", "code"),
        ("n8n-nodes-base.postgres", "database"),
        ("@n8n/n8n-nodes-langchain.agent", "ai.agent"),
        ("@n8n/n8n-nodes-langchain.lmChatAnthropic", "ai.model"),
        ("@n8n/n8n-nodes-langchain.vectorStoreInMemory", "ai.vector-store"),
        ("@n8n/n8n-nodes-langchain.vectorStorePinecone", "ai.vector-store-remote"),
        ("@n8n/n8n-nodes-langchain.memoryBufferWindow", "ai.memory"),
        ("@n8n/n8n-nodes-langchain.memoryPostgresChat", "ai.memory-remote"),
        ("@n8n/n8n-nodes-langchain.openAi", "ai.model-app"),
        ("n8n-nodes-base.stopAndError", "stop"),
        ("n8n-nodes-base.splitInBatches", "loop"),
    ],
)
def test_node_types_are_sorted_into_families_from_n8ns_own_node_list(node_type, family):
    assert family_of(node_type).id == family


def test_a_community_node_has_no_family_and_stays_unpriced_and_named():
    price = _price("community-node")
    assert family_of("n8n-nodes-klicktipp.klicktipp") is None
    assert price.unknown_types == ("n8n-nodes-klicktipp.klicktipp",)


@pytest.mark.parametrize(
    "name, kind, rate",
    [
        ("schedule-http-sheets", "schedule", 1 / 3600),
        ("schedule-weekly-cron", "schedule", 1 / 604800),
        ("cron-legacy-function", "schedule", 1 / 900),  # everyX 15 minutes
        ("interval-legacy", "schedule", 1 / 30),
        ("poll-gmail-telegram", "poll", 1 / 60),
        ("old-start-node", "manual", None),
        ("subworkflow-trigger", "subworkflow", None),
        ("error-workflow", "error", None),
        ("chat-agent-memory-tool", "chat", None),
        ("form-if-branches", "form", None),
        ("telegram-bot-agent", "app-webhook", None),
        ("mcp-server", "mcp", None),
        ("webhook-set", "webhook", None),
    ],
)
def test_the_trigger_decides_what_starts_executions_and_at_what_rate(name, kind, rate):
    price = _price(name, rps=10)
    assert price.trigger.kind == kind
    if rate is None:
        assert price.trigger.rate_per_s is None
    else:
        assert price.trigger.rate_per_s == pytest.approx(rate, rel=0.01)
    said = price.notes[0]
    if kind in ("schedule", "poll"):
        assert "not started by a webhook" in said and "--rps 10" in said and "x the" in said
    if kind == "schedule":
        assert "scheduled" in said
    if kind in ("chat", "form", "mcp", "app-webhook"):
        assert "is a webhook" in said


def test_cron_expressions_imply_their_rate():
    assert cron_rate("*/5 * * * *") == pytest.approx(1 / 300)
    assert cron_rate("0 9 * * 1-5") == pytest.approx(5 / 604800, rel=0.01)
    assert cron_rate("30 0 9 * * *") == pytest.approx(1 / 86400)  # six fields: seconds first
    assert cron_rate("0 0 1 jan *") == pytest.approx(1 / (365.25 * 86400), rel=0.01)
    for bad in ("nonsense", "* * *", "99 * * * *", "*/0 * * * *"):
        assert cron_rate(bad) is None


def test_exclusive_branches_cost_the_dearest_branch_or_the_mix_given():
    price = _price("switch-three-responds")
    runs = sorted(_line(price, f"Respond {x}").runs for x in "ABC")
    assert runs == [0.0, 0.0, 1.0]  # one Respond per execution, not three
    one = TABLE.row("n8n-nodes-base.respondToWebhook").cpu.ms
    assert sum(_line(price, f"Respond {x}").cost_ms for x in "ABC") == pytest.approx(one, abs=0.01)
    assert any("dearest" in n for n in price.notes)
    mixed = _price("switch-three-responds", branches={"Respond A": 0.5, "Respond B": 0.25})
    assert [_line(mixed, f"Respond {x}").runs for x in "ABC"] == [0.5, 0.25, 0.25]
    with pytest.raises(InputError, match="add up to"):
        _price("switch-three-responds", branches={"Respond A": 0.8, "Respond B": 0.8})
    with pytest.raises(InputError, match="no node of that name"):
        _price("switch-three-responds", branches={"Nowhere": 0.5})


def test_a_node_reached_on_every_path_runs_once_and_a_merge_runs_once():
    form = _price("form-if-branches")
    assert _line(form, "Airtable").runs == 1.0
    assert {_line(form, "Slack").runs, _line(form, "Set").runs} == {0.0, 1.0}
    merged = _price("merge-join")
    assert _line(merged, "Merge").runs == 1.0 and _line(merged, "Set").runs == 1.0
    assert _line(merged, "Notion").runs == _line(merged, "Airtable").runs == 1.0


def test_an_error_output_is_not_taken_and_a_loop_body_runs_once_per_batch():
    stopped = _price("error-output-stop")
    assert _line(stopped, "Set").runs == 1.0 and _line(stopped, "Stop and Error").runs == 0.0
    looped = _price("loop-over-items", items=3)
    assert _line(looped, "HTTP Request").runs == 3.0  # batch size 1: three batches
    assert any("close a loop" in n for n in looped.notes)
    # the loop's HTTP call waits once per item in each of its runs
    assert _line(looped, "HTTP Request").wait_ms == pytest.approx(3 * 3 * DEFAULTS["http"].ms)


def test_waits_under_65_s_hold_the_execution_and_longer_ones_are_parked():
    held = _price("webhook-wait-10s")
    assert held.wait_ms == pytest.approx(10_000) and held.parked_ms == 0
    parked = _price("webhook-wait-2h")
    assert parked.parked_ms == pytest.approx(7_200_000) and parked.wait_ms == pytest.approx(DEFAULTS["app"].ms)
    assert any("parked in the database" in n for n in parked.notes)
    event = _price("wait-for-webhook")
    assert event.wait_ms == 0 and any("parked" in n for n in event.notes)
    approval = _price("send-and-wait")
    assert approval.wait_ms == 0 and any("parked" in n for n in approval.notes)
    doc = _load("webhook-wait-10s")
    wait = next(n for n in doc["nodes"] if n["name"] == "Wait")
    for seconds, parked_ in ((PARK_THRESHOLD_MS / 1000 - 1, False), (PARK_THRESHOLD_MS / 1000, True)):
        wait["parameters"]["amount"] = seconds
        price = price_workflow(doc, TABLE)
        assert (price.parked_ms > 0) is parked_


def test_an_ai_agent_waits_on_its_model_once_and_once_more_per_tool_round():
    price = _price("chat-agent-memory-tool")
    model = DEFAULTS["model"].ms
    assert price.model_calls == 2 and price.model_wait_ms == pytest.approx(2 * model)
    assert any("model calls 2 x" in n and "gpt-4.1-mini" in n for n in price.notes)
    given = _price("chat-agent-memory-tool", waits=["OpenAI Chat Model=2000"])
    assert given.model_wait_ms == pytest.approx(4000)
    by_type = _price("chat-agent-memory-tool", waits=["lmChatOpenAi=1000"])
    assert by_type.model_wait_ms == pytest.approx(2000)
    chain = _price("chain-parser")
    assert chain.model_calls == 1
    rag = _price("rag-query-agent")
    # the agent (a tool round: 2 calls) and the vector store tool's own model (1 call); embeddings apart
    assert rag.model_calls == 3 and any("embedding model calls" in n for n in rag.notes)


def test_every_call_out_waits_and_wait_ms_sets_every_call_not_named_by_wait():
    price = _price("postgres-redis")
    assert price.wait_ms == pytest.approx(2 * DEFAULTS["database"].ms)
    every = _price("postgres-redis", wait_ms_per_call=100.0, waits=["Redis=7"])
    assert every.wait_ms == pytest.approx(107)
    no_calls = _price("webhook-set", wait_ms_per_call=250.0)
    assert no_calls.wait_ms == pytest.approx(250) and any(
        "no node of this workflow calls out" in n for n in no_calls.notes
    )
    for bad in (["x"], ["Redis=abc"], ["Redis=-1"], ["Redis=1e300"], ["=5"]):
        with pytest.raises(InputError, match="--wait"):
            _price("postgres-redis", waits=bad)


def test_sub_nodes_wired_on_the_main_path_still_reach_their_root():
    price = _price("sub-nodes-on-main-path")
    assert _line(price, "RAG Agent").runs == 1.0 and _line(price, "Append Sheet").runs == 1.0
    assert price.model_calls == 1


def test_model_calls_outside_the_sized_flow_are_named_with_their_wait():
    price = _price("two-flows-webhook-and-chat")
    assert price.trigger.kind == "webhook" and price.model_calls == 0
    said = [n for n in price.notes if "AI node 'AI Agent'" in n]
    assert said and "model call" in said[0] and "When chat message received" in said[0]


def test_a_schedule_only_workflow_is_said_to_be_scheduled_without_rps():
    price = _price("schedule-weekly-cron")
    assert "scheduled" in price.notes[0] and "sized for that rate" in price.notes[0]


def test_notes_disabled_and_unreached_nodes_cost_nothing():
    price = _price("notes-and-disabled")
    assert _line(price, "Slack").priced_by == "none" and _line(price, "Sticky Note").cost_ms == 0
    frag = _price("no-trigger-fragment")
    assert frag.trigger is None and _line(frag, "Code").runs == 1.0
    assert "no trigger node" in frag.notes[0]


def _one(node: dict, extra_nodes=(), connections=None) -> dict:
    hook = {"name": "Webhook", "type": "n8n-nodes-base.webhook", "typeVersion": 2, "parameters": {}}
    conns = (
        connections
        if connections is not None
        else {"Webhook": {"main": [[{"node": node["name"], "type": "main", "index": 0}]]}}
    )
    return {"name": "h", "nodes": [hook, node, *extra_nodes], "connections": conns}


@pytest.mark.parametrize(
    "export, says",
    [
        (
            _one(
                {
                    "name": "W",
                    "type": "n8n-nodes-base.wait",
                    "typeVersion": 1.1,
                    "parameters": {"amount": 5, "unit": ["s"]},
                }
            ),
            "`unit`",
        ),
        (
            _one(
                {
                    "name": "W",
                    "type": "n8n-nodes-base.wait",
                    "typeVersion": 1.1,
                    "parameters": {"amount": 5, "unit": {"a": 1}},
                }
            ),
            "`unit`",
        ),
        (
            _one(
                {
                    "name": "W",
                    "type": "n8n-nodes-base.wait",
                    "typeVersion": 1.1,
                    "parameters": {"amount": 1e38, "unit": "days"},
                }
            ),
            "past any date",
        ),
        (
            _one({"name": "W", "type": "n8n-nodes-base.wait", "typeVersion": 1.1, "parameters": {"amount": [1]}}),
            "`amount`",
        ),
        (_one({"name": "X", "type": "n8n-nodes-base.set\x1b[31m", "parameters": {}}), "control or space"),
        (
            _one({"name": "X", "type": "n8n-nodes-base.set", "parameters": {}}, connections={"Webhook": ["x"]}),
            "not an object",
        ),
        (
            _one(
                {"name": "X", "type": "n8n-nodes-base.set", "parameters": {}},
                connections={"Webhook": {"main": [[{"x": 1}]]}},
            ),
            "target",
        ),
        (
            _one(
                {"name": "X", "type": "n8n-nodes-base.set", "parameters": {}},
                connections={"Webhook": {"main": [[{"node": "X", "index": -1}]]}},
            ),
            "input index",
        ),
    ],
)
def test_hostile_exports_are_refused_in_one_line_with_nothing_raw(export, says):
    with pytest.raises(InputError) as caught:
        price_workflow(export, TABLE)
    text = str(caught.value)
    assert says in text and "\n" not in text and "\x1b" not in text


def test_names_with_control_characters_are_echoed_clean_and_cycles_are_answered():
    evil = "Set\x1b[2J\u202e\x07"
    node = {"name": evil, "type": "n8n-nodes-base.set", "parameters": {}}
    loop = {"name": "Back", "type": "n8n-nodes-base.noOp", "parameters": {}}
    conns = {
        "Webhook": {"main": [[{"node": evil, "type": "main", "index": 0}]]},
        evil: {"main": [[{"node": "Back", "type": "main", "index": 0}]]},
        "Back": {"main": [[{"node": evil, "type": "main", "index": 0}]]},
    }
    price = price_workflow(_one(node, [loop], conns), TABLE)
    text = json.dumps(price.model_dump(), ensure_ascii=False)
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text
    assert _line(price, "Set[2J").runs == 1.0 and any("close a loop" in n for n in price.notes)


def test_a_type_without_its_package_is_read_as_n8n_s_own():
    """Some public collections write `httpRequest` for `n8n-nodes-base.httpRequest`: priced as that node, not as an
    unknown one."""
    flow = {
        "nodes": [
            {"name": "Hook", "type": "webhook", "parameters": {}},
            {"name": "Call", "type": "httpRequest", "parameters": {"url": "https://api.example.com/x"}},
            {"name": "Old", "type": "function", "parameters": {"functionCode": "return items;"}},
        ],
        "connections": {
            "Hook": {"main": [[{"node": "Call", "type": "main", "index": 0}]]},
            "Call": {"main": [[{"node": "Old", "type": "main", "index": 0}]]},
        },
    }
    price = price_workflow(flow, TABLE)
    assert price.trigger is not None and price.trigger.kind == "webhook"
    call, old = _line(price, "Call"), _line(price, "Old")
    assert call.type == "n8n-nodes-base.httpRequest" and call.priced_by != "unknown" and call.wait_ms > 0
    assert old.type == "n8n-nodes-base.function" and old.priced_by != "unknown"


def test_a_key_given_twice_is_read_as_n8n_reads_it_and_said(tmp_path):
    """JavaScript's JSON.parse (n8n's reader) keeps the last of two equal keys; some public exports have them (two
    connections from one node written as two keys): answered, the last one taken, and the answer says so."""
    from n8n_sizer.cli.advise.workflow import priced_profile

    text = (
        '{"nodes": [{"name": "Hook", "type": "n8n-nodes-base.webhook", "parameters": {}},'
        ' {"name": "A", "type": "n8n-nodes-base.set", "parameters": {}},'
        ' {"name": "B", "type": "n8n-nodes-base.httpRequest", "parameters": {}}],'
        ' "connections": {"Hook": {"main": [[{"node": "A", "type": "main", "index": 0}]]},'
        ' "Hook": {"main": [[{"node": "B", "type": "main", "index": 0}]]}}}'
    )
    path = tmp_path / "twice.json"
    path.write_text(text)
    _, price = priced_profile(path, items=None, cpu_ms=None, wait_ms=None, calibration=None, engine="default")
    assert price.notes[0].startswith("the file gives a key twice in one object ('Hook'")
    assert _line(price, "B").runs == 1 and _line(price, "A").runs == 0  # the last connection from Hook, as n8n


def test_a_nameless_node_and_an_empty_connection_kind_are_answered_and_said():
    """Seen in public collections: a node with no `name` (nothing can connect to it: n8n never runs it) and a
    connection kind holding `{}` instead of a list of outputs. Priced without them, each said in the notes."""
    flow = {
        "nodes": [
            {"name": "Hook", "type": "n8n-nodes-base.webhook", "parameters": {}},
            {"name": "Set", "type": "n8n-nodes-base.set", "parameters": {}},
            {"parameters": {"prompt": "a node with neither name nor type"}},
        ],
        "connections": {"Hook": {"main": [[{"node": "Set", "type": "main", "index": 0}]], "typeOptions": {}}},
    }
    price = price_workflow(flow, TABLE)
    assert _line(price, "Set").runs == 1 and len(price.lines) == 2
    assert any("1 node(s) without a name" in n for n in price.notes)
    assert any("1 connection kind(s) hold {} instead of a list" in n for n in price.notes)
