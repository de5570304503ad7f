"""A workflow's calls out, rewritten to the local stand-ins, so that a benchmark of it never reaches a real service.

`plan_rewrite(export, base_url, latency_ms)` says what it would do, node by node, and which credentials the local
n8n needs (`Rewrite.credentials`: one per latency, each pointing at the stand-in); `apply_rewrite(export, plan,
credential_ids)` returns the rewritten copy once those credentials exist. Per node:

- **HTTP** (HTTP Request, the HTTP Request tool, GraphQL): its URL's scheme and host become the stand-in's, with
  the node's latency as a `/lat/<ms>` prefix; the path stays; authentication is dropped (the stand-in needs none).
- **OpenAI** (OpenAI Chat Model, OpenAI embeddings, the OpenAI node): its `openAiApi` credential is replaced by one
  whose base URL is the stand-in's (`.../lat/<ms>/v1`); `options.baseURL` is dropped.
- **another provider's chat model or embeddings sub-node** (Anthropic, Gemini, Ollama...): swapped for the OpenAI
  one on the stand-in: the root (Agent, chain) runs the same way, its model answers after the model's latency.
- **Telegram**: its credential's `baseUrl` is the stand-in's.
- **anything else that calls out** (an app, a database, a remote vector store or memory, a sub-workflow this export
  does not hold, an app's "send and wait"): not redirectable. `Rewrite.unredirected` names them, and the caller
  refuses the workflow unless the user asked to swap them (`swap=True`, the `--swap-calls` flag): each becomes an
  HTTP Request to the stand-in waiting that node's time (an app node is an HTTP call plus its mapping), a remote
  vector store the in-memory one, a remote chat memory the window buffer, a sub-workflow call a No-Op.

Pure: the standard library only (the room's rule); the latency per node comes from the caller (the pricer's waits).
"""

from __future__ import annotations

import copy
import re
import uuid
from typing import Any

from n8n_sizer.safety.frozen import Frozen

AI = "@n8n/n8n-nodes-langchain."
BASE = "n8n-nodes-base."
HTTP_TYPES = {BASE + "httpRequest", AI + "toolHttpRequest", BASE + "graphql"}
OPENAI_TYPES = {AI + "lmChatOpenAi", AI + "embeddingsOpenAi", AI + "openAi", AI + "lmOpenAi"}
TELEGRAM = BASE + "telegram"


class Change(Frozen):
    node: str
    type: str
    how: str  # url, openai, model (swapped for OpenAI's), embedding (likewise), telegram, swap (an app...: see _swap)
    latency_ms: float = 0.0


class Rewrite(Frozen):
    changes: tuple[Change, ...]
    unredirected: tuple[str, ...]  # "name (type): why" of calls a rewrite cannot redirect
    credentials: dict[str, dict[str, Any]]  # key -> {"type": ..., "data": ...} to create on the local n8n

    def summary(self) -> str:
        counts: dict[str, int] = {}
        for c in self.changes:
            counts[c.how] = counts.get(c.how, 0) + 1
        return ", ".join(f"{n} {how}" for how, n in sorted(counts.items())) or "nothing to redirect"


def _lat(ms: float) -> int:
    return max(0, min(int(round(ms)), 600_000))


def _cred_key(kind: str, ms: float) -> str:
    return f"{kind}-{_lat(ms)}ms"


def _model_node(node: dict[str, Any], kind: str) -> dict[str, Any]:
    """An OpenAI chat model or embeddings sub-node standing in for another provider's (same name and position)."""
    if kind == "embedding":
        params: dict[str, Any] = {"model": "text-embedding-3-small", "options": {}}
        type_, version = AI + "embeddingsOpenAi", 1.2
    else:
        params = {"model": {"__rl": True, "mode": "id", "value": "gpt-4o-mini"}, "options": {}}
        type_, version = AI + "lmChatOpenAi", 1.2
    return {
        **{k: v for k, v in node.items() if k in ("id", "name", "position")},
        "type": type_,
        "typeVersion": version,
        "parameters": params,
    }


def _http_node(node: dict[str, Any], url: str) -> dict[str, Any]:
    return {
        **{k: v for k, v in node.items() if k in ("id", "name", "position", "onError", "executeOnce")},
        "type": BASE + "httpRequest",
        "typeVersion": 4.2,
        "parameters": {"method": "POST", "url": url, "options": {}},
    }


def plan_rewrite(
    export: dict[str, Any],
    base_url: str,
    latency_ms: dict[str, float],
    families: dict[str, str],
    swap: bool = False,
) -> Rewrite:
    """What `apply_rewrite` will do. `latency_ms`: each calling node's wait per call (by name); `families`: each
    node's family id (advisor.workflow_price.families, by name); `swap`: replace what cannot be redirected."""
    changes, unredirected, creds = [], [], {}
    for node in export.get("nodes", []):
        if not isinstance(node, dict) or node.get("disabled"):
            continue
        name, type_ = str(node.get("name")), str(node.get("type"))
        fam = families.get(name, "")
        ms = float(latency_ms.get(name, 0.0))
        if type_ in HTTP_TYPES:
            changes.append(Change(node=name, type=type_, how="url", latency_ms=ms))
        elif type_ in OPENAI_TYPES or fam in ("ai.model", "ai.embedding"):
            key = _cred_key("openai", ms)
            creds[key] = {
                "type": "openAiApi",
                "data": {"apiKey": "sk-stand-in", "url": f"{base_url}/lat/{_lat(ms)}/v1"},
            }
            how = "openai" if type_ in OPENAI_TYPES else "embedding" if fam == "ai.embedding" else "model"
            changes.append(Change(node=name, type=type_, how=how, latency_ms=ms))
        elif type_ == TELEGRAM:
            key = _cred_key("telegram", ms)
            creds[key] = {
                "type": "telegramApi",
                "data": {"accessToken": "1:stand-in", "baseUrl": f"{base_url}/lat/{_lat(ms)}"},
            }
            changes.append(Change(node=name, type=type_, how="telegram", latency_ms=ms))
        elif fam in (
            "app",
            "database",
            "ai.tool-call",
            "ai.reranker",
            "ai.model-app",
            "subworkflow",
            "ai.tool-workflow",
            "ai.vector-store-remote",
            "ai.memory-remote",
        ) or (isinstance(node.get("parameters"), dict) and node["parameters"].get("operation") == "sendAndWait"):
            why = (
                "its host is not configurable"
                if fam not in ("subworkflow", "ai.tool-workflow")
                else "its sub-workflow is not in this export"
            )
            if swap:
                changes.append(Change(node=name, type=type_, how="swap", latency_ms=ms))
            else:
                unredirected.append(f"{name} ({type_.rsplit('.', 1)[-1]}): {why}")
    return Rewrite(changes=tuple(changes), unredirected=tuple(unredirected), credentials=creds)


def apply_rewrite(
    export: dict[str, Any], plan: Rewrite, base_url: str, credential_ids: dict[str, dict[str, str]]
) -> dict[str, Any]:
    """The rewritten copy of `export`; `credential_ids`: plan.credentials' keys -> {"id", "name"} as created."""
    out = copy.deepcopy(export)
    by_name = {c.node: c for c in plan.changes}
    nodes = []
    for node in out.get("nodes", []):
        change = by_name.get(str(node.get("name"))) if isinstance(node, dict) else None
        if change is None:
            nodes.append(node)
            continue
        ms = change.latency_ms
        if change.how == "url":
            params = node.setdefault("parameters", {})
            path = _path_of(str(params.get("url") or params.get("endpoint") or "/"))
            if str(params.get("url", "")).startswith("="):
                path = "/expression"
            url = f"{base_url}/lat/{_lat(ms)}{path if path.startswith('/') else '/' + path}"
            params["url" if node["type"] != BASE + "graphql" else "endpoint"] = url
            params["authentication"] = "none"
            node.pop("credentials", None)
            if isinstance(params.get("options"), dict):
                params["options"].pop("proxy", None)
            nodes.append(node)
        elif change.how in ("openai", "model", "embedding"):
            new = node if change.how == "openai" else _model_node(node, change.how)
            new.setdefault("parameters", {})
            if isinstance(new["parameters"].get("options"), dict):
                new["parameters"]["options"].pop("baseURL", None)
            new["credentials"] = {"openAiApi": credential_ids[_cred_key("openai", ms)]}
            nodes.append(new)
        elif change.how == "telegram":
            node["credentials"] = {"telegramApi": credential_ids[_cred_key("telegram", ms)]}
            nodes.append(node)
        else:  # swapped: an app, a database, a remote store, a sub-workflow call
            nodes.append(_swap(node, change, base_url))
    out["nodes"] = nodes
    return out


def _swap(node: dict[str, Any], change: Change, base_url: str) -> dict[str, Any]:
    short = change.type.rsplit(".", 1)[-1]
    keep = {k: v for k, v in node.items() if k in ("id", "name", "position")}
    params = node.get("parameters") if isinstance(node.get("parameters"), dict) else {}
    if short.startswith("vectorStore"):
        mode = params.get("mode", "retrieve")
        return keep | {
            "type": AI + "vectorStoreInMemory",
            "typeVersion": 1.3,
            "parameters": {
                "mode": mode,
                "memoryKey": {"__rl": True, "mode": "id", "value": "stand-in"},
                "prompt": "text",
            },
        }
    if short.startswith("memory"):
        return keep | {
            "type": AI + "memoryBufferWindow",
            "typeVersion": 1.3,
            "parameters": {"sessionIdType": "customKey", "sessionKey": "stand-in"},
        }
    if short in ("executeWorkflow",) or short == "toolWorkflow":
        return keep | {"type": BASE + "noOp", "typeVersion": 1, "parameters": {}}
    if (change.type.startswith(AI) and short.startswith("tool")) or short.endswith("Tool"):
        return keep | {
            "type": AI + "toolHttpRequest",
            "typeVersion": 1.1,
            "parameters": {
                "toolDescription": f"stand-in for {short}",
                "method": "GET",
                "url": f"{base_url}/lat/{_lat(change.latency_ms)}/{short}",
                "options": {},
            },
        }
    return _http_node(node, f"{base_url}/lat/{_lat(change.latency_ms)}/{short}") | {
        "id": node.get("id", str(uuid.uuid4()))
    }


_NOT_PATH = re.compile(r"[^A-Za-z0-9\-._~/]")


def _path_of(url: str) -> str:
    """The path of a workflow's URL, for the stand-in's route: what follows the host, without query or fragment, and
    only the characters a plain URL path keeps (anything else becomes `_`), so it is never parsed as a URL again."""
    rest = url.split("://", 1)[1] if "://" in url else url
    path = "/" + rest.split("/", 1)[1] if "/" in rest else "/"
    path = path.split("?", 1)[0].split("#", 1)[0]
    return _NOT_PATH.sub("_", path)[:200] or "/"
