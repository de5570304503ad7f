"""Workflows, in one place: the one reader of workflow files (`read_workflow`: a packaged template or the user's
JSON export), the one webhook-path rewrite, the one body the public API accepts (`create_body`), the one deploy
path (`deploy_workflow`: create, activate, wait until the webhook routes), and the bench's workflow with its
request body (`load_bench_workflow`).

A bench run creates two copies on each target: the measured one and a warm-up copy on its own webhook path, so
warm-up executions never mix into the ledger's execution count of the measured workflow.
"""

from __future__ import annotations

import copy
import json
import os
import uuid
from importlib import resources
from pathlib import Path
from typing import Any

from n8n_sizer.errors import InputError
from n8n_sizer.n8n.client import N8nClient
from n8n_sizer.safety.frozen import Frozen

# The packaged workflows (templates/workflows/); the bench loads BUILT_IN, the drills the first four.
WORKFLOW_TEMPLATES = ("light", "code-heavy", "long-wait", "binary-read", "signed-webhook")
BUILT_IN = ("light", "code-heavy", "signed-webhook")

WEBHOOK_TYPE = "n8n-nodes-base.webhook"
# The built-in workflows read a number from the body (seed 002: "doubles a number from the request body").
DEFAULT_BODY = b'{"number": 21}'


class BenchWorkflow(Frozen):
    """A workflow ready to create through n8n's public API, with its webhook path and request body."""

    name: str  # "light", "code-heavy" or the file's name
    definition: dict[str, Any]
    webhook_path: str
    method: str
    body: bytes
    # Credentials the workflow needs created first (a local stand-in's, n8n_sizer/standins/rewrite.py): the
    # definition refers to each by the id and name "standin:<key>", which `setup_target` replaces.
    credentials: dict[str, dict[str, Any]] = {}

    def copy_for(self, suffix: str) -> BenchWorkflow:
        """The same workflow on webhook path `<path>-<suffix>` with fresh webhook ids (e.g. the warm-up copy)."""
        path = f"{self.webhook_path}-{suffix}"
        return self.model_copy(
            update={
                "definition": with_webhook_path(self.definition, path, f"{self.name} ({suffix})"),
                "webhook_path": path,
            }
        )


def read_workflow(name_or_path: str) -> dict[str, Any]:
    """A packaged template (light, code-heavy, long-wait, binary-read) or a workflow JSON file, as a dict."""
    if name_or_path in WORKFLOW_TEMPLATES:
        text = resources.files("n8n_sizer").joinpath("templates", "workflows", f"{name_or_path}.json").read_text()
        return json.loads(text)
    from n8n_sizer.safety.files import read_user_text
    from n8n_sizer.safety.jsondoc import load_json

    if not os.path.lexists(name_or_path):
        raise InputError(
            f"--workflow {name_or_path}: no such file; try one of {', '.join(WORKFLOW_TEMPLATES)} "
            f"or a path to an exported workflow JSON"
        )
    fix = "export the workflow from n8n's editor (Download)"
    workflow = load_json(read_user_text(name_or_path, "--workflow", fix=fix), f"--workflow {name_or_path}", fix)
    if not isinstance(workflow, dict) or not isinstance(workflow.get("nodes"), list):
        raise InputError(f"--workflow {name_or_path}: no `nodes` list; export the workflow from n8n's editor")
    return workflow


def webhook_nodes(definition: dict[str, Any]) -> list[dict[str, Any]]:
    """The enabled Webhook trigger nodes, in the file's order."""
    return [
        n
        for n in definition.get("nodes", [])
        if isinstance(n, dict) and n.get("type") == WEBHOOK_TYPE and not n.get("disabled")
    ]


def _first_hook(definition: dict[str, Any]) -> dict[str, Any]:
    hooks = webhook_nodes(definition)
    if not hooks:
        raise InputError(
            f"workflow {definition.get('name', '(unnamed)')!r} has no enabled Webhook node; "
            f"the bench calls a workflow through its webhook: add a Webhook trigger node"
        )
    return hooks[0]


def webhook_path(definition: dict[str, Any]) -> str:
    """The production path of the workflow's first Webhook node (`/webhook/<path>`)."""
    node = _first_hook(definition)
    path = node.get("parameters", {}).get("path") or node.get("webhookId")
    if not path:
        raise InputError(
            f"workflow {definition.get('name', '(unnamed)')!r}: its Webhook node has no path; set one in the node"
        )
    return f"/webhook/{str(path).strip('/')}"


def webhook_method(definition: dict[str, Any]) -> str:
    return str(_first_hook(definition).get("parameters", {}).get("httpMethod", "GET")).upper()


def with_webhook_path(definition: dict[str, Any], path: str, name: str | None = None) -> dict[str, Any]:
    """A copy whose first Webhook node listens on `path` with a fresh webhook id (two active workflows cannot
    share a path), renamed to `name` if given."""
    out = copy.deepcopy(definition)
    node = _first_hook(out)
    node.setdefault("parameters", {})["path"] = path.strip("/")
    node["webhookId"] = str(uuid.uuid4())
    if name is not None:
        out["name"] = name
    return out


def deploy_workflow(client: N8nClient, definition: dict[str, Any], timeout_s: float = 30.0) -> tuple[str, str]:
    """The one deploy path: create, activate, and wait until main routes its webhook; (workflow id, path)."""
    created = client.create_workflow(definition)
    client.activate_workflow(created["id"])
    path = webhook_path(definition)
    client.wait_webhook_registered(path, webhook_method(definition), timeout_s)
    return str(created["id"]), path


def load_bench_workflow(spec: str, body_file: Path | None = None, run_tag: str | None = None) -> BenchWorkflow:
    """`spec` is `light`, `code-heavy` or a path to a workflow JSON file. `run_tag` makes the webhook path
    unique per run (targets keep their workflows between runs on a long-lived stack)."""
    source = f"built-in workflow {spec}" if spec in BUILT_IN else f"--workflow {spec}"
    name = spec if spec in BUILT_IN else Path(spec).stem
    definition = read_workflow(spec)
    hooks = webhook_nodes(definition)
    if not hooks:
        raise InputError(
            f"{source} has no Webhook node, so there is nothing to send load to; add a Webhook "
            f"trigger (POST) to the workflow"
        )
    if len(hooks) > 1:
        raise InputError(f"{source} has {len(hooks)} Webhook nodes; the bench loads one; keep one Webhook trigger")
    params = hooks[0].get("parameters", {})
    method = str(params.get("httpMethod", "GET")).upper()
    if method != "POST":
        raise InputError(
            f"{source}: its Webhook node answers {method}, the bench POSTs a body; set the "
            f"Webhook node's HTTP Method to POST"
        )
    path = str(params.get("path") or f"bench-{name}").strip("/")
    if run_tag:
        path = f"{path}-{run_tag}"
    if body_file is not None:
        from n8n_sizer.safety.files import read_user_bytes

        body = read_user_bytes(body_file, "--body", fix="pass the JSON your webhook expects", max_bytes=1 << 20)
    elif spec in BUILT_IN:
        body = DEFAULT_BODY
    else:
        raise InputError(f"--workflow {spec} needs --body FILE: the JSON request body your webhook expects")
    flow = BenchWorkflow(name=name, definition=definition, webhook_path=path, method=method, body=body)
    return flow.model_copy(update={"definition": with_webhook_path(definition, path, f"n8n-sizer {name}")})
