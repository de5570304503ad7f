"""Request bodies as webhook senders send them: JSON of about N bytes, HMAC-SHA256 signed in a header, and a
share of malformed requests, each of a known class.

Valid body: compact ASCII JSON `{"event": "...", "id": seq, "data": {"number": 21, "pad": "..."}}` of about
`payload_bytes` (the webhook-ingest benchmark sent 1.2 KB), signed `X-Signature: sha256=<hex HMAC of the body>`.
Malformed classes, and the answer a receiver owes each (what the `signed-webhook` workflow answers):
  bad-signature  a valid body with a wrong signature                      401
  invalid-json   a body that is not JSON, correctly signed                400 (n8n itself answers 422)
  schema         valid JSON, correctly signed, `event` not a string     422
  oversize       a valid, signed body over the receiver's size limit    413
`--malformed F` makes exactly floor(F x n) of the first n requests malformed, spread evenly and the classes in
turn, so a run of 240 requests at 0.08 has 19 malformed ones, whatever the seed. Pure apart from `load_secret`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

from n8n_sizer.errors import InputError
from n8n_sizer.runs.records import REFUSAL_STATUS, PayloadClass

CLASSES: tuple[str, ...] = get_args(PayloadClass)  # bad-signature, invalid-json, schema, oversize
EXPECTED_STATUS = REFUSAL_STATUS
DEFAULT_PAYLOAD_BYTES = 1200  # the webhook-ingest benchmark's 1.2 KB bodies (issue 16)
SIGNATURE_HEADER = "X-Signature"
SECRET_BYTES = 32  # 256 bits, the HMAC-SHA256 block's worth of key material


def max_body_bytes(payload_bytes: int) -> int:
    """The receiver's size limit: four valid bodies' worth, at least 16 KiB, so only an oversize one crosses it."""
    return max(4 * payload_bytes, 16 * 1024)


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def body_of(seq: int, payload_bytes: int) -> bytes:
    """A compact ASCII JSON body of about `payload_bytes` (never less than its fields need)."""
    doc = {"event": "order.created", "id": seq, "data": {"number": 21, "pad": ""}}
    bare = len(json.dumps(doc, separators=(",", ":")))
    doc["data"]["pad"] = "x" * max(0, payload_bytes - bare)
    return json.dumps(doc, separators=(",", ":")).encode()


def class_of(seq: int, malformed: float) -> str | None:
    """The class of request `seq` (0-based in its step): None (valid) or one of CLASSES, in turn."""
    if malformed <= 0:
        return None
    before, upto = math.floor(seq * malformed), math.floor((seq + 1) * malformed)
    return CLASSES[before % len(CLASSES)] if upto > before else None


@dataclass(frozen=True)
class Payloads:
    """What the driver sends as request `seq`: (body, extra headers, class). `secret` None: unsigned bodies."""

    payload_bytes: int = DEFAULT_PAYLOAD_BYTES
    malformed: float = 0.0
    secret: str | None = None

    def __repr__(self) -> str:  # the secret never reaches a log or a traceback
        return f"Payloads(payload_bytes={self.payload_bytes}, malformed={self.malformed}, secret=***)"

    def request(self, seq: int) -> tuple[bytes, dict[str, str], str | None]:
        cls = class_of(seq, self.malformed)
        body = body_of(seq, self.payload_bytes)
        if cls == "invalid-json":
            body = body[:-2]  # cut off the closing braces: not JSON any more
        elif cls == "schema":
            body = body.replace(b'"event":"order.created"', b'"event":17', 1)
        elif cls == "oversize":
            body = body_of(seq, max_body_bytes(self.payload_bytes) + 1024)
        headers = {}
        if self.secret is not None:
            signed = sign(self.secret, body)
            headers[SIGNATURE_HEADER] = "sha256=" + "0" * 64 if cls == "bad-signature" else signed
        return body, headers, cls


def load_secret(path: Path) -> str:
    """The HMAC secret from `path`; when the file does not exist, a new one is generated and written 0600
    (never printed). An existing file is read, never overwritten."""
    from n8n_sizer.safety.files import read_user_text
    from n8n_sizer.safety.write import write_atomic

    if not path.exists():
        secret = secrets.token_hex(SECRET_BYTES)
        write_atomic(path, secret + "\n", private=True, what="--hmac-secret-file")
        return secret
    text = read_user_text(
        path,
        "--hmac-secret-file",
        fix="point it at a file holding one secret, or at a new path to have one generated",
        max_bytes=4096,
    ).strip()
    if len(text) < 16 or not all(c.isalnum() or c in "-_" for c in text):
        raise InputError(
            f"--hmac-secret-file {path}: expected one secret of at least 16 letters, digits, '-' or "
            f"'_'; point it at a new path to have one generated"
        )
    return text


def signature_headers(secret: str | None, body: bytes) -> dict[str, str]:
    return {} if secret is None else {SIGNATURE_HEADER: sign(secret, body)}


def deployed_workflow(flow, secret: str | None, payloads: Payloads | None):
    """The bench workflow as deployed: signed-webhook gets its secret and size limit here, at deploy time, so
    run.json only ever holds the copy without them (n8n.signed)."""
    if flow.name != "signed-webhook":
        return flow
    from n8n_sizer.n8n.signed import with_secret

    if secret is None:
        raise InputError("signed-webhook needs its HMAC secret; pass --hmac-secret-file FILE (generated if absent)")
    size = payloads.payload_bytes if payloads is not None else DEFAULT_PAYLOAD_BYTES
    return flow.model_copy(update={"definition": with_secret(flow.definition, secret, max_body_bytes(size))})
