"""Server catalog: the sizes the advisor recommends and the fleet can create.

Hetzner prices are seed 002's gross monthly EUR from the Hetzner Cloud API (checked 2026-11-05).
GCP e2 prices are not in the seeds: they are GCP's public on-demand list prices for us-central1
(730 h a month) converted at 0.92 EUR/USD, marked `price_source="estimate"`, so check them before
you buy. The e2-micro/small/medium sizes are shared-core: 2 vCPU that burst above a baseline
fraction of a core (0.25 / 0.5 / 1.0), so sustained capacity follows the baseline.

A server the catalog does not hold (`advise --vcpu 16`) is priced from a rate per vCPU and per GiB of RAM,
derived from the catalog's own prices (`price_rate`, its derivation in `PriceRate.how`) and marked as an estimate.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from functools import cache
from typing import Literal

from pydantic import Field

from n8n_sizer.safety.frozen import Frozen

Provider = Literal["hetzner", "gcp"]
SKYLAKE_CLASS = "seed-002-skylake"  # seed 002's Intel Xeon (Skylake) host, slower per core than its EPYC-Rome ones
Arch = Literal["x86", "arm"]


class ServerSize(Frozen):
    provider: Provider
    size: str
    vcpu: int = Field(gt=0)
    arch: Arch
    ram_mib: int = Field(gt=0)
    monthly_eur: float = Field(ge=0)
    shared_core: bool = False
    # Sustained share of the vCPUs for shared-core (burstable) sizes; 1.0 for dedicated vCPU slices.
    baseline_vcpu: float = Field(gt=0)
    cpu: str
    price_source: Literal["seed-002", "estimate"]
    # Whose CPU speed the model gives it: seed 002 measured its CX23 on an Intel Xeon (Skylake) and its CX33/CX43 on
    # AMD EPYC-Rome, one execution alone taking 104 ms on the first and 72-78 ms on the others: two speeds.
    host_class: str = "seed-002"

    @property
    def hourly_eur(self) -> float:
        return self.monthly_eur / 730.0


def _hz(size: str, vcpu: int, arch: Arch, ram_gib: int, eur: float, cpu: str) -> ServerSize:
    return ServerSize(
        provider="hetzner",
        size=size,
        vcpu=vcpu,
        arch=arch,
        ram_mib=ram_gib * 1024,
        monthly_eur=eur,
        baseline_vcpu=float(vcpu),
        cpu=cpu,
        price_source="seed-002",
        host_class=SKYLAKE_CLASS if "Skylake" in cpu else "seed-002",
    )


def _e2(size: str, vcpu: int, ram_mib: int, usd: float, baseline: float | None = None) -> ServerSize:
    return ServerSize(
        provider="gcp",
        size=size,
        vcpu=vcpu,
        arch="x86",
        ram_mib=ram_mib,
        monthly_eur=round(usd * 0.92, 2),
        shared_core=baseline is not None,
        baseline_vcpu=baseline if baseline is not None else float(vcpu),
        cpu="Intel/AMD (e2, platform chosen by GCP)",
        price_source="estimate",
    )


CATALOG: tuple[ServerSize, ...] = (
    # seed 002 "What we tested": vCPU, CPU model, RAM and gross monthly EUR.
    _hz("cx23", 2, "x86", 4, 6.64, "Intel Xeon (Skylake)"),
    _hz("cax11", 2, "arm", 4, 7.25, "Ampere Altra (Neoverse-N1)"),
    _hz("cx33", 4, "x86", 8, 10.27, "AMD EPYC-Rome"),
    _hz("cax21", 4, "arm", 8, 12.69, "Ampere Altra (Neoverse-N1)"),
    _hz("cx43", 8, "x86", 16, 19.35, "AMD EPYC-Rome"),
    # GCP e2 (estimates, see module docstring). Shared-core sizes carry their baseline.
    _e2("e2-micro", 2, 1024, 6.11, baseline=0.25),
    _e2("e2-small", 2, 2048, 12.23, baseline=0.5),
    _e2("e2-medium", 2, 4096, 24.46, baseline=1.0),
    _e2("e2-standard-2", 2, 8192, 48.92),
    _e2("e2-standard-4", 4, 16384, 97.83),
    _e2("e2-standard-8", 8, 32768, 195.67),
)

PROVIDERS: tuple[str, ...] = ("hetzner", "gcp")
ARCHES: tuple[str, ...] = ("x86", "arm")


class UnknownSize(ValueError):
    pass


def find_size(size: str, provider: str | None = None) -> ServerSize:
    """The catalog entry for `size` (case-insensitive), or UnknownSize naming the sizes that exist."""
    wanted = size.lower()
    for server in CATALOG:
        if server.size == wanted and (provider is None or server.provider == provider):
            return server
    known = ", ".join(s.size for s in CATALOG if provider is None or s.provider == provider)
    raise UnknownSize(f"unknown server size {size!r}; known sizes: {known}")


def sizes_for(provider: str | None = None, arch: str | None = None) -> list[ServerSize]:
    """Catalog entries filtered by provider and arch, cheapest first."""
    rows = [s for s in CATALOG if (provider is None or s.provider == provider) and (arch is None or s.arch == arch)]
    return sorted(rows, key=lambda s: (s.monthly_eur, s.vcpu))


@dataclass(frozen=True)
class PriceRate:
    """What one vCPU and one GiB of RAM cost a month at one provider, for one arch, derived from the catalog (an
    internal figure, not a boundary: a dataclass, which costs `advise`'s start nothing)."""

    provider: str
    arch: str
    per_vcpu_eur: float
    per_gib_eur: float
    how: str  # the derivation, in words

    def monthly_eur(self, vcpu: float, ram_mib: int) -> float:
        return round(self.per_vcpu_eur * vcpu + self.per_gib_eur * ram_mib / 1024.0, 2)


# GCP's on-demand list rates for e2 in us-central1 (USD an hour), which the e2 prices above are made of: a size costs
# its billed vCPU (a shared-core size its baseline share) x the vCPU rate + its GiB x the memory rate, 730 h a month.
GCP_E2_USD_PER_VCPU_HOUR = 0.021811
GCP_E2_USD_PER_GIB_HOUR = 0.002923
EUR_PER_USD = 0.92
HOURS_PER_MONTH = 730.0


@cache
def price_rate(provider: str, arch: str) -> PriceRate | None:
    """The provider's rate per vCPU and per GiB for `arch`, or None when the catalog has no size of that arch.

    In this catalog every size of a provider comes with the same RAM per (billed) vCPU: 2 GiB at Hetzner, 4 GiB at
    GCP. So the prices fix what one vCPU with its RAM costs, not a vCPU and a GiB apart. GCP: its e2 prices are
    made of e2's two list rates (`GCP_E2_*`), which reproduce every e2 size here within 0.5% (a test checks it).
    Hetzner: the vCPU-with-2-GiB price is the least-squares line through the origin over its sizes of that arch,
    split between the vCPU and its 2 GiB in the proportion e2's rates give a vCPU and a GiB (the split only moves
    an estimate whose RAM is not 2 GiB per vCPU).
    """
    sizes = [s for s in CATALOG if s.provider == provider and s.arch == arch]
    if not sizes:
        return None
    vcpu_eur = GCP_E2_USD_PER_VCPU_HOUR * HOURS_PER_MONTH * EUR_PER_USD
    gib_eur = GCP_E2_USD_PER_GIB_HOUR * HOURS_PER_MONTH * EUR_PER_USD
    names = ", ".join(s.size for s in sizes)
    if provider == "gcp":
        how = (
            f"e2's list rates in us-central1 (${GCP_E2_USD_PER_VCPU_HOUR} per vCPU and ${GCP_E2_USD_PER_GIB_HOUR} per "
            f"GiB an hour, {HOURS_PER_MONTH:g} h, {EUR_PER_USD} EUR/USD), of which the catalog's {names} prices are made"
        )
        return PriceRate(provider="gcp", arch=arch, per_vcpu_eur=vcpu_eur, per_gib_eur=gib_eur, how=how)
    rows = [(s.baseline_vcpu, s.ram_mib / 1024.0, s.monthly_eur) for s in sizes]
    pair = sum(v * p for v, _, p in rows) / sum(v * v for v, _, _ in rows)  # EUR per vCPU with its RAM
    gib_per_vcpu = statistics.median(g / v for v, g, _ in rows)
    b = pair / (vcpu_eur / gib_eur + gib_per_vcpu)
    a = pair - gib_per_vcpu * b
    how = (
        f"every {provider} {arch} size ({names}) pairs a vCPU with {gib_per_vcpu:g} GiB: least squares through the "
        f"origin of their prices gives {pair:.2f} EUR a month for the pair, split {a:.2f} per vCPU and {b:.2f} per "
        "GiB in the proportion of GCP's e2 list rates"
    )
    return PriceRate(provider=provider, arch=arch, per_vcpu_eur=a, per_gib_eur=b, how=how)


def estimate_price(provider: str | None, arch: str, vcpu: float, ram_mib: int) -> tuple[float, PriceRate] | None:
    """(monthly EUR, the rate used) for a server the catalog does not hold: at `provider`'s rate, or without one
    at the cheapest provider's for that arch; None where no provider has sizes of that arch."""
    rates = [r for r in (price_rate(p, arch) for p in ((provider,) if provider else PROVIDERS)) if r is not None]
    if not rates:
        return None
    best = min(rates, key=lambda r: r.monthly_eur(vcpu, ram_mib))
    return best.monthly_eur(vcpu, ram_mib), best
