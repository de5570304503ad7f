"""Memory as a constraint (advisor/ram.py, bundle/limits.py, bundle/checks/rules_memory.py): every rendered container
carries the limit its settings need; no answer reserves more than its host or sets a production limit / concurrency
its container's limit cannot hold; a host too small for the stack is never chosen; `check` fails what does not fit."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import pytest
import yaml

from n8n_sizer.advisor import ram
from n8n_sizer.advisor.answer.base import Request
from n8n_sizer.advisor.catalog import sizes_for
from n8n_sizer.advisor.pools import default_postgres_memory, setup_recommended_max_connections
from n8n_sizer.advisor.profiles import LIGHT, WorkflowProfile, profile_for
from n8n_sizer.advisor.setup import Setup
from n8n_sizer.bundle.checks.one_host import check_compose
from n8n_sizer.bundle.limits import cluster_memory, memory_table, parse_memory_mib
from n8n_sizer.bundle.render import render_bundle
from n8n_sizer.bundle.render_topology import pg_settings, render_topology
from n8n_sizer.bundle.secrets import generate_secrets
from n8n_sizer.bundle.topology import parse_topology

ROOT = Path(__file__).resolve().parents[2]
TOPOLOGIES = ROOT / "tests" / "data" / "topologies"


@lru_cache(maxsize=1)
def _advisor():
    from n8n_sizer.advisor.engine import build_advisor

    return build_advisor()


def _role(name: str, image: str) -> str | None:
    if "/runners:" in image:
        return "runner"
    if image.startswith("postgres:"):
        return "postgres"
    if image.startswith("redis:"):
        return "redis"
    if "/n8n:" in image:
        return next(r for r in ("main", "webhook", "worker") if name.startswith(f"n8n-{r}"))
    return None


SETUPS = [
    Setup(mode="regular"),
    Setup(mode="regular", production_limit=168, held_mb=30),
    Setup(mode="queue", workers=3, concurrency=25, runner_concurrency=12, queue_depth_jobs=300_000),
]


@pytest.mark.parametrize("setup", SETUPS, ids=lambda s: f"{s.mode}-{s.workers}-{s.production_limit}")
def test_every_rendered_container_carries_the_limit_its_settings_need(setup: Setup) -> None:
    services = yaml.safe_load(render_bundle(setup, generate_secrets()).compose)["services"]
    table = memory_table(setup)
    held = setup.held_mb or ram.HELD_MIB_PER_EXECUTION
    for name, spec in services.items():
        role = _role(name, spec["image"])
        assert role is not None, name
        assert parse_memory_mib(spec["mem_limit"]) == table[role].limit_mib, name
        assert parse_memory_mib(spec["mem_reservation"]) == table[role].reservation_mib, name
    slots = setup.production_limit or ram.UNLIMITED_MAIN_SLOTS
    if setup.mode == "regular":
        assert table["main"].limit_mib >= ram.MAIN_BASE_MIB + slots * held
    else:
        assert table["worker"].limit_mib >= ram.WORKER_BASE_MIB + setup.concurrency * held
        redis = services["n8n-redis"]
        maxmemory = int(redis["command"][redis["command"].index("--maxmemory") + 1].removesuffix("mb"))
        assert maxmemory * (1 << 20) >= setup.queue_depth_jobs * ram.REDIS_WAITING_JOB_BYTES
        assert parse_memory_mib(redis["mem_limit"]) >= ram.REDIS_FORK_FACTOR * maxmemory
    pg = default_postgres_memory(setup_recommended_max_connections(setup))
    assert f"max_connections={pg.max_connections}" in services["n8n-postgres"]["command"]
    assert parse_memory_mib(services["n8n-postgres"]["mem_limit"]) >= ram.postgres_need_mib(pg)


@pytest.mark.parametrize("case", ["advise-rps-400", "lb-apart"])
def test_cluster_hosts_carry_their_roles_limits_and_fit_their_ram(case: str) -> None:
    t = parse_topology(json.loads((TOPOLOGIES / f"{case}.json").read_text()))
    bundles = render_topology(t, generate_secrets(), public_url="http://n8n.example.com:5678/").hosts
    pg = pg_settings(t)
    for host in t.hosts():
        table = cluster_memory(t, host, pg)
        services = yaml.safe_load(bundles[host.name].compose)["services"]
        total = 0.0
        for name, spec in services.items():
            role = _role(name, spec.get("image", ""))
            if role is None:
                continue
            assert parse_memory_mib(spec["mem_limit"]) == table[role].limit_mib, (host.name, name)
            total += parse_memory_mib(spec["mem_limit"])
        assert total <= ram.usable_mib(host.ram_mib), (host.name, total)
        results = {
            r.rule: r
            for r in check_compose(bundles[host.name].compose, _fake_env(bundles[host.name].env), ram_mib=host.ram_mib)
        }
        for rule in ("host-memory", "execution-memory", "redis-maxmemory", "postgres-memory"):
            assert results[rule].status != "fail", (host.name, results[rule].message)


def _fake_env(text: str) -> dict[str, str]:
    from n8n_sizer.bundle.secrets import parse_env_text

    return parse_env_text(text)


def test_slots_that_fit_is_the_most_the_host_holds() -> None:
    for ram_mib in (2048, 4096, 8192, 16384):
        for setup in (Setup(mode="regular"), Setup(mode="queue", workers=2)):
            n = ram.slots_that_fit(setup, ram_mib)
            if n == 0:
                assert ram.stack_limit_mib(ram.with_slots(setup, 1)) > ram.usable_mib(ram_mib)
                continue
            assert ram.stack_limit_mib(ram.with_slots(setup, n)) <= ram.usable_mib(ram_mib)
            assert ram.stack_limit_mib(ram.with_slots(setup, n + 1)) > ram.usable_mib(ram_mib)
    # 1 GiB cannot hold main, its runner and Postgres at all (the e2-micro)
    assert ram.slots_that_fit(Setup(mode="regular"), 1024) == 0


ASKED = [
    (1.0, LIGHT, None),
    (5.0, profile_for("light", wait_ms=10000), None),
    (20.0, profile_for("light", wait_ms=10000), None),
    (30.0, profile_for("light", wait_ms=10000), 2),
    (40.0, LIGHT, 4),
    (
        10.0,
        WorkflowProfile(name="ai", code_cpu_ms=5, wait_ms=3000, overhead_key="light", measured=False, held_mb=60),
        2,
    ),
]


@pytest.mark.parametrize("rps, profile, vcpu", ASKED, ids=[f"{r}-{p.name}-{p.wait_ms:g}-{v}" for r, p, v in ASKED])
def test_no_answer_reserves_more_than_its_host_or_a_limit_its_container_cannot_hold(rps, profile, vcpu) -> None:
    rec = _advisor().recommend(Request(rps=rps, profile=profile, vcpu=vcpu))
    size = next(s for s in sizes_for(None, "x86") if s.size == rec.server.size) if rec.server.size else None
    assert size is not None and size.ram_mib > 1024, rec.server  # never the 1 GiB e2-micro
    setup = rec.setup
    assert setup.held_mb == profile.held_mb
    assert ram.stack_limit_mib(setup) <= ram.usable_mib(size.ram_mib)
    table = ram.stack_memory(setup)
    held = ram.held_mib(setup)
    if setup.mode == "regular" and setup.production_limit is not None:
        assert ram.MAIN_BASE_MIB + setup.production_limit * held <= table["main"].limit_mib
    if setup.mode == "queue":
        assert ram.WORKER_BASE_MIB + setup.concurrency * held <= table["worker"].limit_mib
    assert rec.memory is not None and rec.memory.limits_mib == ram.stack_limit_mib(setup)
    # what it renders passes check's memory rules on that host
    results = {r.rule: r for r in check_compose(render_bundle(setup, generate_secrets()).compose, ram_mib=size.ram_mib)}
    for rule in ("host-memory", "execution-memory", "redis-maxmemory", "postgres-memory"):
        assert results[rule].status != "fail", results[rule].message


def test_a_capped_limit_says_why_and_little_s_law_gives_the_capacity() -> None:
    """--wait-ms 20000 on 2 vCPU: Little's law asks more executions at once than a CX23's memory holds; the answer
    caps the production limit there, says so with the figures, and its capacity is what those slots carry."""
    rec = _advisor().recommend(Request(rps=30, profile=profile_for("light", wait_ms=20000), vcpu=2))
    cap = ram.slots_that_fit(rec.setup, 4096)
    assert rec.production_limit == cap
    said = [w for w in rec.warnings if w.startswith("memory caps N8N_CONCURRENCY_PRODUCTION_LIMIT")]
    assert said and f"at {cap} " in said[0] and "4,096 MiB" in said[0]
    assert rec.bound.name == "slots"
    assert any("more memory, or queue mode" in w for w in rec.warnings)
    # Little's law on the capped slots: capacity x time in flight (at least the 20 s wait) stays within the slots
    assert rec.capacity_per_s.mid * 20.0 <= cap


def test_the_os_share_and_the_usable_ram_are_stated_figures() -> None:
    assert ram.os_share_mib(4096) == round(0.04 * 4096 + ram.DOCKER_ENGINE_MIB + ram.BASE_SYSTEM_MIB + 0.5)
    assert ram.usable_mib(8192) == 8192 - ram.os_share_mib(8192)


@pytest.mark.parametrize(
    "text, mib",
    [
        ("768m", 768),
        ("1g", 1024),
        ("1.5G", 1536),
        (1 << 30, 1024),
        ("512MB", 512),
        ("", None),
        ("lots", None),
        (None, None),
    ],
)
def test_compose_memory_values_are_read_in_mib(text, mib) -> None:
    assert parse_memory_mib(text) == mib


def test_docs_state_the_measured_figures() -> None:
    """docs/deploy.md's table of measured figures is ram.py's (written by hand once, checked here)."""
    docs = (ROOT / "docs" / "deploy.md").read_text()
    for name in (
        "MAIN_BASE_MIB",
        "QUEUE_MAIN_BASE_MIB",
        "WORKER_BASE_MIB",
        "RUNNER_BASE_MIB",
        "HELD_MIB_PER_EXECUTION",
        "OPEN_REQUEST_MIB",
        "PG_BACKEND_MIB",
        "REDIS_WAITING_JOB_BYTES",
        "REDIS_KEPT_JOB_BYTES",
    ):
        value = getattr(ram, name)
        assert f"`{name}` | {value:,g}" in docs, name


def test_a_sweep_of_single_server_answers_keeps_every_host_within_its_ram() -> None:
    """The done-when of issue 36, over rates, workloads and sizes: no answer reserves more than its host."""
    ai = WorkflowProfile(name="ai", code_cpu_ms=5, wait_ms=8000, overhead_key="light", measured=False, held_mb=60)
    sizes = {s.size: s.ram_mib for s in sizes_for(None, "x86")}
    for profile in (LIGHT, profile_for("code-heavy"), profile_for("light", wait_ms=10000), ai):
        for rps in (1.0, 5.0, 20.0, 60.0):
            for vcpu in (None, 2, 4):
                rec = _advisor().recommend(Request(rps=rps, profile=profile, vcpu=vcpu))
                ram_mib = sizes[rec.server.size]
                assert ram_mib > 1024 and ram.stack_limit_mib(rec.setup) <= ram.usable_mib(ram_mib), (rps, vcpu)


@pytest.mark.parametrize("rps, wait_ms", [(150.0, 0.0), (60.0, 5000.0)])
def test_a_topology_answer_renders_hosts_that_hold_their_containers(rps: float, wait_ms: float) -> None:
    rec = _advisor().recommend(Request(rps=rps, profile=profile_for("light", wait_ms=wait_ms), max_hosts=40))
    assert rec.hosts > 1
    t = parse_topology(json.loads(rec.model_dump_json()))
    bundles = render_topology(t, generate_secrets(), public_url="http://n8n.example.com:5678/").hosts
    for host in t.hosts():
        results = {r.rule: r for r in check_compose(bundles[host.name].compose, ram_mib=host.ram_mib)}
        assert results["host-memory"].status == "pass", (host.name, results["host-memory"].message)
        assert results["execution-memory"].status != "fail", (host.name, results["execution-memory"].message)
