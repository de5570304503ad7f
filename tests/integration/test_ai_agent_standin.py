"""An AI agent workflow runs for real through n8n against the local OpenAI-compatible stand-in: the shared session
stack (regular mode), an exported chat-agent workflow (tests/data/workflows/webhook-agent-respond.json: an
Anthropic chat model, which the rewrite swaps for OpenAI's on the stand-in) rewritten by `standins/rewrite.py`, its
credential created over the public API. The stand-in sees the model calls n8n makes; nothing leaves 127.0.0.1.

Run it under the heavy-command lock: flock /work/heavy.lock .venv/bin/python -m pytest
tests/integration/test_ai_agent_standin.py
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx

from n8n_sizer.bench.calibrate import stand_in_plan
from n8n_sizer.n8n.workflows import deploy_workflow, with_webhook_path
from n8n_sizer.standins.openai import StandInConfig, StandInServer
from n8n_sizer.standins.rewrite import apply_rewrite

EXPORT = Path(__file__).resolve().parents[1] / "data" / "workflows" / "webhook-agent-respond.json"


def test_an_exported_ai_agent_runs_against_the_stand_in_model_through_n8n(regular_stack):
    export = with_webhook_path(json.loads(EXPORT.read_text()), f"agent-{int(time.time())}", "stand-in agent")
    server = StandInServer(StandInConfig(latency_ms=300, completion_tokens=4)).serve()
    try:
        plan = stand_in_plan(export, swap=False, base_url=server.url)
        plan = plan.model_copy(
            update={
                "credentials": {
                    k: {**v, "data": {**v["data"], "url": server.base_url(300)}} for k, v in plan.credentials.items()
                }
            }
        )
        with regular_stack.client() as client:
            made = {
                key: client.create_credential(f"stand-in {key}", spec["type"], spec["data"])
                for key, spec in plan.credentials.items()
            }
            ids = {k: {"id": str(v["id"]), "name": str(v["name"])} for k, v in made.items()}
            _, path = deploy_workflow(client, apply_rewrite(export, plan, server.url, ids))
        started = time.monotonic()
        answer = httpx.post(regular_stack.main_url + path, json={"question": "ok?"}, timeout=60)
        took = time.monotonic() - started
        assert answer.status_code == 200, answer.text[:300]
        assert "ok ok ok ok" in answer.text  # the stand-in's answer, through the agent and Respond to Webhook
        calls = server.counts.get("chat", 0) + server.counts.get("responses", 0)
        assert calls == 1, server.counts  # one model call: no tools attached
        assert took >= 0.3  # the execution waited on the model
    finally:
        server.close()
