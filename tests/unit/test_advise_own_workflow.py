"""`advise --results` on runs of a workflow that is not packaged, including a first run whose steps never saturated."""

from n8n_sizer.advisor.engine import build_advisor
from n8n_sizer.advisor.measurements import Hardware, Load, MeasuredSetup, Measurement, Results
from n8n_sizer.advisor.profiles import user_profile
from n8n_sizer.advisor.recommend import Request


def _step(rate: float, main_ms: float | None, answered: float | None = None, workflow: str = "my-flow") -> Measurement:
    """One constant-rate bench step on a 2-vCPU host that kept up with its rate (no saturation)."""
    answered = rate if answered is None else answered
    return Measurement(
        id=f"run1-local-rate-{rate:g}",
        source="results/run1",
        table="bench step",
        n8n_version="2.41.1",
        hardware=Hardware(provider="local", size=None, vcpu=2, arch="x86", ram_mib=8192, host_class="user:Test CPU"),
        workflow=workflow,
        setup=MeasuredSetup(mode="regular", db="postgres"),
        load=Load(kind="open", offered_rps=rate, duration_s=60, generator="n8n-sizer bench"),
        results=Results(
            answered_per_min=60 * answered,
            errors=0,
            p50_ms=40,
            p95_ms=90,
            main_cpu_ms=main_ms,
            demand_executions_per_s=answered if main_ms else None,
        ),
    )


def test_unsaturated_steps_with_per_role_cpu_pin_the_workflows_own_overhead():
    # 4, 8, 12, 16/s all kept up: no capacity point, but main's CPU per execution was measured at each step.
    rows = [_step(r, 90.0) for r in (4, 8, 12, 16)]
    advisor = build_advisor(rows)
    profile = user_profile("my-flow")
    assert advisor.fitted.knows(profile)
    rec = advisor.recommend(Request(rps=8, vcpu=2, profile=profile))
    # 90 ms of main CPU per execution on 2 vCPU: main can keep at most the host's 2 cores busy, 2 / 90 ms = 22/s,
    # and the rest of an execution's CPU (Postgres, the runner) shares those cores
    assert 6 <= rec.capacity_per_s.mid < 22, rec.capacity_per_s


def test_a_heavier_own_workflow_gets_less_capacity_than_a_lighter_one():
    light = build_advisor([_step(r, 40.0) for r in (4, 8)])
    heavy = build_advisor([_step(r, 160.0) for r in (4, 8)])
    p = user_profile("my-flow")
    a = light.recommend(Request(rps=3, vcpu=2, profile=p)).capacity_per_s.mid
    b = heavy.recommend(Request(rps=3, vcpu=2, profile=p)).capacity_per_s.mid
    assert b < 0.6 * a, (a, b)


def test_steps_without_cpu_rows_or_saturation_do_not_know_the_workflow():
    advisor = build_advisor([_step(r, None) for r in (4, 8)])
    assert not advisor.fitted.knows(user_profile("my-flow"))


def test_a_workflow_priced_at_twice_lights_overhead_carries_about_half_with_a_wider_interval():
    from n8n_sizer.advisor.profiles import LIGHT

    advisor = build_advisor()
    twice = LIGHT.model_copy(update={"name": "priced", "overhead_ratio": 2.0, "ratio_sd_log": 0.2, "measured": False})
    a = advisor.recommend(Request(rps=2, vcpu=4, profile=LIGHT)).capacity_per_s
    b = advisor.recommend(Request(rps=2, vcpu=4, profile=twice)).capacity_per_s
    assert 0.4 < b.mid / a.mid < 0.6
    assert b.high / b.low > a.high / a.low  # the price's own uncertainty widens the interval
