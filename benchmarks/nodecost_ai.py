"""Node kinds of the families campaign (benchmarks/node_costs.py --families): AI roots with their sub-nodes, app
nodes that reach a local stand-in, and the core nodes the first campaigns left out. Each builder returns nodes
(and the AI connections among them) that take one item and pass one on without expressions, against the local
OpenAI-compatible stand-in (n8n_sizer/standins/openai.py) through an `openAiApi` credential whose base URL is the
stand-in's, or an app credential whose host is configurable (Telegram's `baseUrl`).

A kind is a unit the chain repeats K times: `unit(kind, i, ctx)` gives (main node, its sub-nodes, AI connections
from the sub-nodes to it). The main node is the one on the chain; its measured row prices it with its sub-nodes
(the chat model inside the Agent's row, embeddings and the text splitter inside the vector store's), or a sub-node
alone as a difference of two kinds (`DELTAS`: memory = agent with memory - agent).
"""

from __future__ import annotations

import uuid
from typing import Any

from nodecost_lib import _condition, node

AI = "@n8n/n8n-nodes-langchain."


def _uid() -> str:
    return str(uuid.uuid4())


def ai_node(type_: str, version: float, parameters: dict[str, Any], name: str, cred: dict | None = None) -> dict:
    out = {
        "parameters": parameters,
        "id": _uid(),
        "name": name,
        "type": AI + type_,
        "typeVersion": version,
        "position": [0, 0],
    }
    if cred is not None:
        out["credentials"] = cred
    return out


def openai_cred(ctx: dict) -> dict:
    return {"openAiApi": {"id": ctx["openai_cred_id"], "name": ctx["openai_cred_name"]}}


def chat_model(name: str, ctx: dict, responses: bool = False) -> dict:
    """The OpenAI Chat Model sub-node: version 1.3 speaks the Responses API (its default), 1.2 chat completions."""
    params: dict[str, Any] = {"model": {"__rl": True, "mode": "id", "value": "gpt-4o-mini"}, "options": {}}
    if not responses:
        return ai_node("lmChatOpenAi", 1.2, params, name, openai_cred(ctx))
    return ai_node("lmChatOpenAi", 1.3, params | {"responsesApiEnabled": True}, name, openai_cred(ctx))


def embeddings(name: str, ctx: dict) -> dict:
    return ai_node("embeddingsOpenAi", 1.2, {"model": "text-embedding-3-small", "options": {}}, name, openai_cred(ctx))


def _agent(name: str) -> dict:
    return ai_node("agent", 3.1, {"promptType": "define", "text": "Say ok.", "options": {}}, name)


def _link(sub: str, root: str, kind: str) -> tuple[str, str, str]:
    return (sub, root, kind)


def unit(kind: str, i: int, ctx: dict) -> tuple[dict, list[dict], list[tuple[str, str, str]]]:
    """(the chain's node, its sub-nodes, (sub, root, connection type) links) for one copy `i` of `kind`."""
    n = f"{kind} {i}"
    if kind == "aiAgent":  # the Agent with its chat model: one model call (the Responses API, the default)
        root, model = _agent(n), chat_model(f"{n} model", ctx, responses=True)
        return root, [model], [_link(model["name"], n, "ai_languageModel")]
    if kind == "aiAgentChat":  # the same over chat completions (the sub-node's version 1.2)
        root, model = _agent(n), chat_model(f"{n} model", ctx)
        return root, [model], [_link(model["name"], n, "ai_languageModel")]
    if kind == "aiAgentMemory":  # ... with a window buffer memory
        root, model = _agent(n), chat_model(f"{n} model", ctx, responses=True)
        memory = ai_node(
            "memoryBufferWindow",
            1.3,
            {"sessionIdType": "customKey", "sessionKey": "bench", "contextWindowLength": 5},
            f"{n} memory",
        )
        links = [_link(model["name"], n, "ai_languageModel"), _link(memory["name"], n, "ai_memory")]
        return root, [model, memory], links
    if kind == "aiAgentTool":  # ... with a calculator tool, which the stand-in model calls once: two model calls
        root, model = _agent(n), chat_model(f"{n} model", ctx, responses=True)
        tool = ai_node("toolCalculator", 1, {}, f"{n} calc")
        links = [_link(model["name"], n, "ai_languageModel"), _link(tool["name"], n, "ai_tool")]
        return root, [model, tool], links
    if kind == "aiAgentToolHttp":  # ... with an HTTP Request tool that calls the stand-in
        root, model = _agent(n), chat_model(f"{n} model", ctx, responses=True)
        tool = ai_node(
            "toolHttpRequest",
            1.1,
            {"toolDescription": "Looks a value up.", "method": "GET", "url": ctx["app_url"] + "/tool", "options": {}},
            f"{n} http",
        )
        links = [_link(model["name"], n, "ai_languageModel"), _link(tool["name"], n, "ai_tool")]
        return root, [model, tool], links
    if kind == "aiChain":  # Basic LLM Chain with its chat model
        root = ai_node("chainLlm", 1.7, {"promptType": "define", "text": "Say ok."}, n)
        model = chat_model(f"{n} model", ctx, responses=True)
        return root, [model], [_link(model["name"], n, "ai_languageModel")]
    if kind == "aiChainParser":  # ... with a structured output parser
        root = ai_node("chainLlm", 1.7, {"promptType": "define", "text": "Say ok.", "hasOutputParser": True}, n)
        model = chat_model(f"{n} model", ctx)
        parser = ai_node(
            "outputParserStructured",
            1.3,
            {"schemaType": "fromJson", "jsonSchemaExample": '{"ok": "ok"}'},
            f"{n} parser",
        )
        links = [_link(model["name"], n, "ai_languageModel"), _link(parser["name"], n, "ai_outputParser")]
        return root, [model, parser], links
    if kind == "aiModelApp":  # the OpenAI node, "message a model"
        root = ai_node(
            "openAi",
            1.8,
            {
                "resource": "text",
                "operation": "message",
                "modelId": {"__rl": True, "mode": "id", "value": "gpt-4o-mini"},
                "messages": {"values": [{"content": "Say ok."}]},
                "options": {},
            },
            n,
            openai_cred(ctx),
        )
        return root, [], []
    if kind == "aiVectorInsert":  # the in-memory vector store, insert: loader + splitter + embeddings
        root = ai_node(
            "vectorStoreInMemory",
            1.3,
            {"mode": "insert", "memoryKey": {"__rl": True, "mode": "id", "value": f"k{i}"}},
            n,
        )
        loader = ai_node(
            "documentDefaultDataLoader",
            1.1,
            {"jsonMode": "expressionData", "jsonData": "Some text to store.", "options": {}},
            f"{n} loader",
        )
        splitter = ai_node(
            "textSplitterRecursiveCharacterTextSplitter", 1, {"chunkSize": 1000, "options": {}}, f"{n} splitter"
        )
        emb = embeddings(f"{n} embeddings", ctx)
        links = [
            _link(loader["name"], n, "ai_document"),
            _link(splitter["name"], loader["name"], "ai_textSplitter"),
            _link(emb["name"], n, "ai_embedding"),
        ]
        return root, [loader, splitter, emb], links
    if kind == "aiVectorLoad":  # the in-memory vector store, load (a similarity search: one embeddings call)
        root = ai_node(
            "vectorStoreInMemory",
            1.3,
            {"mode": "load", "prompt": "text", "topK": 2, "memoryKey": {"__rl": True, "mode": "id", "value": "shared"}},
            n,
        )
        emb = embeddings(f"{n} embeddings", ctx)
        return root, [emb], [_link(emb["name"], n, "ai_embedding")]
    if kind == "appTelegram":  # Telegram: send a message, through a credential whose baseUrl is the stand-in
        root = node(
            "telegram",
            1.2,
            {"chatId": "1", "text": "ok", "additionalFields": {"appendAttribution": False}},
            n,
        )
        root["credentials"] = {"telegramApi": {"id": ctx["telegram_cred_id"], "name": ctx["telegram_cred_name"]}}
        root["webhookId"] = _uid()
        return root, [], []
    if kind == "appHttpJson":  # an app-like call: HTTP Request POSTing JSON to the stand-in
        root = node(
            "httpRequest",
            4.2,
            {
                "method": "POST",
                "url": ctx["app_url"] + "/app",
                "sendBody": True,
                "specifyBody": "json",
                "jsonBody": '{"text": "ok"}',
                "options": {},
            },
            n,
        )
        return root, [], []
    if kind == "stopAndError":
        return node("stopAndError", 1, {"errorMessage": "stop"}, n), [], []
    if kind == "splitInBatches":  # Loop Over Items (v3) with its loop output back to itself through a No-Op
        return node("splitInBatches", 3, {"options": {}}, n), [], []
    if kind == "function":
        return node("function", 1, {"functionCode": "return items;"}, n), [], []
    if kind == "functionItem":
        return node("functionItem", 1, {"functionCode": "return item;"}, n), [], []
    if kind == "mergeAppend":
        return node("merge", 3.1, {"options": {}}, n), [], []
    if kind == "mergeChooseBranch":
        return node("merge", 3.1, {"mode": "chooseBranch", "useDataOfInput": 1}, n), [], []
    if kind == "mergeByFields":
        return (
            node(
                "merge",
                3.1,
                {
                    "mode": "combine",
                    "fieldsToMatchString": "n",
                    "options": {},
                },
                n,
            ),
            [],
            [],
        )
    if kind == "html":
        return (
            node(
                "html",
                1.2,
                {
                    "operation": "generateHtmlTemplate",
                    "html": "<p>ok</p>",
                },
                n,
            ),
            [],
            [],
        )
    if kind == "sort":
        return node("sort", 1, {"sortFieldsUi": {"sortField": [{"fieldName": "n"}]}, "options": {}}, n), [], []
    if kind == "limit":
        return node("limit", 1, {"maxItems": 5}, n), [], []
    if kind == "removeDuplicates":
        return node("removeDuplicates", 2, {"compare": "allFields", "options": {}}, n), [], []
    if kind == "renameKeys":
        return (
            node(
                "renameKeys", 1, {"keys": {"key": [{"currentKey": "zz", "newKey": "yy"}]}, "additionalOptions": {}}, n
            ),
            [],
            [],
        )
    if kind == "filterDiscard":  # a Filter that drops its item: what follows it does not run
        return node("filter", 2.2, {"conditions": _condition() | {"conditions": []}, "options": {}}, n), [], []
    raise ValueError(f"no builder for node kind {kind!r}")


# kind -> (row id, n8n node type, `when` (the setting a row prices), what the row holds)
ROWS: dict[str, tuple[str, str, dict | None, str]] = {
    "aiAgent": ("aiAgent", AI + "agent", None, "the Agent with its OpenAI Chat Model, one model call (Responses API)"),
    "aiChain": ("aiChain", AI + "chainLlm", None, "Basic LLM Chain with its OpenAI Chat Model, one model call"),
    "aiModelApp": ("aiModelApp", AI + "openAi", None, "the OpenAI node, message a model: one model call"),
    "aiVectorInsert": (
        "aiVectorInsert",
        AI + "vectorStoreInMemory",
        {"mode": "insert"},
        "in-memory vector store, insert: loader, splitter, embeddings",
    ),
    "aiVectorLoad": (
        "aiVectorLoad",
        AI + "vectorStoreInMemory",
        None,
        "in-memory vector store, load: one embeddings call and a search",
    ),
    "appTelegram": (
        "appTelegram",
        "n8n-nodes-base.telegram",
        None,
        "Telegram send message, to a local stand-in (its credential's baseUrl)",
    ),
    "stopAndError": (
        "stopAndError",
        "n8n-nodes-base.stopAndError",
        None,
        "Stop and Error: the execution ends as failed (against No-Op)",
    ),
    "splitInBatches": (
        "splitInBatches",
        "n8n-nodes-base.splitInBatches",
        None,
        "Loop Over Items, one batch, its loop through a No-Op",
    ),
    "function": ("function", "n8n-nodes-base.function", None, "Function (legacy), return items"),
    "functionItem": ("functionItem", "n8n-nodes-base.functionItem", None, "Function Item (legacy), return item"),
    "mergeAppend": ("mergeAppend", "n8n-nodes-base.merge", {"mode": "append"}, "Merge, append"),
    "mergeChooseBranch": (
        "mergeChooseBranch",
        "n8n-nodes-base.merge",
        {"mode": "chooseBranch"},
        "Merge, choose branch",
    ),
    "mergeByFields": (
        "mergeByFields",
        "n8n-nodes-base.merge",
        {"combineBy": "combineByFields"},
        "Merge, combine by fields",
    ),
    "html": ("html", "n8n-nodes-base.html", None, "HTML, generate a template"),
    "sort": ("sort", "n8n-nodes-base.sort", None, "Sort by a field"),
    "limit": ("limit", "n8n-nodes-base.limit", None, "Limit"),
    "removeDuplicates": ("removeDuplicates", "n8n-nodes-base.removeDuplicates", None, "Remove Duplicates, all fields"),
    "renameKeys": ("renameKeys", "n8n-nodes-base.renameKeys", None, "Rename Keys"),
}
# A sub-node's row as the difference of two kinds per copy: (row id, type, the kind with it, the kind without it).
DELTAS: dict[str, tuple[str, str, str, str]] = {
    "aiMemory": ("aiMemory", AI + "memoryBufferWindow", "aiAgentMemory", "aiAgent"),
    "aiTool": ("aiTool", AI + "toolCalculator", "aiAgentTool", "aiAgent"),
    "aiToolCall": ("aiToolCall", AI + "toolHttpRequest", "aiAgentToolHttp", "aiAgent"),
    "aiOutputParser": ("aiOutputParser", AI + "outputParserStructured", "aiChainParser", "aiChain"),
}
