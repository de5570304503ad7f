"""The pricer's validation points: workflows that did not feed the cost table, measured against light
(`n8n_sizer/data/workflow_price_validation.json`, written by `benchmarks/workflow_price.py --from ... --embed`),
priced again with the table as it is now. `advise --validate` lists them beside the throughput points.

Measured, per workflow: light's rate over the workflow's (what the capacity model divides by), and the workflow's
CPU per execution over light's, each the median over rounds against the light runs just before and after it.
Error = predicted ratio / measured - 1.
"""

from __future__ import annotations

import json
import statistics
from functools import lru_cache
from importlib import resources

from n8n_sizer.advisor.workflow_price.pricer import price_workflow
from n8n_sizer.advisor.workflow_price.table import NodeCostTable, load_node_costs
from n8n_sizer.safety.frozen import Frozen


class PricePoint(Frozen):
    key: str
    items: int
    predicted: float  # the price's ratio to light
    low: float
    high: float
    measured_rate_ratio: float  # light's rate over the workflow's, median over rounds
    measured_cpu_ratio: float  # the workflow's CPU per execution over light's
    error_pct: float  # by rate
    cpu_error_pct: float
    rounds: int
    runs: tuple[str, ...]
    waits: bool = False  # it waited when measured (a model, an app): its closed-loop rate is its wait's; by CPU only


class PriceValidation(Frozen):
    points: tuple[PricePoint, ...]
    median_abs_pct_error: float
    max_abs_pct_error: float
    cpu_median_abs_pct_error: float
    cpu_max_abs_pct_error: float
    inside_interval: float  # share of points whose measured rate ratio is inside the price's interval
    campaigns: tuple[str, ...]


@lru_cache(maxsize=1)
def _embedded() -> dict:
    text = resources.files("n8n_sizer").joinpath("data/workflow_price_validation.json").read_text(encoding="utf-8")
    return json.loads(text)


def validate_prices(table: NodeCostTable | None = None) -> PriceValidation:
    """Every embedded validation workflow priced with `table` (the embedded one by default), against what ran."""
    table = table or load_node_costs()
    doc = _embedded()
    points = []
    for p in doc["points"]:
        mid, low, high = price_workflow(p["definition"], table, items=p["items"]).overhead_ratio_to_light
        rate, cpu = statistics.median(p["measured_rate_ratio"]), statistics.median(p["measured_cpu_ratio"])
        points.append(
            PricePoint(
                key=p["key"],
                items=p["items"],
                predicted=mid,
                low=low,
                high=high,
                measured_rate_ratio=round(rate, 4),
                measured_cpu_ratio=round(cpu, 4),
                error_pct=round((mid / rate - 1) * 100, 1),
                cpu_error_pct=round((mid / cpu - 1) * 100, 1),
                rounds=len(p["measured_rate_ratio"]),
                runs=tuple(p["runs"]),
                waits=bool(p.get("waits", False)),
            )
        )
    by_rate = [p for p in points if not p.waits] or points
    errors = [abs(p.error_pct) for p in by_rate]
    cpu_errors = [abs(p.cpu_error_pct) for p in points]
    inside = sum(p.low <= p.measured_rate_ratio <= p.high for p in by_rate) / len(by_rate)
    return PriceValidation(
        points=tuple(points),
        median_abs_pct_error=statistics.median(errors),
        max_abs_pct_error=max(errors),
        cpu_median_abs_pct_error=statistics.median(cpu_errors),
        cpu_max_abs_pct_error=max(cpu_errors),
        inside_interval=round(inside, 3),
        campaigns=tuple(doc["about"]["campaigns"]),
    )
