"""The topology search near a single process's ceiling (topology_search.PLATEAU_MARGIN, issue 25): when nothing
carries the rate comfortably, the answer is the cheapest topology within the margin of the most capacity
reachable, not the most hosts for the last fraction of a percent, and it says so."""

import pytest

from n8n_sizer.advisor.answer.layout import Group, Layout, TopologyModel
from n8n_sizer.advisor.answer.topology_search import (
    NEGLIGIBLE_GAIN,
    PLATEAU_MARGIN,
    HostOption,
    TopologySearch,
    plateau_floor,
)
from n8n_sizer.advisor.catalog import sizes_for
from n8n_sizer.advisor.engine import build_advisor
from n8n_sizer.advisor.profiles import CODE_HEAVY, LIGHT
from n8n_sizer.advisor.recommend import Request


@pytest.fixture(scope="module")
def advisor():
    return build_advisor()


def _search(advisor, profile, max_hosts, arch="x86"):
    options = [
        HostOption(advisor.host_for_size(s), s.provider, s.size, s.vcpu, s.monthly_eur, s.ram_mib)
        for s in sizes_for("hetzner", arch)
    ]
    return TopologySearch(advisor.model, profile, options, max_hosts)


def test_the_floor_is_the_margin_below_the_top_or_the_rate_when_the_top_carries_it():
    assert plateau_floor(100.0, None) == pytest.approx(100.0 * (1 - PLATEAU_MARGIN))
    assert plateau_floor(100.0, 50.0) == pytest.approx(100.0 * (1 - PLATEAU_MARGIN))
    assert plateau_floor(100.0, 98.0) == pytest.approx(98.0, rel=1e-5)  # the top carries it: so must the answer
    assert plateau_floor(100.0, 150.0) == pytest.approx(100.0 * (1 - NEGLIGIBLE_GAIN))  # nothing carries it


@pytest.mark.parametrize("profile", [LIGHT, CODE_HEAVY], ids=["light", "code-heavy"])
@pytest.mark.parametrize("max_hosts", [4, 12, 40])
def test_the_most_capacity_answer_is_the_cheapest_within_the_margin_and_one_host_fewer_falls_below(
    advisor, profile, max_hosts
):
    search = _search(advisor, profile, max_hosts)
    s = search.most_capacity()
    top = s.most_reachable_per_s
    assert s.hosts <= max_hosts
    assert s.capacity_per_s >= (1 - PLATEAU_MARGIN) * top * (1 - 1e-3)
    assert s.capacity_per_s <= top * (1 + 1e-3)
    # no candidate reaching the floor is cheaper: the same search, asked for the exact top, costs at least as much
    exact = search.most_capacity(rate=top * 10)  # nothing carries it: floor = the top less NEGLIGIBLE_GAIN
    assert exact.capacity_per_s >= s.capacity_per_s * (1 - 1e-3)
    assert s.cost <= exact.cost
    # the fewest worker hosts of its kind: one fewer falls below the floor
    last = s.layout.groups[-1]
    if last.count > 1:
        fewer = Layout(
            s.layout.groups[:-1] + (Group(**{**last.__dict__, "count": last.count - 1}),),
            s.layout.concurrency,
            s.layout.worker_pool,
        )
        assert TopologyModel(advisor.model, profile, fewer).capacity_per_s() < (1 - PLATEAU_MARGIN) * top


def test_at_400_per_s_the_answer_names_redis_ceiling_and_buys_no_hosts_for_the_last_percent(advisor):
    rec = advisor.recommend(Request(rps=400, profile=LIGHT, max_hosts=40))
    most = _search(advisor, LIGHT, 40).most_capacity(rate=400)  # the default --max-hosts
    assert rec.hosts == most.hosts < 40
    head = rec.warnings[0]
    assert head.startswith("at its ceiling") and "bound by redis" in head
    assert f"about {rec.capacity_per_s.mid:.0f}/s with {rec.hosts} hosts" in head
    assert f"reaches is about {most.most_reachable_per_s:.0f}/s" in head
    assert any("Redis' single core binds" in w and "cannot be spread over shards" in w for w in rec.warnings)


def test_a_rate_the_top_carries_is_carried_by_the_plateau_answer(advisor):
    search = _search(advisor, LIGHT, 40)
    top = search.most_capacity().most_reachable_per_s
    rate = top * (1 - PLATEAU_MARGIN / 3)  # inside the margin: the cheapest within 3% might not carry it
    s = search.most_capacity(rate=rate)
    assert s.capacity_per_s > rate
