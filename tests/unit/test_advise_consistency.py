"""One capacity per named server (issue 36): whatever names a server scores that server's own speed.

Over a grid of rates, vCPU (catalog sizes and sizes the catalog does not hold), providers, arches and workloads, every
place an answer names one server with one setup (the verdict, `one_host`, the single-server alternatives, the size
table of the answer and of the all-sizes question, and `advise --topology` given the answer back) gives it one
capacity; where a size was measured (the five-VPS benchmark), the answer's interval holds the measurement.
"""

from __future__ import annotations

import itertools
import math

import pytest

from n8n_sizer.advisor.catalog import CATALOG, estimate_price, price_rate, sizes_for
from n8n_sizer.advisor.engine import build_advisor
from n8n_sizer.advisor.measurements import load_embedded
from n8n_sizer.advisor.profiles import CODE_HEAVY, LIGHT, profile_for
from n8n_sizer.advisor.recommend import MAX_HOSTS_DEFAULT, Request

RPS = [2, 8, 20, 45, 120, 400]
VCPU = [None, 2, 4, 8, 16]
PLACES = [(None, "x86"), ("hetzner", "x86"), ("gcp", "x86"), (None, "arm"), ("hetzner", "arm")]
PROFILES = {"light": LIGHT, "code-heavy": CODE_HEAVY, "custom": profile_for("light", cpu_ms=50, wait_ms=200)}


@pytest.fixture(scope="module")
def advisor():
    return build_advisor()


def _requests():
    for (provider, arch), vcpu, rps, name in itertools.product(PLACES, VCPU, RPS, PROFILES):
        hosts = [1] if vcpu is not None else [1, MAX_HOSTS_DEFAULT]
        for max_hosts in hosts:
            yield Request(rps=rps, vcpu=vcpu, arch=arch, provider=provider, profile=PROFILES[name], max_hosts=max_hosts)
    for vcpu, rps in itertools.product((2, 4), (3, 20)):  # and a p95 target (a latency miss on some)
        yield Request(rps=rps, vcpu=vcpu, profile=LIGHT, p95_ms=400)


def _named(rec, full):
    """(server, setup) -> capacities, from every place the answer names one server with one setup."""
    seen: dict[tuple, list[tuple[str, float]]] = {}

    def add(where, provider, size, vcpu, mode, workers, capacity):
        seen.setdefault((provider, size or f"{vcpu}-vCPU", mode, workers), []).append((where, capacity))

    if rec.hosts == 1 and not rec.webhook_processors:
        g = rec.topology[0]
        add("verdict", g.provider, g.size, g.vcpu, rec.mode, rec.workers, rec.capacity_per_s.mid)
    if rec.one_host is not None:
        o = rec.one_host
        add("one_host", o.provider, o.size, o.vcpu, o.mode, o.workers, o.capacity_per_s.mid)
    for a in rec.alternatives:
        if a.hosts == 1 and not a.webhook_processors:
            g = a.topology[0]
            add(f"alternative {a.what!r}", g.provider, g.size, g.vcpu, a.mode, a.workers, a.capacity_per_s.mid)
    for where, fits in (("table", rec.fits), ("all-sizes table", full.fits)):
        for f in fits:
            add(where, f.provider, f.size, f.vcpu, f.mode, f.workers, f.capacity_per_s)
    return seen


def test_every_place_that_names_a_server_gives_it_one_capacity(advisor):
    answers = 0
    for req in _requests():
        rec = advisor.answer(req)
        full = advisor.recommend(req.model_copy(update={"vcpu": None, "max_hosts": 1}))
        answers += 1
        for key, found in _named(rec, full).items():
            caps = [c for _, c in found]
            assert max(caps) == pytest.approx(min(caps), rel=1e-9), (req.model_dump(exclude={"profile"}), key, found)
        # the verdict's own server is in its table, with the verdict's setup, capacity and judgement
        g = rec.topology[0]
        if req.vcpu is not None and rec.hosts == 1 and g.size is not None:
            row = next(f for f in rec.fits if f.size == g.size and f.provider == g.provider)
            assert (row.mode, row.workers) == (rec.mode, rec.workers), (req, row)
            assert row.capacity_per_s == pytest.approx(rec.capacity_per_s.mid, rel=1e-9)
            assert (row.carries, row.comfortable) == (rec.feasible, rec.comfortable), (req, row)
    assert answers > 500


@pytest.mark.parametrize(
    "vcpu, arch, provider", [(2, "x86", None), (2, "x86", "gcp"), (4, "arm", None), (16, "x86", None)]
)
def test_advise_topology_scores_the_answer_it_is_given_back_the_same(advisor, tmp_path, vcpu, arch, provider):
    from n8n_sizer.cli.advise.given import given_layout_from

    for rps in (3, 20, 60):
        req = Request(rps=rps, vcpu=vcpu, arch=arch, provider=provider, profile=LIGHT)
        rec = advisor.answer(req)
        path = tmp_path / f"advice-{rps}.json"
        path.write_text(rec.model_dump_json())
        kind, setup, option, _ = given_layout_from(path, advisor, False)
        assert kind == "one-host"
        given = advisor.evaluate_one_host(req.model_copy(update={"vcpu": None}), setup, option)
        assert given.capacity_per_s.mid == pytest.approx(rec.capacity_per_s.mid, rel=1e-9), (rps, rec.server)
        assert given.feasible == rec.feasible


@pytest.mark.parametrize(
    "row", [m for m in load_embedded() if m.id.startswith("s002-") and m.id.endswith("-peak")], ids=lambda m: m.id
)
def test_a_measured_size_is_answered_within_its_measurement(advisor, row):
    """The five-VPS benchmark's servers, asked as a user would (`advise --rps 2 --vcpu V --arch A --provider
    hetzner`): the answer names that server, runs it in the measured mode and its 90% interval holds the peak."""
    hw = row.hardware
    rec = advisor.answer(Request(rps=2, vcpu=int(hw.vcpu), arch=hw.arch, provider="hetzner", profile=LIGHT))
    assert rec.server.size == hw.size and rec.mode == row.setup.mode
    cap = rec.capacity_per_s
    assert cap.low <= row.results.throughput_per_s <= cap.high, (row.id, row.results.throughput_per_s, cap)


def test_off_catalog_sizes_are_priced_as_an_estimate_and_never_offered_a_smaller_server(advisor):
    rec = advisor.answer(Request(rps=200, vcpu=16, profile=LIGHT))
    assert rec.server.size is None and rec.price_estimated and rec.one_host.price_estimated
    eur, rate = estimate_price(None, "x86", 16, 16 * 2048)
    assert rec.monthly_eur == pytest.approx(eur) and eur > max(s.monthly_eur for s in sizes_for("hetzner", "x86"))
    assert any(w.startswith("no catalog size has 16 vCPU") and rate.how in w for w in rec.warnings)
    assert not rec.feasible
    for a in rec.alternatives:  # a way past it carries the rate, or more than your own server does
        assert a.comfortable or a.capacity_per_s.mid > rec.capacity_per_s.mid, a.what
        assert a.monthly_eur is not None
    assert any(a.hosts > 1 and a.price_estimated for a in rec.alternatives)


def test_price_rates_come_from_the_catalog():
    gcp = price_rate("gcp", "x86")
    for s in sizes_for("gcp", "x86"):  # e2's list rates reproduce every e2 price in the catalog
        assert gcp.monthly_eur(s.baseline_vcpu, s.ram_mib) == pytest.approx(s.monthly_eur, rel=0.005), s.size
    for arch in ("x86", "arm"):
        hz = price_rate("hetzner", arch)
        sizes = sizes_for("hetzner", arch)
        # least squares through the origin: the residuals are orthogonal to vCPU, none is off by more than a third
        assert sum(s.vcpu * (s.monthly_eur - hz.monthly_eur(s.vcpu, s.ram_mib)) for s in sizes) == pytest.approx(
            0, abs=1e-6
        )
        assert all(abs(hz.monthly_eur(s.vcpu, s.ram_mib) / s.monthly_eur - 1) < 0.33 for s in sizes)
        assert hz.per_vcpu_eur / hz.per_gib_eur == pytest.approx(gcp.per_vcpu_eur / gcp.per_gib_eur)
    assert price_rate("gcp", "arm") is None and estimate_price("gcp", "arm", 4, 8192) is None
    assert {s.provider for s in CATALOG} == {"hetzner", "gcp"}
    assert math.isfinite(estimate_price(None, "arm", 64, 64 * 2048)[0])


def test_next_renders_what_was_asked_and_says_when_it_does_not_carry(advisor):
    from n8n_sizer.cli.advise.answer_text import next_lines

    carried = next_lines(advisor.answer(Request(rps=5, vcpu=2, profile=LIGHT)))
    assert carried[0].startswith("next: n8n-sizer render --mode regular") and len(carried) == 1
    rec = advisor.answer(Request(rps=20, vcpu=2, profile=LIGHT))
    lines = next_lines(rec)
    assert not rec.feasible and lines[0].startswith("next: n8n-sizer render --mode regular")
    assert f"does NOT carry 20/s (about {rec.capacity_per_s.mid:.1f}/s at most)" in lines[1]
    carrying = next(a for a in rec.alternatives if a.carries)
    assert carrying.advise_command in lines[2] and carrying.render_command in lines[2]
    latency = next_lines(advisor.answer(Request(rps=20, vcpu=4, profile=LIGHT, p95_ms=50)))
    assert "does NOT carry 20/s within --p95-ms 50" in latency[1]


def test_notes_speak_only_of_the_workflow_and_host_asked_about(advisor):
    assert advisor.notes  # the contention fit refuses some shapes: there are notes to leave out
    light = advisor.answer(Request(rps=20, vcpu=2, profile=LIGHT))
    assert light.mode == "regular" and not any("code-heavy" in n for n in light.notes)
    shown = 0
    for (workflow, vcpu, arch), note in advisor.notes.items():
        profile = PROFILES.get(workflow)
        if profile is None:
            continue
        rec = advisor.recommend(Request(rps=1000, vcpu=int(vcpu), arch=arch, profile=profile))
        if rec.mode == "queue":  # the contention fit bounds queue mode: its note is about this answer
            assert note in rec.notes
            shown += 1
        others = [n for (w, v, a), n in advisor.notes.items() if (w, v, a) != (workflow, vcpu, arch)]
        assert not set(others) & set(rec.notes)
    assert shown
    cluster = advisor.recommend(Request(rps=400, profile=LIGHT, max_hosts=MAX_HOSTS_DEFAULT))
    assert cluster.hosts > 1 and not set(advisor.notes.values()) & set(cluster.notes)


def test_with_your_results_the_vcpu_you_measured_is_your_server_at_its_measured_speed():
    """`advise --results DIR --vcpu 2` after runs on a 2-vCPU host: the answer is that host (its own speed), not a
    CX23; another size is still the catalog's, at its own speed."""
    from tests.unit.test_advise_own_workflow import _step

    advisor = build_advisor([_step(r, 90.0, workflow="light") for r in (4, 8, 12)])
    mine = advisor.host_for_vcpu(2, "x86")
    assert mine.host_class == "user:Test CPU" and advisor.user_host(2, "x86") is not None
    rec = advisor.answer(Request(rps=3, vcpu=2, profile=LIGHT))
    assert rec.server.size is None and rec.server.provider is None and rec.price_estimated
    assert rec.capacity_per_s.mid == pytest.approx(advisor._capacity(LIGHT, rec.setup, mine), rel=1e-9)
    other = advisor.answer(Request(rps=3, vcpu=4, profile=LIGHT))
    assert other.server.size == "cx33"
