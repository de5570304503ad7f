"""Lab-shape points as the model sees them: topologies measured on the namespace lab with a CPU budget per host.

`benchmarks/lab_shape.py --from FOLDER --embed PAGE` writes them to data/lab_shape.json (read by
advisor/measurements.py `load_lab_points`): each topology's hosts with their roles and the cores their budget gave
them, what the bench carried over the lab (two generators, every accepted request matched to its stored execution),
and the tag its per-role rows carry in data/measurements.json. `advise --validate` (advisor/validate.py `lab_checks`)
predicts each from a fit WITHOUT its own run's rows (leave one topology out): this machine's speed and how an
execution's CPU splits between roles come from the other runs, so a topology's own run never informs its
prediction. A lab host's cores for its roles are its quota x `usable` (the share of a CFS quota a saturated
host's processes reached in the other topologies) less `outside_cores` (its sampler and sshd). A point whose
sitting was speed-probed (lab/speed.py) is put at its own sitting's speed against its campaign's others.
"""

from __future__ import annotations

import statistics

from n8n_sizer.advisor.answer.contract import Roles
from n8n_sizer.advisor.answer.given import GivenGroup, given_layout
from n8n_sizer.advisor.answer.layout import TopologyModel
from n8n_sizer.advisor.capacity import CapacityModel, HostShape
from n8n_sizer.advisor.measurements import LAB_ENVIRONMENT, LabPoint, load_lab_points, sitting_class
from n8n_sizer.advisor.profiles import BUILTIN

LAB_CLASS = LAB_ENVIRONMENT  # quiet lab hosts under a CFS quota each (fit.py `idle:<class>`, `processes_sharing`)


def lab_host_class(start_s: float) -> str:
    """The host class of a quiet lab campaign that began at `start_s`, its per-role rows and its points alike."""
    return sitting_class(LAB_CLASS, start_s)


def lab_host(cores: float, arch: str, host_class: str, usable: float, outside_cores: float) -> HostShape:
    """A lab host as the model sees it: the cores of its CFS quota that its roles can use."""
    return HostShape(vcpu=max(cores * usable - outside_cores, 1e-3), arch=arch, host_class=host_class)


def quota_reach() -> tuple[float, float]:
    """(usable, outside_cores) as the embedded lab runs measured them (medians), for a lab not measured yet:
    (1.0, 0.0) where none is embedded."""
    points = load_lab_points()
    if not points:
        return 1.0, 0.0
    return (statistics.median(p.usable for p in points), statistics.median(p.outside_cores for p in points))


def lab_model(model: CapacityModel, point: LabPoint) -> TopologyModel:
    """The topology model of a lab point: each host its own budget at the rows' speed."""
    groups = [
        GivenGroup(
            name=h.name,
            provider=None,
            size=None,
            count=1,
            roles=Roles(**h.roles),
            host=lab_host(h.cores, "x86", point.host_class, point.usable, point.outside_cores),
            monthly_eur=None,
            vcpu=h.vcpu,
        )
        for h in point.hosts
    ]
    return TopologyModel(model, BUILTIN["light"], given_layout(groups, point.concurrency, point.worker_pool))


def sitting_speed(own_ms: float | None, peers_ms: list[float | None]) -> float:
    """How much faster this machine was in a point's sitting than in its campaign's other sittings, whose rows its
    prediction comes from: their median speed probe over its own (1 where either was not probed). The budgets are
    CPU time, so a lab topology's capacity goes as 1 / CPU ms."""
    peers = [p for p in peers_ms if p]
    return statistics.median(peers) / own_ms if own_ms and peers else 1.0
