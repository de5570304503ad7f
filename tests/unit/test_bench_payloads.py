"""Payloads (bench.payloads): sizes, signatures, the malformed share and classes, the secret file; the ledger per
class; signed-webhook's deploy-time settings (n8n.signed); the CLI's one-line refusals."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat

import pytest
import typer

from n8n_sizer.bench.payloads import (
    CLASSES,
    Payloads,
    body_of,
    class_of,
    deployed_workflow,
    load_secret,
    max_body_bytes,
    sign,
)
from n8n_sizer.cli import _run, app
from n8n_sizer.errors import InputError
from n8n_sizer.n8n.signed import with_respond_mode, with_secret
from n8n_sizer.n8n.workflows import load_bench_workflow, read_workflow
from n8n_sizer.runs.ledger import build_ledger, format_ledger
from n8n_sizer.runs.records import RequestRecord


@pytest.mark.parametrize("size", [64, 1200, 10_000])
def test_valid_body_is_compact_json_of_about_the_size(size):
    body = body_of(7, size)
    doc = json.loads(body)
    assert doc["id"] == 7 and isinstance(doc["data"], dict)
    assert body == json.dumps(doc, separators=(",", ":")).encode()  # what JSON.stringify gives back
    assert abs(len(body) - size) <= 60


@pytest.mark.parametrize("fraction, n", [(0.08, 240), (0.25, 100), (0.5, 10), (0.01, 1000)])
def test_malformed_share_is_exact_and_classes_take_turns(fraction, n):
    classes = [class_of(seq, fraction) for seq in range(n)]
    bad = [c for c in classes if c is not None]
    assert len(bad) == int(fraction * n + 1e-9)
    assert bad[:4] == list(CLASSES[: len(bad[:4])])
    assert class_of(3, 0.0) is None


def test_each_class_is_wrong_in_its_own_way():
    secret = "s" * 32
    p = Payloads(payload_bytes=1200, malformed=0.5, secret=secret)
    seen = {}
    for seq in range(16):
        body, headers, cls = p.request(seq)
        seen.setdefault(cls, (body, headers))
    assert set(seen) == {None, *CLASSES}
    body, headers = seen[None]
    good = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    assert headers["X-Signature"] == good == sign(secret, body)
    body, headers = seen["bad-signature"]
    assert json.loads(body) and headers["X-Signature"] != sign(secret, body)
    body, headers = seen["invalid-json"]
    with pytest.raises(ValueError):
        json.loads(body)
    assert headers["X-Signature"] == sign(secret, body)
    body, headers = seen["schema"]
    assert not isinstance(json.loads(body)["event"], str) and headers["X-Signature"] == sign(secret, body)
    body, headers = seen["oversize"]
    assert len(body) > max_body_bytes(1200) and json.loads(body)["event"] == "order.created"
    assert secret not in repr(p)


def test_secret_file_generated_0600_then_read_never_overwritten(tmp_path):
    path = tmp_path / "hmac.key"
    first = load_secret(path)
    assert len(first) == 64 and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert load_secret(path) == first
    path.write_text("short\n")
    with pytest.raises(InputError, match="at least 16"):
        load_secret(path)
    assert path.read_text() == "short\n"


def _rec(seq, status, cls=None, execution_id=None):
    return RequestRecord(
        seq=seq,
        step="burst-2-8-10-30",
        target="t",
        scheduled_s=seq,
        sent_s=seq,
        status=status,
        latency_ms=5.0,
        error_class=None if status and status < 300 else "non-2xx",
        execution_id=execution_id,
        payload_class=cls,
    )


def test_ledger_counts_per_class_and_refusals_do_not_hide_a_loss():
    records = [
        _rec(0, 200, None, "1"),
        _rec(1, 401, "bad-signature", "2"),
        _rec(2, 200, None, "3"),
        _rec(3, 422, "invalid-json"),
        _rec(4, 200, "schema", "5"),
        _rec(5, 500, "oversize"),
    ]
    # executions: 1, 2 (the refusal), 5 (the schema request let through); 3 is missing
    ledger = build_ledger(records, executions_stored=3, executions_succeeded=3, success_ids={"1", "2", "5"})
    assert ledger.accepted == 3 and ledger.refusals_with_execution == 1
    assert ledger.accepted_then_lost == 1 and ledger.lost_seqs == [2]
    by = ledger.by_class
    assert by["valid"].fired == 2 and by["valid"].accepted == 2
    assert by["bad-signature"].refused_as_expected == 1 and by["invalid-json"].refused_as_expected == 1
    assert by["schema"].accepted == 1 and by["oversize"].other == 1
    text = format_ledger("t", ledger)
    assert "bad-signature" in text and "refused ok" in text
    plain = build_ledger(records[:1], 1, 1, {"1"})
    assert plain.by_class is None and plain.accepted_then_lost == 0


def test_signed_webhook_modes_and_secret():
    flow = load_bench_workflow("signed-webhook")
    assert flow.method == "POST"
    last = with_respond_mode(flow.definition, "last-node")
    now = with_respond_mode(flow.definition, "immediately")
    assert last["connections"]["Work"]["main"][0][0]["node"] == "Respond"
    assert now["connections"]["Respond"]["main"][0][0]["node"] == "Work"
    assert "202" in json.dumps(now["nodes"]) and "|| 200" in json.dumps(last["nodes"])
    at_ingest = with_respond_mode(flow.definition, "received")
    hook = [n for n in at_ingest["nodes"] if n["name"] == "Webhook"][0]["parameters"]
    assert hook["responseMode"] == "onReceived" and hook["options"]["responseCode"]["values"]["responseCode"] == 202
    assert "Respond" not in {n["name"] for n in at_ingest["nodes"]} and "Respond" not in json.dumps(
        at_ingest["connections"]
    )
    secret = "a1" * 16
    deployed = deployed_workflow(flow.model_copy(update={"definition": last}), secret, None)
    code = [n for n in deployed.definition["nodes"] if n["name"] == "Check"][0]["parameters"]["jsCode"]
    assert f'"{secret}"' in code and "Number(16384)" in code
    assert secret not in json.dumps(read_workflow("signed-webhook"))  # the template keeps its placeholder
    with pytest.raises(InputError, match="placeholder"):
        with_secret(deployed.definition, secret, 16384)
    with pytest.raises(InputError, match="needs its HMAC secret"):
        deployed_workflow(flow, None, None)


@pytest.mark.parametrize(
    "args, words",
    [
        (["--shape", "burst:8:2:10:30"], "must be above BASE"),
        (["--malformed", "1"], "leaves nothing"),
        (["--malformed", "-0.1"], "--malformed"),
        (["--payload-bytes", "10"], "--payload-bytes"),
        (["--respond", "later"], "choose last-node, immediately or received"),
        (["--respond", "immediately"], "add --workflow signed-webhook"),
        (["--hmac-secret-file", "/nonexistent-dir/k"], "does not exist"),
        (["--shape", "ramp:1:5", "--soak", "1h", "--rate", "1"], "one step of its own"),
    ],
)
def test_bench_refuses_bad_payload_and_shape_flags_in_one_line(args, words, tmp_path, capsys):
    with pytest.raises(SystemExit) as done:
        _run(typer.main.get_command(app), "n8n-sizer", ["bench", "--local", "--out", str(tmp_path), *args])
    assert done.value.code == 2
    out = capsys.readouterr().err.strip()
    assert words in out and "Traceback" not in out and len(out.splitlines()) == 1
    assert not any(tmp_path.iterdir())  # nothing started, nothing written
