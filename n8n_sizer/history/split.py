"""A node's measured time, split into CPU and waiting by its family: the one place this split is made.

A node run's `executionTime` (n8n's run data) is wall time in the process that runs it. What part of it is CPU
depends on what the node does:

- `trigger` (Webhook, Schedule, any `...Trigger`): its work is n8n's per-execution base, priced with the workflow;
  nothing here.
- `code` (Code, Function): its own JavaScript in the task runner: all CPU (on a busy host, also the wait for a
  core: an upper bound).
- `cpu` (Set, IF, Merge, ... every node that computes and calls nothing): all CPU.
- `call` (HTTP Request, and every app node: Slack, Postgres, Google Sheets, a community node), `model` (the AI
  nodes, `@n8n/n8n-nodes-langchain.*`: a model or vector store called), `sub-workflow` (Execute Workflow: a whole
  execution, then its own calls), `wait` (Wait): the node's CPU is priced from the node cost table (its row per run;
  a type the table lacks, the median row), and the rest of its measured time is waiting, holding a slot but no CPU.

Waits parked in the database (a Wait longer than n8n's 65 s) are not running at all: history/timings.py leaves
them out before this split. When the node-family table of the workflow pricer lands (advisor/workflow_price, with
a waiting model per family), `family_of` and `priced_cpu_ms` switch to it; nothing else changes.
"""

from __future__ import annotations

import statistics

from n8n_sizer.advisor.workflow_price import NodeCostTable
from n8n_sizer.history.record import Family
from n8n_sizer.history.trigger_seen import is_trigger

CODE_TYPES = {"n8n-nodes-base.code", "n8n-nodes-base.function", "n8n-nodes-base.functionItem"}
WAIT_TYPES = {"n8n-nodes-base.wait"}
SUB_WORKFLOW_TYPES = {"n8n-nodes-base.executeWorkflow"}
MODEL_PREFIX = "@n8n/n8n-nodes-langchain."
NOTE_TYPES = {"n8n-nodes-base.stickyNote"}
# n8n-nodes-base nodes that compute on the items they get and call nothing outside the process.
CPU_TYPES = {
    f"n8n-nodes-base.{name}"
    for name in (
        "set",
        "if",
        "filter",
        "switch",
        "merge",
        "noOp",
        "dateTime",
        "crypto",
        "splitOut",
        "aggregate",
        "sort",
        "limit",
        "removeDuplicates",
        "splitInBatches",
        "itemLists",
        "renameKeys",
        "summarize",
        "html",
        "xml",
        "markdown",
        "compareDatasets",
        "respondToWebhook",
        "stopAndError",
        "executionData",
        "convertToFile",
        "extractFromFile",
        "editImage",
        "compression",
        "jwt",
        "totp",
        "moveBinaryData",
        "spreadsheetFile",
        "readBinaryFile",
        "readBinaryFiles",
        "writeBinaryFile",
        "readWriteFile",
        "debugHelper",
        "n8n",
        "form",
        "noOp",
    )
}


def family_of(node_type: str) -> Family:
    """The node's family (module docstring)."""
    if node_type in NOTE_TYPES:
        return "none"
    if is_trigger(node_type):
        return "trigger"
    if node_type in CODE_TYPES:
        return "code"
    if node_type in WAIT_TYPES:
        return "wait"
    if node_type in SUB_WORKFLOW_TYPES:
        return "sub-workflow"
    if node_type.startswith(MODEL_PREFIX):
        return "model"
    if node_type in CPU_TYPES:
        return "cpu"
    return "call"


def priced_cpu_ms(node_type: str, table: NodeCostTable) -> float:
    """CPU of one run of the node, from the node cost table (the median row for a type it does not have), >= 0."""
    row = table.row(node_type)
    if row is not None:
        return max(row.cpu.ms, 0.0)
    return max(statistics.median(r.cpu.ms for r in table.nodes), 0.0)


def split_node_time(
    node_type: str, per_execution_ms: float, runs_per_execution: float, table: NodeCostTable
) -> tuple[Family, float, float]:
    """(family, CPU ms, waiting ms) of a node's measured time per execution; the two add up to the time."""
    family = family_of(node_type)
    measured = max(per_execution_ms, 0.0)
    if family in ("trigger", "none"):
        return family, 0.0, 0.0
    if family in ("code", "cpu"):
        return family, measured, 0.0
    cpu = min(measured, priced_cpu_ms(node_type, table) * runs_per_execution)
    return family, cpu, measured - cpu
