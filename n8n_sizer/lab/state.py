"""What a lab created, recorded as it is created: the inventory's `lab` section, which `lab down` reads.

Something enters the record only after it exists and is known to be the lab's own (a namespace with the inode
`ip netns add` gave it, a PID this process started), so removing what the record lists can never remove a
namespace, link or process the lab did not make.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

from pydantic import ValidationError

from n8n_sizer.bundle.topology import Topology
from n8n_sizer.errors import InputError
from n8n_sizer.fleet.inventory import Inventory, InventoryHost, load_inventory
from n8n_sizer.lab.cpu import LabCpu
from n8n_sizer.lab.plan import LabPlan
from n8n_sizer.safety.files import read_user_text
from n8n_sizer.safety.frozen import Frozen

MARKER = ".n8n-sizer-lab"  # in the lab's folder, holding the lab id: down removes only a folder carrying it
DOWN_FIX = "pass the lab.json that `n8n-sizer lab up --out` wrote"


class NamespaceRecord(Frozen):
    name: str  # the host
    netns: str | None = None  # the namespace, n8nsz-<lab id>-<host>; None in a record of an older lab (left alone)
    netns_inode: int  # the namespace `ip netns add` made; down deletes it only if name, lab id and inode all match
    veth: str | None = None
    sshd_pid: int | None = None
    sshd_config: str | None = None


class LabState(Frozen):
    lab_id: str
    bridge: str | None = None  # set once the bridge exists
    forward_rule: bool = False  # set once `plan.forward_rule` is in iptables' FORWARD chain
    subnet: str
    folder: str | None = None  # keys, sshd configs and logs; set once created
    client_key: str | None = None
    namespaces: tuple[NamespaceRecord, ...] = ()
    topology: dict | None = None  # the topology the lab was made for, as `parse_topology` reads it (`lab deploy`)
    cpu: LabCpu | None = None  # each host's CPU budget (lab.cpu), set before its first group exists


class Recorder:
    """The record of a lab being built (mutable while `lab up` runs; `state()` freezes it)."""

    def __init__(self, plan: LabPlan, topology: Topology | None = None) -> None:
        self.plan = plan
        self.topology = None if topology is None else topology_dict(topology)
        self.bridge: str | None = None
        self.forward_rule = False
        self.folder: Path | None = None
        self.client_key: Path | None = None
        self.namespaces: dict[str, dict] = {}
        self.cpu: LabCpu | None = None

    def namespace(self, name: str, netns: str, inode: int) -> None:
        self.namespaces[name] = {"name": name, "netns": netns, "netns_inode": inode}

    def update(self, name: str, **fields) -> None:
        self.namespaces[name].update(fields)

    def state(self) -> LabState:
        return LabState(
            lab_id=self.plan.lab_id,
            bridge=self.bridge,
            forward_rule=self.forward_rule,
            subnet=self.plan.subnet,
            folder=None if self.folder is None else str(self.folder),
            client_key=None if self.client_key is None else str(self.client_key),
            namespaces=tuple(NamespaceRecord(**n) for n in self.namespaces.values()),
            topology=self.topology,
            cpu=self.cpu,
        )


def topology_dict(topology: Topology) -> dict:
    """`topology` in the input shape `parse_topology` reads back."""
    data = topology.model_dump(mode="json")
    data["topology"] = data.pop("groups")
    return data


def machine_arch() -> str:
    return "arm" if platform.machine().lower() in ("aarch64", "arm64") else "x86"


def lab_inventory(plan: LabPlan, topology: Topology, state: LabState) -> Inventory:
    """The inventory `bench --inventory` reads: every namespace is a host on the bridge, reached as root.
    Every namespace shares this machine's cores, so each says the machine's vCPU count and size "netns"."""
    provider = topology.groups[0].provider
    hosts = {}
    for ns in plan.namespaces:
        hosts[ns.name] = InventoryHost(
            name=ns.name,
            role="cluster" if ns.kind == "host" else "loadgen",
            provider=provider,
            size="netns",
            vcpu=os.cpu_count() or 1,
            arch=machine_arch(),
            public_ip=ns.address,
            private_ip=ns.address,
            ssh_user="root",
            roles=ns.roles if ns.kind == "host" else None,
        )
    return Inventory(
        stack=f"lab-{plan.lab_id}",
        provider=provider,
        location="lab",
        expires_at="at lab down",
        hosts=hosts,
        subnet=plan.subnet,
        lab=state.model_dump(mode="json"),
    )


def read_lab_state(path: Path) -> LabState:
    """The `lab` section of a lab inventory file; one-line InputError for anything else."""
    text = read_user_text(path, "--inventory", fix=DOWN_FIX)
    inventory = load_inventory(text)
    if inventory.lab is None:
        raise InputError(f"--inventory {path} is not a lab's inventory (no `lab` section); {DOWN_FIX}")
    try:
        return LabState.model_validate(inventory.lab)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "lab"
        raise InputError(f"--inventory {path}: lab.{where}: {first['msg']}; {DOWN_FIX}") from None
