"""What a fleet costs for a number of hours, from the catalog's monthly prices (730 h a month).

Hetzner bills per started hour up to the monthly cap and GCP per second; hourly = monthly / 730 is
the same rate for both as long as the fleet lives less than a month. Gross EUR as in the catalog;
GCP figures are the catalog's estimates (see `advisor/catalog.py`).
"""

from __future__ import annotations

import math

from pydantic import Field

from n8n_sizer.errors import InputError
from n8n_sizer.fleet.spec import FleetSpec
from n8n_sizer.safety.frozen import Frozen

DEFAULT_WARN_EUR = 5.0


class HostCost(Frozen):
    name: str
    role: str
    size: str
    vcpu: int
    monthly_eur: float
    hourly_eur: float
    total_eur: float
    price_source: str


class CostEstimate(Frozen):
    stack: str
    provider: str
    hours: float = Field(gt=0)
    hosts: tuple[HostCost, ...]
    total_eur: float
    warn_eur: float
    over_threshold: bool


def estimate_cost(spec: FleetSpec, hours: float | None = None, warn_eur: float = DEFAULT_WARN_EUR) -> CostEstimate:
    """EUR per host and in total for `hours` (default: the stack's TTL), billed in whole started hours."""
    hours = spec.ttl_hours if hours is None else hours
    if not hours > 0 or math.isinf(hours):
        raise InputError(f"--hours must be a positive number of hours, got {hours}; try --hours 2")
    if not warn_eur >= 0:
        raise InputError(f"--warn-eur must be >= 0, got {warn_eur}; try --warn-eur 5")
    billed = math.ceil(hours)  # Hetzner bills started hours; GCP per second, so this is an upper bound
    rows = []
    for host in spec.hosts:
        server = spec.server_of(host)
        role = "loadgen" if host is spec.loadgen else "target"
        rows.append(
            HostCost(
                name=host.name,
                role=role,
                size=server.size,
                vcpu=server.vcpu,
                monthly_eur=server.monthly_eur,
                hourly_eur=server.hourly_eur,
                total_eur=server.hourly_eur * billed,
                price_source=server.price_source,
            )
        )
    total = sum(r.total_eur for r in rows)
    return CostEstimate(
        stack=spec.stack,
        provider=spec.provider,
        hours=hours,
        hosts=tuple(rows),
        total_eur=total,
        warn_eur=warn_eur,
        over_threshold=total > warn_eur,
    )
