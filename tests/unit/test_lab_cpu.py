"""The lab's CPU budget: quota arithmetic, the record in the inventory, and the record read back per host."""

from __future__ import annotations

import pytest

from n8n_sizer.bundle.topology import parse_topology
from n8n_sizer.errors import InputError
from n8n_sizer.lab.cpu import LabCpu, lab_host_cores, plan_cpu, plan_for_topology, usable_cores
from n8n_sizer.lab.plan import plan_lab
from n8n_sizer.lab.state import LabState, Recorder, lab_inventory, topology_dict

TOPOLOGY = {
    "topology": [
        {"name": "data", "provider": "hetzner", "size": "cx23", "roles": {"postgres": 1, "redis": 1}},
        {
            "name": "ingest",
            "provider": "hetzner",
            "size": "cx33",
            "roles": {"main": 1, "webhook": 1, "load_balancer": 1},
        },
        {"name": "worker", "provider": "hetzner", "size": "cx23", "count": 2, "roles": {"workers": 1}},
    ],
    "subnet": "10.213.7.0/24",
}


def test_scale_fits_the_whole_topology_into_the_usable_cores():
    cpu = plan_cpu([("data", 2), ("ingest", 4), ("worker-1", 2), ("worker-2", 2)], "ab12cd", machine_cores=2)
    assert cpu.usable_cores == 1.5 and cpu.total_vcpu == 10 and cpu.scale == pytest.approx(0.15)
    assert [(h.name, h.cores, h.quota_us) for h in cpu.hosts] == [
        ("data", 0.3, 30_000),
        ("ingest", 0.6, 60_000),
        ("worker-1", 0.3, 30_000),
        ("worker-2", 0.3, 30_000),
    ]
    assert sum(h.quota_us for h in cpu.hosts) == 150_000  # 1.5 cores x the 100 ms period
    assert cpu.group == "n8n-sizer-lab-ab12cd" and cpu.host("ingest").cgroup == "n8n-sizer-lab-ab12cd/ingest"
    assert cpu.host("gen-1") is None  # generators get no budget


def test_a_topology_that_fits_is_not_scaled_up():
    cpu = plan_cpu([("solo", 1)], "ab12cd", machine_cores=8)
    assert cpu.scale == 1.0 and cpu.hosts[0].cores == 1.0 and cpu.hosts[0].quota_us == 100_000


def test_cpu_cores_overrides_the_reserve_within_the_machine():
    assert usable_cores(2) == 1.5 and usable_cores(1) == 0.5 and usable_cores(16) == 15.5
    assert plan_cpu([("a", 2), ("b", 2)], "ab12cd", 2, cores=1.0).scale == 0.25
    for bad in (0, -1, 2.5):
        with pytest.raises(InputError, match="--cpu-cores"):
            usable_cores(2, bad)


def test_the_budget_is_recorded_in_the_inventory_and_read_back_as_each_hosts_cores():
    topology = parse_topology(TOPOLOGY)
    plan = plan_lab(topology, 2, "ab12cd")
    rec = Recorder(plan, topology)
    rec.cpu = plan_for_topology(topology, "ab12cd", cores=1.2)
    inventory = lab_inventory(plan, topology, rec.state())
    lab = inventory.model_dump(mode="json")["lab"]
    assert LabState.model_validate(lab).cpu == rec.cpu
    assert lab["cpu"]["scale"] == pytest.approx(1.2 / 10)
    assert lab["cpu"]["hosts"][1] == {
        "name": "ingest",
        "vcpu": 4,
        "cores": 0.48,
        "quota_us": 48_000,
        "period_us": 100_000,
        "cgroup": "n8n-sizer-lab-ab12cd/ingest",
    }
    hosts = lab_host_cores(lab)
    assert [(h.name, h.cores, h.vcpu) for h in hosts] == [
        ("data", 0.24, 2),
        ("ingest", 0.48, 4),
        ("worker-1", 0.24, 2),
        ("worker-2", 0.24, 2),
    ]
    assert hosts[1].roles == {"main": 1, "webhook": 1, "load_balancer": 1}
    assert hosts[2].roles == {"workers": 1}


def test_a_lab_without_a_budget_puts_every_host_on_the_shared_cores():
    lab = {"topology": topology_dict(parse_topology(TOPOLOGY))}
    assert {h.cores for h in lab_host_cores(lab, machine_cores=2)} == {2.0}
    with pytest.raises(InputError, match="no topology"):
        lab_host_cores({})


def test_a_record_with_a_scale_above_one_is_refused():
    with pytest.raises(ValueError):
        LabCpu(group="n8n-sizer-lab-ab12cd", machine_cores=2, usable_cores=1.5, total_vcpu=1, scale=1.5, hosts=())
