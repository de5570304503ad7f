"""Server catalog: the sizes the advisor recommends and the fleet can create.

Hetzner prices are seed 002's gross monthly EUR from the Hetzner Cloud API (checked 2026-11-05).
GCP e2 prices are not in the seeds: they are GCP's public on-demand list prices for us-central1
(730 h a month) converted at 0.92 EUR/USD, marked `price_source="estimate"`, so check them before
you buy. The e2-micro/small/medium sizes are shared-core: 2 vCPU that burst above a baseline
fraction of a core (0.25 / 0.5 / 1.0), so sustained capacity follows the baseline.
"""

from __future__ import annotations

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
