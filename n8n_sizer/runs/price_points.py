"""The user's bench runs as equations on the per-node cost table (advisor/workflow_price/refit.py).

Each run keeps the workflow it ran (run.json `spec.workflow_resolved.definition`) and, per steady step, the CPU
per execution of every role (the kernel's accounting where it ran, else sampled; `fit_input`). Steps are pooled
per workflow, host class and mode (the median of their total CPU per execution). Where light ran on the same host
class and mode, every other workflow gives its ratio to light's; anything else is named in `skipped` with the run
that would help. Ratios only, never a run's CPU in ms against the table's: a bench step at a low rate charges the
processes' idle CPU to its few executions (a light step at 4/s read far above the table's light), which a ratio
to light run the same way mostly cancels.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path

from n8n_sizer.advisor.roles import MEASURED_ROLES
from n8n_sizer.advisor.workflow_price.refit import Observation
from n8n_sizer.runs.fit_input import _workflow_name, find_runs, measurements_from_run
from n8n_sizer.runs.store import RunStore

ROLES = tuple(r for r in MEASURED_ROLES if r != "load_balancer")  # n8n's and its data stores' work


def _total_cpu_ms(results) -> float | None:
    values = [getattr(results, f"{role}_cpu_ms") for role in ROLES]
    values = [v for v in values if v is not None]
    return sum(values) if values else None


def observations_from_results(
    path: Path, workflow_name: str | None = None, items: int = 1, code_cpu_ms: float = 0.0
) -> tuple[list[Observation], list[str]]:
    """(observations, skipped reasons) from the run folders at `path`. `workflow_name` (the export being priced)
    gets `items` and `code_cpu_ms`; every other workflow is taken at 1 item and no Code JavaScript of its own."""
    definitions: dict[str, dict] = {}
    pooled: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    runs: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for folder in find_runs(path):
        manifest = RunStore.open(folder).manifest
        name = _workflow_name(manifest.workflow)
        definition = (manifest.spec.get("workflow_resolved") or {}).get("definition")
        if isinstance(definition, dict):
            definitions.setdefault(name, definition)
        for m in measurements_from_run(folder):
            total = _total_cpu_ms(m.results)
            if total is None or total <= 0:
                continue
            key = (name, m.hardware.host_class, m.setup.mode)
            pooled[key].append(total)
            runs[key].add(manifest.run_id)
    observations, skipped = [], []
    for (name, host_class, mode), values in sorted(pooled.items()):
        if name == "light":
            continue  # the other workflows' denominator
        light = pooled.get(("light", host_class, mode))
        if not light:
            skipped.append(
                f"{name} on {host_class} ({mode}): no light run beside it; run `n8n-sizer bench "
                "--workflow light` on the same host and mode so its runs read as a ratio to light"
            )
            continue
        if name not in definitions:
            skipped.append(f"{name}: its runs do not keep the workflow (bench from before it did); run it again")
            continue
        mine = name == workflow_name
        observations.append(
            Observation(
                run_ids=tuple(sorted(runs[(name, host_class, mode)] | runs[("light", host_class, mode)])),
                workflow=name,
                definition=definitions[name],
                mode=mode,
                items=items if mine else 1,
                code_cpu_ms=code_cpu_ms if mine else 0.0,
                ratio_to_light=statistics.median(values) / statistics.median(light),
            )
        )
    return observations, skipped
