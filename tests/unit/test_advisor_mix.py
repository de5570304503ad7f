"""advisor/mix.py: the blend of a mix's profiles carries exactly the mix's demands (utilisation law) and its
in-flight executions (Little's law); the table names the top workflows and sums the rest; scaling."""

from __future__ import annotations

import pytest

from n8n_sizer.advisor.capacity import HostShape
from n8n_sizer.advisor.engine import build_advisor
from n8n_sizer.advisor.mix import MixEntry, blend, scale_mix, size_mix
from n8n_sizer.advisor.profiles import WorkflowProfile
from n8n_sizer.advisor.setup import Setup
from n8n_sizer.errors import InputError


@pytest.fixture(scope="module")
def advisor():
    return build_advisor(None)


def _p(name, code=0.0, wait=0.0, nodes=0, ratio=1.0, sd=0.1, held=None):
    return WorkflowProfile(
        name=name,
        code_cpu_ms=code,
        wait_ms=wait,
        overhead_key="light",
        measured=False,
        code_nodes=nodes,
        overhead_ratio=ratio,
        ratio_sd_log=sd,
        held_mb=held,
    )


MIX = [
    MixEntry(name="orders", profile=_p("orders", code=40.0, wait=300.0, nodes=2, ratio=1.3), rate_per_s=3.0),
    MixEntry(name="sync", profile=_p("sync", ratio=0.95), rate_per_s=0.2),
    MixEntry(name="crm", profile=_p("crm", wait=1200.0, nodes=1, ratio=1.05, held=20.0), rate_per_s=0.7),
]


@pytest.mark.parametrize("setup", [Setup(mode="regular"), Setup(mode="queue", workers=2, concurrency=20)])
def test_the_blend_at_the_total_rate_carries_the_mix_demands_exactly(advisor, setup):
    model = advisor.model
    host = HostShape(vcpu=4.0, arch="x86", host_class=model.reference_class)
    mixed = blend(MIX, model, 6.5)
    total = sum(e.rate_per_s for e in MIX)
    d = model.demands(mixed, setup, host)
    parts = [(e.rate_per_s, model.demands(e.profile, setup, host)) for e in MIX]
    for field in ("total_s", "main_s", "worker_s", "runner_s", "path_s", "wait_s"):
        assert total * getattr(d, field) == pytest.approx(sum(r * getattr(x, field) for r, x in parts), rel=1e-9)
    # Little's law: the blend's in-flight at the total rate is the sum of each workflow's at the same CPU queue
    stretch = model.residence_s(d, host, total) - d.wait_s
    each = sum(r * (x.wait_s + x.path_s * stretch / d.path_s) for r, x in parts)
    assert model.in_flight_at(mixed, setup, host, total) == pytest.approx(each, rel=1e-9)


def test_the_blend_keeps_code_nodes_whole_and_memory_weighted_by_in_flight(advisor):
    mixed = blend(MIX, advisor.model, 6.5)
    assert isinstance(mixed.code_nodes, int) and mixed.code_nodes == 1  # (3 x 2 + 0.7 x 1) / 3.9 = 1.7 -> 1
    assert mixed.held_mb is not None and 6.5 < mixed.held_mb < 20.0
    assert blend(MIX[:2], advisor.model, 6.5).held_mb is None  # no workflow holds other than light: light's figure


def test_size_mix_table_names_the_top_and_sums_the_rest(advisor):
    many = [MixEntry(name=f"w{i}", profile=_p(f"w{i}", wait=100.0 * i), rate_per_s=0.1 * (i + 1)) for i in range(12)]
    sized = size_mix(many, advisor.model, 6.5, burst_per_s=12.0, p99_second_per_s=20.0, top=5)
    assert [r.name for r in sized.rows[:5]] == ["w11", "w10", "w9", "w8", "w7"]
    rest = sized.rows[5]
    assert rest.workflows == 7 and rest.name == "the other 7 workflows"
    assert sum(r.cpu_share for r in sized.rows) == pytest.approx(1.0)
    assert sum(r.rate_per_s for r in sized.rows) == pytest.approx(sized.rate_per_s)
    assert sized.in_flight == pytest.approx(sum(r.in_flight for r in sized.rows))
    assert sized.burst_per_s == 12.0 and sized.workflows == 12


def test_measured_time_in_flight_is_used_for_littles_law(advisor):
    e = MixEntry(name="a", profile=_p("a", wait=100.0), rate_per_s=2.0, running_ms=500.0)
    sized = size_mix([e], advisor.model, 6.5, 2.0, 4.0)
    assert sized.in_flight == pytest.approx(1.0)
    assert sized.memory_mb == pytest.approx(6.5)


def test_scaling_and_empty_mixes(advisor):
    scaled = scale_mix(MIX, 2.0, {"sync": 5.0})
    assert [e.rate_per_s for e in scaled] == pytest.approx([6.0, 2.0, 1.4])
    with pytest.raises(InputError, match="nothing to size"):
        blend([e.model_copy(update={"rate_per_s": 0.0}) for e in MIX], advisor.model, 6.5)
    with pytest.raises(InputError, match="no workflow of that name"):
        scale_mix(MIX, 1.0, {"nope": 2.0})


def test_the_advisor_answers_the_blend_like_any_profile(advisor):
    from n8n_sizer.advisor.recommend import Request

    sized = size_mix(MIX, advisor.model, 6.5, burst_per_s=5.0, p99_second_per_s=9.0)
    rec = advisor.answer(Request(rps=sized.rate_per_s, vcpu=4, profile=sized.profile, max_hosts=1))
    assert rec.request["workload"] == "mix"
    assert rec.capacity_per_s.mid > 0
