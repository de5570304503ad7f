"""The one override that maps pinned images to stand-ins and keeps published ports on loopback."""

from __future__ import annotations

import json

import yaml

from n8n_sizer import versions

from .conftest import standins

GOLDEN = __import__("pathlib").Path(__file__).resolve().parents[1] / "golden"


def test_every_pinned_image_of_every_golden_file_has_a_stand_in() -> None:
    mapping = standins.standin_images()
    for compose in GOLDEN.glob("*/docker-compose.yml"):
        override = yaml.safe_load(standins.override_text(compose.read_text(), mapping).replace("!override", ""))
        rendered = yaml.safe_load(compose.read_text())["services"]
        assert set(override["services"]) == set(rendered), compose
        for name, spec in override["services"].items():
            assert spec["image"] == mapping[rendered[name]["image"]]
            assert spec["image"].startswith("n8n-sizer-standin/")


def test_ports_are_replaced_by_loopback_ones_with_a_free_host_port() -> None:
    text = standins.override_text((GOLDEN / "production" / "docker-compose.yml").read_text(), standins.standin_images())
    assert "ports: !override" in text  # replaces the rendered list instead of merging with it
    caddy = yaml.safe_load(text.replace("!override", ""))["services"]["n8n-caddy"]
    assert caddy["ports"] == ["127.0.0.1::80", "127.0.0.1::443", "127.0.0.1::443/udp"]


def test_an_image_without_a_stand_in_is_named() -> None:
    compose = "services:\n  other:\n    image: nginx:1.27\n"
    try:
        standins.override_text(compose, standins.standin_images())
    except RuntimeError as exc:
        assert "nginx:1.27" in str(exc) and "other" in str(exc)
    else:
        raise AssertionError("an unmapped image must be refused")


def test_the_stand_ins_follow_the_pins() -> None:
    mapping = standins.standin_images()
    assert set(mapping) == {
        versions.N8N_IMAGE,
        versions.RUNNERS_IMAGE,
        versions.POSTGRES_IMAGE,
        versions.REDIS_IMAGE,
        versions.CADDY_IMAGE,
    }


def test_a_cluster_bundles_private_address_ports_stay_as_rendered() -> None:
    """The other hosts dial the data host's private address: with the cluster's subnet given, those ports
    stay; everything else still goes to loopback with a free port."""
    cluster = GOLDEN / "cluster-advise-rps-400"
    subnet = json.loads((cluster / "topology.json").read_text())["subnet"]
    mapping = standins.standin_images()
    data = yaml.safe_load(
        standins.override_text((cluster / "data" / "docker-compose.yml").read_text(), mapping, subnet).replace(
            "!override", ""
        )
    )["services"]
    assert data["n8n-postgres"]["ports"] == ["10.89.0.10:5432:5432"]
    assert data["n8n-redis"]["ports"] == ["10.89.0.10:6379:6379"]
    ingest = yaml.safe_load(
        standins.override_text((cluster / "ingest" / "docker-compose.yml").read_text(), mapping, subnet).replace(
            "!override", ""
        )
    )["services"]
    assert ingest["n8n-lb"]["ports"] == ["127.0.0.1::5678"]
    # without the subnet (a single-host stack) or outside it, nothing is bound beyond loopback
    for other in (None, "10.213.30.0/24"):
        plain = yaml.safe_load(
            standins.override_text((cluster / "data" / "docker-compose.yml").read_text(), mapping, other).replace(
                "!override", ""
            )
        )["services"]
        assert plain["n8n-postgres"]["ports"] == ["127.0.0.1::5432"], other


def test_every_cluster_golden_host_has_its_stand_ins() -> None:
    mapping = standins.standin_images()
    hosts = list(GOLDEN.glob("cluster-*/*/docker-compose.yml"))
    assert len(hosts) >= 10
    for compose in hosts:
        override = yaml.safe_load(standins.override_text(compose.read_text(), mapping).replace("!override", ""))
        assert set(override["services"]) == set(yaml.safe_load(compose.read_text())["services"]), compose
