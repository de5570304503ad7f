"""What a user's own bench steps showed, so that no advice printed beside them contradicts them.

A recommendation for a rate that a step measured on the same setup and host must agree with that step: a step
that did not keep up (or failed too often) means "does not carry it", whatever the model predicts. A workflow with
no capacity point gets "not known yet" and the run that would measure it, never another workflow's demand.
Used alike by the report's advice section and by `advise --results`.
"""

from __future__ import annotations

from dataclasses import dataclass

from n8n_sizer.advisor.measurements import Measurement
from n8n_sizer.runs.stats import FAILED_SHARE, SATURATION_SHARE


@dataclass(frozen=True)
class StepVerdict:
    """One measured step at a rate: what it carried and whether that was the rate offered."""

    measurement_id: str
    setup: str  # "regular", "regular, limit 10", "queue, 2 workers x 10"
    processes: tuple[str, int]  # (mode, workers): what decides capacity (a production limit only queues)
    offered_per_s: float
    carried_per_s: float
    kept_up: bool
    why: str


def setup_words(mode: str, workers: int, concurrency: int | None, production_limit: int | None) -> str:
    if mode == "queue":
        return f"queue, {workers} workers" + (f" x {concurrency}" if concurrency else "")
    return "regular" + (f", limit {production_limit}" if production_limit not in (None, -1) else "")


def step_verdict(m: Measurement) -> StepVerdict | None:
    """The verdict of an open-load step (None for anything else): kept up when it carried at least
    SATURATION_SHARE of the offered rate and at most FAILED_SHARE of its requests failed."""
    offered, carried = m.load.offered_rps, m.results.throughput_per_s
    if m.load.kind != "open" or not offered or carried is None:
        return None
    answered = carried * (m.load.duration_s or 0.0)
    errors = m.results.errors or 0
    failed_share = errors / (answered + errors) if answered + errors else 0.0
    if failed_share > FAILED_SHARE:
        kept, why = False, f"{errors} of {answered + errors:.0f} requests failed"
    elif carried < SATURATION_SHARE * offered:
        kept, why = False, f"carried {carried:.1f}/s of {offered:g}/s offered"
    else:
        kept, why = True, f"carried {carried:.1f}/s of {offered:g}/s offered"
    s = m.setup
    return StepVerdict(
        measurement_id=m.id,
        setup=setup_words(s.mode, s.workers, s.concurrency, s.production_limit),
        processes=(s.mode, s.workers if s.mode == "queue" else 0),
        offered_per_s=offered,
        carried_per_s=carried,
        kept_up=kept,
        why=why,
    )


def measured_at(rows: list[Measurement], workflow: str, vcpu: float, arch: str, rate: float) -> list[StepVerdict]:
    """Verdicts of the steps that offered `rate` to `workflow` on hosts of this shape."""
    out = []
    for m in rows:
        if m.workflow != workflow or float(m.hardware.vcpu) != float(vcpu) or m.hardware.arch != arch:
            continue
        if m.load.offered_rps is None or abs(m.load.offered_rps - rate) > 1e-9:
            continue
        verdict = step_verdict(m)
        if verdict is not None:
            out.append(verdict)
    return out


def contradiction(verdicts: list[StepVerdict], mode: str, workers: int, feasible: bool) -> StepVerdict | None:
    """The measured step that a "carries it" for this mode and worker count would contradict, or None. A
    production limit does not count as another setup: it queues requests, it adds no capacity."""
    if not feasible:
        return None
    key = (mode, workers if mode == "queue" else 0)
    return next((v for v in verdicts if v.processes == key and not v.kept_up), None)


def how_to_measure(workflow: str, rate: float) -> str:
    """The run that gives a workflow its capacity point: rates past where it stops keeping up."""
    rates = ",".join(f"{r:g}" for r in sorted({max(1.0, rate / 2), rate, rate * 1.5, rate * 2}))
    return (
        f"n8n-sizer bench --local --workflow {workflow}.json --body BODY.json --rates {rates} --step-seconds 60 "
        "(the steps past its ceiling give the capacity point)"
    )


def overrule(rec, rows: list[Measurement], workflow: str):
    """`rec` as the user's own steps leave it: when a step on the same host shape, workflow, rate and setup did not
    keep up, the recommendation does not carry the rate, whatever the model predicted. Returns (rec, the step or
    None). A multi-host answer is not the measured setup: it is returned as it is."""
    if getattr(rec, "hosts", 1) != 1 or not rec.feasible:
        return rec, None
    verdicts = measured_at(rows, workflow, float(rec.server.vcpu), rec.server.arch, float(rec.request["rps"]))
    against = contradiction(verdicts, rec.setup.mode, rec.setup.workers, rec.feasible)
    if against is None:
        return rec, None
    note = (
        f"your run measured this setup at {against.offered_per_s:g}/s: {against.why}, so it does not carry it "
        f"(step {against.measurement_id})"
    )
    return rec.model_copy(update={"feasible": False, "warnings": [note, *rec.warnings]}), against
