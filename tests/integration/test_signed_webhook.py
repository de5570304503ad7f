"""signed-webhook on real n8n (the session's queue stack): both response modes refuse each malformed class with its
status, accept every valid request, and every accepted request has its stored execution (the ledger, matched one
by one). Small and bounded: 32 requests per mode, a burst of 4 s."""

from __future__ import annotations

import asyncio
import secrets
import time

import pytest

from n8n_sizer.bench.http_post import HttpPost
from n8n_sizer.bench.load import run_open
from n8n_sizer.bench.payloads import Payloads, deployed_workflow, signature_headers
from n8n_sizer.bench.shapes import arrival_times, mean_rate, parse_shape
from n8n_sizer.n8n.signed import with_respond_mode
from n8n_sizer.n8n.workflows import deploy_workflow, load_bench_workflow, with_webhook_path
from n8n_sizer.runs.ledger import build_ledger
from n8n_sizer.runs.records import REFUSAL_STATUS

pytestmark = pytest.mark.timeout(300)


@pytest.mark.parametrize("respond, valid_status", [("last-node", 200), ("immediately", 202), ("received", 202)])
def test_signed_webhook_refuses_by_class_and_loses_nothing(queue_stack, respond, valid_status):
    secret = secrets.token_hex(16)
    flow = load_bench_workflow("signed-webhook")
    flow = flow.model_copy(update={"definition": with_respond_mode(flow.definition, respond)})
    payloads = Payloads(payload_bytes=1200, malformed=0.25, secret=secret)
    deployed = deployed_workflow(flow, secret, payloads)
    definition = with_webhook_path(deployed.definition, f"signed-{respond}-{secrets.token_hex(3)}")
    with queue_stack.client() as client:
        workflow_id, path = deploy_workflow(client, definition)

    shape = parse_shape("burst:4:12:2:4")  # 32 requests over 4 s
    records = []

    async def send():
        client = HttpPost(
            f"{queue_stack.main_url}{path}", flow.body, timeout_s=60, headers=signature_headers(secret, flow.body)
        )
        try:
            return await run_open(
                client,
                rate_per_s=mean_rate(shape, 4.0),
                duration_s=4.0,
                max_in_flight=100,
                step=shape.name,
                target="local",
                sink=records.append,
                times=arrival_times(shape, 4.0),
                payloads=payloads,
            )
        finally:
            client.close()  # inside the loop: its sockets close with it

    tally = asyncio.run(send())
    assert tally.scheduled == len(records) == 32

    received = respond == "received"  # main answers 202 at ingest: only n8n's own body parser can refuse
    for r in records:
        if r.payload_class is None or (received and r.payload_class != "invalid-json"):
            assert r.status == valid_status, (r.seq, r.status, r.body_snippet)
            assert r.execution_id is not None or received
        else:
            assert r.status in REFUSAL_STATUS[r.payload_class], (r.payload_class, r.status, r.body_snippet)
    assert sum(1 for r in records if r.payload_class) == 8
    if received:  # the 202 names no execution: count them, and the checks that ran after the answer
        expected = sum(1 for r in records if r.status == 202)
        deadline = time.monotonic() + 120
        with queue_stack.client() as api:
            while (counts := api.count_executions(workflow_id)).by_status.get(
                "success", 0
            ) < expected and time.monotonic() < deadline:
                time.sleep(1)
        assert counts.by_status.get("success", 0) == expected == 30  # 24 valid + 6 malformed let through
        ledger = build_ledger(records, counts.total, counts.by_status.get("success", 0), None)
        assert ledger.accepted_then_lost == 0 and ledger.by_class["bad-signature"].accepted == 2
        return

    # the executions (in `immediately` mode they finish after their answer): wait until all are final
    expected = sum(1 for r in records if r.execution_id is not None)
    deadline = time.monotonic() + 120
    with queue_stack.client() as api:
        while True:
            counts = api.count_executions(workflow_id)
            if counts.by_status.get("success", 0) >= expected or time.monotonic() > deadline:
                break
            time.sleep(1)
    ledger = build_ledger(records, counts.total, counts.by_status.get("success", 0), counts.success_ids)
    assert ledger.accepted == 24 and ledger.accepted_then_lost == 0 and ledger.lost_seqs == []
    assert all(t.refused_as_expected == t.fired for c, t in ledger.by_class.items() if c != "valid")
    assert ledger.by_class["valid"].accepted == 24
