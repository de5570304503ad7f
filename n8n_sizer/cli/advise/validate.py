"""`advise --validate`: the model's leave-one-out accuracy over its measurements, as a table or JSON."""

from __future__ import annotations

import json
import sys

from n8n_sizer.cli.text import table as _table


def print_validation(extra, json_out: bool) -> int:
    from n8n_sizer.advisor.answer.lab_points import lab_checks, lab_order_right
    from n8n_sizer.advisor.measurements import load_embedded
    from n8n_sizer.advisor.validate import leave_one_out
    from n8n_sizer.advisor.workflow_price.validation import validate_prices

    rows = tuple(load_embedded()) + tuple(extra or ())
    v = leave_one_out(rows)
    prices = validate_prices()
    lab = lab_checks(rows)
    if json_out:
        print(
            json.dumps(
                {
                    "median_abs_pct_error": v.median_abs_pct_error,
                    "max_abs_pct_error": v.max_abs_pct_error,
                    "interval_coverage": v.interval_coverage,
                    "points": [
                        {
                            "id": p.id,
                            "workflow": p.workflow,
                            "setup": p.setup,
                            "host": p.host,
                            "measured_per_s": p.measured_per_s,
                            "predicted_per_s": p.predicted_per_s,
                            "low_per_s": p.low_per_s,
                            "high_per_s": p.high_per_s,
                            "error_pct": p.error_pct,
                        }
                        for p in v.points
                    ],
                    "excluded": [{"id": e.measurement.id, "reason": e.reason} for e in v.excluded],
                    "latency_points": [
                        {
                            "id": c.id,
                            "setup": c.setup,
                            "offered_per_s": c.offered_per_s,
                            "measured_p95_ms": c.measured_p95_ms,
                            "predicted_p95_ms": c.predicted_p95_ms,
                            "error_pct": c.error_pct,
                        }
                        for c in v.latency
                    ],
                    "demand_rows": {
                        "median_abs_pct_error": v.demand_median_abs_pct_error,
                        "max_abs_pct_error": v.demand_max_abs_pct_error,
                        "rows": [
                            {
                                "id": d.id,
                                "role": d.role,
                                "setup": d.setup,
                                "measured_ms": d.measured_ms,
                                "predicted_ms": d.predicted_ms,
                                "error_pct": d.error_pct,
                            }
                            for d in v.demand
                        ],
                    },
                    "workflow_price_points": prices.model_dump(mode="json"),
                    "lab_shape": {
                        "order_right": lab_order_right(lab),
                        "points": [
                            {
                                "id": x.id,
                                "topology": x.label,
                                "campaign": x.campaign,
                                "measured_per_s": x.measured_per_s,
                                "predicted_per_s": x.predicted_per_s,
                                "bound": x.bound,
                                "lost": x.lost,
                                "accepted": x.accepted,
                                "error_pct": x.error_pct,
                            }
                            for x in lab
                        ],
                    },
                },
                indent=2,
            )
        )
        return 0
    out = ["leave-one-out: each capacity point predicted by a fit without it"]
    rows = [
        [
            p.id,
            p.workflow,
            p.setup,
            p.host,
            f"{p.measured_per_s:.2f}",
            f"{p.predicted_per_s:.2f}",
            f"{p.low_per_s:.1f}-{p.high_per_s:.1f}",
            f"{p.error_pct:+.1f}%",
        ]
        for p in v.points
    ]
    out += _table(
        rows, ["measurement", "workflow", "setup", "host", "measured/s", "predicted/s", "90% interval", "error"]
    )
    out.append(
        f"throughput rows: median |error| {v.median_abs_pct_error:.1f}%, max |error| {v.max_abs_pct_error:.1f}%, "
        f"measured value inside the 90% interval for {v.interval_coverage:.0%} of points "
        f"({len(v.points)} capacity points)"
    )
    out += ["", "leave-one-out: each per-role CPU row predicted by a fit without it"]
    rows = [
        [d.id, d.role, d.setup, f"{d.measured_ms:.1f} ms", f"{d.predicted_ms:.1f} ms", f"{d.error_pct:+.1f}%"]
        for d in v.demand
    ]
    out += _table(rows, ["row", "role", "setup", "measured", "predicted", "error"])
    if v.demand:
        out.append(
            f"per-role demand rows: median |error| {v.demand_median_abs_pct_error:.1f}%, max |error| "
            f"{v.demand_max_abs_pct_error:.1f}% ({len(v.demand)} rows)"
        )
    if lab:
        out += ["", "lab topologies (each host its own CPU budget): each predicted by a fit without its own run's rows"]
        rows = [
            [
                x.label,
                x.campaign,
                f"{x.measured_per_s:.2f}",
                f"{x.predicted_per_s:.2f}",
                x.bound,
                f"{x.lost} of {x.accepted}",
                f"{x.error_pct:+.1f}%",
            ]
            for x in lab
        ]
        out += _table(rows, ["topology", "campaign", "measured/s", "predicted/s", "bound", "lost", "error"])
        errs = sorted(abs(x.error_pct) for x in lab)
        out.append(
            f"{len(lab)} lab topologies: median |error| {errs[len(errs) // 2]:.1f}%, max |error| "
            f"{errs[-1]:.1f}%, order right (within each campaign): {'yes' if lab_order_right(lab) else 'no'}"
        )
    out += [
        "",
        "latency check (not a target): p95 below capacity, constant-rate arrivals, plus the reported "
        "network round trip",
    ]
    rows = [
        [
            c.id,
            c.setup,
            f"{c.offered_per_s:g}",
            f"{c.measured_p95_ms:,.0f} ms",
            f"{c.predicted_p95_ms:,.0f} ms",
            f"{c.error_pct:+.0f}%",
        ]
        for c in v.latency
    ]
    out += _table(rows, ["measurement", "setup", "offered/s", "measured p95", "predicted p95", "error"])
    out += [
        "",
        "workflows priced from their nodes (advise --workflow) against their measured ratio to light "
        f"(regular mode; {', '.join(prices.campaigns)})",
    ]
    rows = [
        [
            p.key,
            str(p.items),
            f"{p.predicted:.2f}",
            f"{p.low:.2f}-{p.high:.2f}",
            f"{p.measured_rate_ratio:.2f}",
            f"{p.error_pct:+.1f}%",
            f"{p.measured_cpu_ratio:.2f}",
            f"{p.cpu_error_pct:+.1f}%",
        ]
        for p in prices.points
    ]
    out += _table(
        rows, ["workflow", "items", "priced", "90% interval", "measured rate", "error", "measured CPU", "error"]
    )
    out.append(
        f"workflow prices: median |error| {prices.median_abs_pct_error:.1f}%, max |error| "
        f"{prices.max_abs_pct_error:.1f}% by rate ({prices.cpu_median_abs_pct_error:.1f}% / "
        f"{prices.cpu_max_abs_pct_error:.1f}% by CPU), measured inside the 90% interval for "
        f"{prices.inside_interval:.0%} ({len(prices.points)} workflows)"
    )
    out += ["", "not used, and why:"] + [f"  {e.measurement.id}: {e.reason}" for e in v.excluded]
    print("\n".join(out))
    sys.stdout.flush()
    return 0
