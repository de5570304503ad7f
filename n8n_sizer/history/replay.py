"""A history as workflows to replay (`bench --history FILE`): a history keeps no workflow definitions, so each
workflow is synthesised in the same shape, from its nodes and their measured times. Pure: no I/O.

Per workflow, one chain, in the order of its nodes:
- its trigger becomes a Webhook (POST, answering with the last node's output): the bench sends each workflow's
  executions at its measured rate, a schedule's as evenly spaced calls;
- each Code node becomes a Code node that spins a counted integer loop for the CPU the history measured in it
  (beyond the Code row's round trip), the loop's iterations per ms calibrated on this machine's Node.js;
- each calling node (HTTP Request, an app's node, an AI model: `call`, `model`, `sub-workflow` families) becomes an
  HTTP Request to the delayed HTTP stand-in, on a path of its own that answers after that node's measured waiting
  time per run;
- each Wait becomes a Wait of its measured (not parked) time;
- every other node (Set, IF, Merge, ...) becomes a No Operation node, or a Set node with as many expressions as
  it had (expressions are what such nodes cost, docs/workflow-price.md).

What it reproduces: the rates, the trigger's ingest cost (as a webhook), each node's CPU as the cost table prices
it, the Code nodes' measured CPU, every wait and call latency, so CPU demand and time in flight per execution.
What it does not: payloads and item counts (one item flows), branches (a chain runs every node once), nodes run
more than once per execution (one call per execution carries all of a node's waiting), a sub-workflow's own
execution (its call is a stand-in call), parked waits (they are not running), an app's own CPU beyond its row, and
bursts (the bench offers constant rates; the history's busiest minute is for the advice).
"""

from __future__ import annotations

import re
import uuid

from pydantic import Field

from n8n_sizer.history.record import History, WorkflowHistory
from n8n_sizer.safety.frozen import Frozen

CALLING = ("call", "model", "sub-workflow")
MAX_LOOP_ITERATIONS = 5_000_000_000
LOOP_JS = (
    "const n = {n}; let x = 0;\n"
    "for (let i = 0; i < n; i++) {{ x = (x * 31 + i) % 1000003; }}\n"
    "return [{{ json: {{ x, executionId: $execution.id }} }}];"
)


class ReplayWorkflow(Frozen):
    key: str  # w1, w2, ... (paths and step names)
    name: str  # the history's name for it
    rate_per_s: float = Field(ge=0)
    webhook_path: str
    definition: dict
    routes_ms: dict[str, float] = {}  # stand-in path -> latency per call
    wait_ms: float = Field(0.0, ge=0)  # Wait nodes' time per execution
    code_cpu_ms: float = Field(0.0, ge=0)
    notes: tuple[str, ...] = ()


class ReplayPlan(Frozen):
    workflows: tuple[ReplayWorkflow, ...]
    loop_iterations_per_ms: float


def _node(type_: str, version: float, params: dict, name: str) -> dict:
    return {
        "parameters": params,
        "id": str(uuid.uuid4()),
        "name": name,
        "type": f"n8n-nodes-base.{type_}",
        "typeVersion": version,
        "position": [0, 0],
    }


def _set(name: str, expressions: int) -> dict:
    fields = [
        {"id": str(uuid.uuid4()), "name": f"e{i}", "value": f"={{{{ {i} + 1 }}}}", "type": "number"}
        for i in range(expressions)
    ]
    return _node("set", 3.4, {"assignments": {"assignments": fields}, "includeOtherFields": True, "options": {}}, name)


def synthesise(
    w: WorkflowHistory, key: str, rate_per_s: float, standin_url: str, iterations_per_ms: float, tag: str
) -> ReplayWorkflow:
    """One workflow of the history as a replayable workflow (module docstring)."""
    from n8n_sizer.advisor.workflow_price import load_node_costs

    code_row = max(load_node_costs().row_by_id("code").cpu.ms, 0.0)
    times = {t.name: t for t in w.node_timings if t.inside is None}
    path = f"replay-{key}-{tag}"
    hook = _node("webhook", 2, {"httpMethod": "POST", "path": path, "responseMode": "lastNode", "options": {}}, "In")
    hook["webhookId"] = str(uuid.uuid4())
    chain, routes, notes = [hook], {}, []
    wait_total = code_total = 0.0
    for j, n in enumerate(w.nodes, 1):
        t = times.get(n.name)
        family = t.family if t is not None else None
        if n.disabled or n.type.endswith("stickyNote") or family == "trigger" or n.type == "n8n-nodes-base.webhook":
            continue
        label = f"n{j}"
        if family == "code":
            cpu = max(t.cpu_ms - t.runs_per_execution * code_row, 0.0)
            loops = min(int(round(cpu * iterations_per_ms)), MAX_LOOP_ITERATIONS)
            chain.append(_node("code", 2, {"jsCode": LOOP_JS.format(n=loops)}, label))
            code_total += cpu
        elif family in CALLING and t.wait_ms > 0:
            route = f"/r/{key}/{label}"
            routes[route] = t.wait_ms
            chain.append(_node("httpRequest", 4.2, {"url": f"{standin_url}{route}", "options": {}}, label))
            if t.runs_per_execution > 1.05:
                notes.append(f"a node ran {t.runs_per_execution:.1f} times per execution: replayed as one call")
        elif family == "wait" and t.wait_ms > 0:
            chain.append(_node("wait", 1.1, {"amount": round(t.wait_ms / 1000.0, 3), "unit": "seconds"}, label))
            chain[-1]["webhookId"] = str(uuid.uuid4())
            wait_total += t.wait_ms
        elif n.expressions:
            chain.append(_set(label, n.expressions))
        else:
            chain.append(_node("noOp", 1, {}, label))
    connections = {
        a["name"]: {"main": [[{"node": b["name"], "type": "main", "index": 0}]]}
        for a, b in zip(chain, chain[1:], strict=False)
    }
    definition = {
        "name": f"n8n-sizer replay {key}",
        "nodes": chain,
        "connections": connections,
        "settings": {"executionOrder": "v1"},
    }
    if not w.node_timings:
        notes.append("no node timings in the history: replayed without waits or Code CPU")
    return ReplayWorkflow(
        key=key,
        name=w.name,
        rate_per_s=rate_per_s,
        webhook_path=path,
        definition=definition,
        routes_ms=routes,
        wait_ms=wait_total,
        code_cpu_ms=code_total,
        notes=tuple(notes),
    )


def replay_plan(
    history: History, standin_url: str, iterations_per_ms: float, tag: str, min_rate_per_s: float = 0.0
) -> ReplayPlan:
    """Every workflow with executions in the window, at its mean rate (those below `min_rate_per_s` left out)."""
    if not re.fullmatch(r"[a-z0-9-]{1,40}", tag):
        raise ValueError(f"replay tag {tag!r}: lowercase letters, digits and '-' only")
    out = []
    for i, w in enumerate(history.workflows, 1):
        rate = w.rates.per_s_mean
        if w.rates.executions == 0 or rate <= min_rate_per_s:
            continue
        out.append(synthesise(w, f"w{i}", rate, standin_url, iterations_per_ms, tag))
    return ReplayPlan(workflows=tuple(out), loop_iterations_per_ms=iterations_per_ms)
