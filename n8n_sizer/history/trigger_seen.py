"""What starts a workflow: its trigger node's kind, and a schedule's rule in words. Pure: no I/O.

Kinds follow n8n 2.41.1's trigger nodes: Webhook (`webhook`), Form Trigger (`form`), Chat Trigger (`chat`),
Schedule Trigger, Cron and Interval (`schedule`, with the rule), Manual Trigger (`manual`), Execute Workflow
Trigger (`sub-workflow`), Error Trigger (`error`), MCP Server Trigger (`mcp`), and any other `...Trigger` node,
an app's own (Slack, Gmail, a queue: `app`). A workflow without any trigger node is `none` (it runs only when
another calls it or from the editor); the execution modes (`by_mode`) then say how it ran.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from n8n_sizer.history.record import SeenTrigger

KINDS = {
    "n8n-nodes-base.webhook": "webhook",
    "n8n-nodes-base.formTrigger": "form",
    "@n8n/n8n-nodes-langchain.chatTrigger": "chat",
    "n8n-nodes-base.scheduleTrigger": "schedule",
    "n8n-nodes-base.cron": "schedule",
    "n8n-nodes-base.interval": "schedule",
    "n8n-nodes-base.manualTrigger": "manual",
    "n8n-nodes-base.executeWorkflowTrigger": "sub-workflow",
    "n8n-nodes-base.errorTrigger": "error",
    "@n8n/n8n-nodes-langchain.mcpTrigger": "mcp",
}
# When a workflow has several triggers, the one that says most about its load names it.
PRIORITY = ("webhook", "form", "chat", "mcp", "schedule", "app", "sub-workflow", "error", "manual")
MAX_RULE_CHARS = 160


def is_trigger(node_type: str) -> bool:
    return node_type in KINDS or node_type.lower().endswith("trigger") or node_type == "n8n-nodes-base.start"


def kind_of(node_type: str) -> str:
    return KINDS.get(node_type) or ("manual" if node_type == "n8n-nodes-base.start" else "app")


def trigger_of(nodes: Iterable[tuple[str, bool, dict[str, Any]]]) -> SeenTrigger:
    """The workflow's trigger from its nodes, given as (type, disabled, parameters)."""
    found: list[tuple[str, str, dict[str, Any]]] = []
    for node_type, disabled, params in nodes:
        if not disabled and is_trigger(node_type):
            found.append((kind_of(node_type), node_type, params))
    if not found:
        return SeenTrigger(kind="none")
    kind, node_type, params = min(found, key=lambda f: PRIORITY.index(f[0]) if f[0] in PRIORITY else len(PRIORITY))
    rule = schedule_rule(node_type, params) if kind == "schedule" else None
    return SeenTrigger(kind=kind, node_type=node_type, rule=rule)


def _unit(n: Any, unit: str) -> str:
    return f"every {n:g} {unit}{'' if n == 1 else 's'}" if isinstance(n, (int, float)) else f"every ? {unit}s"


def schedule_rule(node_type: str, params: dict[str, Any]) -> str | None:
    """A schedule's rule in words, bounded; None when its parameters say nothing readable."""
    parts: list[str] = []
    if node_type == "n8n-nodes-base.scheduleTrigger":
        rule = params.get("rule")
        intervals = rule.get("interval") if isinstance(rule, dict) else None
        for item in intervals if isinstance(intervals, list) else []:
            if not isinstance(item, dict):
                continue
            field = item.get("field", "days")
            if field == "cronExpression":
                parts.append(f"cron {str(item.get('expression', '?'))[:60]}")
            elif field in ("seconds", "minutes", "hours", "days", "weeks", "months"):
                amount = item.get(f"{field}Interval", 1)
                parts.append(_unit(amount, field.removesuffix("s")))
    elif node_type == "n8n-nodes-base.interval":
        parts.append(_unit(params.get("interval", 1), str(params.get("unit", "second")).removesuffix("s")))
    elif node_type == "n8n-nodes-base.cron":
        times = params.get("triggerTimes")
        items = times.get("item") if isinstance(times, dict) else None
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict):
                mode = item.get("mode", "everyDay")
                parts.append(f"cron {item.get('cronExpression')}" if mode == "custom" else str(mode))
    text = "; ".join(p for p in parts if p)
    return " ".join(text.split())[:MAX_RULE_CHARS] or None
