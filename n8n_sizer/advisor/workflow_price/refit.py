"""The cost table refined by the user's own runs: a small Bayesian least squares over the table's figures.

Every `bench --workflow FILE` run keeps the workflow's definition (run.json `spec.workflow_resolved`), so a run of
a workflow whose nodes are priced is an equation on the table: with `x` the workflow's counts of each figure
(`base` once, one per node of each row, its expressions x items) and `theta` the figures,

- with `light` measured in the same results on the same host and mode, the measured ratio `r` of CPU per
  execution (the workflow's over light's) says `(r * x_light - x) . theta = code` (`code`: the workflow's own Code
  JavaScript, which the table does not price), with an error of `OBSERVED_RATIO_ERROR * r * light`;
- a measurement made the table's way (closed loop, benchmarks/node_costs.py) says `x . theta = cpu - code` in ms
  (`Observation.cpu_ms`; the user's bench runs give ratios only, runs/price_points.py says why).

The unknowns are the figures and each measured workflow's own effect (what the figures do not explain of it). The
prior is the table: each figure at its median with a standard deviation from its spread over rounds (min .. max
read as a 90% interval, at least `MIN_SD_MS`), each effect at 0 with the method's validated error (10% of the
workflow's price, `VALIDATED_RATIO_ERROR`, read as a 90% half-width as the pricer reads it); a run's ratio is
within `OBSERVED_RATIO_ERROR` the same way. The posterior (`refine_table`) moves a measured workflow's price
toward its measurement (its effect) and the shared figures by their spread; the refined table keeps the posterior
covariance and the effects, so a workflow with the same nodes is priced with its own effect (`pricer`).
"""

from __future__ import annotations

import numpy as np

from n8n_sizer.advisor.workflow_price.pricer import VALIDATED_RATIO_ERROR
from n8n_sizer.advisor.workflow_price.table import Figure, NodeCostTable, Posterior
from n8n_sizer.safety.frozen import Frozen

Z90 = 1.6449
MIN_SD_MS = 0.05
OBSERVED_RATIO_ERROR = 0.10  # one run's ratio against light's, as the validation saw neighbouring runs move
EXPR = "expression"


class Observation(Frozen):
    """One workflow measured in the user's runs: its definition, items, and what the runs said."""

    run_ids: tuple[str, ...]
    workflow: str
    definition: dict
    mode: str = "regular"
    items: int = 1
    code_cpu_ms: float = 0.0
    ratio_to_light: float | None = None  # CPU per execution over light's, same host and mode
    cpu_ms: float | None = None  # CPU per execution on the table's own machine (when no light was run)
    error: float = OBSERVED_RATIO_ERROR  # relative


class RefitReport(Frozen):
    used: tuple[str, ...]  # "workflow (runs)" for each observation used
    skipped: tuple[str, ...]  # why others were not
    moved: dict[str, tuple[float, float]]  # figure -> (before ms, after ms), for figures that moved by >= 1%


def _ids(table: NodeCostTable) -> list[str]:
    return ["base", *[r.id for r in table.nodes], EXPR]


def design(definition: dict, table: NodeCostTable, items: int = 1) -> tuple[dict[str, float], float]:
    """(counts per figure, the known offset in ms) of a workflow, as the pricer prices it: the base once, each
    measured row by the runs of its nodes (the connections walked from the trigger), expressions x items x runs;
    nodes priced by family or unknown, and extra items, are an offset (not refined)."""
    from n8n_sizer.advisor.workflow_price.pricer import price_workflow

    price = price_workflow(definition, table.model_copy(update={"posterior": None}), items=items)
    x: dict[str, float] = {"base": 1.0}
    offset = 0.0
    for line in price.lines:
        if line.runs <= 0 or line.priced_by not in ("row", "family", "unknown"):
            continue
        if line.priced_by == "row":
            x[line.row_id] = x.get(line.row_id, 0.0) + line.runs
            offset += table.per_item_ms.ms * (items - 1) * line.runs
        else:
            offset += line.cost_ms - table.per_expression_ms["default"].ms * line.expressions * items * line.runs
        x[EXPR] = x.get(EXPR, 0.0) + line.expressions * items * line.runs
    return x, offset


def _prior(table: NodeCostTable) -> tuple[np.ndarray, np.ndarray]:
    """The figures' prior: the table's medians, each with its spread over rounds (independent rounds); a refined
    table's posterior for the figures (its workflows' own effects are not carried over)."""
    figs = [table.base, *[r.cpu for r in table.nodes], table.per_expression_ms["default"]]
    mean = np.array([f.ms for f in figs])
    if table.posterior is not None:
        n = len(figs)
        return mean, np.array(table.posterior.covariance)[:n, :n]
    sd = np.array([max((f.high_ms - f.low_ms) / (2 * Z90), MIN_SD_MS) for f in figs])
    return mean, np.diag(sd**2)


def _vector(x: dict[str, float], ids: list[str]) -> np.ndarray:
    return np.array([x.get(i, 0.0) for i in ids])


def refine_table(table: NodeCostTable, observations: list[Observation]) -> tuple[NodeCostTable, RefitReport]:
    """The table (already for the observations' mode: `NodeCostTable.for_mode`) refined by the observations."""
    ids = _ids(table)
    mean, cov = _prior(table)
    n = len(ids)
    light_x = _vector({"base": 1.0, "code": 1.0}, ids)
    light_ms = float(light_x @ mean)
    rows, targets, noise, used, skipped, effects, effect_sd = [], [], [], [], [], [], []
    for ob in observations:
        try:
            x, offset = design(ob.definition, table, ob.items)
        except Exception as exc:  # an export the pricer refuses is left out, with its reason
            skipped.append(f"{ob.workflow}: {str(exc)[:120]}")
            continue
        xv = _vector(x, ids)
        # the workflow's own effect: what the table's figures do not explain of it (the validated method error)
        # (10% read as a 90% half-width, as the pricer reads it; so is a run's error)
        effect_sd.append(max(VALIDATED_RATIO_ERROR * float(xv @ mean + offset) / Z90, MIN_SD_MS))
        effects.append(tuple(float(v) for v in xv))
        if ob.ratio_to_light is not None:
            rows.append((ob.ratio_to_light * light_x - xv, -1.0))
            targets.append(ob.code_cpu_ms + offset)
            noise.append(ob.error * ob.ratio_to_light * light_ms / Z90)
        elif ob.cpu_ms is not None:
            rows.append((xv, 1.0))
            targets.append(ob.cpu_ms - ob.code_cpu_ms - offset)
            noise.append(ob.error * ob.cpu_ms / Z90)
        else:
            effects.pop()
            effect_sd.pop()
            skipped.append(f"{ob.workflow}: neither a ratio to light nor a CPU figure")
            continue
        used.append(f"{ob.workflow} ({', '.join(ob.run_ids)})")
    if not rows:
        return table, RefitReport(used=(), skipped=tuple(skipped), moved={})
    k = len(rows)
    z = np.zeros((k, n + k))
    for i, (zx, ze) in enumerate(rows):
        z[i, :n], z[i, n + i] = zx, ze
    mean = np.concatenate([mean, np.zeros(k)])
    full = np.zeros((n + k, n + k))
    full[:n, :n] = cov
    full[n:, n:] = np.diag(np.array(effect_sd) ** 2)
    cov = full
    y, r_inv = np.array(targets), np.diag(1.0 / np.array(noise) ** 2)
    prior_inv = np.linalg.inv(cov)
    post_cov = np.linalg.inv(prior_inv + z.T @ r_inv @ z)
    post = post_cov @ (prior_inv @ mean + z.T @ r_inv @ y)
    sd = np.sqrt(np.diag(post_cov))

    def fig(i: int, old: Figure) -> Figure:
        return Figure(
            ms=round(float(post[i]), 3),
            low_ms=round(float(post[i] - Z90 * sd[i]), 3),
            high_ms=round(float(post[i] + Z90 * sd[i]), 3),
            per_round=old.per_round,
            roles=old.roles,
        )

    nodes = tuple(r.model_copy(update={"cpu": fig(1 + k, r.cpu)}) for k, r in enumerate(table.nodes))
    expr = fig(len(ids) - 1, table.per_expression_ms["default"])
    refined = table.model_copy(
        update={
            "base": fig(0, table.base),
            "nodes": nodes,
            "per_expression_ms": {**table.per_expression_ms, "default": expr},
            "posterior": Posterior(
                ids=tuple(ids),
                covariance=tuple(tuple(float(v) for v in row) for row in post_cov),
                effects=tuple(zip(effects, (float(v) for v in post[n:]), strict=True)),
                runs=tuple(used),
            ),
        }
    )
    moved = {
        i: (round(float(mean[j]), 3), round(float(post[j]), 3))
        for j, i in enumerate(ids)
        if abs(post[j] - mean[j]) >= 0.01 * max(abs(mean[j]), 0.1)
    }
    return refined, RefitReport(used=tuple(used), skipped=tuple(skipped), moved=moved)
