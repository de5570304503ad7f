"""A lab host's own CPU: a cgroup v1 quota proportional to its vCPU, scaled so the whole topology fits here.

Every namespace shares this machine's cores; without a budget the lab shows no topology's shape (one busy host
takes what another would have had). `lab up` gives each topology host a group `n8n-sizer-lab-<lab id>/<host>`
under `cpu` and `cpuacct` with a CFS quota of `vcpu x scale` cores, and moves the host's sshd into it before any
session exists, so everything started in that namespace over SSH (and all their children) runs inside it.

    scale = min(1, usable cores / total vCPU of the topology's hosts)

Usable cores are this machine's cores less `GENERATOR_RESERVE_CORES` for what runs outside the hosts (the load
generators, the bench and its samplers, sshd's own sessions), unless `lab up --cpu-cores` says otherwise. A
topology that fits is not scaled up: a host never gets more than its own vCPU. The generators get no quota.

The plan (`plan_cpu`) is pure and recorded in the inventory (`lab.cpu`, a `LabCpu`) before any group exists;
`lab down` removes the top group and everything under it (the bench's per-role groups included) by that name,
which carries the lab's id. `lab_host_cores` reads a lab record back as (host, roles, cores) for the advisor.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field

from n8n_sizer.errors import InputError
from n8n_sizer.hosts.cgroups import PERIOD_US, PREFIX, CgroupError, CpuGroup, available_mounts, quota_us, remove_tree
from n8n_sizer.safety.frozen import Frozen

GENERATOR_RESERVE_CORES = 0.5  # left outside the hosts' budgets for the generators, the bench and its samplers
# The lab's weight against other work on this machine (cgroup v1 cpu.shares; a process outside any group weighs
# 1024). A quota is only a cap: on a machine shared with other work (load average 8-16 seen here) a host would
# get far less than its budget and the topology's shape would drown in that noise. The quotas cap the hosts at
# the usable cores, so the weight only decides who waits when the machine is oversubscribed; other work keeps at
# least the cores the quotas leave. The generators share the weight (no quota) so the load is sent on time.
LAB_SHARES = 65536
GENERATORS = "generators"  # the group of the load-generator namespaces, beside the hosts'


class HostCpu(Frozen):
    """One topology host's budget: its vCPU, the cores it gets here (vcpu x scale) and the quota that says so."""

    name: str
    vcpu: int = Field(ge=1)
    cores: float = Field(gt=0)
    quota_us: int = Field(gt=0)
    period_us: int = Field(gt=0)
    cgroup: str  # relative to each controller's mount: `n8n-sizer-lab-<id>/<host>`


class LabCpu(Frozen):
    """The lab's CPU budget (the inventory's `lab.cpu`)."""

    group: str  # the top group, `n8n-sizer-lab-<id>`, under `cpu` and `cpuacct`
    machine_cores: int = Field(ge=1)
    usable_cores: float = Field(gt=0)
    total_vcpu: int = Field(ge=1)
    scale: float = Field(gt=0, le=1)  # cores here per vCPU of the topology
    shares: int = Field(LAB_SHARES, ge=2, le=262144)  # the top group's cpu.shares
    hosts: tuple[HostCpu, ...]

    @property
    def generators_group(self) -> str:
        return f"{self.group}/{GENERATORS}"

    def host(self, name: str) -> HostCpu | None:
        return next((h for h in self.hosts if h.name == name), None)


class HostCores(Frozen):
    """A lab host as the advisor scores it: its own cores at this machine's speed."""

    name: str
    roles: dict[str, int]
    cores: float
    vcpu: int


def usable_cores(machine_cores: int, requested: float | None = None) -> float:
    """The cores the hosts' budgets share: `requested` (`--cpu-cores`) or this machine's less the reserve."""
    if requested is not None:
        if not 0 < requested <= machine_cores:
            raise InputError(
                f"--cpu-cores {requested:g} is out of range; give more than 0 and at most this "
                f"machine's {machine_cores} cores, e.g. --cpu-cores {max(machine_cores - 0.5, 0.5):g}"
            )
        return float(requested)
    return max(machine_cores - GENERATOR_RESERVE_CORES, machine_cores / 2)


def plan_cpu(
    hosts: list[tuple[str, int]],
    lab_id: str,
    machine_cores: int,
    cores: float | None = None,
    period_us: int = PERIOD_US,
) -> LabCpu:
    """The budget of each (host name, vCPU): scale = min(1, usable / total vCPU), quota = vcpu x scale x period."""
    if not hosts:
        raise ValueError("a lab has at least one topology host")
    usable = usable_cores(machine_cores, cores)
    total = sum(v for _, v in hosts)
    scale = min(1.0, usable / total)
    top = f"{PREFIX}lab-{lab_id}"
    return LabCpu(
        group=top,
        machine_cores=machine_cores,
        usable_cores=usable,
        total_vcpu=total,
        scale=scale,
        hosts=tuple(
            HostCpu(
                name=name,
                vcpu=v,
                cores=round(v * scale, 4),
                quota_us=quota_us(v * scale, period_us),
                period_us=period_us,
                cgroup=f"{top}/{name}",
            )
            for name, v in hosts
        ),
    )


def plan_for_topology(topology, lab_id: str, cores: float | None = None) -> LabCpu:
    return plan_cpu([(h.name, h.vcpu) for h in topology.hosts()], lab_id, os.cpu_count() or 1, cores)


def lab_cpu_mounts() -> dict[str, Path]:
    """This machine's cgroup v1 cpu and cpuacct mounts; one line and exit 2 when it has none."""
    mounts = available_mounts()
    if not mounts:
        raise InputError(
            "lab up gives each host a CPU budget with cgroup v1 `cpu` and `cpuacct`, which this "
            "machine does not offer to this process (not root, or cgroup v2 only); run it as root on "
            "a machine with cgroup v1, or pass --no-cpu-budget for a lab whose hosts share every core"
        )
    return mounts


def create_lab_groups(cpu: LabCpu, mounts: dict[str, Path]) -> None:
    """The lab's top group with its weight, each host's group with its quota, the generators' group."""
    CpuGroup(cpu.group, mounts).create().set_shares(cpu.shares)
    for h in cpu.hosts:
        CpuGroup(h.cgroup, mounts).create().set_quota(h.cores, h.period_us)
    CpuGroup(cpu.generators_group, mounts).create()


def place_in_host(cpu: LabCpu, namespace: str, pid: int, mounts: dict[str, Path]) -> None:
    """Move `pid` (a namespace's sshd, right after it started) and its children into its host's group, or the
    generators' group for a namespace that is not a topology host."""
    h = cpu.host(namespace)
    CpuGroup(h.cgroup if h is not None else cpu.generators_group, mounts).add(pid)


def remove_cpu_groups(cpu: LabCpu) -> tuple[list[str], list[str]]:
    """Remove the lab's top group and everything under it, by its recorded name; (removed, failed)."""
    mounts = available_mounts()
    if not mounts:
        return [], [f"cgroups {cpu.group} (cgroup v1 cpu/cpuacct not reachable from this process)"]
    try:
        return remove_tree(cpu.group, mounts)
    except CgroupError as exc:
        return [], [f"cgroups {cpu.group} ({exc})"]


def lab_host_cores(lab: dict, machine_cores: int | None = None) -> list[HostCores]:
    """A lab record (the inventory's `lab` section, as a dict) as each topology host with its roles and the cores
    it has here: `vcpu x scale` with a CPU budget, else every host on the machine's shared cores (no budget)."""
    from n8n_sizer.bundle.topology import parse_topology

    topology = lab.get("topology")
    if not topology:
        raise InputError("the lab record has no topology; pass the lab.json that `n8n-sizer lab up --out` wrote")
    cpu = LabCpu.model_validate(lab["cpu"]) if lab.get("cpu") else None
    shared = float(machine_cores or os.cpu_count() or 1)
    out = []
    for h in parse_topology(topology).hosts():
        budget = cpu.host(h.name) if cpu else None
        out.append(
            HostCores(
                name=h.name,
                roles={k: v for k, v in h.roles.model_dump().items() if v},
                cores=budget.cores if budget else shared,
                vcpu=h.vcpu,
            )
        )
    return out
