"""Lab-shape points: topologies measured on the namespace lab with a CPU budget per host, predicted by the model.

`benchmarks/lab_shape.py --from FOLDER --embed PAGE` writes them to data/lab_shape.json: each topology's hosts with their roles and the
cores their budget gave them, what the bench carried over the lab (two generators, every accepted request matched
to its stored execution), and the tag its per-role rows carry in data/measurements.json. `advise --validate`
predicts each from a fit WITHOUT its own run's rows (leave one topology out): this machine's speed and how an
execution's CPU splits between roles come from the other runs, so a topology's own run never informs its
prediction. A lab host's cores for its roles are its quota x `usable` (the share of a CFS quota a saturated
host's processes reached in the other topologies) less `outside_cores` (its sampler and sshd). A point whose
sitting was speed-probed (lab/speed.py) is put at its own sitting's speed against its campaign's others.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from pydantic import Field

from n8n_sizer.advisor.answer.contract import Roles
from n8n_sizer.advisor.answer.given import GivenGroup, given_layout
from n8n_sizer.advisor.answer.layout import TopologyModel
from n8n_sizer.advisor.capacity import CapacityModel, HostShape
from n8n_sizer.advisor.measurements import LAB_ENVIRONMENT, sitting_class
from n8n_sizer.advisor.profiles import BUILTIN
from n8n_sizer.advisor.validate import pct_error
from n8n_sizer.safety.frozen import Frozen

LAB_CLASS = LAB_ENVIRONMENT  # quiet lab hosts under a CFS quota each (fit.py `idle:<class>`, `processes_sharing`)


def lab_host_class(start_s: float) -> str:
    """The host class of a quiet lab campaign that began at `start_s`, its per-role rows and its points alike."""
    return sitting_class(LAB_CLASS, start_s)


class LabHost(Frozen):
    name: str
    roles: dict[str, int]
    cores: float = Field(gt=0)  # the host's CPU budget here (vcpu x scale)
    vcpu: int = Field(gt=0)


class LabPoint(Frozen):
    id: str
    label: str
    hosts: list[LabHost]
    concurrency: int = Field(gt=0)
    worker_pool: int = Field(gt=0)
    usable: float = Field(gt=0, le=1)
    outside_cores: float = Field(ge=0)
    measured_per_s: float = Field(gt=0)
    accepted: int = Field(ge=0)
    lost: int = Field(ge=0)
    row_tag: str  # the run's tag in the ids of its embedded per-role rows (`-<tag>-`)
    host_class: str
    machine_load_avg: list[float]
    source: str
    # this machine's speed in the point's sitting (lab/speed.py: CPU ms of a fixed JavaScript workload, before and
    # after it); None for the campaigns measured before the probe existed
    speed_probe_ms: float | None = Field(default=None, gt=0)

    def owns(self, measurement_id: str) -> bool:
        return f"-{self.row_tag}-" in measurement_id


@lru_cache(maxsize=1)
def load_lab_points() -> tuple[LabPoint, ...]:
    try:
        text = resources.files("n8n_sizer").joinpath("data/lab_shape.json").read_text(encoding="utf-8")
    except FileNotFoundError:
        return ()
    return tuple(LabPoint.model_validate(p) for p in json.loads(text)["points"])


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


@dataclass(frozen=True)
class HeldOutLab:
    """A lab topology (lab_points.py) predicted by a fit without its own run's per-role rows."""

    id: str
    label: str
    measured_per_s: float
    predicted_per_s: float
    bound: str
    lost: int
    accepted: int
    campaign: str = ""  # its host class: the campaign it was measured in (advisor/measurements.py sitting_class)

    @property
    def error_pct(self) -> float:
        return pct_error(self.predicted_per_s, self.measured_per_s)


def lab_order_right(checks: list[HeldOutLab]) -> bool | None:
    """Whether the predictions rank the lab topologies as the measurements do, within each campaign: topologies are
    ranked against the others measured in the same sitting (a campaign of another day's machine state measured the
    same 4 worker hosts at 9.0/s and at 13.6/s), never across campaigns."""
    pairs = [(a, b) for i, a in enumerate(checks) for b in checks[i + 1 :] if a.campaign == b.campaign]
    if not pairs:
        return None
    return all((a.predicted_per_s - b.predicted_per_s) * (a.measured_per_s - b.measured_per_s) >= 0 for a, b in pairs)


def lab_checks(measurements, full=None, on_line=None) -> list[HeldOutLab]:
    """Each embedded lab topology predicted by a fit without its own run's rows (leave one topology out), from
    `full` (a FullFit of `measurements`, made here when not given); `on_line` hears one line per topology."""
    from n8n_sizer.advisor.fit import FullFit

    full = full or FullFit(measurements)
    points = load_lab_points()
    out = []
    for point in points:
        fitted = full.without(lambda _rid, mid, point=point: point.owns(mid))
        tm = lab_model(fitted.model, point)
        b = tm.binding()
        peers = [p.speed_probe_ms for p in points if p.id != point.id and p.host_class == point.host_class]
        held = HeldOutLab(
            id=point.id,
            label=point.label,
            measured_per_s=point.measured_per_s,
            predicted_per_s=tm.capacity_per_s() * sitting_speed(point.speed_probe_ms, peers),
            bound=f"{b.name} {b.host}".strip(),
            lost=point.lost,
            accepted=point.accepted,
            campaign=point.host_class,
        )
        out.append(held)
        if on_line is not None:
            on_line(
                f"  {held.label:<40} {held.campaign:<28} measured {held.measured_per_s:6.2f}/s  predicted "
                f"{held.predicted_per_s:6.2f}/s  bound {held.bound:<18} lost {held.lost} of {held.accepted}"
                f"  {held.error_pct:+6.1f}%"
            )
    return out
