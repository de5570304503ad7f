"""Node families: every n8n node type sorted by what one run of it does to an execution's cost and time.

A family says how a node is priced when the table has no row of its own (a figure of the family's measured
members, with their spread), whether it waits on something outside n8n (a model, an app's API, a database, a
sub-workflow, a timer) and, for triggers, what starts the execution (a webhook, a schedule, a poll...).

`classify_description(desc)` sorts one node of n8n's own node list (`dist/types/nodes.json` of n8n-nodes-base and
@n8n/n8n-nodes-langchain, n8n 2.41.1): `benchmarks/node_families.py` runs it over that list and writes
`n8n_sizer/data/node_families.json`, which `family_of(type)` reads. A type that list does not hold (a community
node, a newer n8n) is sorted by its name alone (`classify_name`), or not at all (unpriced, named in the answer).
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from n8n_sizer.safety.frozen import Frozen

BASE = "n8n-nodes-base."
AI = "@n8n/n8n-nodes-langchain."


class Family(Frozen):
    id: str
    what: str
    role: str  # trigger, node, sub (an AI sub-node: called by the root it is attached to), none (never runs)
    calls: str = ""  # what it waits on per call: model, embedding, app, http, database, vector, subworkflow, wait
    runs: str = "main"  # trigger kind for triggers: webhook, form, chat, mcp, app-webhook, schedule, poll, ...


def _f(id_: str, what: str, role: str = "node", calls: str = "", runs: str = "main") -> Family:
    return Family(id=id_, what=what, role=role, calls=calls, runs=runs)


FAMILIES: dict[str, Family] = {
    f.id: f
    for f in (
        # triggers: what starts an execution, and so at what rate (triggers.py)
        _f("trigger.webhook", "Webhook trigger", "trigger", runs="webhook"),
        _f("trigger.form", "Form trigger: a webhook that serves a form", "trigger", runs="form"),
        _f("trigger.chat", "Chat trigger: a webhook that serves a chat", "trigger", runs="chat"),
        _f("trigger.mcp", "MCP server trigger: a webhook an MCP client calls", "trigger", runs="mcp"),
        _f(
            "trigger.app-webhook",
            "an app's trigger: the app calls a webhook on each event",
            "trigger",
            runs="app-webhook",
        ),
        _f("trigger.schedule", "Schedule, Cron or Interval trigger", "trigger", runs="schedule"),
        _f("trigger.poll", "an app's polling trigger: n8n asks the app on a schedule", "trigger", runs="poll"),
        _f("trigger.manual", "manual trigger (the editor's Execute button)", "trigger", runs="manual"),
        _f("trigger.subworkflow", "sub-workflow trigger: another workflow calls it", "trigger", runs="subworkflow"),
        _f("trigger.error", "Error trigger: runs when another workflow fails", "trigger", runs="error"),
        _f("trigger.event", "an event trigger (a queue, a mailbox, a database, n8n itself)", "trigger", runs="event"),
        _f("none", "a canvas note: never runs", "none"),
        # nodes that run in the execution
        _f("data", "a data node: reshapes items inside n8n, no call out"),
        _f("code", "Code, Function, Function Item: JavaScript in the task runner"),
        _f("http", "HTTP Request (or GraphQL, RSS): one HTTP call plus its mapping", calls="http"),
        _f("app", "an app node: an HTTP call to the app's API plus its mapping", calls="app"),
        _f("database", "a database node: a query over the network", calls="database"),
        _f("subworkflow", "Execute Workflow: a whole sub-execution", calls="subworkflow"),
        _f("wait", "Wait (or Form): a timer, or parked until an event resumes it", calls="wait"),
        _f("loop", "Split In Batches / Loop Over Items"),
        _f("merge", "Merge"),
        _f("stop", "Stop and Error: ends the execution as failed"),
        _f("respond", "Respond to Webhook"),
        # AI (@n8n/n8n-nodes-langchain): root nodes run on the main path, sub-nodes are called by their root
        _f("ai.agent", "AI Agent: one model call, more with tools", calls="model"),
        _f("ai.chain", "an LLM chain (Basic LLM Chain, classifier, extractor...): one model call", calls="model"),
        _f("ai.model-app", "a model API node (OpenAI, Anthropic, Gemini...): one model call", calls="model"),
        _f("ai.model", "a chat or language model sub-node: the model its root calls", "sub", calls="model"),
        _f("ai.embedding", "an embeddings sub-node: one embeddings call per use", "sub", calls="embedding"),
        _f("ai.memory", "chat memory kept in n8n (window buffer)", "sub"),
        _f("ai.memory-remote", "chat memory in a database (Postgres, Redis, Mongo...)", "sub", calls="database"),
        _f("ai.vector-store", "the in-memory vector store", "node"),
        _f("ai.vector-store-remote", "a vector store service (Pinecone, Qdrant, Supabase...)", "node", calls="vector"),
        _f("ai.text-splitter", "a text splitter sub-node", "sub"),
        _f("ai.document-loader", "a document loader sub-node", "sub"),
        _f("ai.output-parser", "an output parser sub-node", "sub"),
        _f("ai.retriever", "a retriever sub-node", "sub"),
        _f("ai.reranker", "a reranker sub-node: one call to its API", "sub", calls="app"),
        _f("ai.tool", "a tool that runs inside n8n (calculator, think, code, vector store)", "sub"),
        _f("ai.tool-call", "a tool that calls out (HTTP, an app, MCP, search)", "sub", calls="app"),
        _f("ai.tool-workflow", "a workflow as a tool: a sub-execution", "sub", calls="subworkflow"),
    )
}

# n8n-nodes-base nodes by name where the node list alone does not say (no credentials but a call out, credentials
# but no call out, legacy names).
CODE = {"code", "function", "functionItem", "aiTransform"}
HTTP = {"httpRequest", "graphql", "rssFeedRead"}
DATABASE = {
    "postgres",
    "mySql",
    "microsoftSql",
    "mongoDb",
    "redis",
    "questDb",
    "crateDb",
    "timescaleDb",
    "oracleDatabase",
    "dataTable",
    "snowflake",
}
IN_PROCESS_WITH_CREDENTIALS = {"jwt", "totp", "crypto", "respondToWebhook"}
NO_CREDENTIAL_APPS = {"coinGecko", "hackerNews", "openThesaurus", "quickChart", "postBin", "n8n"}
SPECIAL = {
    "executeWorkflow": "subworkflow",
    "wait": "wait",
    "form": "wait",
    "splitInBatches": "loop",
    "merge": "merge",
    "stopAndError": "stop",
    "respondToWebhook": "respond",
    "stickyNote": "none",
}
TRIGGERS = {
    "webhook": "trigger.webhook",
    "formTrigger": "trigger.form",
    "scheduleTrigger": "trigger.schedule",
    "cron": "trigger.schedule",
    "interval": "trigger.schedule",
    "manualTrigger": "trigger.manual",
    "start": "trigger.manual",  # n8n 0.x's Start node, still in old exports
    "executeWorkflowTrigger": "trigger.subworkflow",
    "errorTrigger": "trigger.error",
}
AI_TRIGGERS = {"chatTrigger": "trigger.chat", "manualChatTrigger": "trigger.manual", "mcpTrigger": "trigger.mcp"}
AI_TOOLS_IN_PROCESS = {"toolCalculator", "toolThink", "toolCode", "toolVectorStore", "toolExecutor"}


def _is_trigger(desc: dict) -> bool:
    name = str(desc.get("name", ""))
    return "trigger" in (desc.get("group") or []) or name.lower().endswith("trigger") or name in ("cron", "interval")


def _trigger_family(name: str, desc: dict, package: str) -> str:
    table = TRIGGERS if package == BASE else AI_TRIGGERS
    if name in table:
        return table[name]
    if desc.get("polling"):
        return "trigger.poll"
    if desc.get("webhooks"):
        return "trigger.app-webhook"
    return "trigger.event"


def _ai_family(name: str, desc: dict) -> str:
    codex = desc.get("codex") or {}
    sub = set((codex.get("subcategories") or {}).get("AI") or [])
    if name in AI_TOOLS_IN_PROCESS:
        return "ai.tool"
    if name == "toolWorkflow":
        return "ai.tool-workflow"
    if name == "code":
        return "code"
    if name.startswith("vectorStore") or "Vector Stores" in sub:
        return "ai.vector-store" if "InMemory" in name else "ai.vector-store-remote"
    if "Agents" in sub and "Miscellaneous" in sub:
        return "ai.model-app"  # OpenAI, Anthropic, Gemini... nodes that call a model directly
    for key, family in (
        ("Agents", "ai.agent"),
        ("Chains", "ai.chain"),
        ("Language Models", "ai.model"),
        ("Embeddings", "ai.embedding"),
        ("Text Splitters", "ai.text-splitter"),
        ("Document Loaders", "ai.document-loader"),
        ("Output Parsers", "ai.output-parser"),
        ("Retrievers", "ai.retriever"),
        ("Rerankers", "ai.reranker"),
    ):
        if key in sub:
            return family
    if "Memory" in sub or name.startswith("memory"):
        return (
            "ai.memory"
            if name in ("memoryBufferWindow", "memoryManager", "memoryChatRetriever")
            else "ai.memory-remote"
        )
    if "Tools" in sub or "Model Context Protocol" in sub:
        return "ai.tool-call"
    if name == "mcpClient":
        return "app"
    return "data"  # chat, toolExecutor...: in-process helpers


def classify_description(desc: dict, package: str) -> str:
    """The family of one entry of n8n's node list (`package` is BASE or AI)."""
    name = str(desc.get("name", ""))
    if _is_trigger(desc):
        return _trigger_family(name, desc, package)
    if package == AI:
        return _ai_family(name, desc)
    if name in SPECIAL:
        return SPECIAL[name]
    if name in CODE:
        return "code"
    if name in HTTP:
        return "http"
    if name in DATABASE:
        return "database"
    if name in NO_CREDENTIAL_APPS:
        return "app"
    if desc.get("credentials") and name not in IN_PROCESS_WITH_CREDENTIALS:
        return "app"
    return "data"


def tool_variant_family(base_family: str) -> str:
    """A node used as an AI tool (`<type>Tool`, n8n's usableAsTool): it calls out where the node does."""
    return "ai.tool-call" if FAMILIES[base_family].calls else "ai.tool"


@lru_cache(maxsize=1)
def _known() -> dict[str, str]:
    text = resources.files("n8n_sizer").joinpath("data/node_families.json").read_text(encoding="utf-8")
    return json.loads(text)["types"]


def classify_name(node_type: str) -> str | None:
    """A type n8n 2.41.1's node list does not hold, sorted by its name where the name says enough, else None."""
    short = node_type.rsplit(".", 1)[-1]
    lower = short.lower()
    if node_type.startswith(BASE) and short in TRIGGERS:
        return TRIGGERS[short]  # n8n 0.x's Start node and other names of old exports
    if lower.endswith("trigger"):
        return "trigger.event"
    if node_type.startswith(AI):
        if lower.startswith("lmchat") or lower.startswith("lm"):
            return "ai.model"
        if lower.startswith("embeddings"):
            return "ai.embedding"
        if lower.startswith("vectorstore"):
            return "ai.vector-store-remote"
        if lower.startswith("memory"):
            return "ai.memory-remote"
        if lower.startswith("tool"):
            return "ai.tool-call"
    if lower.endswith("tool") and len(short) > 4:
        return "ai.tool-call"  # a community or newer node used as an AI tool: assume it calls out
    if node_type.startswith(BASE):
        return "app"  # a node n8n no longer ships: the ones old exports hold were app integrations
    return None


def family_of(node_type: str) -> Family | None:
    """The family of a node type: n8n 2.41.1's node list first, then its name; None when neither says."""
    fid = _known().get(node_type) or classify_name(node_type)
    return FAMILIES.get(fid) if fid else None
