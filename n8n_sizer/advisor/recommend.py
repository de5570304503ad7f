"""From a request (rate, hosts, workload) to a recommendation, every number from the fitted model.

Candidates: on every allowed host (a catalog size, or `--vcpu V`) the single-host setups, simplest first
(regular mode; queue mode with 1, 2, ... workers); with `max_hosts` >= 2 also multi-host topologies
(search.py). A candidate's capacity does not depend on the requested rate (its settings are sized at its
own comfortable rate), which keeps the answers consistent:
- the answer is the cheapest candidate (on one host: the simplest setup) that carries the rate
  *comfortably*, i.e. at or below COMFORT_UTILISATION of its capacity and within the p95 target;
- when none does, it is the candidate with the most capacity, and the text names it and what binds it.
So a higher rate never gets less capacity, and neither do bigger hosts when nothing carries the rate.
"""

from __future__ import annotations

import math

from n8n_sizer.advisor import ram, settings
from n8n_sizer.advisor.answer import explain as explain
from n8n_sizer.advisor.answer.base import Basis, Candidate, Recommendation, Request, SingleChoice, SizeFit
from n8n_sizer.advisor.answer.layout import COMFORT_UTILISATION, TopologyModel
from n8n_sizer.advisor.answer.multi import build_topology
from n8n_sizer.advisor.answer.single import build_single
from n8n_sizer.advisor.answer.topology_search import (
    MAX_HOSTS_DEFAULT,
    NEGLIGIBLE_GAIN,
    HostOption,
    Scored,
    TopologySearch,
)
from n8n_sizer.advisor.capacity import HostShape
from n8n_sizer.advisor.catalog import ServerSize, sizes_for
from n8n_sizer.advisor.fit import FittedModel
from n8n_sizer.advisor.pools import RAM_MIB_PER_VCPU_ASSUMED, worker_pool_size
from n8n_sizer.advisor.profiles import WorkflowProfile
from n8n_sizer.advisor.ram import UNLIMITED_MAIN_SLOTS, RamModel
from n8n_sizer.advisor.setup import Setup, most_workers
from n8n_sizer.advisor.usl import UslModel
from n8n_sizer.errors import InputError

__all__ = ["Advisor", "Request", "Recommendation", "COMFORT_UTILISATION", "MAX_HOSTS_DEFAULT"]


class Advisor:
    """Holds the fitted model, the RAM model and any USL fits; answers requests."""

    def __init__(
        self,
        fitted: FittedModel,
        ram: RamModel,
        usl: dict[tuple, UslModel] | None = None,
        notes: list[str] | None = None,
        measurements=(),
    ):
        self.fitted = fitted
        self.model = fitted.model
        self.ram = ram
        self.usl = usl or {}
        self.notes = notes or []
        self._options: dict[tuple, list[Candidate]] = {}
        self._searches: dict[tuple, TopologySearch] = {}
        # Shared-core (burstable) sizes: the longest embedded soak on one gives their latency floor.
        soaks = [
            m for m in measurements if m.hardware.shared_core and m.results.p95_ms is not None and m.load.duration_s
        ]
        self.soak = max(soaks, key=lambda m: m.load.duration_s) if soaks else None
        self.basis = Basis(fitted=fitted, ram=ram, notes=tuple(self.notes), soak=self.soak)

    # --- hosts ---------------------------------------------------------------------------------
    def host_for_size(self, size: ServerSize) -> HostShape:
        # Hetzner sizes run at the speed seed 002 measured on their CPU; GCP has no throughput measurement, so the
        # reference speed.
        return HostShape(vcpu=size.baseline_vcpu, arch=size.arch, host_class=size.host_class, ram_mib=size.ram_mib)

    def host_for_vcpu(self, vcpu: int, arch: str, ram_mib: int | None = None) -> HostShape:
        return HostShape(
            vcpu=float(vcpu),
            arch=arch,
            host_class=self.model.reference_class,
            ram_mib=ram_mib or RAM_MIB_PER_VCPU_ASSUMED * vcpu,
        )

    # --- single-host candidates ----------------------------------------------------------------
    def _usl_cap(self, profile: WorkflowProfile, setup: Setup, host: HostShape) -> float:
        usl = self.usl.get((profile.name, host.vcpu, host.arch))
        return usl.throughput_at(setup.workers) if usl is not None and setup.mode == "queue" else math.inf

    def _capacity(self, profile: WorkflowProfile, setup: Setup, host: HostShape) -> float:
        return min(self.model.throughput_at(profile, setup, host), self._usl_cap(profile, setup, host))

    def _candidate(self, profile: WorkflowProfile, host: HostShape, workers: int) -> Candidate | None:
        """Regular mode (workers 0) or queue mode, settings sized at the setup's own comfortable rate, the executions
        at once (production limit, --concurrency) capped by what the host's memory holds (ram.slots_that_fit, every
        container's limit within the host's RAM less the OS's share); None when the host cannot hold the stack."""
        model = self.model
        asked = cap = None
        if workers:
            probe_cap = self._capacity(profile, Setup(mode="queue", workers=workers, concurrency=1000), host)
            at = COMFORT_UTILISATION * probe_cap
            conc = settings.worker_concurrency(model, profile, host, workers, at)
            probe = Setup(mode="queue", workers=workers, concurrency=conc, held_mb=profile.held_mb)
            d = model.demands(profile, probe, host)
            busy = (model.residence_s(d, host, at) - d.wait_s) * at / workers
            setup = probe.model_copy(update={"db_pool_size": worker_pool_size(conc, busy)})
            cap = self._memory_cap(setup, host)
            if cap == 0:
                return None
            if cap is not None and conc > cap:
                asked = conc
                setup = setup.model_copy(update={"concurrency": cap, "db_pool_size": worker_pool_size(cap, busy)})
        else:
            setup = Setup(mode="regular", db_pool_size=settings.db_pool_size(), held_mb=profile.held_mb)
            cap = self._memory_cap(setup, host)
            if cap == 0:
                return None
            limit = settings.production_limit_for(model, profile, host, self._capacity(profile, setup, host))
            if limit is None and cap is not None and cap < UNLIMITED_MAIN_SLOTS:
                asked, limit = limit, cap  # no limit would let main take more than the host holds: the memory sets one
            elif limit is not None and cap is not None and limit > cap:
                asked, limit = limit, cap
            setup = setup.model_copy(update={"production_limit": limit})
        mid = self._capacity(profile, setup, host)
        runner = settings.runner_concurrency(model, profile, setup, host, COMFORT_UTILISATION * mid)
        setup = setup.model_copy(update={"runner_concurrency": runner})
        if host.ram_mib is not None and ram.stack_limit_mib(setup) > ram.usable_mib(host.ram_mib):
            # The runner's limit at its concurrency took some of the room: the executions at once give it back.
            cap = ram.slots_that_fit(setup, host.ram_mib)
            if cap == 0:
                return None
            field = "production_limit" if setup.mode == "regular" else "concurrency"
            asked = asked if asked is not None else getattr(setup, field)
            setup = ram.with_slots(setup, cap)
            if workers:
                setup = setup.model_copy(update={"db_pool_size": worker_pool_size(cap, busy)})
            mid = self._capacity(profile, setup, host)
        mode = "queue" if workers else "regular-limit" if setup.production_limit else "regular"
        capped = asked is not None or (setup.production_limit is not None and setup.production_limit == cap)
        return Candidate(
            mode,
            setup,
            mid,
            model.binding_bound(profile, setup, host),
            slots_asked=asked,
            slots_memory_cap=cap if capped else None,
        )

    @staticmethod
    def _memory_cap(setup: Setup, host: HostShape) -> int | None:
        """The most executions at once the host's memory holds for this setup (0: not even one), None where the
        host's RAM is unknown (a measured host)."""
        return None if host.ram_mib is None else ram.slots_that_fit(setup, host.ram_mib)

    def host_options(self, profile: WorkflowProfile, host: HostShape) -> list[Candidate]:
        """Regular, then queue with 1 .. max_workers_on_host workers, simplest first."""
        key = (profile, host)
        if key not in self._options:
            found = [self._candidate(profile, host, w) for w in range(0, max_workers_on_host(host) + 1)]
            self._options[key] = [c for c in found if c is not None]  # a setup the host's memory cannot hold is none
        return self._options[key]

    def most_on_host(self, profile: WorkflowProfile, host: HostShape) -> Candidate:
        """The simplest setup within a negligible gain of the most capacity on this host."""
        options = self.host_options(profile, host)
        top = max(c.mid for c in options)
        return next(c for c in options if c.mid >= (1.0 - NEGLIGIBLE_GAIN) * top)

    def _p95(self, profile: WorkflowProfile, c: Candidate, host: HostShape, rate: float, shared: bool) -> float | None:
        if rate >= c.mid:
            return None
        p95 = self.model.p95_ms_at(profile, c.setup, host, rate)
        if shared and self.soak is not None:
            p95 = max(p95, self.soak.results.p95_ms)  # the soak's measured tail, not the model's 50 ms
        return p95

    def best_on_host(
        self, profile: WorkflowProfile, host: HostShape, rate: float, p95_target: float | None, shared: bool = False
    ) -> tuple[Candidate, bool, bool, float | None] | None:
        """(setup, comfortable, carries, p95): the simplest setup that carries the rate comfortably, else the
        one with the most capacity (ties: the simpler); None when the host's memory holds no setup at all."""
        options = self.host_options(profile, host)
        if not options:
            return None
        for c in options:
            p95 = self._p95(profile, c, host, rate, shared)
            if rate <= COMFORT_UTILISATION * c.mid and (p95_target is None or (p95 is not None and p95 <= p95_target)):
                return c, True, True, p95
        best = self.most_on_host(profile, host)
        p95 = self._p95(profile, best, host, rate, shared)
        carries = rate < best.mid and (p95_target is None or (p95 is not None and p95 <= p95_target))
        return best, False, carries, p95

    # --- the answer ----------------------------------------------------------------------------
    def _options_for(self, req: Request) -> tuple[list[tuple[HostOption, bool]], list[ServerSize]]:
        sizes = sizes_for(req.provider, req.arch)
        if req.vcpu is not None:
            same = [s for s in sizes if s.vcpu == req.vcpu and not s.shared_core]
            s = same[0] if same else None
            return [
                (
                    HostOption(
                        self.host_for_vcpu(req.vcpu, req.arch, s.ram_mib if s else None),
                        s.provider if s else req.provider,
                        s.size if s else None,
                        req.vcpu,
                        s.monthly_eur if s else None,
                        s.ram_mib if s else None,
                    ),
                    False,
                )
            ], sizes
        if not sizes:
            raise InputError(
                f"no catalog size for --provider {req.provider} --arch {req.arch}; "
                "GCP e2 sizes are x86 only: try --arch x86 or --provider hetzner"
            )
        return [
            (HostOption(self.host_for_size(s), s.provider, s.size, s.vcpu, s.monthly_eur, s.ram_mib), s.shared_core)
            for s in sizes
        ], sizes

    def recommend(self, req: Request) -> Recommendation:
        profile = req.profile
        options, sizes = self._options_for(req)
        multi_options = [o for o, shared in options if not shared]
        search = None
        if req.max_hosts >= 2 and multi_options:
            key = (profile, tuple(multi_options), req.max_hosts)
            search = self._searches.get(key)
            if search is None:
                search = self._searches[key] = TopologySearch(self.model, profile, multi_options, req.max_hosts)
        answer, singles = self._cheapest_comfortable(req, options, search, req.p95_ms)
        carries = answer is not None
        if answer is None and req.p95_ms is not None:
            # A latency miss: the rate is carried, the p95 target is not. Answer what carries the rate and say so.
            answer, _ = self._cheapest_comfortable(req, options, search, None)
        if answer is None:
            most = search.most_capacity(req.rps) if search is not None else None
            best_single = max(singles, key=lambda t: t[0].cand.mid)
            if most is not None and most.capacity_per_s > best_single[0].cand.mid:
                answer = most
                p95 = TopologyModel(self.model, profile, most.layout).p95_ms(req.rps)
                carries = req.rps < most.capacity_per_s and (req.p95_ms is None or p95 <= req.p95_ms)
            else:
                answer, carries = best_single[0], best_single[2]
        fits = self._fits(profile, req, sizes)
        if isinstance(answer, SingleChoice):
            return self._build_single(req, answer, carries, fits, sizes)
        return self._build_topology(req, answer, carries, fits)

    def answer(self, req: Request, cluster_hosts: int = MAX_HOSTS_DEFAULT) -> Recommendation:
        """`recommend`, with the question asked first and the ways past it (answer/alternatives.py)."""
        from n8n_sizer.advisor.answer.alternatives import with_alternatives

        return with_alternatives(self.recommend, req, self.recommend(req), cluster_hosts)

    def _cheapest_comfortable(self, req: Request, options, search, p95_target):
        """The cheapest candidate (one host, or a topology) that carries the rate comfortably within the
        p95 target, or None; and every host's own answer."""
        singles = []
        for opt, shared in options:
            best = self.best_on_host(req.profile, opt.shape, req.rps, p95_target, shared)
            if best is None:
                continue  # the host's RAM cannot hold the stack (ram.slots_that_fit): never chosen
            c, comfortable, carries, p95 = best
            singles.append((SingleChoice(opt, shared, c, p95), comfortable, carries))
        if not singles:
            raise InputError(
                f"no server of this request has the memory for n8n's stack (at least "
                f"{ram.stack_limit_mib(Setup(mode='regular', production_limit=1)):,} MiB of containers plus the "
                "OS's share, docs/deploy.md#memory-limits); ask for a larger one, e.g. --vcpu 2"
            )
        found = [(_cost1(s.option), 0, s) for s, ok, _ in singles if ok]
        multi = search.carrying(req.rps, p95_target) if search is not None else None
        if multi is not None:
            found.append((multi.cost, 1, multi))
        return (min(found, key=lambda t: (t[0], t[1]))[2] if found else None), singles

    def _fits(self, profile: WorkflowProfile, req: Request, sizes: list[ServerSize]) -> list[SizeFit]:
        """Every catalog size of the provider and arch, judged by the verdict's rule (the warnings name a larger
        size from it; the answer shows the ones --vcpu allows, `_finish`)."""
        out = []
        for size in sizes:
            best = self.best_on_host(profile, self.host_for_size(size), req.rps, req.p95_ms, size.shared_core)
            if best is None:
                continue  # too little memory for the stack: not a size to offer
            c, comfortable, carries, _ = best
            out.append(
                SizeFit(
                    provider=size.provider,
                    size=size.size,
                    vcpu=size.vcpu,
                    arch=size.arch,
                    monthly_eur=size.monthly_eur,
                    mode=c.mode,
                    workers=c.setup.workers,
                    capacity_per_s=c.mid,
                    carries=carries,
                    comfortable=comfortable,
                )
            )
        return out

    def _build_single(self, req: Request, s: SingleChoice, carries: bool, fits, sizes) -> Recommendation:
        c, host = s.cand, s.option.shape
        queue_alt = None  # the queue-mode setup a regular answer would move to, where one process is the ceiling
        if c.mode != "queue" and c.bound.name in ("main", "runners"):
            alt = max(self.host_options(req.profile, host), key=lambda o: o.mid)
            queue_alt = alt if alt.setup.mode == "queue" and alt.mid > c.mid else None
        usl_cap = self._usl_cap(req.profile, c.setup, host)
        return _finish(req, build_single(self.basis, req, s, carries, fits, usl_cap, queue_alt))

    def _build_topology(self, req: Request, s: Scored, carries: bool, fits) -> Recommendation:
        return _finish(req, build_topology(self.basis, req, s, carries, fits))

    def evaluate_one_host(self, req: Request, setup: Setup, option: HostOption) -> Recommendation:
        """The answer for one host the user gives (a one-host topology): exactly this setup, no search."""
        profile, host = req.profile, option.shape
        mid = self._capacity(profile, setup, host)
        mode = "queue" if setup.mode == "queue" else "regular-limit" if setup.production_limit else "regular"
        cand = Candidate(mode, setup, mid, self.model.binding_bound(profile, setup, host))
        p95 = self._p95(profile, cand, host, req.rps, False)
        carries = req.rps < mid and (req.p95_ms is None or (p95 is not None and p95 <= req.p95_ms))
        fits = self._fits(profile, req, sizes_for(req.provider, req.arch))
        rec = self._build_single(
            req.model_copy(update={"given": True, "max_hosts": 1}),
            SingleChoice(option, False, cand, p95),
            carries,
            fits,
            [],
        )
        return rec.model_copy(
            update={"request": {**rec.request, "max_hosts": None, "topology": {"hosts": 1, "machine_vcpu": None}}}
        )

    def evaluate(self, req: Request, layout, given_hosts: int | None = None) -> Recommendation:
        """The answer for a topology the user gives (answer/given.py): no search, the same model."""
        from n8n_sizer.advisor.answer.given import evaluate

        fits = self._fits(req.profile, req, sizes_for(req.provider, req.arch))
        return _finish(req, evaluate(self.basis, req, layout, fits, given_hosts))


def _finish(req: Request, rec: Recommendation) -> Recommendation:
    """The verdict's comfort rule and the concurrency setting in words, the same for every kind of answer."""
    mid = rec.capacity_per_s.mid
    comfortable = rec.feasible and req.rps <= COMFORT_UTILISATION * mid
    fits = [f for f in rec.fits if req.vcpu is None or f.vcpu == req.vcpu]
    return rec.model_copy(
        update={
            "comfortable": comfortable,
            "concurrency_setting": explain.concurrency_setting(rec),
            "fits": fits,
            "held_mb": req.profile.held_mb,
        }
    )


def max_workers_on_host(host: HostShape) -> int:
    """Workers on a host that also runs main, Postgres and Redis (setup.most_workers: one per 2 vCPU). Grows with
    the host, so a bigger host never has fewer setups to choose from."""
    return most_workers(host.vcpu, shared=True)


def _cost1(opt: HostOption) -> tuple:
    return (opt.monthly_eur if opt.monthly_eur is not None else math.inf, 1)
