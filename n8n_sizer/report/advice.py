"""The report's last section: what the advisor recommends once it is refitted on these runs.

For every workflow and host shape the runs measured, and every constant rate they offered, the advisor
(embedded measurements + these runs, the runs' host as the reference) says which setup it would run and
what that setup carries. Same refit as `advise --results`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from n8n_sizer.advisor.engine import build_advisor
from n8n_sizer.advisor.fit import is_user_point
from n8n_sizer.advisor.profiles import BUILTIN, LIGHT, user_profile
from n8n_sizer.advisor.recommend import Request
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
    lines = [TITLE, "",
             f"Refitted on the embedded measurements plus these runs ({len(rows)} step(s), {len(used)} of them capacity "
             "points; `advise --validate --results DIR` lists why the others are not). Same as "
             "`advise --rps R --vcpu V --results DIR`.", "",
             "| workflow | host | rate | setup it would run | capacity, 90% interval | carries it | notes |",
             "|---|---|---:|---|---|---|---|"]
    shapes = sorted({(m.workflow, float(m.hardware.vcpu), m.hardware.arch) for m in rows})
    for workflow, vcpu, arch in shapes:
        profile = BUILTIN.get(workflow) or user_profile(workflow)
        note = ""
        if f"overhead:{profile.overhead_key}" not in advisor.model.params:
            profile, note = LIGHT, f"no capacity point for {workflow}: the light workflow's demand stands in"
        rates = sorted({m.load.offered_rps for m in rows if m.workflow == workflow and m.load.offered_rps})
        for rate in rates:
            rec = advisor.recommend(Request(rps=rate, vcpu=max(1, round(vcpu)), arch=arch, profile=profile))
            setup = (f"queue, {rec.workers} workers, --concurrency {rec.concurrency}" if rec.mode == "queue"
                     else "regular" + (f", N8N_CONCURRENCY_PRODUCTION_LIMIT={rec.production_limit}"
                                       if rec.production_limit else ""))
            cap = rec.capacity_per_s
            lines.append(f"| {workflow} | {vcpu:g} vCPU {arch} | {rate:g}/s | {setup} | {cap.mid:.1f}/s "
                         f"({cap.low:.1f}-{cap.high:.1f}) | {'yes' if rec.feasible else 'no'} | {note} |")
    return "\n".join(lines) + "\n"
