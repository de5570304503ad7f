"""Which nodes one execution runs, and how often: the connections walked from the trigger, not the node list.

- An execution starts at one trigger (triggers.py picks it); only what its connections reach runs. Without a
  trigger, every node with no main input starts (as if a Webhook fed it).
- Exclusive outputs (IF, Switch, Filter's kept-or-discarded, Text Classifier, Sentiment Analysis, a node's error
  output) run one branch per item: priced at the dearest branch, or at the mix `shares` gives (`--branch NODE=
  SHARE`: the share of executions that take the branch whose first node is NODE; the branching node's other
  outputs share the rest equally). An error output (On Error: continue with an error output) is taken by none
  unless `shares` names it.
- A node reached from several parents runs once per parent that runs (n8n's v1 execution order), except a Merge,
  which waits for its inputs and runs once. So a node after the join of exclusive branches runs once.
- Loops (a Split In Batches / Loop Over Items body back to the node, or any other cycle) are cut at the edge that
  closes them; the loop body runs once per batch (ceil(items / batch size)).
- AI sub-nodes (a model, memory, tools, embeddings...) run when the root they are attached to runs: their weight
  is their consumers'. An agent's tools share one tool call per agent run (the pricer assumes one tool round).

`node_weights` returns each node's runs per execution (0 for what the execution does not reach).
"""

from __future__ import annotations

import math
from collections import defaultdict

from n8n_sizer.advisor.workflow_price.export import ExportNode, ParsedExport, printable
from n8n_sizer.errors import InputError
from n8n_sizer.safety.frozen import Frozen

EXCLUSIVE = {
    "n8n-nodes-base.if",
    "n8n-nodes-base.switch",
    "n8n-nodes-base.filter",
    "@n8n/n8n-nodes-langchain.textClassifier",
    "@n8n/n8n-nodes-langchain.sentimentAnalysis",
}
MERGE = {"n8n-nodes-base.merge"}  # waits for its inputs and runs once
LOOP = "n8n-nodes-base.splitInBatches"
PSEUDO = -1  # a sub-node's link to its root, walked where an export wires the sub-node on the main path
EPS = 1e-9


class Walk(Frozen):
    weights: dict[str, float]  # node name -> runs per execution
    chosen: dict[str, str]  # branching node -> the branch priced ("dearest: NODE", "mix given")
    notes: tuple[str, ...] = ()
    cycles: int = 0


def _loop_outputs(node: ExportNode) -> tuple[int | None, int]:
    """(the 'done' output or None, the loop output) of Split In Batches: v3 has done=0 and loop=1, v1-2 one."""
    if (node.type_version or 1) >= 3:
        return 0, 1
    return None, 0


def _batches(node: ExportNode, items: int) -> int:
    size = node.parameters.get("batchSize", 1 if (node.type_version or 1) >= 3 else 10)
    if isinstance(size, bool) or not isinstance(size, (int, float)) or not size >= 1:
        size = 1
    return max(1, math.ceil(items / size))


def _error_output(node: ExportNode, outputs: set[int]) -> int | None:
    """The output index of a node's error branch (On Error: continue with error output), or None."""
    if node.on_error != "continueErrorOutput":
        return None
    if node.type == "n8n-nodes-base.if":
        return 2
    if node.type in EXCLUSIVE and node.type != "n8n-nodes-base.filter":
        return max(outputs) if len(outputs) > 1 else None
    return 1


def node_weights(
    parsed: ParsedExport,
    start: list[str],
    own_ms: dict[str, float],
    items: int = 1,
    shares: dict[str, float] | None = None,
    sub_node: set[str] | None = None,
) -> Walk:
    """Runs per execution of every node (see the module docstring). `start`: the trigger(s) the execution begins
    at (empty: every node without a main input); `own_ms`: each node's cost per run, to find the dearest branch;
    `shares`: --branch NODE=SHARE; `sub_node`: names of AI sub-nodes (called by their root, never on the path)."""
    nodes = {n.name: n for n in parsed.nodes}
    shares = dict(shares or {})
    sub_node = set(sub_node or ())
    out: dict[str, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
    feeds: dict[str, list[str]] = defaultdict(list)  # sub-node -> the nodes it is attached to
    tools: dict[str, int] = defaultdict(int)  # root -> tools attached to it
    has_main_input: set[str] = set()
    tool_of: set[tuple[str, str]] = set()
    for e in parsed.edges:
        if nodes[e.source].disabled or nodes[e.target].disabled:
            continue
        if e.kind == "main":
            out[e.source][e.output].append(e.target)
            has_main_input.add(e.target)
        elif e.kind.startswith("ai_"):  # n8n's AI connection types; any other kind is not a connection n8n runs
            feeds[e.source].append(e.target)
            if e.kind == "ai_tool":
                tools[e.target] += 1
                tool_of.add((e.source, e.target))
    # A sub-node wired on the main path (exports do this by mistake; n8n would not run it) passes the execution on
    # to the root it is attached to, as its author meant: priced as if the root were next.
    # (an output of its own, -1, walked only when a main edge reaches the sub-node; it does not add runs)
    for name in list(feeds):
        out[name][PSEUDO].extend(feeds[name])
    notes: list[str] = []
    unknown = sorted(set(shares) - set(nodes))
    if unknown:
        raise InputError(f"--branch {printable(unknown[0], 60)!r}: no node of that name in the workflow")
    if not start:
        start = [
            n.name
            for n in parsed.nodes
            if not n.disabled and n.name not in has_main_input and n.name not in sub_node and n.name not in feeds
        ]
    # depth-first from the start: cut every edge that closes a cycle, keep the order for a topological sort
    back: set[tuple[str, int, str]] = set()
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    order: list[str] = []
    for root in start:
        if root in state:
            continue
        stack = [(root, iter([(o, t) for o, ts in sorted(out[root].items()) for t in ts]))]
        state[root] = 1
        while stack:
            name, it = stack[-1]
            step = next(it, None)
            if step is None:
                stack.pop()
                state[name] = 2
                order.append(name)
                continue
            o, target = step
            if state.get(target) == 1:
                back.add((name, o, target))
            elif target not in state:
                state[target] = 1
                stack.append((target, iter([(oo, t) for oo, ts in sorted(out[target].items()) for t in ts])))
    order.reverse()  # topological: every kept edge goes forward
    if back:
        notes.append(
            f"{len(back)} connection(s) close a loop; the loop body is priced once per batch "
            "(ceil(items / batch size)), not once per pass n8n may make"
        )

    def factors(name: str) -> dict[int, float]:
        """Each output's share of the node's runs that flows on, before choosing among exclusive outputs."""
        node = nodes[name]
        outs = {o: 1.0 for o in out[name]}
        if node.type == LOOP:
            done, loop = _loop_outputs(node)
            batches = _batches(node, items)
            outs = {o: (1.0 if o == done else float(batches)) for o in outs}
        return outs

    # the dearest branch: each node's cost and everything after it (a node after a join is counted on each
    # branch, which is what choosing between them needs)
    below: dict[str, float] = {}
    for name in reversed(order):
        node = nodes[name]
        per_out = {
            o: f * sum(below.get(t, 0.0) for t in out[name][o] if (name, o, t) not in back)
            for o, f in factors(name).items()
        }
        err = _error_output(node, set(per_out))
        if err is not None:
            per_out.pop(err, None)
        if node.type in EXCLUSIVE:
            rest = max(per_out.values(), default=0.0)
        else:
            rest = sum(per_out.values())
        below[name] = own_ms.get(name, 0.0) + rest

    weights: dict[str, float] = defaultdict(float)
    merge_in: dict[str, float] = defaultdict(float)
    chosen: dict[str, str] = {}
    for s in start:
        weights[s] = 1.0
    for name in order:
        node = nodes[name]
        if node.type in MERGE or name in merge_in:
            weights[name] = max(weights[name], merge_in[name])
        w = weights[name]
        if w <= EPS:
            continue
        fac = factors(name)
        err = _error_output(node, set(fac))
        given = {o: shares[t] for o in fac for t in out[name][o] if t in shares}
        exclusive = node.type in EXCLUSIVE or err is not None
        if exclusive:
            branches = [o for o in fac if o != err]
            if given:
                total = sum(given.values())
                if total > 1 + 1e-6:
                    raise InputError(
                        f"--branch: the shares after {node.name!r} add up to {total:g}, above 1; give each "
                        "branch's share of executions (0 to 1)"
                    )
                rest = [o for o in branches if o not in given]
                left = max(0.0, 1.0 - total)
                take = {o: given.get(o, left / len(rest) if rest else 0.0) for o in fac}
                chosen[name] = "mix given"
            elif node.type in EXCLUSIVE and branches:
                costs = {o: sum(below.get(t, 0.0) for t in out[name][o] if (name, o, t) not in back) for o in branches}
                best = max(branches, key=lambda o: (costs[o], -o))
                take = {o: (1.0 if o == best else 0.0) for o in fac}
                first = next((t for t in out[name][best]), None)
                if len(branches) > 1 or node.type == "n8n-nodes-base.filter":
                    chosen[name] = f"dearest: {first}" if first else "dearest: none"
            else:
                take = {o: (0.0 if o == err else 1.0) for o in fac}
        else:
            take = dict.fromkeys(fac, 1.0)
        for o, f in fac.items():
            for target in out[name][o]:
                if (name, o, target) in back:
                    continue
                flow = w * f * take.get(o, 0.0)
                if nodes[target].type in MERGE or o == PSEUDO:
                    merge_in[target] = max(merge_in[target], flow)
                else:
                    weights[target] += flow
    # sub-nodes run when what they are attached to runs: consumers first (a sub-node may feed another sub-node,
    # e.g. embeddings -> vector store -> vector store tool -> agent); a cycle among sub-nodes runs never
    pending = {name: sum(1 for c in feeds[name] if c in feeds) for name in feeds}
    ready = [name for name, n in pending.items() if n == 0]
    users: dict[str, list[str]] = defaultdict(list)
    for name in feeds:
        for consumer in feeds[name]:
            if consumer in feeds:
                users[consumer].append(name)
    while ready:
        name = ready.pop()
        if name not in start:
            # an agent calls one of its tools per tool round: each tool takes an equal share of the round
            runs = sum(weights.get(c, 0.0) / (tools[c] if (name, c) in tool_of else 1) for c in feeds[name])
            weights[name] = max(weights.get(name, 0.0), runs)
        for user in users[name]:
            pending[user] -= 1
            if pending[user] == 0:
                ready.append(user)
    return Walk(
        weights={n.name: round(weights.get(n.name, 0.0), 6) for n in parsed.nodes},
        chosen=chosen,
        notes=tuple(notes),
        cycles=len(back),
    )
