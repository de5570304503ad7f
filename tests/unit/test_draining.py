"""Graceful stop as rendered: the load balancer drains a stopping upstream (retries a refused connection on
another, health-checks often), and every n8n process waits for its longest execution before Docker kills it.
The Caddyfile is validated by the real Caddy (Debian's, the load balancer of the lab and the stand-ins)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from n8n_sizer.bundle.caddyfile import parse_routes, route_for
from n8n_sizer.bundle.composefile import duration_s
from n8n_sizer.bundle.drain import COMPOSE_HOOK_PATH, DRAIN_HEALTH_URI, DRAIN_S, drain_hook_source
from n8n_sizer.bundle.render_topology import render_topology
from n8n_sizer.bundle.secrets import generate_secrets
from n8n_sizer.bundle.topology import parse_topology

TOPOLOGIES = Path(__file__).resolve().parents[1] / "data" / "topologies"
CASES = ("advise-rps-400", "gcp-three-hosts", "lb-apart")


def _cluster(case: str, longest_s: int = 30):
    doc = json.loads((TOPOLOGIES / f"{case}.json").read_text())
    doc["longest_execution_s"] = longest_s
    return render_topology(parse_topology(doc), generate_secrets(), public_url="http://n8n.example.com:5678/")


def _caddyfile(case: str) -> str:
    for bundle in _cluster(case).hosts.values():
        doc = yaml.safe_load(bundle.compose)
        if "caddyfile" in doc.get("configs", {}):
            return doc["configs"]["caddyfile"]["content"]
    raise AssertionError(f"{case}: no load balancer")


@pytest.mark.parametrize("case", CASES)
def test_every_upstream_is_retried_and_health_checked_faster_than_it_drains(case: str) -> None:
    text = _caddyfile(case)
    blocks = re.findall(r"reverse_proxy [^{]+\{([^}]*)\}", text)
    assert blocks
    for block in blocks:
        opts = dict(line.split(None, 1) for line in block.strip().splitlines())
        try_s = duration_s(opts["lb_try_duration"])
        check_s = duration_s(opts["health_interval"]) + duration_s(opts["health_timeout"])
        # a refused connection is retried elsewhere for longer than a health check takes to flip
        assert try_s is not None and try_s > check_s, opts
        assert opts["health_uri"] in ("/healthz/readiness", DRAIN_HEALTH_URI)
        # a draining processor's failed check is seen (twice) before n8n is told to stop
        assert 2 * duration_s(opts["health_interval"]) <= DRAIN_S, opts


@pytest.mark.parametrize("case", CASES)
def test_webhook_processors_are_checked_at_the_drain_hooks_path_and_main_at_its_readiness(case: str) -> None:
    routes = parse_routes(_caddyfile(case))
    assert route_for(routes, "/webhook/x").health_uri == DRAIN_HEALTH_URI
    assert route_for(routes, "/rest/login").health_uri == "/healthz/readiness"


@pytest.mark.parametrize("case", CASES)
def test_every_webhook_processor_loads_the_rendered_drain_hook_and_waits_for_it(case: str) -> None:
    seen = workers = 0
    for bundle in _cluster(case).hosts.values():
        doc = yaml.safe_load(bundle.compose)
        for name, spec in doc["services"].items():
            if not name.startswith("n8n-webhook-"):
                continue
            seen += 1
            env = spec["environment"]
            assert env["EXTERNAL_HOOK_FILES"] == COMPOSE_HOOK_PATH and env["SIZER_DRAIN_S"] == str(DRAIN_S)
            assert spec["configs"] == [{"source": "drain-hook", "target": COMPOSE_HOOK_PATH}], name
            assert doc["configs"]["drain-hook"]["content"] == drain_hook_source()
            assert "$" not in drain_hook_source()  # Compose interpolates `configs: content` (a ${...} fails up)
            n8n_s = int(env["N8N_GRACEFUL_SHUTDOWN_TIMEOUT"])
            assert duration_s(spec["stop_grace_period"]) > DRAIN_S + n8n_s, name
        for name, spec in doc["services"].items():  # main stops at once: nothing routes to it by path
            if re.match(r"n8n-main", name):
                assert "EXTERNAL_HOOK_FILES" not in spec["environment"], name
            if re.match(r"n8n-worker", name):  # a worker finishes what Bull handed it (the hook's worker part)
                workers += 1
                assert spec["environment"]["EXTERNAL_HOOK_FILES"] == COMPOSE_HOOK_PATH, name
                assert "SIZER_DRAIN_S" not in spec["environment"], name  # no load balancer wait
                assert spec["configs"] == [{"source": "drain-hook", "target": COMPOSE_HOOK_PATH}], name
                assert doc["configs"]["drain-hook"]["content"] == drain_hook_source()
    assert seen >= 1 and workers >= 1


@pytest.mark.skipif(shutil.which("caddy") is None, reason="Debian's caddy is installed by scripts/test.sh")
@pytest.mark.parametrize("case", CASES)
def test_the_rendered_caddyfile_is_valid_for_the_real_caddy(case: str, tmp_path: Path) -> None:
    path = tmp_path / "Caddyfile"
    path.write_text(_caddyfile(case))
    proc = subprocess.run(
        ["caddy", "validate", "--config", str(path), "--adapter", "caddyfile"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-800:]


@pytest.mark.parametrize("longest_s", [30, 300])
def test_webhook_processors_and_workers_wait_for_the_longest_execution_before_docker_kills_them(longest_s: int) -> None:
    seen = set()
    for bundle in _cluster("advise-rps-400", longest_s).hosts.values():
        for name, spec in yaml.safe_load(bundle.compose)["services"].items():
            if not re.match(r"n8n-(main|webhook|worker)", name):
                continue
            n8n_s = int(spec["environment"]["N8N_GRACEFUL_SHUTDOWN_TIMEOUT"])
            assert longest_s < n8n_s < duration_s(spec["stop_grace_period"]), name
            seen.add(re.match(r"n8n-(main|webhook|worker)", name).group(1))
    assert seen == {"main", "webhook", "worker"}
