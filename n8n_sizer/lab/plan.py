"""The pure plan of a lab: which namespaces, which addresses, which links, and the `ip` commands for them.

Every host of the topology becomes a namespace with the topology's own private address (`Topology.hosts()`
assigns them from `.10` upward), so a bundle rendered for the topology runs unchanged in the lab. Load
generators take `.9` downward (a cluster stack's load generator is `.9` too), the bridge holds `.1`, which
lets this machine's root namespace reach every host. No namespace gets a default route: a packet for any
address outside the subnet has nowhere to go.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import Field

from n8n_sizer.bundle.topology import FIRST_HOST_OFFSET, Topology
from n8n_sizer.errors import InputError
from n8n_sizer.safety.frozen import Frozen
from n8n_sizer.safety.network import check_private_subnet

# Generators take .9 down to .2: .1 is the bridge, .10 upward are the topology's hosts.
MAX_GENERATORS = FIRST_HOST_OFFSET - 2
LAB_ID_RE = re.compile(r"^[0-9a-f]{6}$")
BRIDGE_PREFIX = "n8nsz-"  # every link the lab owns starts with it or with VETH_PREFIX
NETNS_PREFIX = "n8nsz-"  # every namespace is n8nsz-<lab id>-<host>: a name no other lab or tool makes
VETH_PREFIX = "nz"
INNER_IFACE = "eth0"  # the namespace's end of its veth; each namespace has only this one and lo
IFNAMSIZ = 15  # Linux's limit on an interface name (16 bytes with the NUL)


class LabNamespace(Frozen):
    """One namespace of the lab: a topology host or a load generator."""

    name: str  # the host's name (its hostname inside, its key in the inventory)
    netns: str  # the namespace's name on this machine: netns_name(lab_id, name)
    kind: Literal["host", "generator"]
    address: str
    veth: str  # the root namespace's end, enslaved to the bridge
    roles: dict[str, int] | None = None  # the topology's process counts on this host; None for a generator


class LabPlan(Frozen):
    lab_id: str
    bridge: str
    subnet: str
    gateway: str  # the bridge's address: how this machine reaches the namespaces
    prefix_len: int
    namespaces: tuple[LabNamespace, ...] = Field(min_length=1)

    def hosts(self) -> list[LabNamespace]:
        return [n for n in self.namespaces if n.kind == "host"]

    def generators(self) -> list[LabNamespace]:
        return [n for n in self.namespaces if n.kind == "generator"]


def plan_lab(topology: Topology, generators: int, lab_id: str, generator_prefix: str = "gen-") -> LabPlan:
    """Names, addresses and links of a lab for `topology` plus `generators` load-generator namespaces, named
    `generator_prefix` + 1..N (namespace names are this machine's: two labs side by side need two prefixes)."""
    if not LAB_ID_RE.match(lab_id):
        raise ValueError(f"lab id {lab_id!r} is not 6 lowercase hex digits")
    if not 1 <= generators <= MAX_GENERATORS:
        raise InputError(
            f"--generators {generators} is out of range; use 1 to {MAX_GENERATORS} "
            f"(they take .{FIRST_HOST_OFFSET - 1} down to .2 of the subnet), e.g. --generators 2"
        )
    try:  # the one subnet rule (safety/network.py), also for a Topology built without parse_topology
        net = ipaddress.ip_network(check_private_subnet(topology.subnet))
    except ValueError as exc:
        raise InputError(str(exc)) from None
    hosts = topology.hosts()
    names = [h.name for h in hosts] + [f"{generator_prefix}{i}" for i in range(1, generators + 1)]
    if len(set(names)) != len(names):
        clash = next(n for n in names if names.count(n) > 1)
        raise InputError(
            f"the topology's host {clash!r} has the name of a load generator; rename that group "
            "(gen-1 .. gen-N belong to the lab's generators)"
        )
    out = [
        LabNamespace(
            name=h.name,
            netns=netns_name(lab_id, h.name),
            kind="host",
            address=h.private_ip,
            veth=veth_name(lab_id, i),
            roles=h.roles.model_dump(),
        )
        for i, h in enumerate(hosts, start=1)
    ]
    for g in range(1, generators + 1):
        name = f"{generator_prefix}{g}"
        out.append(
            LabNamespace(
                name=name,
                netns=netns_name(lab_id, name),
                kind="generator",
                address=str(net[FIRST_HOST_OFFSET - g]),
                veth=veth_name(lab_id, len(hosts) + g),
            )
        )
    return LabPlan(
        lab_id=lab_id,
        bridge=BRIDGE_PREFIX + lab_id,
        subnet=str(net),
        gateway=str(net[1]),
        prefix_len=net.prefixlen,
        namespaces=tuple(out),
    )


def netns_name(lab_id: str, host: str) -> str:
    """The namespace of `host` in lab `lab_id`. The lab's random id is in the name, so `lab down` can tell its
    own namespace from one that took a generic name (`data`, `worker-1`) or a recycled inode."""
    return f"{NETNS_PREFIX}{lab_id}-{host}"


def is_lab_netns(name: str, lab_id: str) -> bool:
    return bool(LAB_ID_RE.fullmatch(lab_id)) and name.startswith(f"{NETNS_PREFIX}{lab_id}-") and "/" not in name


def veth_name(lab_id: str, index: int) -> str:
    name = f"{VETH_PREFIX}{lab_id}-{index}"
    assert len(name) <= IFNAMSIZ, name
    return name


def bridge_commands(plan: LabPlan) -> list[list[str]]:
    return [
        ["ip", "link", "add", "name", plan.bridge, "type", "bridge"],
        ["ip", "addr", "add", f"{plan.gateway}/{plan.prefix_len}", "dev", plan.bridge],
        ["ip", "link", "set", plan.bridge, "up"],
    ]


def link_commands(plan: LabPlan, ns: LabNamespace) -> list[list[str]]:
    """After `ip netns add NAME`: its veth (peer created inside the namespace), address, lo and eth0 up."""
    return [
        ["ip", "link", "add", ns.veth, "type", "veth", "peer", "name", INNER_IFACE, "netns", ns.netns],
        ["ip", "link", "set", ns.veth, "master", plan.bridge],
        ["ip", "link", "set", ns.veth, "up"],
        ["ip", "-n", ns.netns, "addr", "add", f"{ns.address}/{plan.prefix_len}", "dev", INNER_IFACE],
        ["ip", "-n", ns.netns, "link", "set", "lo", "up"],
        ["ip", "-n", ns.netns, "link", "set", INNER_IFACE, "up"],
    ]


def forward_rule(bridge: str, lab_id: str) -> list[str]:
    """iptables' FORWARD rule that lets the lab's own bridge forward between its own ports. Needed where
    br_netfilter hands bridged frames to iptables and the FORWARD policy is DROP (Docker sets both); it
    matches only frames entering and leaving the lab's bridge, so it opens nothing else."""
    return [
        "FORWARD",
        "-i",
        bridge,
        "-o",
        bridge,
        "-m",
        "comment",
        "--comment",
        f"n8n-sizer lab {lab_id}",
        "-j",
        "ACCEPT",
    ]


def sshd_command(ns: LabNamespace, sshd_path: str, config: str) -> list[str]:
    """sshd in the namespace, in its own UTS namespace named after the host (so `hostname` tells hosts apart).
    `ip netns exec`, `unshare` (no --fork) and `sh -c exec` each replace themselves: the PID is sshd's."""
    return [
        "ip",
        "netns",
        "exec",
        ns.netns,
        "unshare",
        "--uts",
        "--",
        "sh",
        "-c",
        'hostname "$1" && exec "$2" -D -e -f "$3"',
        "sh",
        ns.name,
        sshd_path,
        config,
    ]


def overlapping_routes(ip_route_text: str, subnet: str) -> list[str]:
    """Lines of `ip -o route show` / `ip -o addr show` output (any table) whose network overlaps `subnet`.
    A lab never takes a subnet this machine already routes: its traffic could leave through that link."""
    net = ipaddress.ip_network(subnet)
    hits = []
    for line in ip_route_text.splitlines():
        for word in line.split():
            if "/" not in word and not re.fullmatch(r"\d+\.\d+\.\d+\.\d+", word):
                continue
            try:
                other = ipaddress.ip_network(word, strict=False)
            except ValueError:
                continue
            if other.version == net.version and other.prefixlen > 0 and other.overlaps(net):
                hits.append(" ".join(line.split()))
                break
    return hits
