"""A mix of workflows, each at its own rate, sized as one: what an instance's history asks (`advise --history`).

A mix is a list of `MixEntry`: a workflow's profile, its rate, its burst (its busiest minute) and the time its
executions measured in flight. Sizing it rests on three laws:

- **Utilisation law** (U = X D): every bound of the capacity model is a resource's capacity over the demand one
  execution puts on it, and demands are linear in a profile's terms (n8n's overhead, the Code nodes' CPU and round
  trips, the wait). A mix at rates r_i loads each resource with sum r_i D_i = R x D_blend, where D_blend is the
  rate-weighted mean demand (w_i = r_i / R). So the blended profile at the total rate R gives every CPU bound of
  the mix exactly, and the usual answer (one host first, the ways past it) is asked once, of it (`blend`).
- **Little's law** (N = X R): executions in flight are rate x time in flight, per workflow, summed; the blend's
  wait is the rate-weighted mean wait, so the model's in-flight for the blend at R is the mix's sum. The measured
  in-flight (rate x measured time in flight) is shown beside it per workflow.
- **Memory**: in flight x what one execution holds (`WorkflowProfile.held_mb`; None is the light workflow's
  measured figure, passed in as `light_held_mb`), summed over the workflows.

The blend's p95 is the p95 of a mean execution, not of any one workflow: each workflow's own measured durations
are in the history. Pure: no I/O.
"""

from __future__ import annotations

import math

from pydantic import Field

from n8n_sizer.advisor.capacity import CapacityModel
from n8n_sizer.advisor.profiles import WorkflowProfile
from n8n_sizer.errors import InputError
from n8n_sizer.safety.frozen import Frozen

TOP = 8  # the answer's table names the workflows that carry the most load, and sums the rest in one row


class MixEntry(Frozen):
    name: str
    trigger: str = ""
    profile: WorkflowProfile
    rate_per_s: float = Field(ge=0)
    burst_per_s: float = Field(0.0, ge=0)  # its busiest minute's rate
    running_ms: float | None = Field(None, ge=0)  # measured time in flight per execution (parked waits left out)


class MixRow(Frozen):
    """One row of the answer's table: a workflow, or the rest summed (`workflows` > 1)."""

    name: str
    trigger: str
    workflows: int = 1
    rate_per_s: float
    burst_per_s: float
    cpu_ms: float  # CPU per execution on the model's reference host (n8n's overhead + Code nodes)
    wait_ms: float
    in_flight: float  # rate x time in flight (measured where the history has it, else the model's wait + CPU)
    held_mb: float  # memory those executions hold
    cpu_share: float  # of the mix's CPU demand
    rate_share: float


class MixSizing(Frozen):
    profile: WorkflowProfile  # the blend, at rate_per_s
    rate_per_s: float
    burst_per_s: float  # the instance's busiest minute, all workflows together
    p99_second_per_s: float
    in_flight: float
    memory_mb: float
    cpu_ms: float  # the blend's CPU per execution
    workflows: int
    rows: tuple[MixRow, ...]


def _cpu_s(model: CapacityModel, p: WorkflowProfile) -> float:
    return model.overhead_s(p) + model.runner_s(p)


def blend(entries: list[MixEntry], model: CapacityModel, light_held_mb: float) -> WorkflowProfile:
    """The rate-weighted profile whose demands at the total rate are the mix's (module docstring)."""
    live = [e for e in entries if e.rate_per_s > 0]
    if not live:
        raise InputError("the mix has no workflow with executions in its window: nothing to size; widen --since")
    keys = {e.profile.overhead_key for e in live}
    if len(keys) > 1:
        raise InputError(f"the mix's profiles rest on different fitted overheads ({', '.join(sorted(keys))})")
    total = sum(e.rate_per_s for e in live)
    w = [e.rate_per_s / total for e in live]
    trip_ms = model.params.get("runner_round_trip_ms", 0.0)
    factor = model.params["runner_factor"]
    runner_ms = sum(
        wi * (e.profile.code_cpu_ms * factor + e.profile.code_nodes * trip_ms) for wi, e in zip(w, live, strict=True)
    )
    nodes = math.floor(sum(wi * e.profile.code_nodes for wi, e in zip(w, live, strict=True)) + 1e-9)
    code_cpu = max(runner_ms - nodes * trip_ms, 0.0) / factor if factor > 0 else 0.0
    overhead = [wi * e.profile.overhead_ratio for wi, e in zip(w, live, strict=True)]
    ratio = sum(overhead)
    sd = sum(o * e.profile.ratio_sd_log for o, e in zip(overhead, live, strict=True)) / ratio if ratio > 0 else 0.0
    in_flight = [e.rate_per_s * _residence_s(model, e) for e in live]
    held = None
    if any(e.profile.held_mb is not None for e in live) and sum(in_flight) > 0:
        held = sum(n * (e.profile.held_mb or light_held_mb) for n, e in zip(in_flight, live, strict=True)) / sum(
            in_flight
        )
    return WorkflowProfile(
        name="mix",
        code_cpu_ms=code_cpu,
        wait_ms=sum(wi * e.profile.wait_ms for wi, e in zip(w, live, strict=True)),
        overhead_key=next(iter(keys)),
        measured=False,
        code_nodes=nodes,
        overhead_ratio=max(ratio, 1e-3),
        ratio_sd_log=min(sd, 5.0),
        held_mb=held,
    )


def _residence_s(model: CapacityModel, e: MixEntry) -> float:
    """Time in flight per execution: measured where known, else the profile's wait plus its CPU."""
    if e.running_ms is not None:
        return e.running_ms / 1000.0
    return e.profile.wait_s + _cpu_s(model, e.profile)


def scale_mix(entries: list[MixEntry], factor: float, by_name: dict[str, float]) -> list[MixEntry]:
    """Every rate x `factor`, and the named workflows' x their own factor too (`--scale 3 --scale NAME=5`)."""
    names = {e.name for e in entries}
    unknown = sorted(set(by_name) - names)
    if unknown:
        shown = ", ".join(sorted(names)[:10]) + (" ..." if len(names) > 10 else "")
        raise InputError(f"--scale {unknown[0]}=...: no workflow of that name or id in the history; names: {shown}")
    out = []
    for e in entries:
        k = factor * by_name.get(e.name, 1.0)
        out.append(e.model_copy(update={"rate_per_s": e.rate_per_s * k, "burst_per_s": e.burst_per_s * k}))
    return out


def size_mix(
    entries: list[MixEntry],
    model: CapacityModel,
    light_held_mb: float,
    burst_per_s: float,
    p99_second_per_s: float,
    top: int = TOP,
) -> MixSizing:
    """The blend, and the table of workflows with their share of the load (the top ones named, the rest summed)."""
    profile = blend(entries, model, light_held_mb)
    live = [e for e in entries if e.rate_per_s > 0]
    total_rate = sum(e.rate_per_s for e in live)
    cpu = {e.name: _cpu_s(model, e.profile) * 1000.0 for e in live}
    load = {e.name: e.rate_per_s * cpu[e.name] for e in live}
    total_load = sum(load.values()) or 1.0
    rows = []
    for e in live:
        n = e.rate_per_s * _residence_s(model, e)
        rows.append(
            MixRow(
                name=e.name,
                trigger=e.trigger,
                rate_per_s=e.rate_per_s,
                burst_per_s=e.burst_per_s,
                cpu_ms=cpu[e.name],
                wait_ms=e.profile.wait_ms,
                in_flight=n,
                held_mb=n * (e.profile.held_mb or light_held_mb),
                cpu_share=load[e.name] / total_load,
                rate_share=e.rate_per_s / total_rate,
            )
        )
    rows.sort(key=lambda r: (-r.cpu_share, -r.rate_per_s))
    shown, rest = rows[:top], rows[top:]
    if len(rest) == 1:
        shown, rest = rows, []
    if rest:
        rate = sum(r.rate_per_s for r in rest)
        shown.append(
            MixRow(
                name=f"the other {len(rest)} workflows",
                trigger="",
                workflows=len(rest),
                rate_per_s=rate,
                burst_per_s=sum(r.burst_per_s for r in rest),
                cpu_ms=sum(r.cpu_ms * r.rate_per_s for r in rest) / rate if rate else 0.0,
                wait_ms=sum(r.wait_ms * r.rate_per_s for r in rest) / rate if rate else 0.0,
                in_flight=sum(r.in_flight for r in rest),
                held_mb=sum(r.held_mb for r in rest),
                cpu_share=sum(r.cpu_share for r in rest),
                rate_share=sum(r.rate_share for r in rest),
            )
        )
    in_flight = sum(r.in_flight for r in rows)
    return MixSizing(
        profile=profile,
        rate_per_s=total_rate,
        burst_per_s=max(burst_per_s, total_rate),
        p99_second_per_s=p99_second_per_s,
        in_flight=in_flight,
        memory_mb=sum(r.held_mb for r in rows),
        cpu_ms=_cpu_s(model, profile) * 1000.0,
        workflows=len(live),
        rows=tuple(shown),
    )
