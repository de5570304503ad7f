"""From a request (rate, host, workload) to a recommendation, every number from the fitted model.

Order of preference, simplest first: regular mode; regular mode with N8N_CONCURRENCY_PRODUCTION_LIMIT; queue
mode with 1, 2, ... workers. A setup *carries* a rate when the rate is below its predicted capacity (and the
p95 target, if any, is met); it carries it *comfortably* at or below COMFORT_UTILISATION of capacity.
- Regular mode when it carries the rate comfortably.
- Regular mode with a production limit when it carries the rate, but with little headroom: a burst then
  waits in main's FIFO instead of piling up in main's memory (seed 000: 6.9 GB without the limit).
- Queue mode with the fewest workers that carry the rate comfortably, else the fewest that carry it.
- Nothing carries it: the setup with the most capacity, but never more workers than add capacity beyond
  the model's own uncertainty (a worker is added only when its mid prediction rises above the best
  setup's low end): extra workers cost RAM (~225 MB idle each, seed 000) and compete for the same cores.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from n8n_sizer.advisor import settings
from n8n_sizer.advisor.capacity import HostShape
from n8n_sizer.advisor.catalog import ServerSize, sizes_for
from n8n_sizer.advisor.fit import FittedModel, profile_of
from n8n_sizer.advisor.profiles import WorkflowProfile
from n8n_sizer.advisor.ram import RamModel
from n8n_sizer.advisor.setup import MAX_WORKERS, Setup, postgres_connections, recommended_max_connections
from n8n_sizer.advisor.usl import UslModel
from n8n_sizer.advisor.validate import describe_setup
from n8n_sizer.errors import InputError

COMFORT_UTILISATION = 0.7  # a 1.4x burst still fits; seed 000 alerts at 85% of the server's CPU
RAM_WARN_SHARE = 0.8
RecommendedMode = Literal["regular", "regular-limit", "queue"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Request(_Frozen):
    rps: float = Field(gt=0)
    vcpu: int | None = Field(None, gt=0)
    arch: Literal["x86", "arm"] = "x86"
    provider: Literal["hetzner", "gcp"] | None = None
    profile: WorkflowProfile
    p95_ms: float | None = Field(None, gt=0)


class Interval(_Frozen):
    low: float
    mid: float
    high: float


class ServerChoice(_Frozen):
    provider: str | None
    size: str | None
    vcpu: float
    arch: str
    monthly_eur: float | None
    shared_core: bool = False


class SizeFit(_Frozen):
    provider: str
    size: str
    vcpu: int
    arch: str
    monthly_eur: float
    mode: RecommendedMode
    workers: int
    capacity_per_s: float
    carries: bool


class Recommendation(_Frozen):
    request: dict
    mode: RecommendedMode
    workers: int
    concurrency: int | None
    runner_concurrency: int
    production_limit: int | None
    db_pool_size: int
    postgres_connections: int
    max_connections: int
    redis: list[str]
    queue_keep_last: int | None = None  # N8N_EXECUTIONS_QUEUE_KEEP_LAST_COMPLETED and _FAILED, queue mode only
    capacity_per_s: Interval
    headroom: float  # capacity mid / rate - 1
    feasible: bool
    cpu_utilisation: float
    p95_ms: float | None
    bound: str
    ram_idle_mb: float
    ram_peak_mb: float
    server: ServerChoice
    fits: list[SizeFit]
    warnings: list[str]
    evidence: list[str]
    notes: list[str]
    extrapolated: bool
    setup: Setup


class _Candidate:
    def __init__(self, mode: RecommendedMode, setup: Setup, mid: float, p95: float | None, bound: str):
        self.mode, self.setup, self.mid, self.p95, self.bound = mode, setup, mid, p95, bound


class Advisor:
    """Holds the fitted model, the RAM model and any USL fits; answers requests."""

    def __init__(self, fitted: FittedModel, ram: RamModel, usl: dict[tuple, UslModel] | None = None,
                 notes: list[str] | None = None):
        self.fitted = fitted
        self.model = fitted.model
        self.ram = ram
        self.usl = usl or {}
        self.notes = notes or []

    # --- hosts ---------------------------------------------------------------------------------
    def host_for_size(self, size: ServerSize) -> HostShape:
        # Hetzner sizes run at seed 002's measured speed; GCP has no measurement, so the same speed is assumed.
        return HostShape(vcpu=size.baseline_vcpu, arch=size.arch, host_class="seed-002")

    def host_for_vcpu(self, vcpu: int, arch: str) -> HostShape:
        return HostShape(vcpu=float(vcpu), arch=arch, host_class=self.model.reference_class)

    # --- candidates ----------------------------------------------------------------------------
    def _usl_cap(self, profile: WorkflowProfile, setup: Setup, host: HostShape) -> float:
        """The USL contention ceiling for this worker count where one was fitted on this host shape."""
        usl = self.usl.get((profile.name, host.vcpu, host.arch))
        return usl.throughput_at(setup.workers) if usl is not None and setup.mode == "queue" else math.inf

    def _capacity(self, profile: WorkflowProfile, setup: Setup, host: HostShape) -> float:
        return min(self.model.throughput_at(profile, setup, host), self._usl_cap(profile, setup, host))

    def _candidate(self, profile: WorkflowProfile, host: HostShape, mode: RecommendedMode, workers: int,
                   rate: float) -> _Candidate:
        model = self.model
        if mode == "queue":
            probe_cap = self._capacity(profile, Setup(mode="queue", workers=workers, concurrency=1000), host)
            at = min(rate, COMFORT_UTILISATION * probe_cap)
            conc = settings.worker_concurrency(model, profile, host, workers, at)
            setup = Setup(mode="queue", workers=workers, concurrency=conc, db_pool_size=settings.db_pool_size())
        elif mode == "regular-limit":
            probe_cap = self._capacity(profile, Setup(mode="regular"), host)
            at = min(rate, COMFORT_UTILISATION * probe_cap)
            setup = Setup(mode="regular", production_limit=settings.production_limit(model, profile, host, at),
                          db_pool_size=settings.db_pool_size())
        else:
            setup = Setup(mode="regular", db_pool_size=settings.db_pool_size())
        mid = self._capacity(profile, setup, host)
        at = min(rate, COMFORT_UTILISATION * mid)
        runner = settings.runner_concurrency(model, profile, setup, host, at)
        setup = setup.model_copy(update={"runner_concurrency": runner})
        p95 = model.p95_ms_at(profile, setup, host, rate) if rate < mid else None
        b = model.binding_bound(profile, setup, host)
        return _Candidate(mode, setup, mid, p95, f"{b.name}: {b.why}")

    def _carries(self, c: _Candidate, rate: float, p95_target: float | None) -> bool:
        return rate < c.mid and (p95_target is None or (c.p95 is not None and c.p95 <= p95_target))

    def best_on_host(self, profile: WorkflowProfile, host: HostShape, rate: float,
                     p95_target: float | None) -> tuple[_Candidate, bool]:
        """The setup to run on this host, and whether it carries the rate."""
        regular = self._candidate(profile, host, "regular", 0, rate)
        if self._carries(regular, rate, p95_target) and rate <= COMFORT_UTILISATION * regular.mid:
            return regular, True
        limited = self._candidate(profile, host, "regular-limit", 0, rate)
        if self._carries(limited, rate, p95_target):
            return limited, True
        queue, best_queue = self._queue_options(profile, host, rate, p95_target)
        carrying = [c for c in queue if self._carries(c, rate, p95_target)]
        comfortable = [c for c in carrying if rate <= COMFORT_UTILISATION * c.mid]
        if comfortable or carrying:
            return (comfortable or carrying)[0], True
        if best_queue.mid >= max(regular.mid, limited.mid):
            return best_queue, False
        return max((regular, limited), key=lambda c: c.mid), False

    def _queue_options(self, profile: WorkflowProfile, host: HostShape, rate: float,
                       p95_target: float | None) -> tuple[list[_Candidate], _Candidate]:
        """Queue candidates with 1..2V workers (at most MAX_WORKERS), and the one with the most capacity that
        does not add a worker the model cannot tell apart from noise (mid below the best candidate's interval
        low end)."""
        max_workers = min(MAX_WORKERS, max(2, 2 * math.ceil(host.vcpu)))
        queue = [self._candidate(profile, host, "queue", w, rate) for w in range(1, max_workers + 1)]
        best = max(queue, key=lambda c: c.mid)
        low, _, _ = self.fitted.throughput_interval(profile, best.setup, host)
        return queue, next(c for c in queue if c.mid >= low)

    # --- the answer ----------------------------------------------------------------------------
    def recommend(self, req: Request) -> Recommendation:
        profile = req.profile
        sizes = sizes_for(req.provider, req.arch)
        if req.vcpu is not None:
            host = self.host_for_vcpu(req.vcpu, req.arch)
            choice, carries = self.best_on_host(profile, host, req.rps, req.p95_ms)
            same = [s for s in sizes if s.vcpu == req.vcpu and not s.shared_core]
            server = ServerChoice(provider=same[0].provider if same else req.provider, size=same[0].size if same else None,
                                  vcpu=req.vcpu, arch=req.arch, monthly_eur=same[0].monthly_eur if same else None)
        else:
            if not sizes:
                raise InputError(f"no catalog size for --provider {req.provider} --arch {req.arch}; "
                                 "GCP e2 sizes are x86 only: try --arch x86 or --provider hetzner")
            host, choice, carries, size = self._cheapest_size(profile, sizes, req)
            server = ServerChoice(provider=size.provider, size=size.size, vcpu=size.vcpu, arch=size.arch,
                                  monthly_eur=size.monthly_eur, shared_core=size.shared_core)
        return self._build(req, host, choice, carries, server, sizes)

    def _cheapest_size(self, profile, sizes, req):
        results = []
        for size in sizes:
            host = self.host_for_size(size)
            choice, carries = self.best_on_host(profile, host, req.rps, req.p95_ms)
            comfortable = carries and req.rps <= COMFORT_UTILISATION * choice.mid
            if comfortable:
                return host, choice, True, size
            results.append((host, choice, carries, size))
        carrying = [r for r in results if r[2]]
        if carrying:
            return carrying[0]
        return max(results, key=lambda r: r[1].mid)

    def _build(self, req: Request, host: HostShape, choice: _Candidate, carries: bool, server: ServerChoice,
               sizes: list[ServerSize]) -> Recommendation:
        profile, setup = req.profile, choice.setup
        cap = self._usl_cap(profile, setup, host)
        low, mid, high = (min(v, cap) for v in self.fitted.throughput_interval(profile, setup, host))
        warnings: list[str] = []
        evidence = self._evidence(profile, setup, host)
        extrapolated = self._extrapolated(profile, setup, host, warnings)
        fits = self._fits(profile, req, sizes)
        if not carries:
            warnings.append(self._infeasible_warning(req, choice, mid, fits))
        elif req.rps > COMFORT_UTILISATION * mid:
            warnings.append(f"little headroom: {req.rps:g}/s is {req.rps / mid:.0%} of the predicted capacity "
                            f"({mid:.1f}/s); a burst will queue")
        if carries and req.rps > low:
            warnings.append(f"the low end of the capacity interval ({low:.1f}/s) is below {req.rps:g}/s: "
                            "measure your workflow (`n8n-sizer bench`) before relying on it")
        if choice.mode != "queue" and choice.bound.split(":")[0] in ("main", "runners"):
            util = self.model.cpu_utilisation_at(profile, setup, host, min(req.rps, mid))
            if util < 0.6:
                _, alt = self._queue_options(profile, host, req.rps, req.p95_ms)
                warnings.append(f"one process is the ceiling ({choice.bound.split(':')[0]}) while the cores are only "
                                f"~{util:.0%} busy: seed 000's signal for queue mode, where {alt.setup.workers} workers "
                                f"would carry about {alt.mid:.1f}/s on this host")
        if server.shared_core:
            warnings.append(f"{server.size} is shared-core (burstable): sustained capacity uses its {host.vcpu:g} "
                            "vCPU baseline; bursts above it spend CPU credits")
        if server.provider == "gcp":
            warnings.append("no GCP measurement is embedded: GCP sizes are predicted at Hetzner's measured speed")
        warnings.extend(self._measured_errors(profile, setup, host, req.rps, carries))
        ram_idle, ram_peak = self.ram.idle_mb(setup), self.ram.peak_mb(setup)
        size_ram = next((s.ram_mib for s in sizes if s.size == server.size), None)
        if size_ram is not None and ram_peak > RAM_WARN_SHARE * size_ram * 1.048576:
            warnings.append(f"predicted peak stack RAM {ram_peak:.0f} MB is above {RAM_WARN_SHARE:.0%} of "
                            f"{server.size}'s {size_ram} MiB")
        if setup.mode == "queue" and setup.production_limit is None:
            warnings.append("keep N8N_CONCURRENCY_PRODUCTION_LIMIT unset (-1) in queue mode: when set, each worker "
                            "takes its limit from it instead of --concurrency (per worker, not a total)")
        return Recommendation(
            request={"rps": req.rps, "vcpu": req.vcpu, "arch": req.arch, "provider": req.provider,
                     "workload": profile.name, "cpu_ms": profile.code_cpu_ms, "wait_ms": profile.wait_ms,
                     "p95_ms": req.p95_ms},
            mode=choice.mode, workers=setup.workers,
            concurrency=setup.concurrency if setup.mode == "queue" else None,
            runner_concurrency=setup.runner_concurrency, production_limit=setup.production_limit,
            db_pool_size=setup.db_pool_size, postgres_connections=postgres_connections(setup),
            max_connections=recommended_max_connections(setup),
            redis=list(settings.REDIS_SETTINGS) if setup.mode == "queue" else [],
            queue_keep_last=settings.QUEUE_KEEP_LAST_JOBS if setup.mode == "queue" else None,
            capacity_per_s=Interval(low=low, mid=mid, high=high), headroom=mid / req.rps - 1.0, feasible=carries,
            cpu_utilisation=min(self.model.cpu_utilisation_at(profile, setup, host, min(req.rps, mid)), 1.0),
            p95_ms=choice.p95 if carries else None, bound=choice.bound, ram_idle_mb=ram_idle, ram_peak_mb=ram_peak,
            server=server, fits=fits, warnings=warnings, evidence=evidence,
            notes=list(self.notes), extrapolated=extrapolated, setup=setup)

    def _fits(self, profile: WorkflowProfile, req: Request, sizes: list[ServerSize]) -> list[SizeFit]:
        out = []
        for size in sizes:
            choice, carries = self.best_on_host(profile, self.host_for_size(size), req.rps, req.p95_ms)
            out.append(SizeFit(provider=size.provider, size=size.size, vcpu=size.vcpu, arch=size.arch,
                               monthly_eur=size.monthly_eur, mode=choice.mode, workers=choice.setup.workers,
                               capacity_per_s=choice.mid, carries=carries))
        return out

    def _infeasible_warning(self, req: Request, choice: _Candidate, mid: float, fits: list[SizeFit]) -> str:
        what = "queue mode with %d worker(s)" % choice.setup.workers if choice.mode == "queue" else "regular mode"
        head = (f"not sustainable: {req.rps:g}/s is beyond this host; its best setup ({what}) carries about "
                f"{mid:.1f}/s, bound by {choice.bound}. More cores, not more workers, would carry it: ")
        carrying = [f for f in fits if f.carries]
        if carrying:
            f = carrying[0]
            return head + (f"{f.provider} {f.size} ({f.vcpu} vCPU, {f.monthly_eur:.2f} EUR/month) in "
                           f"{f.mode} mode{f' with {f.workers} workers' if f.workers else ''}, about {f.capacity_per_s:.1f}/s")
        if fits:
            best = max(fits, key=lambda f: f.capacity_per_s)
            return head + (f"no single catalog size does; the largest, {best.size}, carries about {best.capacity_per_s:.1f}/s "
                           f"in {best.mode} mode{f' with {best.workers} workers' if best.workers else ''}: spread the load "
                           "over several servers (queue-mode workers on more hosts)")
        return head + "no catalog size matches the filters"

    # --- evidence ------------------------------------------------------------------------------
    def _same_measured(self, m, profile: WorkflowProfile, setup: Setup, host: HostShape) -> bool:
        return (m.workflow == profile.name and m.setup.mode == setup.mode and float(m.hardware.vcpu) == host.vcpu
                and m.hardware.arch == host.arch)

    def _evidence(self, profile: WorkflowProfile, setup: Setup, host: HostShape) -> list[str]:
        pts = [p.measurement for p in self.fitted.points if profile_of(p.measurement).overhead_key == profile.overhead_key]
        pts.sort(key=lambda m: (m.setup.mode != setup.mode, abs(m.setup.workers - setup.workers),
                                abs(float(m.hardware.vcpu) - host.vcpu), m.id))
        return [m.id for m in pts[:8]] + list(self.ram.evidence[:2])

    def _extrapolated(self, profile: WorkflowProfile, setup: Setup, host: HostShape, warnings: list[str]) -> bool:
        if not profile.measured:
            warnings.append(f"extrapolated: the {profile.name} profile borrows the light workflow's measured n8n overhead "
                            f"and adds your {profile.code_cpu_ms:g} ms of Code CPU and {profile.wait_ms:g} ms of waiting")
            return True
        same = [p.measurement for p in self.fitted.points if self._same_measured(p.measurement, profile, setup, host)
                and (setup.mode == "regular" or p.measurement.setup.workers == setup.workers)]
        if same:
            return False
        measured = sorted({(p.measurement.setup.mode, p.measurement.setup.workers, float(p.measurement.hardware.vcpu),
                            p.measurement.hardware.arch) for p in self.fitted.points
                           if p.measurement.workflow == profile.name})
        listed = "; ".join(f"{mode}{f' {w}w' if w else ''} on {v:g} vCPU {a}" for mode, w, v, a in measured)
        warnings.append(f"extrapolated: no measurement of the {profile.name} workflow in {setup.mode} mode"
                        f"{f' with {setup.workers} workers' if setup.workers else ''} on {host.vcpu:g} vCPU {host.arch}; "
                        f"measured: {listed or 'none'}")
        return True

    def _measured_errors(self, profile: WorkflowProfile, setup: Setup, host: HostShape, rate: float,
                         carries: bool) -> list[str]:
        """Failed measurements of this workflow on this host size, for this setup or one with more workers:
        all of them when the rate is past capacity, else those at up to 1.5x the requested rate."""
        out = []
        for m in self.fitted.excluded:
            m = m.measurement
            errors = m.results.errors or 0
            relevant = not carries or (m.load.offered_rps or 0.0) <= 1.5 * rate
            if errors and relevant and self._same_measured(m, profile, setup, host) and m.setup.workers >= setup.workers:
                if m.setup.mode == "regular" and m.setup.production_limit != setup.production_limit:
                    continue
                out.append(f"measured {describe_setup(m)} on {host.vcpu:g} vCPU: {errors} errors at "
                           f"{m.load.offered_rps:g} req/s ({m.id})")
        return out

