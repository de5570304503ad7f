"""The local stand-ins: an OpenAI-compatible server on 127.0.0.1 that speaks what n8n's AI nodes send, and the
rewrite that points a workflow's calls at it (a benchmark never calls the real services)."""

from __future__ import annotations

import base64
import json
import struct
import sys
import time
from pathlib import Path

import httpx
import pytest

from n8n_sizer.bench.calibrate import stand_in_plan
from n8n_sizer.errors import InputError
from n8n_sizer.standins.openai import StandInConfig, StandInServer
from n8n_sizer.standins.rewrite import apply_rewrite

DATA = Path(__file__).resolve().parents[1] / "data" / "workflows"
TOOL = {
    "type": "function",
    "function": {"name": "calculator", "parameters": {"type": "object", "properties": {"input": {"type": "string"}}}},
}


@pytest.fixture()
def server():
    s = StandInServer(StandInConfig(latency_ms=0, completion_tokens=3, dims=8)).serve()
    yield s
    s.close()


def test_chat_completions_call_a_tool_first_then_answer_and_count_tokens(server):
    url = server.base_url() + "/chat/completions"
    first = httpx.post(
        url, json={"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": [TOOL]}
    ).json()
    call = first["choices"][0]["message"]["tool_calls"][0]
    assert first["choices"][0]["finish_reason"] == "tool_calls" and call["function"]["name"] == "calculator"
    assert json.loads(call["function"]["arguments"]) == {"input": "1"}
    messages = [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": call["id"], "content": "1"}]
    second = httpx.post(url, json={"model": "m", "messages": messages, "tools": [TOOL]}).json()
    assert second["choices"][0]["message"]["content"] == "ok ok ok" and second["usage"]["completion_tokens"] == 3
    assert server.counts["chat"] == 2 and server.counts["tool_calls"] == 1


def test_the_responses_api_and_streams_speak_their_formats(server):
    url = server.base_url() + "/responses"
    tools = [{"type": "function", "name": "calculator", "parameters": TOOL["function"]["parameters"]}]
    first = httpx.post(url, json={"model": "m", "input": [{"role": "user", "content": "hi"}], "tools": tools}).json()
    assert first["output"][0]["type"] == "function_call" and first["status"] == "completed"
    done = [{"role": "user", "content": "hi"}, {"type": "function_call_output", "call_id": "c", "output": "1"}]
    second = httpx.post(url, json={"model": "m", "input": done, "tools": tools}).json()
    assert second["output"][0]["content"][0]["text"] == "ok ok ok"
    stream = httpx.post(url, json={"model": "m", "input": "hi", "stream": True}).text
    assert "event: response.output_text.delta" in stream and "event: response.completed" in stream
    chat = httpx.post(
        server.base_url() + "/chat/completions",
        json={"model": "m", "messages": [], "stream": True, "stream_options": {"include_usage": True}},
    ).text
    assert chat.strip().endswith("data: [DONE]") and '"usage"' in chat


def test_a_prompt_that_asks_for_json_gets_json_that_fits_its_schema(server):
    prompt = 'Answer.\n```json\n{"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "array", "items": {"type": "string"}}}}\n```'
    got = httpx.post(
        server.base_url() + "/chat/completions", json={"messages": [{"role": "user", "content": prompt}]}
    ).json()
    text = got["choices"][0]["message"]["content"]
    assert json.loads(text.removeprefix("```json\n").removesuffix("\n```")) == {"a": 1, "b": ["1"]}


def test_embeddings_are_deterministic_and_base64_when_asked(server):
    url = server.base_url() + "/embeddings"
    a = httpx.post(url, json={"input": ["x", "y"], "model": "e"}).json()
    b = httpx.post(url, json={"input": ["x"], "model": "e", "encoding_format": "base64", "dimensions": 8}).json()
    assert len(a["data"]) == 2 and len(a["data"][0]["embedding"]) == 8
    decoded = struct.unpack("<8f", base64.b64decode(b["data"][0]["embedding"]))
    assert decoded == pytest.approx(a["data"][0]["embedding"], abs=1e-6)
    assert httpx.get(server.base_url() + "/models").json()["data"]


def test_latency_is_configured_per_server_and_per_path(server):
    started = time.monotonic()
    httpx.post(server.base_url(latency_ms=300) + "/chat/completions", json={"messages": []})
    assert time.monotonic() - started >= 0.3
    started = time.monotonic()
    assert httpx.post(server.url + "/lat/200/bot1:x/sendMessage", json={}).json()["ok"] is True
    assert time.monotonic() - started >= 0.2


def test_the_rewrite_points_every_call_at_the_stand_in_and_swaps_other_models():
    export = json.loads((DATA / "webhook-agent-respond.json").read_text())  # an Anthropic chat model
    plan = stand_in_plan(export, swap=False, base_url="http://127.0.0.1:9")
    assert plan.summary() == "1 model" and list(plan.credentials) == ["openai-4500ms"]
    out = apply_rewrite(export, plan, "http://127.0.0.1:9", {"openai-4500ms": {"id": "c1", "name": "s"}})
    model = next(n for n in out["nodes"] if n["name"] == "Anthropic Chat Model")
    assert model["type"] == "@n8n/n8n-nodes-langchain.lmChatOpenAi" and model["credentials"]["openAiApi"]["id"] == "c1"
    assert plan.credentials["openai-4500ms"]["data"]["url"] == "http://127.0.0.1:9/lat/4500/v1"
    http = json.loads((DATA / "schedule-http-sheets.json").read_text())
    with pytest.raises(InputError, match="--swap-calls") as caught:
        stand_in_plan(http, swap=False)
    assert "Google Sheets" in str(caught.value) and "\n" not in str(caught.value)
    swapped = stand_in_plan(http, swap=True, base_url="http://127.0.0.1:9")
    out = apply_rewrite(http, swapped, "http://127.0.0.1:9", {})
    urls = [n["parameters"]["url"] for n in out["nodes"] if n["type"] == "n8n-nodes-base.httpRequest"]
    assert urls == ["http://127.0.0.1:9/lat/500/api", "http://127.0.0.1:9/lat/500/googleSheets"]
    assert not any("example.com" in json.dumps(n) for n in out["nodes"])


def test_bench_refuses_a_workflow_whose_calls_it_cannot_redirect_before_starting_anything(
    tmp_path, monkeypatch, capsys
):
    from n8n_sizer.cli import main

    body = tmp_path / "body.json"
    body.write_text("{}")
    for wf, extra, says in (("rag-query-agent.json", ["--local"], "--swap-calls"),):
        argv = [
            "n8n-sizer",
            "bench",
            *extra,
            "--workflow",
            str(DATA / wf),
            "--body",
            str(body),
            "--out",
            str(tmp_path / "r"),
        ]
        monkeypatch.setattr(sys, "argv", argv)
        with pytest.raises(SystemExit) as exit_:
            main()
        _, err = capsys.readouterr()
        assert exit_.value.code == 2 and says in err and len(err.strip().splitlines()) == 1, err
    # a stand-in runs here, on 127.0.0.1: a fleet or lab target would not reach it
    from types import SimpleNamespace

    from n8n_sizer.bench.session import _stand_ins
    from n8n_sizer.n8n.workflows import load_bench_workflow

    flow = load_bench_workflow(str(DATA / "webhook-agent-respond.json"), body)
    with pytest.raises(InputError, match="bench it with --local"):
        _stand_ins(SimpleNamespace(source="inventory"), flow, False, None)
