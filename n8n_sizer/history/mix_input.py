"""A history as a mix for the advisor: each workflow as a `WorkflowProfile` at its own rate (`mix_entries`).

A workflow's profile, as `advise --workflow FILE` prices an export, but from what ran:
- n8n's overhead: its nodes priced by the node cost table (`price_workflow` on its node types, names and
  expression counts: the history keeps no parameters), relative to the light workflow, with the price's interval;
- the Code nodes' own JavaScript: each Code node's measured CPU per execution less the table's Code row (its task
  runner round trip, which the overhead already prices);
- the wait: every node's measured waiting (history/split.py), parked waits left out.
A workflow without node timings (saved without data, not sampled) waits its mean duration less its priced CPU.

What-if scaling (`--scale 3`, `--scale NAME=5`) multiplies the rates and every minute of the scaled workflows, so
the instance's busiest minute is found again in the scaled minutes, not scaled as a whole.
"""

from __future__ import annotations

import math
from itertools import pairwise

from n8n_sizer.advisor.mix import MixEntry, scale_mix
from n8n_sizer.advisor.profiles import WorkflowProfile
from n8n_sizer.advisor.workflow_price import NodeCostTable, load_node_costs, price_workflow
from n8n_sizer.errors import InputError
from n8n_sizer.history.arrivals import busiest_minute, combine
from n8n_sizer.history.record import History, WorkflowHistory
from n8n_sizer.history.split import CODE_TYPES
from n8n_sizer.history.trigger_seen import is_trigger
from n8n_sizer.safety.frozen import Frozen

Z90 = 1.6449


class MixInput(Frozen):
    """The mix the advisor sizes: its entries (scaled), the instance's busiest minute and 99th-percentile second."""

    entries: tuple[MixEntry, ...]
    burst_per_s: float
    p99_second_per_s: float
    notes: tuple[str, ...] = ()


def _export(w: WorkflowHistory) -> dict:
    """The workflow as an export the pricer reads: its nodes' types and names, and as many expression placeholders
    as each node had expressions (their text is not in the history; only their count prices)."""
    nodes = [
        {
            "name": n.name,
            "type": n.type,
            "typeVersion": n.type_version,
            "disabled": n.disabled,
            "parameters": {f"e{i}": "={{ 0 }}" for i in range(n.expressions)},
        }
        for n in w.nodes
    ]
    return {"name": w.name, "nodes": nodes, "connections": _connections(w)}


def _connections(w: WorkflowHistory) -> dict:
    """n8n's connections object from the history's edges; without them (a history written before they were kept),
    the nodes one after another in their listed order, the trigger first, so that every node is priced once."""
    out: dict[str, dict[str, list[list[dict]]]] = {}
    edges = list(w.edges)
    if not edges and len(w.nodes) > 1:
        order = sorted(w.nodes, key=lambda n: not is_trigger(n.type))
        edges = [(a.name, "main", 0, b.name, 0) for a, b in pairwise(order)]
    for source, kind, output, target, index in edges:
        outputs = out.setdefault(source, {}).setdefault(kind, [])
        while len(outputs) <= output:
            outputs.append([])
        outputs[output].append({"node": target, "type": kind, "index": index})
    return out


def workflow_profile(w: WorkflowHistory, table: NodeCostTable, mode: str = "regular") -> tuple[WorkflowProfile, str]:
    """(profile, a note or "") for one workflow of the history."""
    note = ""
    ratio, sd, priced_ms = 1.0, 0.3, None
    if w.nodes:
        price = price_workflow(_export(w), table, mode=mode)
        mid, low, high = price.overhead_ratio_to_light
        ratio = max(mid, 1e-3)
        sd = math.log(max(high, 1e-9) / max(low, 1e-9)) / (2 * Z90) if low > 0 else 1.0
        priced_ms = price.overhead_ms[0]
        if price.unknown_types:
            note = f"node types not in the cost table (priced as a median node): {', '.join(price.unknown_types)}"
    else:
        note = "no node list: priced as the light workflow, with a wide interval"
    code_row = max(table.row_by_id("code").cpu.ms, 0.0)
    top = [t for t in w.node_timings if t.inside is None]
    code_cpu = sum(max(t.cpu_ms - t.runs_per_execution * code_row, 0.0) for t in top if t.family == "code")
    wait = sum(t.wait_ms for t in top)
    if not top:
        running = w.running_ms or w.durations.mean_ms
        wait = max((running or 0.0) - (priced_ms or 0.0), 0.0)
        note = "; ".join(x for x in (note, "no node timings: its wait is its mean time in flight less its CPU") if x)
    code_nodes = sum(1 for n in w.nodes if n.type in CODE_TYPES and not n.disabled)
    if not w.nodes:
        code_nodes = sum(1 for t in top if t.family == "code")
    profile = WorkflowProfile(
        name=w.name[:80] or w.id,
        code_cpu_ms=code_cpu,
        wait_ms=wait,
        overhead_key="light",
        measured=False,
        code_nodes=min(code_nodes, 10_000),
        overhead_ratio=min(ratio, 1000.0),
        ratio_sd_log=min(sd, 5.0),
    )
    return profile, note


def _names(history: History) -> list[str]:
    """Each workflow's name in the answer: its name, or name (id) where two share one."""
    counts: dict[str, int] = {}
    for w in history.workflows:
        counts[w.name] = counts.get(w.name, 0) + 1
    return [w.name if counts[w.name] == 1 else f"{w.name} ({w.id})" for w in history.workflows]


def parse_scales(values: list[str] | None) -> tuple[float, dict[str, float]]:
    """`--scale 3` (everything) and `--scale NAME=5` (one workflow, by name or id), repeatable; one line when bad."""
    factor, named = 1.0, {}
    for raw in values or []:
        name, sep, number = raw.rpartition("=")
        text = number if sep else raw
        try:
            value = float(text)
        except ValueError:
            raise InputError(f"--scale {raw!r}: {text!r} is not a number; try --scale 3 or --scale NAME=5") from None
        if not math.isfinite(value) or not 0 < value <= 1000:
            raise InputError(f"--scale {raw!r}: the factor must be above 0 and at most 1000; try --scale 3")
        if sep:
            if not name:
                raise InputError(f"--scale {raw!r}: name the workflow before '='; try --scale NAME=5")
            named[name] = named.get(name, 1.0) * value
        else:
            factor *= value
    return factor, named


def mix_entries(
    history: History, scales: list[str] | None = None, table: NodeCostTable | None = None, mode: str = "regular"
) -> MixInput:
    """The history's workflows as mix entries at their rates (scaled), and the instance's burst (scaled)."""
    table = (table or load_node_costs()).for_mode(mode)
    factor, named = parse_scales(scales)
    names = _names(history)
    by_id = {w.id: n for w, n in zip(history.workflows, names, strict=True)}
    # a --scale key may be the workflow's name or id
    resolved = {by_id.get(key, key): value for key, value in named.items()}
    entries, notes = [], []
    for w, name in zip(history.workflows, names, strict=True):
        if w.rates.executions == 0:
            continue
        profile, note = workflow_profile(w, table, mode)
        if note:
            notes.append(f"{name}: {note}")
        entries.append(
            MixEntry(
                name=name,
                trigger=w.trigger.kind + (f" ({w.trigger.rule})" if w.trigger.rule else ""),
                profile=profile.model_copy(update={"name": name[:80]}),
                rate_per_s=w.rates.per_s_mean,
                burst_per_s=w.rates.busiest_minute_per_s,
                running_ms=w.running_ms,
            )
        )
    scaled = scale_mix(entries, factor, resolved)
    minutes = combine(
        ((w.rates, factor * resolved.get(n, 1.0)) for w, n in zip(history.workflows, names, strict=True)),
        history.total.window_s,
    )
    base_mean = history.total.per_s_mean
    new_mean = sum(e.rate_per_s for e in scaled)
    p99 = history.total.p99_second_per_s * (new_mean / base_mean if base_mean > 0 else 1.0)
    burst = busiest_minute(minutes) if history.total.window_s >= 60 else new_mean
    return MixInput(entries=tuple(scaled), burst_per_s=burst, p99_second_per_s=p99, notes=tuple(notes))
