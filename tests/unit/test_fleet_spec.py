"""FleetSpec parsing, labels, cost and the inventory loader: pure functions on data."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from n8n_sizer.errors import InputError
from n8n_sizer.fleet.cost import estimate_cost
from n8n_sizer.fleet.inventory import load_inventory
from n8n_sizer.fleet.labels import decode_expires_at, encode_expires_at, expires_at, fleet_labels
from n8n_sizer.fleet.spec import parse_fleet_config
from n8n_sizer.fleet.stackfile import load_stack_file

ROOT = Path(__file__).resolve().parents[2]
BASE = {
    "owner": "bench",
    "ttl_hours": 2,
    "operator_cidr": "203.0.113.7/32",
    "provider": "hetzner",
    "location": "hel1",
    "loadgen": {"size": "cx23"},
    "targets": [{"name": "t1", "size": "cx33", "setup": {"mode": "queue", "workers": 2}}],
}


def error_of(**changes) -> str:
    values = {**BASE, **changes}
    values = {k: v for k, v in values.items() if v is not None}
    with pytest.raises(InputError) as err:
        parse_fleet_config(values, stack="s1")
    return str(err.value)


def test_a_good_config_parses_into_one_frozen_model():
    spec = parse_fleet_config(BASE, stack="s1")
    assert spec.targets[0].setup.workers == 2 and spec.loadgen.name == "loadgen"
    assert spec.server_of(spec.targets[0]).vcpu == 4
    with pytest.raises(ValueError):  # pydantic's ValidationError
        spec.owner = "x"  # frozen


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"operator_cidr": None}, "n8n-sizer:operator_cidr is missing; set it: pulumi config set"),
        ({"operator_cidr": "::/0"}, "n8n-sizer:operator_cidr: ::/0 would open SSH to the whole internet"),
        ({"operator_cidr": "my-laptop"}, "n8n-sizer:operator_cidr: 'my-laptop' is not a CIDR"),
        ({"ttl_hours": 500}, "n8n-sizer:ttl_hours: Input should be less than or equal to 168"),
        ({"location": "mars1"}, "n8n-sizer:location: 'mars1' is not a Hetzner location"),
        ({"provider": "gcp", "location": "hel1"}, "n8n-sizer:location: 'hel1' is not a GCP zone"),
        ({"provider": "gcp", "location": "europe-west3-a"}, "n8n-sizer:loadgen.size: unknown server size 'cx23'"),
        (
            {"targets": [{"name": "t1", "size": "cx33", "location": "fsn1", "setup": {"mode": "regular"}}]},
            "n8n-sizer:targets[0].location: 'fsn1' differs from n8n-sizer:location 'hel1'",
        ),
        (
            {"targets": [{"name": "loadgen", "size": "cx33", "setup": {"mode": "regular"}}]},
            "n8n-sizer:targets[0].name: 'loadgen' is used twice",
        ),
        (
            {"targets": [{"name": "T_1", "size": "cx33", "setup": {"mode": "regular"}}]},
            "n8n-sizer:targets[0].name: 'T_1' is not a valid host name",
        ),
        (
            {"targets": [{"name": "t1", "size": "cx33", "setup": {"mode": "regular", "workerz": 2}}]},
            "n8n-sizer:targets[0].setup.workerz: is not a known setting",
        ),
        ({"targets": [{"name": "t1", "size": "cx33"}]}, "n8n-sizer:targets[0].setup: is missing"),
        ({"owner": "Alice Smith"}, "n8n-sizer:owner: 'Alice Smith' is not a valid label value"),
        ({"ssh_public_key": "hunter2"}, "n8n-sizer:ssh_public_key: not an OpenSSH public key"),
    ],
)
def test_bad_config_names_the_key_and_the_fix(changes, message):
    assert message in error_of(**changes)


def test_stack_name_must_fit_labels():
    with pytest.raises(InputError, match="stack name 'Bench_1' must be 2-20 lowercase"):
        parse_fleet_config(BASE, stack="Bench_1")


def test_expires_at_encoding_is_label_safe_and_round_trips():
    moment = datetime(2026, 12, 1, 10, 0, 30, tzinfo=UTC)
    value = encode_expires_at(moment)
    assert value == "2026-12-01t10-01z"  # rounded up: never earlier than promised
    assert decode_expires_at(value) == datetime(2026, 12, 1, 10, 1, tzinfo=UTC)
    assert decode_expires_at("2026-12-01T10:00:00Z") is None
    assert expires_at(datetime(2026, 12, 1, 22, 0, tzinfo=UTC), 4) == "2026-12-02t02-00z"
    assert fleet_labels(stack="s1", owner="bench", role="target", expires=value)["expires-at"] == value
    with pytest.raises(ValueError):
        fleet_labels(stack="S1", owner="bench", role="target", expires=value)


def test_cost_per_host_and_total_from_the_catalog():
    spec = load_stack_file(ROOT / "stacks" / "Pulumi.single.yaml")
    est = estimate_cost(spec, hours=10, warn_eur=0.1)
    by_name = {h.name: h for h in est.hosts}
    assert by_name["loadgen"].total_eur == pytest.approx(6.64 / 730 * 10)
    assert by_name["cx33-queue-2w"].total_eur == pytest.approx(10.27 / 730 * 10)
    assert est.total_eur == pytest.approx((6.64 + 10.27) / 730 * 10) and est.over_threshold
    assert estimate_cost(spec, hours=1.5).hosts[0].total_eur == pytest.approx(6.64 / 730 * 2)  # started hours
    assert not estimate_cost(spec).over_threshold and estimate_cost(spec).hours == 2  # default: the TTL
    with pytest.raises(InputError, match="--hours must be a positive number"):
        estimate_cost(spec, hours=0)


INVENTORY = {
    "stack": "single",
    "provider": "hetzner",
    "location": "hel1",
    "expires_at": "2026-12-01t10-00z",
    "hosts": {
        "loadgen": {
            "name": "loadgen",
            "role": "loadgen",
            "provider": "hetzner",
            "size": "cx23",
            "vcpu": 2,
            "arch": "x86",
            "public_ip": "198.51.100.7",
            "private_ip": None,
            "ssh_user": "root",
            "setup": None,
        },
        "t1": {
            "name": "t1",
            "role": "target",
            "provider": "hetzner",
            "size": "cax11",
            "vcpu": 2,
            "arch": "arm",
            "public_ip": "198.51.100.9",
            "private_ip": None,
            "ssh_user": "root",
            "setup": {"mode": "regular"},
        },
    },
}


def test_inventory_loads_from_stack_output_json():
    inv = load_inventory(json.dumps(INVENTORY))
    assert inv.loadgen().public_ip == "198.51.100.7"
    assert [t.name for t in inv.targets()] == ["t1"] and inv.targets()[0].setup.mode == "regular"


@pytest.mark.parametrize(
    "text, message",
    [
        ("not json", "inventory is not JSON"),
        (json.dumps({**INVENTORY, "hosts": {"t1": INVENTORY["hosts"]["t1"]}}), "inventory hosts: "),
        (
            json.dumps(
                {**INVENTORY, "hosts": {**INVENTORY["hosts"], "t1": {**INVENTORY["hosts"]["t1"], "setup": None}}}
            ),
            "target t1 has no setup",
        ),
        (json.dumps({k: v for k, v in INVENTORY.items() if k != "stack"}), "inventory stack: Field required"),
    ],
)
def test_bad_inventory_is_one_clean_error(text, message):
    with pytest.raises(InputError) as err:
        load_inventory(text)
    assert message in str(err.value) and "pulumi stack output --json inventory" in str(err.value)
