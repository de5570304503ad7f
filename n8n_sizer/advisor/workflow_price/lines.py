"""Each node of a workflow as one execution runs it: its cost and its waiting, and what the answer says of them.

`node_lines` gives every node its line: the runs per execution (graph.py), the CPU per run (linecost.py) with its
items and expressions, and its waiting (waits.py): a calling node calls once per item (once with Execute Once); an
Agent calls its model once, and once more per tool round (one round when tools are attached); a chain, a model
node, or any node with a model attached, once; a vector store calls its embeddings once per run (and its service,
if remote); a remote chat memory reads and writes once each; a Wait, a Form, an app's "send and wait" park.
`price_notes` says what changes the answer: the trigger, other flows, unreached nodes, the waiting and its
sources, parked waits, the branches chosen, loops.
"""

from __future__ import annotations

from collections import defaultdict

from n8n_sizer.advisor.workflow_price.export import ExportNode, parse_export
from n8n_sizer.advisor.workflow_price.families import Family
from n8n_sizer.advisor.workflow_price.graph import node_weights
from n8n_sizer.advisor.workflow_price.triggers import describe
from n8n_sizer.advisor.workflow_price.waits import (
    PARK_THRESHOLD_MS,
    NodeWait,
    WaitPlan,
    call_wait,
    sends_and_waits,
    wait_node,
)
from n8n_sizer.safety.frozen import Frozen

EXECUTE_WORKFLOW = "n8n-nodes-base.executeWorkflow"
NO_COST = {"n8n-nodes-base.stickyNote"}  # canvas notes: never executed
MODEL_CALLS = {"ai.agent": 1, "ai.chain": 1, "ai.model-app": 1}  # per run, before tool rounds


class NodeLine(Frozen):
    name: str
    type: str
    row_id: str  # the row it was priced from; "base" (a trigger), "family:<id>", "unknown", "none" (notes, disabled)
    cost_ms: float  # n8n CPU per execution for this node (executing process + its Postgres work), runs included
    low_ms: float
    high_ms: float
    expressions: int = 0
    note: str = ""
    family: str = ""  # families.py
    priced_by: str = "row"  # row, family, in-root, trigger, none, unknown
    runs: float = 1.0  # runs per execution (graph.py): 0 when the execution does not reach it
    wait_ms: float = 0.0  # waiting per execution that holds the execution (all its runs and calls)
    parked_ms: float = 0.0  # waiting per execution parked in the database (holds no slot)
    wait_source: str = ""  # where the wait per call came from
    embedding_calls: float = 0.0  # of its calls, to an embedding model (a vector store's), per execution
    embedding_wait_ms: float = 0.0  # ... and their part of wait_ms
    call_ms: float = 0.0  # the wait of one of its calls (a model call for a root, an embeddings call for a vector
    # store, the call for an HTTP, app or database node): what a stand-in answering for it waits
    model_calls: float = 0.0  # chat model calls per execution (an agent's, a chain's, a model node's)
    model_wait_ms: float = 0.0  # ... and their part of wait_ms


def attached_subs(parsed) -> dict[str, dict[str, list[str]]]:
    """root -> {connection kind: the sub-nodes attached to it} (ai_languageModel, ai_tool, ai_memory...)."""
    out: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for e in parsed.edges:
        if e.kind.startswith("ai_"):
            out[e.target][e.kind].append(e.source)
    return out


def sub_nodes(parsed, families: dict[str, Family | None]) -> set[str]:
    """Nodes that are called by a root rather than run on the path: AI sub-nodes (by family, or by their only
    connections being AI ones)."""
    outgoing: dict[str, set[str]] = defaultdict(set)
    for e in parsed.edges:
        outgoing[e.source].add(e.kind)
    subs = set()
    for node in parsed.nodes:
        fam = families[node.name]
        kinds = outgoing.get(node.name, set())
        if (fam is not None and fam.role == "sub") or (kinds and all(k.startswith("ai_") for k in kinds)):
            subs.add(node.name)
    return subs


def node_wait(
    node: ExportNode,
    family: Family | None,
    attached: dict[str, list[str]],
    nodes: dict[str, ExportNode],
    plan: WaitPlan,
    items: int,
    embedding_calls: dict[str, tuple[float, float]] | None = None,
) -> tuple[NodeWait, float]:
    """(the node's wait per run, its model calls per run). A calling node calls once per item (once with Execute
    Once); an agent calls its model once, and once more per tool round (one round when tools are attached)."""
    calls = 1 if node.execute_once else items
    embedding_calls = {} if embedding_calls is None else embedding_calls  # node -> (calls, ms) per run
    if family is None:
        return NodeWait(ms=0.0), 0.0
    if family.id == "wait":
        return wait_node(node, plan), 0.0
    if family.calls in ("app", "http") and sends_and_waits(node):
        return NodeWait(ms=0.0, source="event", event=True), 0.0
    if family.id in MODEL_CALLS or attached.get("ai_languageModel"):
        # an agent, a chain, a model node; or any node with a model attached (a vector store tool answers with it)
        model_calls = MODEL_CALLS.get(family.id, 1) + (1 if family.id == "ai.agent" and attached.get("ai_tool") else 0)
        models = [nodes[m] for m in attached.get("ai_languageModel", []) if m in nodes]
        per_call = call_wait(node, "model", plan, models)
        return (
            NodeWait(ms=per_call.ms * model_calls * calls, source=per_call.source, per_call_ms=per_call.ms),
            model_calls * calls,
        )
    if family.id in ("ai.vector-store", "ai.vector-store-remote"):
        embeds = [nodes[m] for m in attached.get("ai_embedding", []) if m in nodes]
        total, sources = 0.0, []
        per_call = 0.0
        if embeds:  # an embedding model's call: counted with the model calls, as embedding calls
            w = call_wait(node, "embedding", plan, embeds)
            total, sources, per_call = total + w.ms, [w.source], w.ms
            embedding_calls[node.name] = (calls, w.ms * calls)
        if family.calls == "vector":
            w = call_wait(node, "vector", plan)
            total, sources = total + w.ms, [*sources, w.source]
        return NodeWait(ms=total * calls, source="; ".join(dict.fromkeys(sources)), per_call_ms=per_call), 0.0
    if family.id == "ai.memory-remote":  # the conversation is read before the model call and written after it
        w = call_wait(node, "database", plan)
        return NodeWait(ms=2 * w.ms * calls, source=w.source, per_call_ms=w.ms), 0.0
    if family.id == "subworkflow":
        options = node.parameters.get("options")
        if isinstance(options, dict) and options.get("waitForSubWorkflow") is False:
            return NodeWait(ms=0.0, source="does not wait for the sub-workflow"), 0.0
        w = call_wait(node, "subworkflow", plan)
        return NodeWait(ms=w.ms * calls, source=w.source, per_call_ms=w.ms), 0.0
    if family.calls and family.role != "trigger" and family.id not in ("ai.model", "ai.embedding"):
        w = call_wait(node, family.calls, plan)
        return NodeWait(ms=w.ms * calls, source=w.source, per_call_ms=w.ms), 0.0
    return NodeWait(ms=0.0), 0.0


def node_lines(parsed, table, costing, families, weights, subs, plan, items, per_expr, per_item):
    """Each node's line (cost and wait per execution) and its (mid, low, high) part for the spread."""
    nodes = {n.name: n for n in parsed.nodes}
    attached = attached_subs(parsed)
    lines: list[NodeLine] = []
    model_calls = 0.0
    embedding: dict[str, tuple[float, float]] = {}
    for node in parsed.nodes:
        family = families[node.name]
        if node.type in NO_COST or node.disabled:
            lines.append(
                NodeLine(
                    name=node.name,
                    type=node.type,
                    row_id="none",
                    cost_ms=0,
                    low_ms=0,
                    high_ms=0,
                    note="disabled" if node.disabled else "not executed",
                    family=family.id if family else "",
                    priced_by="none",
                    runs=0.0,
                )
            )
            continue
        runs = weights.get(node.name, 0.0)
        wait, calls = node_wait(node, family, attached.get(node.name, {}), nodes, plan, items, embedding)
        parked = wait.parked_ms > 0 or wait.event
        cost = costing.cost(node, family, parked=parked and family is not None and family.id == "wait")
        model_calls += calls * runs
        priced = cost.priced_by in ("row", "family", "unknown")
        extra = (
            (per_expr.ms * node.expressions * items + per_item.ms * (items - 1)) if priced else 0.0,
            (per_expr.low_ms * node.expressions * items + per_item.low_ms * (items - 1)) if priced else 0.0,
            (per_expr.high_ms * node.expressions * items + per_item.high_ms * (items - 1)) if priced else 0.0,
        )
        mid = max(cost.mid + extra[0], 0.0) * runs
        low = max(cost.low + extra[1], 0.0) * runs
        high = max(cost.high + extra[2], cost.mid + extra[0], 0.0) * runs
        note = cost.note
        if node.type == EXECUTE_WORKFLOW:
            note = "a whole sub-execution (measured with a trigger-only sub-workflow): price its nodes apart"
        if runs == 0 and cost.priced_by not in ("trigger", "none"):
            note = "not reached from the trigger: not run by these executions"
        if family is not None and family.id in ("ai.model", "ai.embedding") and runs > 0:
            note = "its calls are waited on by the node it is attached to"
        lines.append(
            NodeLine(
                name=node.name,
                type=node.type,
                row_id=cost.row_id,
                cost_ms=round(mid, 3),
                low_ms=round(low, 3),
                high_ms=round(high, 3),
                expressions=node.expressions,
                note=note,
                family=cost.family,
                priced_by=cost.priced_by,
                runs=round(runs, 4),
                wait_ms=round(wait.ms * runs, 3),
                parked_ms=round(wait.parked_ms * runs, 3) + (0.0 if not wait.event else 0.0),
                wait_source=wait.source,
                call_ms=wait.per_call_ms,
                model_calls=round(calls * runs, 4),
                model_wait_ms=round(wait.ms * runs, 3) if calls > 0 else 0.0,
                embedding_calls=round(embedding.get(node.name, (0.0, 0.0))[0] * runs, 4),
                embedding_wait_ms=round(embedding.get(node.name, (0.0, 0.0))[1] * runs, 3),
            )
        )
    return lines, model_calls


def price_notes(parsed, lines, walk, trigger, triggers, plan, rps, model_calls, subs) -> list[str]:
    notes = [describe(trigger, rps)]
    others = [t for t in triggers if trigger is not None and t.name != trigger.name]
    if others:
        notes.append(
            "other triggers start executions of their own, not in this price: "
            + ", ".join(f"{t.name!r} ({t.kind}{', ' + t.says if t.says else ''})" for t in others[:5])
            + (" ..." if len(others) > 5 else "")
        )
    unreached = [line for line in lines if line.runs == 0 and line.priced_by not in ("trigger", "none")]
    if unreached:
        notes.append(
            f"{len(unreached)} node(s) are not reached from the trigger (another flow, or not connected): not priced"
        )
    held = [line for line in lines if line.wait_ms > 0]
    if held:
        by_source: dict[str, float] = defaultdict(float)
        for line in held:
            by_source[line.wait_source or "given"] += line.wait_ms
        total = sum(line.wait_ms for line in held)
        parts = []
        if model_calls > 0:
            model_ms = sum(line.model_wait_ms for line in lines)
            parts.append(
                f"model calls {model_calls:g} x {model_ms / model_calls / 1000:.2g} s = {model_ms / 1000:.3g} s"
            )
        embed_calls = sum(line.embedding_calls for line in lines)
        embed_ms = sum(line.embedding_wait_ms for line in lines)
        if embed_calls > 0:
            parts.append(
                f"embedding model calls {embed_calls:g} x {embed_ms / embed_calls / 1000:.2g} s = {embed_ms / 1000:.3g} s"
            )
        other_ms = total - sum(line.model_wait_ms for line in lines) - embed_ms
        if other_ms > 1e-6:
            parts.append(f"other calls and waits {other_ms / 1000:.3g} s")
        skip = ("--wait", "--wait-ms", "time", "given", "")
        sources = sorted({part for line in held for part in line.wait_source.split("; ") if part not in skip})
        notes.append(
            f"waiting per execution: {total / 1000:.3g} s ({'; '.join(parts)}), holding the execution's slot and memory"
            + (f"; defaults: {' | '.join(sources)}" if sources else "")
            + "; set your own with --wait NODE=MS or --wait-ms MS"
        )
    parked = [line for line in lines if line.parked_ms > 0 or (line.wait_source == "event" and line.runs > 0)]
    if parked:
        notes.append(
            "parked in the database, not running (n8n parks waits of "
            f"{PARK_THRESHOLD_MS / 1000:.0f} s or more, and waits on a webhook, form or reply): "
            + ", ".join(f"{line.name!r}" for line in parked[:5])
            + "; they hold no slot while parked"
        )
    if walk.chosen:
        shown = [f"{k!r} -> {v}" for k, v in list(walk.chosen.items())[:4]]
        notes.append(
            "exclusive branches priced at the dearest (or the --branch mix): "
            + ", ".join(shown)
            + (" ..." if len(walk.chosen) > 4 else "")
            + "; give --branch NODE=SHARE for the share of executions that take a branch"
        )
    notes += list(walk.notes)
    if parsed.dropped_edges:
        notes.append(f"{parsed.dropped_edges} connection(s) name a node the export does not have: ignored")
    if parsed.unnamed:
        notes.append(f"{parsed.unnamed} node(s) without a name: no connection reaches them, so they never run")
    if parsed.skipped_outputs:
        notes.append(f"{parsed.skipped_outputs} connection kind(s) hold {{}} instead of a list of outputs: ignored")
    return notes


def models_elsewhere(parsed, lines, families, triggers, trigger, own, items, subs, plan) -> list[str]:
    """Model calls this execution does not make: in the flows other triggers start, or in AI nodes no trigger
    reaches (a broken or unfinished export). Said with the wait each call would hold, so the answer names it."""
    idle = [
        line
        for line in lines
        if line.runs == 0
        and (line.priced_by != "none" or line.note == "disabled")
        and (line.family in MODEL_CALLS or line.family.startswith("ai."))
    ]
    if not idle:
        return []
    nodes = {n.name: n for n in parsed.nodes}
    attached = attached_subs(parsed)
    reached_by: dict[str, str] = {}
    for other in [t for t in triggers if trigger is None or t.name != trigger.name][:10]:
        weights = node_weights(parsed, [other.name], own, items, None, subs).weights
        for line in idle:
            if weights.get(line.name, 0.0) > 0 and line.name not in reached_by:
                reached_by[line.name] = f"{other.name!r} ({other.kind})"
    out = []
    for line in idle:
        node = nodes[line.name]
        wait, calls = node_wait(node, families[line.name], attached.get(line.name, {}), nodes, plan, items)
        if calls <= 0:
            continue
        if len(out) == 5:
            out.append("... and more AI nodes outside this flow")
            break
        where = (
            "but it is disabled"
            if line.note == "disabled"
            else f"in the flow {reached_by[line.name]} starts"
            if line.name in reached_by
            else "but no trigger reaches it"
        )
        out.append(
            f"AI node {line.name!r} makes {calls:g} model call(s) per run, {wait.ms / calls / 1000:.2g} s each "
            f"({wait.source}), {where}: not in this price"
            + ("" if line.note == "disabled" else "; price that flow on its own")
        )
    return out


def stand_in_latencies(export: dict, price) -> dict[str, float]:
    """Each calling node's wait per call (of a `WorkflowPrice`), by name, for a stand-in to answer it with: its own
    call's, and a model or embeddings sub-node's from the root it is attached to."""
    parsed = parse_export(export)
    out = {line.name: line.call_ms for line in price.lines if line.call_ms > 0}
    for e in parsed.edges:
        if e.kind in ("ai_languageModel", "ai_embedding") and e.target in out:
            out[e.source] = max(out.get(e.source, 0.0), out[e.target])
    return out
