"""The model: fit quality, the shipped fit, guards, and the seeds' findings coming out of the model."""

import json
import math
from importlib import resources

import pytest

from n8n_sizer.advisor.capacity import HostShape
from n8n_sizer.advisor.engine import build_advisor, embedded_sha256
from n8n_sizer.advisor.fit import TooFewPoints, fit_capacity
from n8n_sizer.advisor.measurements import load_embedded
from n8n_sizer.advisor.pools import setup_connections as postgres_connections
from n8n_sizer.advisor.profiles import CODE_HEAVY, LIGHT, profile_for
from n8n_sizer.advisor.recommend import Request
from n8n_sizer.advisor.setup import Setup
from n8n_sizer.advisor.usl import TooFewPointsForUsl, UslModel, fit_usl
from n8n_sizer.errors import InputError


@pytest.fixture(scope="module")
def fitted():
    return fit_capacity(load_embedded())


@pytest.fixture(scope="module")
def advisor():
    return build_advisor()


HOST4 = HostShape(vcpu=4.0, arch="x86", host_class="seed-000")


def test_fit_reproduces_the_capacity_points(fitted):
    """In-sample: every point within 25% (seed 000: repeat runs moved by up to 25%), the median within 7% (6.25%
    since each environment's idle CPU per process is fitted, issue 25: the same fit holds the 212 per-role rows at
    a max of 55%, 104% before, and the capacity points' median moved from 5.6%)."""
    assert len(fitted.points) >= 15
    errors = sorted(abs(math.exp(fitted.residuals[p.measurement.id]) - 1.0) for p in fitted.points)
    assert errors[-1] < 0.25 and errors[len(errors) // 2] < 0.07, errors


def test_shipped_fit_equals_a_fresh_fit(fitted):
    shipped = json.loads(resources.files("n8n_sizer").joinpath("data/fitted.json").read_text())
    assert shipped["measurements_sha256"] == embedded_sha256(), "run scripts/refit_embedded.py"
    for name, value in fitted.params.items():
        assert shipped["params"][name] == pytest.approx(value, rel=1e-4), name


def test_capacity_points_exclude_latency_and_failure_points_with_reasons(fitted):
    reasons = {e.measurement.id: e.reason for e in fitted.excluded}
    assert "latency point" in reasons["s000-queue-2w-r5"]
    assert "errors" in reasons["s000-queue-4w-r50"]
    assert "legacy" in reasons["notes-regular-postgres-legacy-engine-c25"]
    assert "s000-queue-2w-r50" in {p.measurement.id for p in fitted.points}


def test_fit_refuses_without_capacity_points():
    rows = [m for m in load_embedded() if m.load.kind in ("idle", "set")]
    with pytest.raises(TooFewPoints, match="n8n-sizer bench"):
        fit_capacity(rows)


def test_usl_refuses_too_few_worker_counts_and_says_which_run_supplies_more():
    with pytest.raises(TooFewPointsForUsl, match=r"needs 4.*--workers 3"):
        fit_usl([(1, 5.2), (2, 8.6), (4, 9.3)], what="code-heavy", how_to_get_more="run --workers 3")


def test_usl_fit_recovers_known_coefficients():
    truth = UslModel(lambda_per_s=5.0, sigma=0.05, kappa=0.02)
    pts = [(n, truth.throughput_at(n)) for n in (1, 2, 3, 4, 6, 8)]
    fit = fit_usl(pts, what="x", how_to_get_more="-")
    assert fit.sigma == pytest.approx(0.05, abs=0.01) and fit.kappa == pytest.approx(0.02, abs=0.005)
    assert fit.max_useful_concurrency() == pytest.approx(math.sqrt(0.95 / 0.02), rel=0.1)


def test_utilisation_law_two_to_four_doubles_four_to_eight_flattens(fitted):
    """Seed 002's three x86 servers in regular mode, each at its own CPU's speed (the CX23 is a Skylake, the
    CX33/CX43 EPYC-Rome): 15.0 -> 31.9 -> 36.1/s. The 2-vCPU host is bound by its cores, the 8-vCPU one by main."""
    from n8n_sizer.advisor.catalog import find_size

    advisor, regular = build_advisor(), Setup(mode="regular")
    hosts = {s: advisor.host_for_size(find_size(s)) for s in ("cx23", "cx33", "cx43")}
    x = {s: fitted.model.throughput_at(LIGHT, regular, h) for s, h in hosts.items()}
    assert x["cx33"] / x["cx23"] > 1.8
    assert x["cx43"] / x["cx33"] < 1.3
    assert fitted.model.binding_bound(LIGHT, regular, hosts["cx43"]).name == "main"
    assert fitted.model.binding_bound(LIGHT, regular, hosts["cx23"]).name == "cpu"


def test_code_heavy_5_rps_on_4_vcpu_takes_two_workers_and_3_rps_stays_regular(advisor):
    """Seed 000 at 5/s: regular mode answered it at 2.6 s p95 (one runner near its ceiling), 2 workers at 1.0 s.
    5/s is above the comfortable share of regular mode's ~5.4/s, so 2 workers; 3/s is below it, and its ~0.7 s
    executions get regular mode's production limit (seed 000: 674 MB instead of 6.9 GB under a burst)."""
    rec = advisor.recommend(Request(rps=5, vcpu=4, profile=CODE_HEAVY))
    assert (rec.mode, rec.workers) == ("queue", 2) and rec.feasible
    rec = advisor.recommend(Request(rps=3, vcpu=4, profile=CODE_HEAVY))
    assert rec.mode == "regular-limit" and rec.workers == 0 and rec.feasible and rec.production_limit >= 10
    assert rec.redis == [] and rec.queue_keep_last is None
    assert rec.ram_idle_mb < advisor.ram.idle_mb(Setup(mode="queue", workers=2))


@pytest.mark.parametrize("rps", [20, 50])
def test_code_heavy_20_to_50_rps_on_4_vcpu_is_queue_2_workers_and_not_sustainable(advisor, rps):
    rec = advisor.recommend(Request(rps=rps, vcpu=4, profile=CODE_HEAVY))
    assert (rec.mode, rec.workers, rec.concurrency) == ("queue", 2, 10)
    assert rec.queue_keep_last == 1000
    assert not rec.feasible
    assert 7.5 <= rec.capacity_per_s.mid <= 10.0  # seed 000: 8.7/s (519/min)
    # the remedy names a way past this host: more cores or more hosts
    assert any(w.startswith("not sustainable") and ("larger" in w or "hosts" in w) for w in rec.warnings)


def test_four_workers_on_4_vcpu_add_no_capacity_and_their_errors_are_shown(advisor, fitted):
    m = fitted.model
    two = m.throughput_at(CODE_HEAVY, Setup(mode="queue", workers=2), HOST4)
    four = m.throughput_at(CODE_HEAVY, Setup(mode="queue", workers=4), HOST4)
    low_two, _, _ = fitted.throughput_interval(CODE_HEAVY, Setup(mode="queue", workers=2), HOST4)
    assert four < two * (two / low_two)  # within the model's own uncertainty of two workers
    rec = advisor.recommend(Request(rps=50, vcpu=4, profile=CODE_HEAVY))
    assert rec.workers != 4
    assert any("s000-queue-4w-r50" in w for w in rec.warnings)


def test_concurrency_5_costs_throughput_and_is_never_recommended(advisor, fitted):
    m = fitted.model
    c5 = m.throughput_at(CODE_HEAVY, Setup(mode="queue", workers=2, concurrency=5), HOST4)
    c10 = m.throughput_at(CODE_HEAVY, Setup(mode="queue", workers=2, concurrency=10), HOST4)
    assert c5 <= c10
    for rps in (2, 8, 20, 50):
        rec = advisor.recommend(Request(rps=rps, vcpu=4, profile=CODE_HEAVY))
        assert rec.concurrency is None or rec.concurrency >= 10


def test_light_40_rps_on_4_vcpu_is_beyond_regular_mode_and_names_what_carries_it(advisor):
    """Regular mode on 4 vCPU is bound by main near seed 002's 31.9/s; the kernel's counts put ~3/4 of a regular
    execution in main, so queue mode, which moves the executions to workers, is what a 4-vCPU server would need for
    40/s, and the answer says how close that is."""
    from n8n_sizer.advisor.catalog import find_size

    host = advisor.host_for_size(find_size("cx33"))
    regular = advisor.model.throughput_at(LIGHT, Setup(mode="regular"), host)
    assert 27 <= regular <= 37  # seed 002: CX33 peaked at 31.93/s
    assert advisor.model.binding_bound(LIGHT, Setup(mode="regular"), host).name == "main"
    rec = advisor.answer(Request(rps=40, vcpu=4, profile=LIGHT))
    assert rec.mode == "queue" and rec.capacity_per_s.mid > regular
    if rec.feasible:
        assert any("headroom" in w or "low end" in w for w in rec.warnings)
    else:
        assert any("would carry it" in w for w in rec.warnings)
    assert any(a.carries for a in rec.alternatives)


def test_without_vcpu_the_cheapest_size_with_headroom_is_chosen(advisor):
    rec = advisor.recommend(Request(rps=10, profile=LIGHT, provider="hetzner"))
    assert rec.server.size == "cx23" and rec.feasible and rec.headroom > 0.3
    rec = advisor.recommend(Request(rps=20, profile=LIGHT, provider="hetzner", arch="arm"))
    assert rec.server.size == "cax21"


def test_intervals_bracket_the_prediction_and_extrapolation_is_flagged(advisor):
    rec = advisor.recommend(Request(rps=3, vcpu=2, profile=profile_for("light", cpu_ms=50, wait_ms=200)))
    assert rec.capacity_per_s.low < rec.capacity_per_s.mid < rec.capacity_per_s.high
    assert rec.extrapolated and any("extrapolated" in w for w in rec.warnings)


def test_shared_core_size_uses_its_baseline_and_says_so(advisor):
    # e2-micro's 1 GiB cannot hold the stack's containers (ram.py), so the smallest shared-core size that can
    rec = advisor.recommend(Request(rps=0.2, profile=LIGHT, provider="gcp"))
    assert rec.server.size == "e2-small" and rec.feasible
    assert any("shared-core" in w for w in rec.warnings)


def test_pool_math_matches_seed_000_connections():
    assert [postgres_connections(Setup(mode="queue", workers=w)) for w in (1, 2, 4)] == [5, 7, 11]
    assert postgres_connections(Setup(mode="regular")) == 3
    assert postgres_connections(Setup(mode="regular", db="sqlite")) == 0


def test_custom_profile_rejects_negative_cpu():
    with pytest.raises(InputError, match="--cpu-ms"):
        profile_for("light", cpu_ms=-1)


def test_leave_one_out_meets_the_accuracy_target(embedded_validation):
    v = embedded_validation  # the capacity points do not depend on `roles`; the fit is shared (conftest.py)
    assert v.median_abs_pct_error <= 10.0
    assert v.max_abs_pct_error <= 25.0
    assert len(v.points) >= 15 and v.interval_coverage >= 0.8


def test_p95_below_capacity_tracks_seed_000_at_5_rps(fitted):
    from n8n_sizer.advisor.validate import latency_checks

    checks = latency_checks(fitted, load_embedded())
    # one runner at 5/s is at its ceiling by the kernel's count (208 ms of Code CPU each): not below capacity
    assert {c.id for c in checks} >= {"s000-queue-2w-r5", "s000-queue-4w-r5"}
    for c in checks:
        assert abs(c.error_pct) < 40, c


def test_many_vcpus_search_no_more_workers_than_a_setup_takes(advisor):
    """2 x vCPU worker candidates would pass MAX_WORKERS from 33 vCPUs on; the search stops there."""
    from n8n_sizer.advisor.setup import MAX_WORKERS

    rec = advisor.recommend(Request(rps=250, vcpu=48, profile=LIGHT))
    assert rec.workers <= MAX_WORKERS and rec.capacity_per_s.mid > 0
