"""One topology contract: every answer `advise` gives renders, passes `check --topology`, and scores back the same.

A grid of answers (rates 1..2000, no --vcpu or 2..32, both packaged workloads and custom profiles, one host or
the default search, both providers), each taken as `advise --json` prints it: parsed by the renderer's parser,
rendered and written, checked, and scored again with `advise --topology`'s path. A fixed grid of corners plus a
hypothesis sample of the rest (derandomized: the same cases in CI as here).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from n8n_sizer.advisor.engine import build_advisor
from n8n_sizer.advisor.profiles import profile_for
from n8n_sizer.advisor.recommend import MAX_HOSTS_DEFAULT, Request
from n8n_sizer.bundle.checks.all_hosts import check_topology
from n8n_sizer.bundle.render_topology import write_topology
from n8n_sizer.bundle.topology import parse_topology
from n8n_sizer.cli.advise.given import given_layout_from

ADVISOR = build_advisor()
PROFILES = {
    "light": ("light", None, None),
    "code-heavy": ("code-heavy", None, None),
    "custom-wait": ("light", 20.0, 3000.0),
    "custom-cpu": ("light", 300.0, 0.0),
}


def _answer(rps: float, vcpu: int | None, workload: str, one_host: bool, provider: str | None):
    name, cpu, wait = PROFILES[workload]
    req = Request(
        rps=rps,
        vcpu=vcpu,
        provider=provider,
        profile=profile_for(name, cpu, wait),
        max_hosts=1 if one_host else MAX_HOSTS_DEFAULT,
    )
    return ADVISOR.answer(req), req


def _round_trip(tmp: Path, rps: float, vcpu: int | None, workload: str, one_host: bool, provider: str | None) -> None:
    rec, req = _answer(rps, vcpu, workload, one_host, provider)
    data = json.loads(json.dumps(rec.model_dump(mode="json")))  # exactly what `advise --json` prints
    topology = parse_topology(data, "advise --json")
    assert len({g.provider for g in topology.groups}) == 1, data["topology"]  # one provider per cluster
    out = tmp / "bundle"
    write_topology(topology, out, public_url=None if topology.single_host else "http://n8n.example.com:5678/")
    if not topology.single_host:  # the render command the answer prints names a public URL
        assert "--public-url" in rec.render_command
    failed = [r for r in check_topology(out) if r.status == "fail"]
    assert not failed, [(r.rule, r.message) for r in failed]
    (tmp / "advice.json").write_text(json.dumps(data))
    given = given_layout_from(tmp / "advice.json", ADVISOR, False)
    if given[0] == "one-host":
        back = ADVISOR.evaluate_one_host(req, given[1], given[2])
    else:
        back = ADVISOR.evaluate(req, given[1], given[3])
    assert back.capacity_per_s.mid == pytest.approx(rec.capacity_per_s.mid, rel=0.01), (data["topology"], back.topology)
    assert back.hosts == rec.hosts and back.workers == rec.workers and back.mode == rec.mode
    for alt in rec.alternatives:  # each alternative is a topology of its own that renders too
        alt_topology = parse_topology(alt.model_dump(mode="json"), "an alternative")
        assert alt_topology.total("main") == 1


CORNERS = [
    (1, None, "light", False, None),
    (12, None, "light", True, None),
    (40, 4, "light", False, None),
    (40, 8, "light", False, None),
    (5, 4, "code-heavy", True, None),
    (20, 4, "code-heavy", False, None),
    (400, None, "light", False, "hetzner"),
    (800, None, "light", False, None),
    (2000, None, "light", False, "gcp"),
    (30, 6, "custom-wait", False, None),
    (3, 2, "custom-cpu", True, "gcp"),
    (150, 32, "code-heavy", False, None),
]


@pytest.mark.parametrize("rps, vcpu, workload, one_host, provider", CORNERS)
def test_every_corner_answer_renders_checks_and_scores_back(tmp_path, rps, vcpu, workload, one_host, provider):
    _round_trip(tmp_path, rps, vcpu, workload, one_host, provider)


@settings(max_examples=25, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rps=st.sampled_from([1, 2, 3, 5, 8, 12, 20, 30, 40, 60, 100, 200, 400, 700, 1000, 1500, 2000]),
    vcpu=st.sampled_from([None, 2, 3, 4, 6, 8, 12, 16, 32]),
    workload=st.sampled_from(sorted(PROFILES)),
    one_host=st.booleans(),
    provider=st.sampled_from([None, "hetzner", "gcp"]),
)
def test_a_sample_of_the_grid_renders_checks_and_scores_back(tmp_path_factory, rps, vcpu, workload, one_host, provider):
    _round_trip(tmp_path_factory.mktemp("grid"), rps, vcpu, workload, one_host, provider)


def test_vcpu_answers_one_server_of_that_size_first_then_the_ways_past_it():
    rec, _ = _answer(40, 4, "light", True, None)
    assert rec.hosts == 1 and rec.one_host is not None and rec.one_host.vcpu == 4
    assert not rec.feasible and 25 < rec.one_host.capacity_per_s.mid < 40  # what one 4-vCPU server carries
    assert all(f.vcpu == 4 for f in rec.fits)  # the size table obeys --vcpu
    assert rec.alternatives and all(a.monthly_eur is not None for a in rec.alternatives)
    assert any(a.comfortable for a in rec.alternatives)
    assert any(a.hosts == 1 for a in rec.alternatives)
    # a cluster is listed only when it is cheaper than every comfortable option before it
    singles = [a.monthly_eur for a in rec.alternatives if a.hosts == 1 and a.comfortable]
    assert all(a.monthly_eur < min(singles) for a in rec.alternatives if a.hosts > 1 and a.comfortable and singles)


def test_the_size_table_uses_the_verdicts_comfort_rule():
    rec, _ = _answer(40, 8, "light", True, None)
    for f in rec.fits:
        assert f.comfortable == (f.carries and 40 <= 0.7 * f.capacity_per_s)
    assert rec.comfortable == any(f.comfortable and f.size == rec.server.size for f in rec.fits)


def test_all_three_modes_are_recommended_where_they_win():
    modes = {_answer(r, 4, w, True, None)[0].mode for r in (2, 5, 10) for w in ("light", "code-heavy", "custom-wait")}
    assert modes == {"regular", "regular-limit", "queue"}
    limited, _ = _answer(2, 4, "code-heavy", True, None)  # seed 000's story: long executions on one server
    assert limited.mode == "regular-limit" and limited.production_limit >= 10
    assert limited.concurrency_per_vcpu == pytest.approx(limited.production_limit / 4, rel=0.01)
    assert "N8N_CONCURRENCY_PRODUCTION_LIMIT" in limited.concurrency_setting


def test_concurrency_moves_with_waiting_not_the_worker_count():
    """custom-wait (20 ms of Code CPU, 3 s of waiting) beside the same workflow without the wait: the wait adds
    slots, not workers (the 20 ms of CPU may need workers of its own, so light is not the comparison)."""
    waits, req = _answer(30, 4, "custom-wait", False, None)
    short = ADVISOR.answer(req.model_copy(update={"profile": profile_for("light", 20.0, 0.0)}))
    assert short.mode == waits.mode == "queue"
    assert waits.concurrency >= 3 * short.concurrency  # 3 s of waiting needs slots, not workers
    assert waits.workers <= short.workers + 1
