"""Price a workflow export from its nodes: n8n's CPU per execution, relative to the packaged `light` workflow.

    overhead = base + sum over nodes of (row + per_item x (items - 1) + per_expression x expressions x items)

`base` is a Webhook alone (receive, start, save, respond), a node's `row` its measured slope (table.py). `light`
(Webhook -> Code -> respond) priced the same way is base + the Code row, so light's ratio is 1.0 by construction.
The Code nodes' own JavaScript is apart (`code_cpu_ms`: the user's --cpu-ms or a calibration), as is waiting
(HTTP Request calls x `wait_ms_per_call`, Wait nodes' configured time): they are what `WorkflowProfile` already
carries. A node type the table does not have is priced as the median known node with an interval from 0 to twice
the costliest ordinary one (Execute Workflow, a whole sub-execution, apart), and named in `unknown_types`. Spreads
of known rows add in quadrature (independent rounds), unknown nodes' add linearly (they could all be costly); the
ratio's interval also holds the validated error of the method (`VALIDATED_RATIO_ERROR`).
"""

from __future__ import annotations

import math
import statistics

from n8n_sizer.advisor.workflow_price.export import ExportNode, parse_export
from n8n_sizer.advisor.workflow_price.table import NodeCostTable
from n8n_sizer.errors import InputError
from n8n_sizer.safety.frozen import Frozen

WEBHOOK = "n8n-nodes-base.webhook"
CODE = "n8n-nodes-base.code"
HTTP_REQUEST = "n8n-nodes-base.httpRequest"
WAIT = "n8n-nodes-base.wait"
EXECUTE_WORKFLOW = "n8n-nodes-base.executeWorkflow"
NO_COST = {"n8n-nodes-base.stickyNote"}  # canvas notes: never executed
MAX_ITEMS = 1_000_000
ENGINES = ("default", "legacy")
# The Wait node's units (n8n 2.41.1, n8n-nodes-base Wait.node.js): a missing unit is "hours" with amount 1 in
# version 1, "seconds" with amount 5 from 1.1 on.
# What the table's own spread does not hold: how far priced ratios fell from measured ones on workflows that did
# not feed the table (docs/workflow-price.md#validation-workflows-that-did-not-feed-the-table, the median |error|
# of the throughput ratio), added in quadrature to every ratio's interval.
VALIDATED_RATIO_ERROR = 0.10
UNIT_S = {"seconds": 1.0, "minutes": 60.0, "hours": 3600.0, "days": 86400.0}


class NodeLine(Frozen):
    name: str
    type: str
    row_id: str  # the table row it was priced from; "base" (the trigger), "unknown", "none" (notes, disabled)
    cost_ms: float  # n8n CPU per execution for this node (executing process + its Postgres work)
    low_ms: float
    high_ms: float
    expressions: int = 0
    note: str = ""


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
    wait_ms: float  # per execution: HTTP Request calls x wait per call, Wait nodes' configured time
    unknown_types: tuple[str, ...]
    notes: tuple[str, ...]
    role_ms: dict[str, float] | None = None  # queue mode: the overhead by role (main, worker, runner, postgres, redis)
    refined_from: tuple[str, ...] = ()  # the user's runs that refined the table (refit.py), if any


def _wait_node_ms(node: ExportNode) -> float | None:
    """A Wait node's configured time, or None when it waits on something else (a webhook, a form, a date)."""
    params = node.parameters
    if params.get("resume", "timeInterval") != "timeInterval":
        return None
    first = node.type_version is not None and node.type_version < 1.1
    amount = params.get("amount", 1 if first else 5)
    unit = params.get("unit", "hours" if first else "seconds")
    if isinstance(amount, bool) or not isinstance(amount, (int, float)) or unit not in UNIT_S:
        return None  # an expression or an odd value: not known before it runs
    return max(0.0, float(amount)) * UNIT_S[unit] * 1000.0


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
            x[ids.index(line.row_id)] += 1.0
        if line.row_id not in ("base", "none"):
            x[-1] += line.expressions * items
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
    if isinstance(items, bool) or not isinstance(items, int) or not 1 <= items <= MAX_ITEMS:
        raise InputError(
            f"--items must be a whole number from 1 to {MAX_ITEMS:,} (got {items!r}); it is the items "
            "each node handles per execution"
        )
    for flag, value in (("--cpu-ms", code_cpu_ms), ("--wait-ms", wait_ms_per_call)):
        if value is not None and (not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0):
            raise InputError(f"{flag} must be a number >= 0 (got {value!r})")
    if engine not in ENGINES:
        raise InputError(f"unknown expression engine {engine!r}; accepted: {', '.join(ENGINES)}")


def price_workflow(
    export: dict,
    table: NodeCostTable,
    items: int = 1,
    code_cpu_ms: float | None = None,
    wait_ms_per_call: float | None = None,
    engine: str = "default",
    mode: str = "regular",
) -> WorkflowPrice:
    """The workflow's n8n CPU per execution, node by node, and its ratio to light's (see the module docstring).
    `mode="queue"` prices from the queue-mode figures (`NodeCostTable.for_mode`), light priced in queue mode too."""
    _check(items, code_cpu_ms, wait_ms_per_call, engine)
    if mode not in ("regular", "queue"):
        raise InputError(f"unknown mode {mode!r}; accepted: regular, queue")
    table = table.for_mode(mode)
    parsed = parse_export(export)
    per_expr = table.per_expression_ms.get(engine) or table.per_expression_ms["default"]
    per_item = table.per_item_ms
    known = [r.cpu.ms for r in table.nodes]
    unknown_mid = max(0.0, statistics.median(known))
    # Execute Workflow runs a whole sub-execution: it is not what an unknown node is like, so it does not set the bound.
    ordinary = [r.cpu.high_ms for r in table.nodes if r.type != EXECUTE_WORKFLOW] or [unknown_mid]
    unknown_high = 2.0 * max(max(ordinary), unknown_mid)
    lines: list[NodeLine] = []
    parts: list[tuple[float, float, float]] = []
    unknown_parts: list[tuple[float, float, float]] = []
    unknown_types: set[str] = set()
    notes: list[str] = []
    wait_ms, http_calls, triggers = 0.0, 0, 0
    for node in parsed.nodes:
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
                )
            )
            continue
        if node.type == WEBHOOK or node.type.lower().endswith("trigger"):
            triggers += 1
            note = "" if node.type == WEBHOOK else "a trigger other than the Webhook, priced as the Webhook base"
            lines.append(
                NodeLine(
                    name=node.name,
                    type=node.type,
                    row_id="base",
                    cost_ms=0,
                    low_ms=0,
                    high_ms=0,
                    note=note or "in the base",
                )
            )
            continue
        # Expressions are evaluated once per item; every extra item costs each node the per-item figure.
        extra = (
            per_expr.ms * node.expressions * items + per_item.ms * (items - 1),
            per_expr.low_ms * node.expressions * items + per_item.low_ms * (items - 1),
            per_expr.high_ms * node.expressions * items + per_item.high_ms * (items - 1),
        )
        row = table.row(node.type)
        if row is None:
            unknown_types.add(node.type)
            mid, low, high = unknown_mid + extra[0], extra[1], unknown_high + extra[2]
            unknown_parts.append((mid, low, high))
            row_id, note = "unknown", "not in the table: priced as the median node, interval 0 to 2x the costliest"
        else:
            mid, low, high = row.cpu.ms + extra[0], row.cpu.low_ms + extra[1], row.cpu.high_ms + extra[2]
            parts.append((mid, low, high))
            row_id, note = row.id, ""
            if node.type == EXECUTE_WORKFLOW:
                note = "a whole sub-execution (measured with a trigger-only sub-workflow): price its nodes apart"
        if node.type == HTTP_REQUEST:
            http_calls += items
        elif node.type == WAIT:
            waited = _wait_node_ms(node)
            if waited is None:
                notes.append(f"Wait node {node.name!r} waits on an event, not a time: its wait is not counted")
            else:
                wait_ms += waited
        mid, low, high = max(mid, 0.0), max(low, 0.0), max(high, mid, 0.0)
        lines.append(
            NodeLine(
                name=node.name,
                type=node.type,
                row_id=row_id,
                cost_ms=round(mid, 3),
                low_ms=round(low, 3),
                high_ms=round(high, 3),
                expressions=node.expressions,
                note=note,
            )
        )
    if triggers == 0:
        notes.append("no trigger node: priced as if a Webhook started it")
    if http_calls:
        if wait_ms_per_call is None:
            notes.append(f"{http_calls} HTTP Request call(s) per execution and no --wait-ms: their wait counted as 0")
        else:
            wait_ms += http_calls * wait_ms_per_call
    if code_cpu_ms is None and any(n.type == CODE and not n.disabled for n in parsed.nodes):
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
            {line.type for line in lines if line.row_id not in ("base", "none", "unknown")}
            - {r.type for r in table.nodes if r.roles is not None}
        )
        if borrowed:
            notes.append(f"priced from regular-mode rows (not measured in queue mode): {', '.join(borrowed)}")
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
        unknown_types=tuple(sorted(unknown_types)),
        notes=tuple(notes),
    )
