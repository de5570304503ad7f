"""A topology the user gives (`advise --topology FILE`): what it carries, what binds it and its pools.

The same model scores it as scores the search's candidates (layout.py), only nothing is searched: the host
groups, their sizes and role counts are the user's. With `machine` every host of the topology shares that one
machine's cores (the lab of docs/lab.md, where each host is a network namespace on this machine): the layout
becomes one host group with every role, so its host bound is the machine's cores over the CPU of all roles,
while the per-process bounds (main, each webhook processor, each worker, Redis) stay per process.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from n8n_sizer.advisor.answer.base import Basis, Recommendation, Request, SizeFit
from n8n_sizer.advisor.answer.contract import Roles
from n8n_sizer.advisor.answer.layout import Group, Layout, TopologyModel, plan_pools
from n8n_sizer.advisor.answer.multi import build_topology
from n8n_sizer.advisor.answer.topology_search import Scored
from n8n_sizer.advisor.capacity import HostShape
from n8n_sizer.errors import InputError

MACHINE_GROUP = "this-machine"


@dataclass(frozen=True)
class GivenGroup:
    """One host group as the topology file states it, with the model's shape of its size."""

    name: str
    provider: str | None
    size: str | None
    count: int
    roles: Roles
    host: HostShape
    monthly_eur: float | None  # per host
    vcpu: int | None = None  # the catalog's vCPU (a shared-core size's host shape has its baseline)
    ram_mib: int | None = None


def given_layout(
    groups: list[GivenGroup], concurrency: int, worker_pool: int, machine: HostShape | None = None
) -> Layout:
    """The layout of `groups`; with `machine`, one group holding every role on the machine's cores."""
    totals = {role: sum(g.count * getattr(g.roles, role) for g in groups) for role in Roles().counts()}
    if not totals["workers"] or totals["main"] != 1 or totals["postgres"] != 1 or totals["redis"] != 1:
        raise InputError(
            "--topology: the advisor scores queue-mode topologies with one main, one Postgres, one "
            f"Redis and at least one worker (this one has {totals['main']}, {totals['postgres']}, "
            f"{totals['redis']}, {totals['workers']}); for one host in regular mode use --max-hosts 1"
        )
    if totals["webhook"] and not totals["load_balancer"]:
        raise InputError(
            "--topology: webhook processors need a load balancer in front (roles.load_balancer 1 on "
            "one host); add one, or drop the webhook processors"
        )
    if machine is not None:
        merged = Group(name=MACHINE_GROUP, host=machine, **totals)
        return Layout((merged,), concurrency=concurrency, worker_pool=worker_pool)
    out = tuple(
        Group(
            name=g.name,
            host=g.host,
            count=g.count,
            provider=g.provider,
            size=g.size,
            monthly_eur=g.monthly_eur,
            **g.roles.counts(),
        )
        for g in groups
    )
    return Layout(out, concurrency=concurrency, worker_pool=worker_pool)


def evaluate(
    basis: Basis, req: Request, layout: Layout, fits: list[SizeFit], given_hosts: int | None = None
) -> Recommendation:
    """The recommendation for exactly `layout`: capacity with its interval, the binding bound, pools, p95.
    `given_hosts`: the hosts the user's file names (a layout on one machine has merged them into one)."""
    tm = TopologyModel(basis.model, req.profile, layout)
    cap = tm.capacity_per_s()
    p95 = tm.p95_ms(req.rps)
    carries = req.rps < cap and (req.p95_ms is None or p95 <= req.p95_ms)
    eur = layout.monthly_eur
    scored = Scored(layout, cap, (eur if eur is not None else math.inf, layout.hosts), plan_pools(tm, cap))
    # max_hosts = its own hosts: the advice to add hosts is for the user to take, not for this answer
    rec = build_topology(
        basis, req.model_copy(update={"max_hosts": layout.hosts, "given": True}), scored, carries, fits
    )
    warnings = list(rec.warnings)
    for g in layout.groups:
        cls = g.host.host_class
        if cls != basis.model.reference_class and f"speed:{cls}" not in basis.model.params:
            warnings.append(
                f"no measurement of {g.name}'s CPU ({cls.removeprefix('user:')}) is in the fit: its "
                "speed is taken as the reference host's; pass --results with bench runs made on it"
            )
    machine = layout.groups[0].host.vcpu if layout.groups[0].name == MACHINE_GROUP else None
    request = {
        **rec.request,
        "max_hosts": None,
        "topology": {"hosts": given_hosts or layout.hosts, "machine_vcpu": machine},
    }
    return rec.model_copy(update={"warnings": warnings, "request": request})
