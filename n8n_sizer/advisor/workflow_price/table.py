"""The per-node cost table (`n8n_sizer/data/node_costs.json`), measured by `benchmarks/node_costs.py`.

Every figure is CPU per execution, in ms, on the machine named in `about`: the executing n8n process with its task
runner, plus the Postgres work it causes (both read from the kernel's per-process accounting). A node's figure is
the slope of a chain of copies (cost with 6 copies minus cost with 1, over 5), so the Webhook, the response and
saving the execution are in `base` (a Webhook alone), not in any node. Each `Figure` is the median over interleaved
rounds with the lowest and highest round (`per_round`); `runs` name the workflows of the campaign it came from.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from pydantic import Field

from n8n_sizer.safety.frozen import Frozen


class Figure(Frozen):
    ms: float
    low_ms: float
    high_ms: float
    per_round: tuple[float, ...] = ()
    roles: dict[str, float] | None = None  # queue mode: the median of each role's share (main, worker, runner...)


class NodeRow(Frozen):
    id: str  # the row id lines cite, e.g. "set"
    type: str  # n8n's node type, e.g. "n8n-nodes-base.set"
    cpu: Figure  # per node per execution, one item, no expression
    main_ms: float | None = None  # of which main with its task runner
    runs: tuple[str, ...] = ()  # the campaign's workflows it was derived from
    roles: dict[str, float] | None = None  # queue mode: each role's share (main, worker, runner, postgres, redis)
    # A row for one setting of the node (e.g. a Merge's mode, a vector store's insert or load): parameter values
    # the node must have for this row to price it; None prices every node of the type no other row matches.
    when: dict[str, str] | None = None
    what: str = ""  # what was measured, where the type alone does not say (an AI root with its model sub-node)
    campaign: str = ""  # the campaign the row came from, where it is not the table's own


class Held(Frozen):
    """Memory one in-flight execution holds in main (MB), measured on real n8n (benchmarks/node_costs.py --families --held)."""

    mb: float
    low_mb: float
    high_mb: float
    what: str
    runs: tuple[str, ...] = ()


class Posterior(Frozen):
    """What the user's runs made of the table (refit.py): the covariance after them of the figures (in the order
    of `ids`: "base", each row id, "expression") and then of each measured workflow's own effect (`effects`: its
    counts over `ids` and the effect's mean in ms, what the figures do not explain of it)."""

    ids: tuple[str, ...]
    covariance: tuple[tuple[float, ...], ...]
    effects: tuple[tuple[tuple[float, ...], float], ...] = ()
    runs: tuple[str, ...] = ()


class QueueCosts(Frozen):
    """The queue-mode part (`benchmarks/node_costs.py --mode queue`): the same figures on a queue stack (main,
    1 worker, Postgres, Redis), each with every role's share from the bench's cgroups. Node kinds not measured in
    queue mode are priced from the regular rows (`NodeCostTable.for_mode`)."""

    about: dict[str, str | int | float] = {}
    base: Figure
    light: Figure | None = None
    nodes: tuple[NodeRow, ...] = ()
    per_expression_ms: dict[str, Figure] = {}
    campaigns: tuple[str, ...] = ()


class NodeCostTable(Frozen):
    about: dict[str, str | int | float] = {}
    base: Figure  # Webhook alone: receive, start, save the execution, respond
    light: Figure  # the packaged light workflow, measured whole (a check of base + code)
    legacy_base: Figure | None = None  # the same under N8N_EXPRESSION_ENGINE=legacy
    legacy_light: Figure | None = None
    nodes: tuple[NodeRow, ...] = Field(min_length=1)
    per_item_ms: Figure  # per extra item per node (Set, 1 -> 50 items)
    per_item_ms_at_10: Figure | None = None  # the same from 1 -> 10 items (a check)
    per_kib_saved_ms: Figure  # per KiB of execution data saved
    per_expression_ms: dict[str, Figure]  # per expression evaluated, by engine ("default", "legacy")
    light_throughput_ratio_legacy: Figure | None = None  # light's rate on legacy over default, same rounds
    queue: QueueCosts | None = None  # queue mode (the worker's side), where measured
    mode: str = "regular"  # which mode's figures `base`, `nodes` and `per_expression_ms` are
    posterior: Posterior | None = None  # refined by the user's runs (refit.py), else None
    held_mb: dict[str, Held] = {}  # memory an in-flight execution holds, by kind ("ai", "light", "wait")

    def for_mode(self, mode: str) -> NodeCostTable:
        """The table a `mode` answer prices from: queue mode's measured rows where they are (their base, light,
        expressions), the regular rows for the kinds the queue campaign has not measured; regular as it is."""
        if mode != "queue" or self.queue is None or self.mode == mode:
            return self
        q = self.queue
        measured = {row.id: row for row in q.nodes}  # ids, not types: a type may have a row per setting
        nodes = tuple(measured.pop(row.id, row) for row in self.nodes) + tuple(measured.values())
        legacy = None
        if self.legacy_base is not None and self.base.ms > 0:  # legacy was measured in regular mode: its ratio
            k = q.base.ms / self.base.ms
            legacy = Figure(
                ms=self.legacy_base.ms * k, low_ms=self.legacy_base.low_ms * k, high_ms=self.legacy_base.high_ms * k
            )
        return self.model_copy(
            update={
                "base": q.base,
                "light": q.light or self.light,
                "nodes": nodes,
                "legacy_base": legacy,
                "per_expression_ms": {**self.per_expression_ms, **q.per_expression_ms},
                "mode": "queue",
            }
        )

    def queue_rows(self) -> set[str]:
        """Node types the queue campaign measured (the others borrow their regular row in queue mode)."""
        return {row.type for row in self.queue.nodes} if self.queue else set()

    def row(self, node_type: str, parameters: dict | None = None) -> NodeRow | None:
        """The row pricing a node of `node_type`: the first whose `when` its parameters match, else the type's row
        without a `when`, else None."""
        plain = None
        for row in self.nodes:
            if row.type != node_type:
                continue
            if row.when is None:
                plain = plain or row
            elif parameters is not None and all(parameters.get(k) == v for k, v in row.when.items()):
                return row
        return plain

    def row_by_id(self, row_id: str) -> NodeRow:
        for row in self.nodes:
            if row.id == row_id:
                return row
        raise KeyError(row_id)


@lru_cache(maxsize=1)
def load_node_costs() -> NodeCostTable:
    """The embedded table (package data, like the embedded measurements)."""
    text = resources.files("n8n_sizer").joinpath("data/node_costs.json").read_text(encoding="utf-8")
    doc = json.loads(text)
    return table_from_doc(doc)


def table_from_doc(doc: dict) -> NodeCostTable:
    """The table of a node_costs.json document, with its queue part when it has one."""
    queue = doc.get("queue") or {}
    part = {"queue": {**queue["table"], "about": queue.get("about", {})}} if queue.get("table", {}).get("base") else {}
    table = {**doc["table"]}
    families = doc.get("families") or {}  # campaigns of further node kinds (benchmarks/node_costs.py --families)
    table["nodes"] = [*table["nodes"], *families.get("nodes", [])]
    if families.get("held_mb"):
        table["held_mb"] = families["held_mb"]
    return NodeCostTable.model_validate({**table, "about": doc["about"], **part})
