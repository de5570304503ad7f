"""A workflow export priced from its nodes: `price_workflow(export, load_node_costs(), items=...)`.

- `export.py`: the export n8n's editor downloads, checked (one-line refusals) and bounded;
- `table.py`: the per-node cost table measured on real n8n (`n8n_sizer/data/node_costs.json`);
- `pricer.py`: the price per node and per execution, relative to the packaged `light` workflow (regular or queue
  mode figures);
- `refit.py`: the table refined by the user's bench runs (a Bayesian least squares, the table as prior);
- `validation.py`: the embedded validation workflows priced again, for `advise --validate`.
"""

from n8n_sizer.advisor.workflow_price.export import MAX_NODES, ParsedExport, parse_export
from n8n_sizer.advisor.workflow_price.pricer import NodeLine, WorkflowPrice, price_workflow
from n8n_sizer.advisor.workflow_price.table import Figure, NodeCostTable, NodeRow, load_node_costs

__all__ = [
    "MAX_NODES",
    "Figure",
    "NodeCostTable",
    "NodeLine",
    "NodeRow",
    "ParsedExport",
    "WorkflowPrice",
    "load_node_costs",
    "parse_export",
    "price_workflow",
]
