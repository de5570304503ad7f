"""One node's CPU per run: its own measured row, else its family's figure, else unknown.

- **row**: the table holds the node's type (for the node's setting, where rows differ by setting: `NodeRow.when`).
- **family**: the table has no row for the type, but measured members of its family (families.py): priced at the
  median of their rows, with the family's spread (the lowest member's low to the highest member's high), so an
  app node is priced from the app nodes measured here (each an HTTP call to a local stand-in plus its mapping).
  A family with no measured member borrows a measured neighbour's figure (`BORROW`, said in the line's note).
- **in-root**: an AI sub-node whose work was measured inside its root's row (a chat model inside the Agent's,
  embeddings and the text splitter inside the vector store's): 0 here, its waiting on its root.
- **unknown**: neither: priced as the median known node with an interval from 0 to twice the costliest ordinary
  row (a sub-execution apart), and named in the answer.
"""

from __future__ import annotations

import statistics

from n8n_sizer.advisor.workflow_price.export import ExportNode
from n8n_sizer.advisor.workflow_price.families import FAMILIES, Family, family_of
from n8n_sizer.advisor.workflow_price.table import NodeCostTable, NodeRow
from n8n_sizer.safety.frozen import Frozen

EXECUTE_WORKFLOW = "n8n-nodes-base.executeWorkflow"
# Measured inside their root's row (benchmarks/node_costs.py --families measures each root with these attached).
IN_ROOT = {"ai.model", "ai.embedding", "ai.text-splitter", "ai.document-loader", "ai.retriever"}
# A family with no measured member of its own is priced as this measured one (in this order of preference): the
# work on n8n's side is the same, only what it waits on differs (waits.py prices that).
BORROW = {
    "ai.vector-store-remote": ("ai.vector-store",),
    "ai.memory-remote": ("ai.memory",),
    "ai.model-app": ("ai.chain", "app"),
    "ai.reranker": ("ai.tool-call", "app"),
    "ai.tool-workflow": ("subworkflow",),
    "ai.tool-call": ("ai.tool", "app"),
    "ai.chain": ("ai.agent",),
    "database": ("app",),
    "loop": ("data",),
    "stop": ("data",),
    "merge": ("data",),
    "respond": ("data",),
    "wait": ("data",),
}
# An app node is an HTTP call plus the mapping of its answer: until an app node is measured, the sum of the HTTP
# Request row and a data node's figure.
COMPOSE = {"app": ("http", "data")}


class Cost(Frozen):
    mid: float
    low: float
    high: float
    priced_by: str  # row, family, in-root, trigger, none, unknown
    row_id: str  # the row it was priced from ("base" for a trigger, "none", "unknown", "family:<id>")
    family: str = ""
    note: str = ""


def _figure(rows: list[NodeRow]) -> tuple[float, float, float]:
    mids = [max(r.cpu.ms, 0.0) for r in rows]
    return statistics.median(mids), min(max(r.cpu.low_ms, 0.0) for r in rows), max(r.cpu.high_ms for r in rows)


def members_by_family(table: NodeCostTable) -> dict[str, list[NodeRow]]:
    """Measured rows by family (every row of a type counts: a type measured for several settings is several
    members)."""
    out: dict[str, list[NodeRow]] = {}
    for row in table.nodes:
        fam = family_of(row.type)
        if fam is not None:
            out.setdefault(fam.id, []).append(row)
    return out


class Costing:
    """A table's node costs: rows, family figures (computed once) and the unknown node's figure."""

    def __init__(self, table: NodeCostTable) -> None:
        self.table = table
        self.members = members_by_family(table)
        known = [r.cpu.ms for r in table.nodes]
        self.unknown_mid = max(0.0, statistics.median(known))
        ordinary = [r.cpu.high_ms for r in table.nodes if r.type != EXECUTE_WORKFLOW] or [self.unknown_mid]
        self.unknown_high = 2.0 * max(max(ordinary), self.unknown_mid)
        self._families: dict[str, tuple[tuple[float, float, float], str] | None] = {}

    def family_figure(self, family: str) -> tuple[tuple[float, float, float], str] | None:
        """(mid, low, high) of a family from its measured members, or borrowed (BORROW); with how it was found."""
        if family not in self._families:
            self._families[family] = self._family_figure(family)
        return self._families[family]

    def _family_figure(self, family: str) -> tuple[tuple[float, float, float], str] | None:
        if self.members.get(family):
            rows = self.members[family]
            return _figure(rows), f"{len(rows)} measured {FAMILIES[family].what.split(':')[0]} row(s)"
        for other in BORROW.get(family, ()):
            found = self.family_figure(other) if other != family else None
            if found is not None and self.members.get(other):
                return found[0], f"as {FAMILIES[other].what.split(':')[0]} (no member measured)"
            if found is not None and other in COMPOSE:
                return found
        if family in COMPOSE and all(self.members.get(f) for f in COMPOSE[family]):
            figs = [_figure(self.members[f]) for f in COMPOSE[family]]
            mid, low, high = (sum(f[i] for f in figs) for i in range(3))
            return (mid, low, high), "an HTTP call plus a data node's mapping (no app node measured yet)"
        return None

    def cost(self, node: ExportNode, family: Family | None, parked: bool = False) -> Cost:
        """The node's CPU per run, before items and expressions (see the module docstring)."""
        table = self.table
        fid = family.id if family else ""
        if family is not None and family.role == "trigger":
            return Cost(mid=0, low=0, high=0, priced_by="trigger", row_id="base", family=fid, note="in the base")
        if family is not None and family.role == "none":
            return Cost(mid=0, low=0, high=0, priced_by="none", row_id="none", family=fid, note="not executed")
        row = next((r for r in table.nodes if r.id == "waitParked"), None) if parked else None
        row = row or table.row(node.type, node.parameters)
        if row is not None:
            return Cost(
                mid=row.cpu.ms, low=row.cpu.low_ms, high=row.cpu.high_ms, priced_by="row", row_id=row.id, family=fid
            )
        if fid in IN_ROOT:
            return Cost(
                mid=0, low=0, high=0, priced_by="in-root", row_id="none", family=fid, note="measured in its root's row"
            )
        found = self.family_figure(fid) if fid else None
        if found is not None:
            (mid, low, high), how = found
            return Cost(
                mid=mid,
                low=low,
                high=high,
                priced_by="family",
                row_id=f"family:{fid}",
                family=fid,
                note=f"by family: {how}",
            )
        return Cost(
            mid=self.unknown_mid,
            low=0.0,
            high=self.unknown_high,
            priced_by="unknown",
            row_id="unknown",
            family=fid,
            note="not in the table: priced as the median node, interval 0 to 2x the costliest",
        )
