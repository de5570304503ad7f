"""The `signed-webhook` workflow's two deploy-time settings: its HMAC secret and its response mode.

The secret reaches n8n inside the workflow's Check node, written in when the bench deploys it: n8n Code nodes
read environment variables only where `N8N_BLOCK_ENV_ACCESS_IN_NODE` allows it (blocked by default in 2.x), and a
credential cannot be read from a Code node, so the code itself is the one place a stock n8n lets the check see it.
The secret therefore lives in the user's n8n database (as any credential would) and in the secret file, never in
run.json (the spec keeps the placeholder copy) and never in a log.

Response modes: `last-node` answers after the work (Check -> Work -> Respond, 200); `immediately` answers as
soon as the request is checked (Check -> Respond -> Work, 202 for a valid request: the work runs after the
answer). Refusals (401/400/422/413) are answered from the check in both modes. In queue mode both answers come from
the worker, after the job left Redis. `received` is the Webhook node's own "Immediately" mode: main answers 202 as
it takes the request (before the queue), so nothing can be refused: the check runs after the answer (no Respond
node: n8n refuses a workflow whose Respond to Webhook node the Webhook would never use).
"""

from __future__ import annotations

import copy
import json
from typing import Any, Literal

from n8n_sizer.errors import InputError

RespondMode = Literal["last-node", "immediately", "received"]
SECRET_MARK = '"__HMAC_SECRET__"'
MAX_BYTES_MARK = '"__MAX_BODY_BYTES__"'
VALID_STATUS = {"last-node": 200, "immediately": 202, "received": 202}


def _node(definition: dict[str, Any], name: str) -> dict[str, Any]:
    for node in definition.get("nodes", []):
        if node.get("name") == name:
            return node
    raise InputError(f"workflow {definition.get('name')!r} has no {name} node; is it n8n-sizer's signed-webhook?")


def with_respond_mode(definition: dict[str, Any], mode: RespondMode) -> dict[str, Any]:
    """A copy wired for `mode` (see the module's docstring)."""
    if mode not in VALID_STATUS:
        raise InputError(f"--respond {mode}: choose last-node, immediately or received")
    out = copy.deepcopy(definition)
    if mode == "received":
        hook = _node(out, "Webhook")["parameters"]
        hook["responseMode"] = "onReceived"
        # Webhook v2 keeps its code in a fixed collection (n8n's getResponseCode reads options.responseCode.values)
        hook.setdefault("options", {})["responseCode"] = {"values": {"responseCode": VALID_STATUS[mode]}}
        out["nodes"] = [n for n in out["nodes"] if n.get("name") != "Respond"]
        out["connections"] = {
            "Webhook": {"main": [[{"node": "Check", "type": "main", "index": 0}]]},
            "Check": {"main": [[{"node": "Work", "type": "main", "index": 0}]]},
        }
        return out
    respond = _node(out, "Respond")
    respond["parameters"].setdefault("options", {})["responseCode"] = f"={{{{ $json.status || {VALID_STATUS[mode]} }}}}"
    if mode == "immediately":

        def link(node: str) -> dict:
            return {"main": [[{"node": node, "type": "main", "index": 0}]]}

        out["connections"] = {"Webhook": link("Check"), "Check": link("Respond"), "Respond": link("Work")}
    return out


def with_secret(definition: dict[str, Any], secret: str, max_body_bytes: int) -> dict[str, Any]:
    """A copy whose Check node carries `secret` and the size limit (the deployed copy; never stored in run.json)."""
    if not secret or not all(c.isalnum() or c in "-_" for c in secret):
        raise InputError("the HMAC secret must be letters, digits, '-' or '_'; let --hmac-secret-file generate one")
    out = copy.deepcopy(definition)
    check = _node(out, "Check")
    code = check["parameters"]["jsCode"]
    if SECRET_MARK not in code or MAX_BYTES_MARK not in code:
        raise InputError("the signed-webhook Check node has no secret placeholder (was the secret written in twice?)")
    check["parameters"]["jsCode"] = code.replace(SECRET_MARK, json.dumps(secret)).replace(
        MAX_BYTES_MARK, str(int(max_body_bytes))
    )
    return out
