"""Price a workflow export from its nodes: n8n's CPU per execution, relative to the packaged `light` workflow, and
what an execution waits on.

    overhead = base + sum over the nodes an execution runs of
               runs x (cost + per_item x (items - 1) + per_expression x expressions x items)

`base` is a Webhook alone (receive, start, save, respond); a node's `cost` its measured row, else its family's
figure (linecost.py: an app node is priced from the app nodes measured here, each an HTTP call to a stand-in plus
its mapping); `runs` how often one execution runs it, walking the connections from the trigger (graph.py:
exclusive branches at the dearest or at the mix given, a node after a join once, loops once per batch, AI
sub-nodes with their root). `light` (Webhook -> Code -> respond) priced the same way is base + the Code row, so
light's ratio is 1.0 by construction. The Code nodes' own JavaScript is apart (`code_cpu_ms`), and so is waiting
(waits.py: every call out waits its family's default, `--wait NODE=MS` or `--wait-ms`; a Wait of 65 s or more is
parked and holds nothing): they are what `WorkflowProfile` carries. A node type nothing prices is priced as the
median known node with an interval from 0 to twice the costliest ordinary one, and named in `unknown_types`.
Spreads of measured rows add in quadrature (independent rounds), a family's linearly within the family (its nodes
are alike), unknown nodes' linearly; the ratio's interval also holds the validated error of the method
(`VALIDATED_RATIO_ERROR`). The trigger (triggers.py) says what starts the executions and at what rate.
"""

from __future__ import annotations

import math
from collections import defaultdict

from n8n_sizer.advisor.workflow_price.export import parse_export
from n8n_sizer.advisor.workflow_price.families import family_of
from n8n_sizer.advisor.workflow_price.graph import node_weights
from n8n_sizer.advisor.workflow_price.linecost import Costing
from n8n_sizer.advisor.workflow_price.lines import (
    MODEL_CALLS,
    NO_COST,
    NodeLine,
    models_elsewhere,
    node_lines,
    price_notes,
    stand_in_latencies,
    sub_nodes,
)
from n8n_sizer.advisor.workflow_price.table import NodeCostTable
from n8n_sizer.advisor.workflow_price.triggers import Trigger, sized_trigger, triggers_in
from n8n_sizer.advisor.workflow_price.waits import parse_waits
from n8n_sizer.errors import InputError
from n8n_sizer.safety.frozen import Frozen

WEBHOOK = "n8n-nodes-base.webhook"
CODE = "n8n-nodes-base.code"
HTTP_REQUEST = "n8n-nodes-base.httpRequest"
WAIT = "n8n-nodes-base.wait"
EXECUTE_WORKFLOW = "n8n-nodes-base.executeWorkflow"
MAX_ITEMS = 1_000_000
ENGINES = ("default", "legacy")
# What the table's own spread does not hold: how far priced ratios fell from measured ones on workflows that did
# not feed the table (docs/workflow-price.md#validation-workflows-that-did-not-feed-the-table, the median |error|
# of the throughput ratio), added in quadrature to every ratio's interval.
VALIDATED_RATIO_ERROR = 0.10
__all__ = ["MODEL_CALLS", "NO_COST", "NodeLine", "WorkflowPrice", "price_workflow", "stand_in_latencies"]


class WorkflowPrice(Frozen):
    name: str
    engine: str
    mode: str = "regular"  # the table's figures it was priced from: regular, or queue (the worker's side)
    items: int
    lines: tuple[NodeLine, ...]
    base_ms: float  # the Webhook's share: receive, start, save, respond
    overhead_ms: tuple[float, float, float]  # (mid, low, high) n8n CPU per execution on the table's machine
    light_ms: float  # light priced from the same table (base + one Code node)
    overhead_ratio_to_light: tuple[float, float, float]  # (mid, low, high)
    relative_uncertainty: float  # half the ratio's interval over its mid
    code_cpu_ms: float  # the Code nodes' own JavaScript per execution (the task runner's), apart from overhead
    wait_ms: float  # per execution, held while running: every call out's wait, Wait nodes under 65 s
    unknown_types: tuple[str, ...]
    notes: tuple[str, ...]
    role_ms: dict[str, float] | None = None  # queue mode: the overhead by role (main, worker, runner, postgres, redis)
    refined_from: tuple[str, ...] = ()  # the user's runs that refined the table (refit.py), if any
    parked_ms: float = 0.0  # per execution, parked in the database (Wait of 65 s or more, event waits)
    model_wait_ms: float = 0.0  # of wait_ms, waiting on model calls
    model_calls: float = 0.0  # model calls per execution
    trigger: Trigger | None = None  # the trigger the answer is sized for
    triggers: tuple[Trigger, ...] = ()
    held_mb: float | None = None  # memory an in-flight execution holds (measured for AI workflows), None: light's
    family_priced: dict[str, int] = {}  # node types priced by their family (no row of their own), by count
    code_nodes: float = 0.0  # Code node runs per execution (each costs the runner a round trip)


def _spread(parts: list[tuple[float, float, float]], unknown: list[tuple[float, float, float]]) -> tuple[float, float]:
    """(below, above) the mid: known parts in quadrature, unknown ones linearly."""
    below = math.sqrt(sum((m - lo) ** 2 for m, lo, _ in parts)) + sum(m - lo for m, lo, _ in unknown)
    above = math.sqrt(sum((hi - m) ** 2 for m, _, hi in parts)) + sum(hi - m for m, _, hi in unknown)
    return below, above


def _posterior_spread(
    table: NodeCostTable, lines: list[NodeLine], items: int, ratio: float, light: float
) -> tuple[float, float, float]:
    """(ms to add: the workflow's own measured effect, the ratio's 90% half-width from the refined covariance, the
    method's error left). The ratio's error is ((x - ratio x_light) . theta + effect) / light; a workflow the runs
    measured (the same counts) carries its own effect, pinned by them; any other keeps the validated error."""
    post = table.posterior
    ids = list(post.ids)
    n = len(ids)
    x = [0.0] * n
    x[ids.index("base")] = 1.0
    for line in lines:
        if line.row_id in ids[1:-1]:
            x[ids.index(line.row_id)] += line.runs
        if line.priced_by in ("row", "family", "unknown"):
            x[-1] += line.expressions * items * line.runs
    d = list(x) + [0.0] * len(post.effects)
    d[ids.index("base")] -= ratio
    d[ids.index("code")] -= ratio
    shift, model = 0.0, VALIDATED_RATIO_ERROR * ratio
    for j, (counts, effect) in enumerate(post.effects):
        if all(abs(a - b) < 1e-9 for a, b in zip(counts, x, strict=True)):
            d[n + j], shift, model = 1.0, effect, 0.0
            break
    cov = post.covariance
    var = sum(d[i] * cov[i][j] * d[j] for i in range(len(d)) if d[i] for j in range(len(d)) if d[j])
    return shift, 1.6449 * math.sqrt(max(var, 0.0)) / light, model


def _roles(table: NodeCostTable, lines: list[NodeLine], total: float) -> dict[str, float] | None:
    """Queue mode: the overhead split by role, each line by its row's measured shares (a row without them, and
    expressions, in `other`); None in regular mode."""
    if table.mode != "queue" or not table.base.roles:
        return None
    out = dict(table.base.roles)
    rows = {r.id: r for r in table.nodes}
    for line in lines:
        row = rows.get(line.row_id)
        if row is None or not row.roles or row.cpu.ms <= 0:
            continue
        for role, ms in row.roles.items():
            out[role] = out.get(role, 0.0) + ms * line.cost_ms / row.cpu.ms
    out["other"] = max(0.0, total - sum(out.values()))
    return {role: round(ms, 3) for role, ms in out.items()}


def _check(items: int, code_cpu_ms: float | None, wait_ms_per_call: float | None, engine: str) -> None:
    from n8n_sizer.safety import numbers as n

    if isinstance(items, bool) or not isinstance(items, int) or not 1 <= items <= MAX_ITEMS:
        raise InputError(
            f"--items must be a whole number from 1 to {MAX_ITEMS:,} (got {items!r}); it is the items "
            "each node handles per execution"
        )
    # the same bounds as without --workflow (safety/numbers.py)
    n.check_numbers({"--cpu-ms": (code_cpu_ms, n.CPU_MS), "--wait-ms": (wait_ms_per_call, n.WAIT_MS)})
    if engine not in ENGINES:
        raise InputError(f"unknown expression engine {engine!r}; accepted: {', '.join(ENGINES)}")


def _spread_parts(lines: list[NodeLine]):
    """(row parts, family parts summed per family, unknown parts) as (mid, low, high) for `_spread`."""
    parts, unknown = [], []
    fam: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for line in lines:
        if line.runs <= 0:
            continue
        triple = (line.cost_ms, line.low_ms, line.high_ms)
        if line.priced_by == "row":
            parts.append(triple)
        elif line.priced_by == "family":
            acc = fam[line.family]
            acc[0], acc[1], acc[2] = acc[0] + triple[0], acc[1] + triple[1], acc[2] + triple[2]
        elif line.priced_by == "unknown":
            unknown.append(triple)
    return parts + [tuple(v) for v in fam.values()], unknown


def price_workflow(
    export: dict,
    table: NodeCostTable,
    items: int = 1,
    code_cpu_ms: float | None = None,
    wait_ms_per_call: float | None = None,
    engine: str = "default",
    mode: str = "regular",
    waits: list[str] | tuple[str, ...] = (),
    branches: dict[str, float] | None = None,
    rps: float | None = None,
) -> WorkflowPrice:
    """The workflow's n8n CPU per execution, node by node, its ratio to light's, its waiting and its trigger (see
    the module docstring). `mode="queue"` prices from the queue-mode figures (`NodeCostTable.for_mode`), light
    priced in queue mode too. `waits`: --wait NODE=MS pairs; `branches`: --branch NODE=SHARE; `rps`: the rate
    asked for (the trigger's note compares it with what a schedule implies)."""
    _check(items, code_cpu_ms, wait_ms_per_call, engine)
    if mode not in ("regular", "queue"):
        raise InputError(f"unknown mode {mode!r}; accepted: regular, queue")
    table = table.for_mode(mode)
    parsed = parse_export(export)
    plan = parse_waits(list(waits), wait_ms_per_call)
    per_expr = table.per_expression_ms.get(engine) or table.per_expression_ms["default"]
    per_item = table.per_item_ms
    costing = Costing(table)
    families = {n.name: family_of(n.type) for n in parsed.nodes}
    triggers = triggers_in(parsed.nodes)
    trigger = sized_trigger(triggers)
    subs = sub_nodes(parsed, families)
    own = {}
    for node in parsed.nodes:
        c = costing.cost(node, families[node.name])
        own[node.name] = c.mid + per_expr.ms * node.expressions * items
    walk = node_weights(parsed, [trigger.name] if trigger else [], own, items, branches, subs)
    lines, model_calls = node_lines(
        parsed, table, costing, families, walk.weights, subs, plan, items, per_expr, per_item
    )
    unknown_types = sorted({line.type for line in lines if line.priced_by == "unknown"})
    notes = price_notes(parsed, lines, walk, trigger, triggers, plan, rps, model_calls, subs)
    notes += models_elsewhere(parsed, lines, families, triggers, trigger, own, items, subs, plan)
    wait_ms = sum(line.wait_ms for line in lines)
    if plan.every_call_ms is not None and not any(line.wait_source == "--wait-ms" for line in lines):
        wait_ms += plan.every_call_ms
        notes.append(
            f"--wait-ms {plan.every_call_ms:g}: no node of this workflow calls out, so it is counted once per "
            "execution (as without --workflow)"
        )
    code_nodes = sum(line.runs for line in lines if line.type == CODE and line.priced_by != "none")
    if code_cpu_ms is None and code_nodes > 0:
        notes.append("Code nodes' own JavaScript counted as 0: give --cpu-ms or a calibration (n8n-sizer calibrate)")
    base = table.base
    if engine == "legacy":
        if table.legacy_base is None:
            raise InputError(
                "the node cost table has no legacy-engine base; re-measure it with "
                "benchmarks/node_costs.py or use the default engine"
            )
        # Measured: the per-execution set-up of the isolated engine is most of what legacy saves.
        base = table.legacy_base
    parts, unknown_parts = _spread_parts(lines)
    nodes_mid = sum(line.cost_ms for line in lines)
    node_below, node_above = _spread(parts, unknown_parts)
    parts.append((base.ms, base.low_ms, base.high_ms))
    mid_total = base.ms + nodes_mid
    below, above = _spread(parts, unknown_parts)
    low_total, high_total = max(mid_total - below, 0.0), mid_total + above
    # light on the default engine, always, with its Code row floored at 0 as every line is
    code = max(table.row_by_id("code").cpu.ms, 0.0)
    light = table.base.ms + code
    mid_ratio = mid_total / light
    # The base is in light too: on the default engine its error mostly cancels in the ratio, so the ratio's spread
    # takes the base at its lowest and highest round on both sides; legacy's base is another measurement.
    same = engine == "default"
    swings = [(b + nodes_mid) / ((b if same else table.base.ms) + code) for b in (base.low_ms, base.high_ms)]
    model = VALIDATED_RATIO_ERROR * mid_ratio
    low_ratio = max(mid_ratio - math.hypot(node_below / light, max(0.0, mid_ratio - min(swings)), model), 0.0)
    high_ratio = mid_ratio + math.hypot(node_above / light, max(0.0, max(swings) - mid_ratio), model)
    if table.posterior is not None and same:
        shift, spread, model = _posterior_spread(table, lines, items, mid_total / light, light)
        mid_total += shift
        mid_ratio = mid_total / light
        unknown_below, unknown_above = _spread([], unknown_parts)
        low_ratio = max(mid_ratio - math.hypot(spread, model) - unknown_below / light, 0.0)
        high_ratio = mid_ratio + math.hypot(spread, model) + unknown_above / light
    ratio = (mid_ratio, low_ratio, high_ratio)
    if table.mode == "queue":
        borrowed = sorted(
            {line.type for line in lines if line.priced_by == "row" and line.runs > 0}
            - {r.type for r in table.nodes if r.roles is not None}
        )
        if borrowed:
            notes.append(f"priced from regular-mode rows (not measured in queue mode): {', '.join(borrowed)}")
    family_priced: dict[str, int] = defaultdict(int)
    for line in lines:
        if line.priced_by == "family":
            family_priced[line.type] += 1
    ai = any(line.family.startswith("ai.") and line.runs > 0 for line in lines)
    held = table.held_mb.get("ai") if ai else None
    return WorkflowPrice(
        name=parsed.name,
        engine=engine,
        mode=table.mode,
        refined_from=table.posterior.runs if table.posterior is not None else (),
        role_ms=_roles(table, lines, mid_total),
        items=items,
        lines=tuple(lines),
        base_ms=base.ms,
        overhead_ms=(round(mid_total, 3), round(low_total, 3), round(high_total, 3)),
        light_ms=round(light, 3),
        overhead_ratio_to_light=tuple(round(r, 4) for r in ratio),
        relative_uncertainty=round((high_ratio - low_ratio) / (2 * mid_ratio), 4) if mid_ratio else 0.0,
        code_cpu_ms=float(code_cpu_ms or 0.0),
        wait_ms=round(wait_ms, 3),
        parked_ms=round(sum(line.parked_ms for line in lines), 3),
        model_wait_ms=round(sum(line.model_wait_ms for line in lines), 3),
        model_calls=round(model_calls, 4),
        unknown_types=tuple(unknown_types),
        notes=tuple(notes),
        trigger=trigger,
        triggers=tuple(triggers),
        held_mb=held.mb if held is not None and held.mb > 0 else None,
        family_priced=dict(sorted(family_priced.items())),
        code_nodes=round(code_nodes, 4),
    )
