"""`advise --topology FILE [--on-this-machine]`: read the user's topology into the advisor's layout."""

from __future__ import annotations

from pathlib import Path

from n8n_sizer.errors import InputError


def this_machine():
    """This machine as the model sees it: its cores, its arch and the host class bench gives its runs
    (runs/fit_input.py: `user:<CPU model>`), so a fit on runs made here applies its speed."""
    from n8n_sizer.advisor.capacity import HostShape
    from n8n_sizer.hosts.facts import host_facts
    from n8n_sizer.hosts.host import LocalHost

    facts = host_facts(LocalHost())
    if not facts.vcpu:
        raise InputError("--on-this-machine: `nproc` gave no CPU count here; run on a Linux host, or drop the flag")
    arch = "arm" if str(facts.arch or "").lower() in ("aarch64", "arm64") else "x86"
    return HostShape(vcpu=float(facts.vcpu), arch=arch, host_class=f"user:{facts.cpu_model or 'local'}")


def given_layout_from(path: Path, advisor, on_this_machine: bool):
    """What the topology file at `path` asks to score (what `advise --json` prints, or {"topology": [...]}):
    `("layout", layout, arch, hosts)` for a queue-mode topology, `("one-host", setup, option, arch)` for one host."""
    from n8n_sizer.advisor.answer.given import GivenGroup, given_layout
    from n8n_sizer.advisor.answer.topology_search import HostOption
    from n8n_sizer.advisor.catalog import find_size
    from n8n_sizer.bundle.topology import load_topology_text
    from n8n_sizer.safety.files import read_user_text

    text = read_user_text(
        path,
        "--topology",
        max_bytes=4 << 20,
        fix="save one with `n8n-sizer advise --rps 200 --json > advice.json`, or write "
        '{"topology": [...]} as docs/cluster.md shows',
    )
    lab = _lab_record(text, path) if on_this_machine else None
    if lab is not None:  # a lab's inventory: each host its own CPU budget here (lab/cpu.py)
        return _lab_layout(lab, advisor)
    topology = load_topology_text(text, f"--topology {path}")
    machine = this_machine() if on_this_machine else None
    groups = []
    for g in topology.groups:
        vcpu, ram_mib, arch = g.server()
        size = find_size(g.size, g.provider) if g.size is not None else None
        host = advisor.host_for_size(size) if size is not None else advisor.host_for_vcpu(vcpu, arch, ram_mib)
        groups.append(
            GivenGroup(
                name=g.name,
                provider=g.provider,
                size=g.size,
                count=g.count,
                roles=g.roles,
                host=host,
                monthly_eur=size.monthly_eur if size else None,
                vcpu=vcpu,
                ram_mib=ram_mib,
            )
        )
    if topology.single_host:
        g = groups[0]
        host = machine or g.host
        option = HostOption(
            host,
            g.provider,
            g.size,
            int(host.vcpu) if machine else g.vcpu,
            None if machine else g.monthly_eur,
            None if machine else g.ram_mib,
        )
        return "one-host", topology.setup(), option, host.arch
    layout = given_layout(groups, topology.concurrency, topology.db_pool_size.of("worker"), machine)
    arch = machine.arch if machine else layout.group_with("workers").host.arch
    return "layout", layout, arch, sum(g.count for g in topology.groups)


def _lab_record(text: str, path: Path) -> dict | None:
    """The `lab` section of a lab inventory (`lab up --out lab.json`) with its CPU budget, else None."""
    from n8n_sizer.safety.jsondoc import load_json

    doc = load_json(text, f"--topology {path}", "pass a topology, or the lab.json that `lab up --out` wrote")
    lab = doc.get("lab") if isinstance(doc, dict) else None
    return lab if isinstance(lab, dict) and isinstance(lab.get("topology"), dict) and lab.get("cpu") else None


def _lab_layout(lab: dict, advisor):
    """Each lab host as a host of its own with the cores its budget gives its roles here (`vcpu x scale` x the
    share of a quota the embedded lab runs reached, less what a host spends outside its roles:
    advisor/answer/lab_points.py), at this machine's measured speed."""
    from n8n_sizer.advisor.answer.contract import Roles
    from n8n_sizer.advisor.answer.given import GivenGroup, given_layout
    from n8n_sizer.advisor.answer.lab_points import lab_host, quota_reach
    from n8n_sizer.bundle.topology import parse_topology
    from n8n_sizer.lab.cpu import lab_host_cores

    machine = this_machine()
    usable, outside = quota_reach()
    topology = parse_topology(lab["topology"], "--topology (the lab's)")
    groups = [
        GivenGroup(
            name=h.name,
            provider=None,
            size=None,
            count=1,
            roles=Roles(**h.roles),
            host=lab_host(h.cores, machine.arch, machine.host_class, usable, outside),
            monthly_eur=None,
            vcpu=h.vcpu,
        )
        for h in lab_host_cores(lab)
    ]
    layout = given_layout(groups, topology.concurrency, topology.db_pool_size.of("worker"))
    return "layout", layout, machine.arch, len(groups)
