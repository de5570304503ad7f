"""check --topology: each broken fixture in tests/data/topologies/broken-<rule>/ fails exactly its own rule,
every cross-host rule has one, and the Caddyfile reader picks routes the way Caddy does.

Regenerate the fixtures with `.venv/bin/python -m tests.data.topologies.make_broken`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from n8n_sizer.bundle.caddyfile import parse_routes, route_for
from n8n_sizer.bundle.checks.all_hosts import RULES, check_topology
from n8n_sizer.errors import InputError

TOPOLOGIES = Path(__file__).resolve().parents[1] / "data" / "topologies"
BROKEN = sorted(TOPOLOGIES.glob("broken-*"))


def test_every_cross_host_rule_has_a_broken_fixture() -> None:
    assert {p.name.removeprefix("broken-") for p in BROKEN} == set(RULES)


@pytest.mark.parametrize("folder", BROKEN, ids=lambda p: p.name)
def test_each_broken_fixture_fails_only_its_rule(folder: Path) -> None:
    results = check_topology(folder)
    failed = [r for r in results if r.status == "fail"]
    assert [r.rule for r in failed] == [folder.name.removeprefix("broken-")], [(r.rule, r.message) for r in failed]
    assert failed[0].fix


def test_two_hosts_with_different_keys_fail_and_the_key_is_not_printed() -> None:
    results = check_topology(TOPOLOGIES / "broken-cluster-encryption-key")
    [result] = [r for r in results if r.rule == "cluster-encryption-key"]
    assert result.status == "fail" and "worker-2" in result.message
    assert "0123456789abcdef" not in result.message + (result.fix or "")


def test_a_folder_without_host_bundles_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="has no <host>/docker-compose.yml"):
        check_topology(tmp_path)
    with pytest.raises(InputError, match="is not a folder"):
        check_topology(tmp_path / "missing")


CADDYFILE = """
:5678 {
  @metrics path /metrics /metrics/*
  respond @metrics 404
  @hooks path /webhook/* /form/*
  handle @hooks {
    reverse_proxy a:5678 b:5678 {
      health_uri /healthz
    }
  }
  handle /webhook-waiting/* {
    reverse_proxy c:5678
  }
  handle {
    reverse_proxy main:5678 {
      health_uri /healthz/readiness
    }
  }
}
"""


def test_caddyfile_routes_follow_caddys_order() -> None:
    routes = parse_routes(CADDYFILE)
    assert route_for(routes, "/webhook/abc").upstreams == ("a:5678", "b:5678")
    assert route_for(routes, "/form/x").health_uri == "/healthz"
    waiting = route_for(routes, "/webhook-waiting/1")
    assert waiting.upstreams == ("c:5678",) and waiting.health_uri is None
    assert route_for(routes, "/webhook-test/x").upstreams == ("main:5678",)
    assert route_for(routes, "/").upstreams == ("main:5678",)
    assert route_for(parse_routes(":80 {\n  respond 200\n}\n"), "/") is None


def test_without_topology_json_the_rules_still_hold(tmp_path: Path) -> None:
    """A hand-made cluster folder has no manifest: data ports must then be on private (RFC 1918) addresses."""
    import shutil

    good = tmp_path / "good"
    shutil.copytree(TOPOLOGIES / "broken-data-ports-private", good)
    (good / "topology.json").unlink()
    compose = good / "data" / "docker-compose.yml"
    assert [r.rule for r in check_topology(good) if r.status == "fail"] == ["data-ports-private"]
    compose.write_text(compose.read_text().replace('"5432:5432"', '"10.89.0.10:5432:5432"'))
    assert [r.rule for r in check_topology(good) if r.status == "fail"] == []
    # A public address (not a documentation range, which Python counts as private); n8n then also points
    # at an address Postgres does not listen on.
    compose.write_text(compose.read_text().replace('"10.89.0.10:5432:5432"', '"95.217.1.5:5432:5432"'))
    failed = [r.rule for r in check_topology(good) if r.status == "fail"]
    assert failed == ["cluster-data-endpoints", "data-ports-private"]
