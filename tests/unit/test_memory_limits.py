"""Memory per container from the advisor's RAM model (bundle/limits.py): every rendered n8n process, runner and
data service carries its figures, the limits sit above the modelled peaks, and `check` fails a main without one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from n8n_sizer.advisor.measurements import load_embedded
from n8n_sizer.advisor.ram import fit_ram
from n8n_sizer.advisor.setup import Setup
from n8n_sizer.bundle.limits import LIMIT_FACTOR, memory_table, parse_memory_mib, role_memory
from n8n_sizer.bundle.render import render_bundle
from n8n_sizer.bundle.render_topology import render_topology
from n8n_sizer.bundle.secrets import generate_secrets
from n8n_sizer.bundle.topology import parse_topology

TOPOLOGIES = Path(__file__).resolve().parents[1] / "data" / "topologies"


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


def _bundles():
    for setup in (Setup(mode="regular"), Setup(mode="queue", workers=3)):
        yield f"{setup.mode}-{setup.workers}", render_bundle(setup, generate_secrets()).compose
    for case in ("advise-rps-400", "lb-apart"):
        t = parse_topology(json.loads((TOPOLOGIES / f"{case}.json").read_text()))
        for host, bundle in render_topology(
            t, generate_secrets(), public_url="http://n8n.example.com:5678/"
        ).hosts.items():
            yield f"{case}/{host}", bundle.compose


BUNDLES = list(_bundles())


@pytest.mark.parametrize("name, compose", BUNDLES, ids=[name for name, _ in BUNDLES])
def test_every_container_carries_its_modelled_memory(name: str, compose: str) -> None:
    services = yaml.safe_load(compose)["services"]
    seen = set()
    for service, spec in services.items():
        role = _role(service, spec["image"])
        if role is None:
            continue
        want = role_memory(role)
        assert parse_memory_mib(spec["mem_reservation"]) == want.reservation_mib, (name, service)
        assert parse_memory_mib(spec.get("mem_limit")) == want.limit_mib, (name, service)
        seen.add(role)
    assert seen or set(services) == {"n8n-lb"}, name  # only a load-balancer host carries none of these


def test_the_figures_rest_on_the_ram_model_with_headroom() -> None:
    model = fit_ram(load_embedded())
    table = memory_table()
    per_worker = model.queue_peak_mb[1]
    # a worker and its runner together reserve at least what one more worker adds to the stack's peak
    assert table["worker"].reservation_mib + table["runner"].reservation_mib >= per_worker
    # main reserves at least the regular-mode peak less its runner
    assert table["main"].reservation_mib + table["runner"].reservation_mib >= model.regular_peak_mb
    for role in ("main", "webhook", "worker", "runner"):
        m = table[role]
        assert m.limit_mib >= LIMIT_FACTOR * m.reservation_mib - 64 and m.limit_mib % 64 == 0, role
    # main's 2.2 GB under overload (notes/real-n8n.md) is past its limit: the limit stops a runaway main
    assert table["main"].limit_mib < 2200
    assert table["postgres"].limit_mib is None and table["redis"].limit_mib is None


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


def test_docs_state_the_figures_deploy_renders() -> None:
    """docs/cluster.md's memory table is this module's table (written by hand once, checked here)."""
    docs = (Path(__file__).resolve().parents[2] / "docs" / "cluster.md").read_text()
    names = {
        "main": "main",
        "webhook processor": "webhook",
        "worker": "worker",
        "task runner": "runner",
        "postgres": "postgres",
        "redis": "redis",
    }
    rows = {}
    for line in docs.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 4 and cells[0] in names:
            rows[names[cells[0]]] = (cells[1], cells[2])
    assert set(rows) == set(names.values())
    for role, (reservation, limit) in rows.items():
        want = role_memory(role)
        assert reservation == f"{want.reservation_mib:,} MiB", role
        assert limit == (f"{want.limit_mib:,} MiB" if want.limit_mib else "none"), role
