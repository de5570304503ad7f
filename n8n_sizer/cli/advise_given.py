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
    """(layout, arch, hosts) of the topology file at `path` (what `advise --json` prints, or {"topology": [...]})."""
    from n8n_sizer.advisor.answer.base import Roles
    from n8n_sizer.advisor.answer.given import GivenGroup, given_layout
    from n8n_sizer.advisor.catalog import find_size
    from n8n_sizer.deploy.topology import load_topology_text

    from n8n_sizer.safety.files import read_user_text

    text = read_user_text(path, "--topology", max_bytes=4 << 20,
                          fix="save one with `n8n-sizer advise --rps 200 --json > advice.json`, or write "
                              "{\"topology\": [...]} as docs/cluster.md shows")
    topology = load_topology_text(text, f"--topology {path}")
    groups = []
    for g in topology.groups:
        size = find_size(g.size, g.provider)
        groups.append(GivenGroup(name=g.name, provider=g.provider, size=size.size, count=g.count,
                                 roles=Roles(**g.roles.model_dump()), host=advisor.host_for_size(size),
                                 monthly_eur=size.monthly_eur))
    machine = this_machine() if on_this_machine else None
    layout = given_layout(groups, topology.concurrency, topology.db_pool_size.worker, machine)
    arch = machine.arch if machine else layout.group_with("workers").host.arch
    return layout, arch, sum(g.count for g in topology.groups)
