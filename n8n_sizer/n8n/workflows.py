"""The workflow a bench run loads: a built-in one (`light`, `code-heavy` from `templates/workflows/`) or the
user's own JSON export, plus the request body to POST to its webhook.

A run creates two copies on each target: the measured one and a warm-up copy on its own webhook path, so
warm-up executions never mix into the ledger's execution count of the measured workflow.
"""

from __future__ import annotations

import copy
import uuid
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from n8n_sizer.errors import InputError

BUILT_IN = ("light", "code-heavy")
WEBHOOK_TYPE = "n8n-nodes-base.webhook"
# The built-in workflows read a number from the body (seed 002: "doubles a number from the request body").
DEFAULT_BODY = b'{"number": 21}'


class BenchWorkflow(BaseModel):
    """A workflow ready to create through n8n's public API, with its webhook path and request body."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str  # "light", "code-heavy" or the file's name
    definition: dict[str, Any]
    webhook_path: str
    method: str
    body: bytes

    def copy_for(self, suffix: str) -> "BenchWorkflow":
        """The same workflow on webhook path `<path>-<suffix>` with fresh webhook ids (e.g. the warm-up copy)."""
        path = f"{self.webhook_path}-{suffix}"
        return self.model_copy(update={"definition": _with_path(self.definition, path, f"{self.name} ({suffix})"),
                                       "webhook_path": path})


def _webhook_nodes(definition: dict[str, Any]) -> list[dict[str, Any]]:
    return [n for n in definition.get("nodes", [])
            if isinstance(n, dict) and n.get("type") == WEBHOOK_TYPE and not n.get("disabled")]


def _with_path(definition: dict[str, Any], path: str, name: str) -> dict[str, Any]:
    out = copy.deepcopy(definition)
    node = _webhook_nodes(out)[0]
    node.setdefault("parameters", {})["path"] = path
    node["webhookId"] = str(uuid.uuid4())
    out["name"] = name
    return out


def public_api_body(definition: dict[str, Any]) -> dict[str, Any]:
    """What `POST /api/v1/workflows` accepts: name, nodes, connections, settings (other keys are refused)."""
    return {"name": definition.get("name", "n8n-sizer bench"), "nodes": definition["nodes"],
            "connections": definition.get("connections", {}), "settings": definition.get("settings") or {}}


def load_workflow(spec: str, body_file: Path | None = None, run_tag: str | None = None) -> BenchWorkflow:
    """`spec` is `light`, `code-heavy` or a path to a workflow JSON file. `run_tag` makes the webhook path
    unique per run (targets keep their workflows between runs on a long-lived stack)."""
    from n8n_sizer.n8n.client import load_workflow as read_workflow  # the n8n API module's reader (templates or file)

    source = f"built-in workflow {spec}" if spec in BUILT_IN else f"--workflow {spec}"
    name = spec if spec in BUILT_IN else Path(spec).stem
    definition = read_workflow(spec)
    hooks = _webhook_nodes(definition)
    if not hooks:
        raise InputError(f"{source} has no Webhook node, so there is nothing to send load to; add a Webhook "
                         f"trigger (POST) to the workflow")
    if len(hooks) > 1:
        raise InputError(f"{source} has {len(hooks)} Webhook nodes; the bench loads one; keep one Webhook trigger")
    params = hooks[0].get("parameters", {})
    method = str(params.get("httpMethod", "GET")).upper()
    if method != "POST":
        raise InputError(f"{source}: its Webhook node answers {method}, the bench POSTs a body; set the "
                         f"Webhook node's HTTP Method to POST")
    path = str(params.get("path") or f"bench-{name}").strip("/")
    if run_tag:
        path = f"{path}-{run_tag}"
    if body_file is not None:
        if not body_file.is_file():
            raise InputError(f"--body {body_file}: no such file; pass the JSON your webhook expects")
        body = body_file.read_bytes()
    elif spec in BUILT_IN:
        body = DEFAULT_BODY
    else:
        raise InputError(f"--workflow {spec} needs --body FILE: the JSON request body your webhook expects")
    flow = BenchWorkflow(name=name, definition=definition, webhook_path=path, method=method, body=body)
    return flow.model_copy(update={"definition": _with_path(definition, path, f"n8n-sizer {name}")})
