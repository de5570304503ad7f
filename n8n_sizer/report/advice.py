"""The report's last section: what the advisor recommends once it is refitted on these runs.

For every workflow and host shape the runs measured, and every constant rate they offered, the advisor
(embedded measurements + these runs, the runs' host as the reference) says which setup it would run and
what that setup carries. Same refit as `advise --results`. Nothing here contradicts the steps beside it
(`runs.evidence`): a rate a step on the same setup did not keep up with is never "carried", and a workflow
without a capacity point is "not known yet", with the run that would measure it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from n8n_sizer.advisor.engine import build_advisor
from n8n_sizer.advisor.fit import is_user_point
from n8n_sizer.advisor.profiles import BUILTIN, user_profile
from n8n_sizer.advisor.recommend import Request
from n8n_sizer.runs.evidence import how_to_measure, measured_at, overrule, setup_words
from n8n_sizer.runs.fit_input import measurements_from_run
from n8n_sizer.runs.store import RUN_JSON

TITLE = "## What the advisor now recommends"


def advice_section(run_dirs: Sequence[str | Path]) -> str:
    # a folder that is not a run is the report's to refuse, with its own message
    rows = [m for d in run_dirs if (Path(d) / RUN_JSON).is_file() for m in measurements_from_run(Path(d))]
    if not rows:
        return f"{TITLE}\n\nThese runs hold no finished load steps with host facts, so there is nothing to refit on.\n"
    advisor = build_advisor(rows)
    used = [p.measurement.id for p in advisor.fitted.points if is_user_point(p.measurement)]
    lines = [
        TITLE,
        "",
        f"Refitted on the embedded measurements plus these runs ({len(rows)} step(s), {len(used)} of them capacity "
        "points; `advise --validate --results DIR` lists why the others are not). Same as "
        "`advise --rps R --vcpu V --max-hosts 1 --results DIR`.",
        "",
        "| workflow | host | rate | setup it would run | capacity, 90% interval | carries it | notes |",
        "|---|---|---:|---|---|---|---|",
    ]
    shapes = sorted({(m.workflow, float(m.hardware.vcpu), m.hardware.arch) for m in rows})
    for workflow, vcpu, arch in shapes:
        rates = sorted({m.load.offered_rps for m in rows if m.workflow == workflow and m.load.offered_rps})
        profile = BUILTIN.get(workflow) or user_profile(workflow)
        known = advisor.fitted.knows(profile)
        for rate in rates:
            measured = measured_at(rows, workflow, vcpu, arch, rate)
            seen = "; ".join(
                f"measured {v.setup}: {v.why}" + ("" if v.kept_up else " (did not keep up)") for v in measured
            )
            if not known:  # never another workflow's demand presented as this one's answer
                lines.append(
                    f"| {workflow} | {vcpu:g} vCPU {arch} | {rate:g}/s | not known yet | - | not known yet "
                    f"| no capacity point for {workflow}; {how_to_measure(workflow, rate)}"
                    f"{'; ' + seen if seen else ''} |"
                )
                continue
            rec = advisor.recommend(Request(rps=rate, vcpu=max(1, round(vcpu)), arch=arch, profile=profile))
            setup = setup_words(
                rec.setup.mode,
                rec.setup.workers,
                rec.setup.concurrency if rec.setup.mode == "queue" else None,
                rec.production_limit,
            )
            rec, against = overrule(rec, rows, workflow)  # the same rule `advise --results` applies
            carries = "yes" if rec.feasible else "no"
            if against is not None:
                carries = f"no: measured on this setup, {against.why}"
            if carries != "yes":  # and what would carry it, when the catalog has such a size
                bigger = next((f for f in rec.fits if f.carries), None)
                if bigger is not None:
                    carries += (
                        f"; {bigger.size} ({bigger.vcpu} vCPU, {bigger.mode}"
                        f"{f', {bigger.workers} workers' if bigger.mode == 'queue' else ''}) would carry it"
                    )
            cap = rec.capacity_per_s
            lines.append(
                f"| {workflow} | {vcpu:g} vCPU {arch} | {rate:g}/s | {setup} | {cap.mid:.1f}/s "
                f"({cap.low:.1f}-{cap.high:.1f}) | {carries} | {seen} |"
            )
    return "\n".join(lines) + "\n"
