"""Issue 25: the model takes every role's measured CPU, leaves rows out only by a rule about the machine, and is
checked against the lab's topologies (each predicted without its own run)."""

import json
import math
from datetime import datetime, timedelta

import pytest

from n8n_sizer.advisor.answer.explain import data_ops_note, what_would_help
from n8n_sizer.advisor.answer.lab_points import lab_model, load_lab_points
from n8n_sizer.advisor.capacity import HostShape
from n8n_sizer.advisor.catalog import SKYLAKE_CLASS, find_size
from n8n_sizer.advisor.engine import build_advisor, embedded_fit
from n8n_sizer.advisor.fit import fit_capacity
from n8n_sizer.advisor.measurements import load_embedded
from n8n_sizer.advisor.points import select_demand_rows, select_lone_rows, shared_machine
from n8n_sizer.advisor.profiles import LIGHT
from n8n_sizer.advisor.roles import PRIORS
from n8n_sizer.advisor.setup import Setup
from n8n_sizer.advisor.validate import lab_checks


def _row(measurement_id: str):
    return next(m for m in load_embedded() if m.id == measurement_id)


def test_sqlite_puts_the_database_inside_main_in_regular_mode():
    """SQLite runs in main's process, Postgres in its own: one regular-mode row of each must not share main's share."""
    model = embedded_fit().model
    host = HostShape(2.0, "x86", "seed-002")
    pg = model.demands(LIGHT, Setup(mode="regular", db="postgres"), host)
    lite = model.demands(LIGHT, Setup(mode="regular", db="sqlite"), host)
    assert lite.main_s == pytest.approx(lite.total_s - lite.runner_s)
    assert pg.main_s < lite.main_s
    assert pg.main_s == pytest.approx(model.params["main_share_regular"] * (pg.total_s - pg.runner_s))


def test_seed_002s_skylake_host_has_its_own_speed_pinned_by_its_lone_execution():
    """Seed 002 ran its CX23 on Intel Skylake and its CX33/CX43 on AMD EPYC-Rome: one execution alone took 104 ms
    on the first, 72-78 ms on the others. The catalog gives cx23 the Skylake class, and the fit's speed for it
    follows the lone executions even with cx23's throughput point held out."""
    assert find_size("cx23").host_class == SKYLAKE_CLASS
    assert find_size("cx33").host_class == find_size("cx43").host_class == "seed-002"
    lone = {r.id for r in select_lone_rows(load_embedded())}
    assert {"s002-cx23-c1", "s002-cx33-c1", "s002-cx43-c1", "s002-cax11-c1"} <= lone
    assert not any(i.startswith("notes-") for i in lone)  # one speed only: they say nothing about speed
    held = fit_capacity(load_embedded(), leave_out="s002-cx23-peak")
    assert held.params[f"speed:{SKYLAKE_CLASS}"] == pytest.approx(104 / 75, rel=0.15)
    advisor = build_advisor()
    assert advisor.host_for_size(find_size("cx23")).host_class == SKYLAKE_CLASS


def test_a_shared_machine_leaves_its_rows_out_whatever_they_measured():
    """The rule looks at how a row was measured (other work on the machine), never at its figure: two rows alike
    but for that."""
    base = next(m for m in load_embedded() if m.id.startswith("cgq-"))
    quiet = base.model_copy(update={"id": "quiet"})
    busy = base.model_copy(update={"id": "busy", "load": base.load.model_copy(update={"machine_shared": True})})
    assert shared_machine(quiet) is None and "shared" in shared_machine(busy)
    ids = {r.measurement.id for r in select_demand_rows([quiet, busy])}
    assert ids == {"quiet"}
    fitted = embedded_fit()
    left = {e.measurement.id for e in fitted.excluded if "shared" in e.reason}
    assert left and all(m.startswith(("cg-", "local-")) for m in left)
    assert all(not r.measurement.id.startswith("cg-") for r in fitted.demand_rows)


def test_every_role_prior_is_pinned_by_a_measured_row():
    fitted = embedded_fit()
    roles = {r.role for r in fitted.demand_rows}
    assert {"main", "webhook", "worker", "runner", "postgres", "redis", "load_balancer"} <= roles
    assert len(PRIORS) == 5


def test_the_lab_points_are_predicted_without_their_own_run():
    points = load_lab_points()
    assert len(points) >= 5
    rows = load_embedded()
    for p in points:
        own = [m for m in rows if p.owns(m.id)]
        assert own, p.id  # its per-role rows are embedded, under its tag
        assert p.lost == 0 and p.accepted > 0
    checks = lab_checks(rows)
    assert [c.id for c in checks] == [p.id for p in points]
    # each prediction differs from the same topology scored by the fit that includes its own rows
    full = embedded_fit().model
    assert any(
        abs(c.predicted_per_s - lab_model(full, p).capacity_per_s()) > 1e-6 for c, p in zip(checks, points, strict=True)
    )


def test_a_lab_host_with_more_budget_carries_more():
    p = load_lab_points()[0]
    model = embedded_fit().model
    base = lab_model(model, p).capacity_per_s()
    more = p.model_copy(update={"hosts": [h.model_copy(update={"cores": h.cores * 2}) for h in p.hosts]})
    assert lab_model(model, more).capacity_per_s() > 1.5 * base


def test_redis_binding_names_what_lifts_it_and_that_it_cannot_be_sharded():
    from n8n_sizer.advisor.answer.base import BindingBound

    bound = BindingBound(name="redis", role="redis", host="data", why="Redis: 1 core / 1.2 ms per execution")
    text = what_would_help(bound, multi_host=True, max_hosts=40, limited_by_connections=False, at_per_s=812.0)
    assert "812" in text and "shard" in text and "host of its own" in text


def test_data_host_operations_come_from_the_measured_rows():
    fitted = embedded_fit()
    note = data_ops_note(100.0, fitted.demand_rows, "light")
    assert note is not None
    cmds = [
        r.measurement.results.redis_commands_per_execution
        for r in fitted.demand_rows
        if r.measurement.results.redis_commands_per_execution
    ]
    assert cmds and f"{100 * sorted(cmds)[len(cmds) // 2]:,.0f}"[:2] in note
    assert data_ops_note(100.0, [], "light") is None


def test_rps_1000_names_its_bound_and_a_narrow_interval():
    import subprocess
    import sys

    p = subprocess.run(
        [sys.executable, "-c", "from n8n_sizer.cli import main; main()", "advise", "--rps", "1000", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    cap = data["capacity_per_s"]
    assert cap["high"] / cap["low"] <= 2.5
    assert data["bound"]["name"]
    assert not any(n.startswith("prior ") for n in data["notes"])
    assert math.isfinite(cap["mid"])


def _run_start(measurement) -> str:
    """The UTC minute of the run a row came from, as its `table` names it ("run 20261202T064700Z-7c843b, ...")."""
    return measurement.table.split("run ", 1)[1][:13]


def test_each_campaign_on_this_machine_is_a_host_class_of_its_own():
    """One speed per campaign (advisor/measurements.py sitting_class): the same four worker hosts carried 9.0/s in
    one sitting and 13.6/s in another. Every row this project counted on its own machine carries the class of the
    campaign it ran in, named by the campaign's first run, and no class holds runs more than a sitting apart; a lab
    point has the class of its own rows."""
    ours = [m for m in load_embedded() if m.hardware.host_class.startswith(("cgroup-", "local-shared-"))]
    assert len(ours) >= 120
    by_class: dict[str, list[str]] = {}
    for m in ours:
        by_class.setdefault(m.hardware.host_class, []).append(_run_start(m))
    labs = [c for c in by_class if c.startswith("cgroup-lab-")]
    assert len(labs) >= 3, "three lab campaigns are embedded, each its own class"
    for cls, starts in by_class.items():
        assert cls.endswith("-" + min(starts).replace("-", "")), f"{cls}: named by its first run {min(starts)}"
        first, last = (datetime.strptime(s, "%Y%m%dT%H%M") for s in (min(starts), max(starts)))
        assert last - first <= timedelta(hours=2), f"{cls}: runs from {first} to {last}, more than a sitting apart"
    for point in load_lab_points():
        own = {m.hardware.host_class for m in ours if point.owns(m.id)}
        assert own == {point.host_class}, point.id


def test_sitting_class_names_the_environment_and_the_campaign_minute():
    from n8n_sizer.advisor.answer.lab_points import lab_host_class
    from n8n_sizer.advisor.measurements import sitting_class

    assert sitting_class("cgroup-quiet", 1796187000.0) == "cgroup-quiet-20261202T0450"
    assert lab_host_class(1796187000.0) == "cgroup-lab-20261202T0450"
    assert sitting_class("cgroup-quiet", 1796187000.0 + 86400) != sitting_class("cgroup-quiet", 1796187000.0)


def test_lab_order_is_judged_within_a_campaign_never_across():
    from n8n_sizer.advisor.validate import HeldOutLab, lab_order_right

    def point(campaign: str, measured: float, predicted: float) -> HeldOutLab:
        return HeldOutLab("x", "t", measured, predicted, "host", 0, 10, campaign)

    # the same topology measured slower in one sitting than predicted in the other: not an ordering claim
    across = [point("a", 2.7, 2.1), point("a", 9.0, 8.0), point("b", 2.4, 2.6), point("b", 13.6, 8.0)]
    assert lab_order_right(across) is True
    within = across + [point("b", 5.2, 9.0)]  # ranked above 13.6/s's prediction in its own campaign: wrong
    assert lab_order_right(within) is False
    assert lab_order_right([point("a", 1.0, 1.0), point("b", 2.0, 0.5)]) is None


def test_a_point_is_put_at_its_own_sittings_speed_against_its_campaigns_others():
    """lab_points.sitting_speed: the other sittings' median speed probe over the point's own (CPU ms, lower is
    faster); 1 where either side was not probed, so a campaign without probes is predicted as before."""
    from n8n_sizer.advisor.answer.lab_points import sitting_speed

    assert sitting_speed(100.0, [110.0, 130.0]) == pytest.approx(1.2)  # this sitting 20% faster: 20% more capacity
    assert sitting_speed(120.0, [100.0, None]) == pytest.approx(100.0 / 120.0)
    assert sitting_speed(None, [100.0]) == 1.0 and sitting_speed(100.0, [None]) == 1.0


def test_a_probed_campaign_carries_a_speed_probe_on_every_point():
    """Since 2026-12-02 10:32 lab_shape.py probes the machine before and after each topology (lab/speed.py): a
    campaign that was probed has the figure on every point, and within one sitting they agree to a few percent."""
    points = load_lab_points()
    probed = {p.host_class for p in points if p.speed_probe_ms is not None}
    assert "cgroup-lab-20261202T1032" in probed
    for campaign in probed:
        ms = [p.speed_probe_ms for p in points if p.host_class == campaign]
        assert None not in ms and len(ms) >= 3, campaign
        assert max(ms) / min(ms) < 1.1, f"{campaign}: {ms}"
