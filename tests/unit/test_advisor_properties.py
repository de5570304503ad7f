"""Consistency of `advise` answers, checked over an explicit grid (issue 13 point 5).

rps 1..1000 x vCPU 1..64 (and no --vcpu) x both workloads x both arches x (--max-hosts 1, the default):
1,872 answers from one Advisor, a few seconds.
"""

import itertools

import pytest

from n8n_sizer.advisor.engine import build_advisor
from n8n_sizer.advisor.profiles import CODE_HEAVY, LIGHT, profile_for
from n8n_sizer.advisor.recommend import COMFORT_UTILISATION, MAX_HOSTS_DEFAULT, Request

RPS = [1, 2, 3, 5, 8, 12, 20, 30, 45, 70, 100, 150, 200, 300, 400, 600, 800, 1000]
VCPU = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64]
PROFILES = {"light": LIGHT, "code-heavy": CODE_HEAVY}


@pytest.fixture(scope="module")
def advisor():
    return build_advisor()


@pytest.fixture(scope="module")
def grid(advisor):
    out = {}
    for name, arch, hosts, vcpu, rps in itertools.product(
        PROFILES, ("x86", "arm"), (1, MAX_HOSTS_DEFAULT), VCPU + [None], RPS
    ):
        out[(name, arch, hosts, vcpu, rps)] = advisor.recommend(
            Request(rps=rps, vcpu=vcpu, arch=arch, profile=PROFILES[name], max_hosts=hosts)
        )
    return out


def _floor(before: float, hosts: int) -> float:
    """What a later answer must carry at least: the same, except that where nothing carries the rate the topology
    search takes the cheapest topology within PLATEAU_MARGIN of the most capacity reachable (topology_search.py),
    and one host the simplest setup within NEGLIGIBLE_GAIN of its most (recommend.py `most_on_host`), which may be
    up to that margin below an earlier answer."""
    from n8n_sizer.advisor.answer.topology_search import NEGLIGIBLE_GAIN, PLATEAU_MARGIN

    return before * (1.0 - (PLATEAU_MARGIN if hosts > 1 else NEGLIGIBLE_GAIN)) - 1e-9


def test_capacity_never_falls_when_the_rate_grows(grid):
    for (name, arch, hosts, vcpu, rps), rec in grid.items():
        i = RPS.index(rps)
        if i:
            before = grid[(name, arch, hosts, vcpu, RPS[i - 1])]
            assert rec.capacity_per_s.mid >= _floor(before.capacity_per_s.mid, hosts), (name, arch, hosts, vcpu, rps)


def test_capacity_never_falls_when_vcpu_grows_unless_a_cheaper_answer_carries_the_rate_comfortably(grid):
    """On bigger hosts the answer is either the same or more capacity, or a cheaper/simpler setup that still
    carries the rate with the headroom every comfortable answer has (rate <= 70% of capacity)."""
    for (name, arch, hosts, vcpu, rps), rec in grid.items():
        if vcpu is None or vcpu == VCPU[0]:
            continue
        before = grid[(name, arch, hosts, VCPU[VCPU.index(vcpu) - 1], rps)]
        comfortable = rec.feasible and rps <= COMFORT_UTILISATION * rec.capacity_per_s.mid + 1e-9
        assert comfortable or rec.capacity_per_s.mid >= _floor(before.capacity_per_s.mid, hosts), (
            name,
            arch,
            hosts,
            vcpu,
            rps,
        )


def test_on_one_server_a_bigger_host_carries_what_a_smaller_one_carried(grid):
    """One server: the answer is the simplest setup that carries the rate comfortably, so a bigger host may answer
    with fewer workers and less capacity (light at 100/s: 4 workers on 24 vCPU, 143/s; 5 on 16 vCPU, 148/s), but
    never carries less than the smaller one did: comfortable stays comfortable, carried stays carried."""
    for (name, arch, hosts, vcpu, rps), rec in grid.items():
        if hosts == 1 and vcpu is not None and vcpu != VCPU[0]:
            before = grid[(name, arch, hosts, VCPU[VCPU.index(vcpu) - 1], rps)]
            if before.feasible:
                assert rec.feasible, (name, arch, vcpu, rps)
            if before.feasible and rps <= COMFORT_UTILISATION * before.capacity_per_s.mid:
                assert rps <= COMFORT_UTILISATION * rec.capacity_per_s.mid + 1e-9, (name, arch, vcpu, rps)
            else:
                assert rec.capacity_per_s.mid >= _floor(before.capacity_per_s.mid, 1), (name, arch, vcpu, rps)


def test_the_issue_examples_no_longer_fall(advisor):
    at = lambda rps, vcpu, p: advisor.recommend(Request(rps=rps, vcpu=vcpu, profile=p))  # noqa: E731
    assert at(50, 8, LIGHT).capacity_per_s.mid >= at(45, 8, LIGHT).capacity_per_s.mid
    assert at(40, 16, CODE_HEAVY).capacity_per_s.mid >= at(40, 8, CODE_HEAVY).capacity_per_s.mid


def test_when_nothing_carries_the_rate_the_answer_is_the_most_capacity_and_the_text_names_it(grid):
    seen = 0
    for (name, arch, hosts, vcpu, rps), rec in grid.items():
        if rec.feasible or any(w.startswith("latency target missed") for w in rec.warnings):
            continue
        seen += 1
        if vcpu is None:  # without --vcpu, every single catalog size was a candidate too
            assert rec.capacity_per_s.mid >= max(f.capacity_per_s for f in rec.fits) - 1e-9, (name, arch, hosts, rps)
        head = next(w for w in rec.warnings if w.startswith("not sustainable"))
        assert "highest-capacity" in head and f"{rec.capacity_per_s.mid:.1f}/s" in head
        assert (rec.server.size or "") in head or f"{rec.hosts} hosts" in head
    assert seen > 100


def _assert_no_contradiction(rec, key) -> None:
    text = " ".join(rec.warnings)
    if "More cores, not more workers" in text or "more cores would carry it" in text:
        assert rec.bound.name in ("cpu", "host"), key
    if "more workers (each with its task runner) would carry it" in text:
        assert rec.bound.name in ("workers", "runners"), key
    if "main's event loop binds" in text:
        assert rec.bound.name == "main", key
    assert "beyond this host" not in text


def test_no_warning_contradicts_the_binding_bound(grid):
    for key, rec in grid.items():
        _assert_no_contradiction(rec, key)


@pytest.mark.parametrize("rps, p95, hosts", [(20, 60, 1), (20, 60, MAX_HOSTS_DEFAULT), (5, 30, 1), (40, 60, 1)])
def test_a_missed_p95_target_is_a_latency_miss(advisor, rps, p95, hosts):
    rec = advisor.recommend(Request(rps=rps, profile=LIGHT, p95_ms=p95, max_hosts=hosts))
    assert not rec.feasible and rec.capacity_per_s.mid > rps
    assert any(w.startswith("latency target missed") and f"--p95-ms {p95}" in w for w in rec.warnings)
    assert not any(w.startswith("not sustainable") for w in rec.warnings)


@pytest.mark.parametrize("size", ["e2-micro", "e2-small", "e2-medium"])
def test_shared_core_sizes_rest_on_the_e2_micro_soak(advisor, size):
    from n8n_sizer.advisor.catalog import find_size

    rate = 0.2
    rec = advisor.recommend(Request(rps=rate, profile=LIGHT, provider="gcp"))
    # seed 004: p95 1,673 ms at 0.2/s on an e2-micro; e2-micro's 1 GiB no longer holds the stack (ram.py)
    assert rec.server.size == "e2-small" and rec.p95_ms >= 1673
    s = find_size(size)
    best = advisor.best_on_host(LIGHT, advisor.host_for_size(s), rate, None, s.shared_core)
    if size == "e2-micro":
        assert best is None
    else:
        assert best is not None and best[3] >= 1673
    text = " ".join(rec.warnings)
    assert "s004-soak" in text and "no GCP measurement is embedded" not in text


@pytest.mark.parametrize("rps", [200, 400])
def test_done_when_200_and_400_per_s_get_feasible_topologies(advisor, rps):
    rec = advisor.recommend(Request(rps=rps, profile=LIGHT, max_hosts=MAX_HOSTS_DEFAULT))
    assert rec.feasible and rec.hosts >= 2 and rec.webhook_processors >= 1 and rec.workers >= 2
    assert rec.postgres_connections <= rec.max_connections and rec.monthly_eur is not None
    roles = [(g.count, g.roles) for g in rec.topology]
    assert sum(c * r.main for c, r in roles) == 1 and sum(c * r.postgres for c, r in roles) == 1
    assert sum(c * r.redis for c, r in roles) == 1 and sum(c * r.load_balancer for c, r in roles) == 1
    assert sum(c * r.webhook for c, r in roles) == rec.webhook_processors
    assert sum(c * r.workers for c, r in roles) == rec.workers
    assert len({g.name for g in rec.topology}) == len(rec.topology)
    p = rec.db_pool_size
    assert rec.postgres_connections == (p.main + 1) + rec.webhook_processors * p.webhook + rec.workers * p.worker
    assert p.worker > 2  # a worker running 10 executions at once needs more than n8n's default pool of 2
    assert rec.monthly_eur == pytest.approx(sum(g.count * g.monthly_eur for g in rec.topology))
    assert rec.bound.role and rec.bound.host and rec.render_command.startswith("n8n-sizer render --topology")
    assert rec.concurrency_per_vcpu == pytest.approx(
        rec.workers * rec.concurrency / sum(g.count * g.vcpu for g in rec.topology if g.roles.workers), rel=0.01
    )


def test_max_hosts_1_is_the_single_server_question(advisor):
    rec = advisor.recommend(Request(rps=200, profile=LIGHT, max_hosts=1))
    assert rec.hosts == 1 and len(rec.topology) == 1 and not rec.feasible
    roles = rec.topology[0].roles
    assert (roles.main, roles.postgres, roles.webhook, roles.load_balancer) == (1, 1, 0, 0)


@pytest.mark.parametrize("cpu_ms, wait_ms", [(50, 200), (400, 0), (5, 2000)])
def test_custom_profile_answers_stay_consistent(advisor, cpu_ms, wait_ms):
    """The issue saw a custom profile bound by its workers told "more cores, not more workers"."""
    p = profile_for("light", cpu_ms=cpu_ms, wait_ms=wait_ms)
    for hosts, vcpu in ((1, 4), (1, None), (MAX_HOSTS_DEFAULT, None)):
        recs = [advisor.recommend(Request(rps=r, vcpu=vcpu, profile=p, max_hosts=hosts)) for r in RPS]
        caps = [r.capacity_per_s.mid for r in recs]
        assert caps == sorted(caps)
        for r in recs:
            _assert_no_contradiction(r, (cpu_ms, wait_ms, hosts, vcpu, r.request["rps"]))
