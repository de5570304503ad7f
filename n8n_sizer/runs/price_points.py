"""The user's bench runs as equations on the per-node cost table (advisor/workflow_price/refit.py).

Each run keeps the workflow it ran (run.json `spec.workflow_resolved.definition`) and, per steady step, the CPU
per execution of every role (the kernel's accounting where it ran, else sampled; `fit_input`). Steps are pooled
per workflow, host class and mode (the median of their total CPU per execution). Where light ran on the same host
class and mode, every other workflow gives its ratio to light's; where it did not, a run on the table's own
machine (same CPU model) gives its CPU in ms; anything else is named in `skipped` with the run that would help.
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


def observations_from_results(path: Path, table_machine: str, workflow_name: str | None = None, items: int = 1,
                              code_cpu_ms: float = 0.0) -> tuple[list[Observation], list[str]]:
    """(observations, skipped reasons) from the run folders at `path`. `workflow_name` (the export being priced)
    gets `items` and `code_cpu_ms`; every other workflow is taken at 1 item and no Code JavaScript of its own."""
    definitions: dict[str, dict] = {}
    pooled: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    runs: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    cpu_model: dict[str, str] = {}
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
            cpu_model[m.hardware.host_class] = m.hardware.host_class.removeprefix("user:")
    observations, skipped = [], []
    for (name, host_class, mode), values in sorted(pooled.items()):
        if name == "light" and not (cpu_model[host_class] and cpu_model[host_class] in table_machine):
            continue  # light is the other workflows' denominator here
        if name not in definitions:
            skipped.append(f"{name}: its runs do not keep the workflow (bench from before it did); run it again")
            continue
        cpu = statistics.median(values)
        light = pooled.get(("light", host_class, mode))
        mine = name == workflow_name
        common = {"run_ids": tuple(sorted(runs[(name, host_class, mode)])), "workflow": name,
                  "definition": definitions[name], "mode": mode, "items": items if mine else 1,
                  "code_cpu_ms": code_cpu_ms if mine else 0.0}
        if light and name != "light":
            observations.append(Observation(**common, ratio_to_light=cpu / statistics.median(light)))
        elif cpu_model[host_class] and cpu_model[host_class] in table_machine:
            observations.append(Observation(**common, cpu_ms=cpu))
        else:
            skipped.append(f"{name} on {host_class} ({mode}): no light run beside it; run `n8n-sizer bench "
                           "--workflow light` on the same host and mode so its runs read as a ratio to light")
    return observations, skipped
