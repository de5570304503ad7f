"""From a request (rate, hosts, workload) to a recommendation, every number from the fitted model.

Candidates: on every allowed host (a catalog size, or `--vcpu V`) the single-host setups, simplest first
(regular mode; queue mode with 1, 2, ... workers); with `max_hosts` >= 2 also multi-host topologies
(answer/topology_search.py). A candidate's capacity does not depend on the requested rate (its settings are sized at its
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
from n8n_sizer.advisor.catalog import ServerSize, estimate_price, sizes_for
from n8n_sizer.advisor.fit import FittedModel, is_user_point
from n8n_sizer.advisor.pools import RAM_MIB_PER_VCPU_ASSUMED, worker_pool_size
from n8n_sizer.advisor.profiles import WorkflowProfile
from n8n_sizer.advisor.ram import UNLIMITED_MAIN_SLOTS, RamModel
from n8n_sizer.advisor.setup import Setup, most_workers
from n8n_sizer.advisor.usl import UslModel
from n8n_sizer.errors import InputError

__all__ = ["Advisor", "Request", "Recommendation", "COMFORT_UTILISATION", "MAX_HOSTS_DEFAULT"]


class Advisor:
    """Holds the fitted model, the RAM model, any USL fits and the notes on the ones refused; answers requests."""

    def __init__(
        self,
        fitted: FittedModel,
        ram: RamModel,
        usl: dict[tuple, UslModel] | None = None,
        notes: dict[tuple, str] | None = None,
        measurements=(),
    ):
        self.fitted = fitted
        self.model = fitted.model
        self.ram = ram
        self.usl = usl or {}
        self.notes = dict(notes or {})  # (workflow, vCPU, arch) -> what the contention fit lacks there
        self._options: dict[tuple, list[Candidate]] = {}
        self._searches: dict[tuple, TopologySearch] = {}
        self._fits_seen: dict[tuple, list[SizeFit]] = {}
        # Shared-core (burstable) sizes: the longest embedded soak on one gives their latency floor.
        soaks = [
            m for m in measurements if m.hardware.shared_core and m.results.p95_ms is not None and m.load.duration_s
        ]
        self.soak = max(soaks, key=lambda m: m.load.duration_s) if soaks else None
        self.basis = Basis(fitted=fitted, ram=ram, notes=self.notes, soak=self.soak)
        self.user_rows = tuple(m for m in measurements if is_user_point(m))

    # --- hosts ----------------------------------------------------------------------------------
    def host_for_size(self, size: ServerSize) -> HostShape:
        """A catalog size at its own speed: Hetzner's at the speed seed 002 measured on its CPU (a CX23's Skylake
        slower than a CX33's EPYC-Rome); GCP has no throughput measurement, so the reference speed."""
        return HostShape(vcpu=size.baseline_vcpu, arch=size.arch, host_class=size.host_class, ram_mib=size.ram_mib)

    def host_for_vcpu(self, vcpu: int, arch: str, ram_mib: int | None = None) -> HostShape:
        """A server of `vcpu` the catalog does not hold: the host your own results measured at that size (its
        measured speed), else one at the reference host's speed."""
        measured = self.user_host(vcpu, arch)
        return HostShape(
            vcpu=float(vcpu),
            arch=arch,
            host_class=measured.host_class if measured is not None else self.model.reference_class,
            ram_mib=ram_mib or (measured.ram_mib if measured is not None else None) or RAM_MIB_PER_VCPU_ASSUMED * vcpu,
        )

    def user_host(self, vcpu: int, arch: str) -> HostShape | None:
        """The host of `vcpu` and `arch` your own bench results measured (`advise --results`), or None: the
        reference class first (the refit makes your host the reference), else the class of most of its rows."""
        counts: dict[tuple[str, int | None], int] = {}
        for m in self.user_rows:
            if float(m.hardware.vcpu) == float(vcpu) and m.hardware.arch == arch:
                key = (m.hardware.host_class, m.hardware.ram_mib)
                counts[key] = counts.get(key, 0) + 1
        if not counts:
            return None
        (cls, ram), _ = max(counts.items(), key=lambda kv: (kv[0][0] == self.model.reference_class, kv[1]))
        return HostShape(vcpu=float(vcpu), arch=arch, host_class=cls, ram_mib=ram)

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
        """(setup, comfortable, carries, p95): the verdict's rule on one host, the same for the answer, the size table
        and every alternative: the simplest setup that carries the rate comfortably within the p95 target; else
        (a latency miss) the simplest that carries it comfortably; else the one with the most capacity (ties: the
        simpler). `carries`: below capacity and within the p95 target. None when the host's memory holds no setup at
        all (ram.slots_that_fit)."""
        options = self.host_options(profile, host)
        if not options:
            return None
        fallback = None
        for c in options:
            p95 = self._p95(profile, c, host, rate, shared)
            if rate <= COMFORT_UTILISATION * c.mid:
                if p95_target is None or (p95 is not None and p95 <= p95_target):
                    return c, True, True, p95
                fallback = fallback or (c, p95)
        best, p95 = fallback or (self.most_on_host(profile, host), None)
        if fallback is None:
            p95 = self._p95(profile, best, host, rate, shared)
        carries = rate < best.mid and (p95_target is None or (p95 is not None and p95 <= p95_target))
        return best, False, carries, p95

    # --- the answer ----------------------------------------------------------------------------
    def _options_for(self, req: Request) -> tuple[list[tuple[HostOption, bool]], list[ServerSize]]:
        """The hosts the answer may use. With --vcpu N, one: the host your results measured at N vCPU (its own
        speed), else the cheapest dedicated catalog size of N vCPU (its own speed, the one the answer names), else
        an N-vCPU server at the reference speed, priced from the provider's rates as an estimate
        (catalog.estimate_price)."""
        sizes = sizes_for(req.provider, req.arch)
        if req.vcpu is not None:
            same = [s for s in sizes if s.vcpu == req.vcpu and not s.shared_core]
            if same and self.user_host(req.vcpu, req.arch) is None:
                s = same[0]
                option = HostOption(self.host_for_size(s), s.provider, s.size, s.vcpu, s.monthly_eur, s.ram_mib)
            else:
                host = self.host_for_vcpu(req.vcpu, req.arch)
                priced = estimate_price(req.provider, req.arch, req.vcpu, host.ram_mib)
                option = HostOption(host, req.provider, None, req.vcpu, priced[0] if priced else None, None)
            return [(option, False)], sizes
        if not sizes:
            raise InputError(
                f"no catalog size for --provider {req.provider} --arch {req.arch}; "
                "GCP e2 sizes are x86 only: try --arch x86 or --provider hetzner"
            )
        return [
            (HostOption(self.host_for_size(s), s.provider, s.size, s.vcpu, s.monthly_eur, s.ram_mib), s.shared_core)
            for s in sizes
        ], sizes

    def _search(self, req: Request, options) -> TopologySearch | None:
        multi_options = [o for o, shared in options if not shared]
        if req.max_hosts < 2 or not multi_options:
            return None
        key = (req.profile, tuple(multi_options), req.max_hosts)
        if key not in self._searches:
            self._searches[key] = TopologySearch(self.model, req.profile, multi_options, req.max_hosts)
        return self._searches[key]

    def _choose(self, req: Request, rate: float) -> tuple[SingleChoice | Scored, list[ServerSize]]:
        """What answers `req` when it is sized for `rate` (the asked rate, or a higher one a burst needs): the
        cheapest candidate that carries `rate` comfortably within the p95 target; else, a latency miss, the
        cheapest that carries it comfortably; else the one with the most capacity."""
        options, sizes = self._options_for(req)
        search = self._search(req, options)
        singles = []
        for opt, shared in options:
            best = self.best_on_host(req.profile, opt.shape, rate, req.p95_ms, shared)
            if best is None:
                continue  # the host's RAM cannot hold the stack (ram.slots_that_fit): never chosen
            c, comfortable, _, p95 = best
            singles.append((SingleChoice(opt, shared, c, p95), comfortable, rate <= COMFORT_UTILISATION * c.mid))
        if not singles:
            raise InputError(
                f"no server of this request has the memory for n8n's stack (at least "
                f"{ram.stack_limit_mib(Setup(mode='regular', production_limit=1)):,} MiB of containers plus the "
                "OS's share, docs/deploy.md#memory-limits); ask for a larger one, e.g. --vcpu 2"
            )
        for level, target in ((1, req.p95_ms), (2, None)):
            found = [(_cost1(s.option), 0, s) for s, ok, loose in singles if (ok if level == 1 else loose)]
            multi = search.carrying(rate, target) if search is not None else None
            if multi is not None:
                found.append((multi.cost, 1, multi))
            if found:
                return min(found, key=lambda t: (t[0], t[1]))[2], sizes
            if req.p95_ms is None:
                break
        best_single = max((s for s, _, _ in singles), key=lambda s: s.cand.mid)
        most = search.most_capacity(rate) if search is not None else None
        if most is not None and most.capacity_per_s > best_single.cand.mid:
            return most, sizes
        return best_single, sizes

    def p95_at(self, req: Request, rate: float, sized_for: float | None = None) -> float | None:
        """The p95 (ms, server side) at `rate` of what `recommend(req, sized_for)` answers; None at or past its
        capacity."""
        answer, _ = self._choose(req, req.rps if sized_for is None else sized_for)
        return self._p95_of(req, answer, rate)

    def _p95_of(self, req: Request, answer: SingleChoice | Scored, rate: float) -> float | None:
        if isinstance(answer, SingleChoice):
            return self._p95(req.profile, answer.cand, answer.option.shape, rate, answer.shared_core)
        p95 = TopologyModel(self.model, req.profile, answer.layout).p95_ms(rate)
        return None if not math.isfinite(p95) else p95

    def recommend(self, req: Request, sized_for: float | None = None) -> Recommendation:
        """The answer to `req`: chosen for `sized_for` when given (a burst sizes up), judged at `req.rps` (the
        headroom, p95, utilisation and verdict are always those at the rate asked)."""
        rate = req.rps if sized_for is None else max(sized_for, req.rps)
        answer, sizes = self._choose(req, rate)
        p95 = self._p95_of(req, answer, req.rps)
        mid = answer.cand.mid if isinstance(answer, SingleChoice) else answer.capacity_per_s
        carries = req.rps < mid and (req.p95_ms is None or (p95 is not None and p95 <= req.p95_ms))
        fits = self._fits(req.profile, req, sizes, rate)
        if isinstance(answer, SingleChoice):
            answer = SingleChoice(answer.option, answer.shared_core, answer.cand, p95)
            rec = self._build_single(req, answer, carries, fits, sizes)
        else:
            rec = self._build_topology(req, answer, carries, fits)
        return self._with_estimate(req, rec)

    def _with_estimate(self, req: Request, rec: Recommendation) -> Recommendation:
        """An answer on servers the catalog does not hold (`--vcpu` off the catalog) is priced from the provider's
        rates: it says so, and how the rate was derived."""
        if not rec.price_estimated or req.vcpu is None:
            return rec
        host = self.host_for_vcpu(req.vcpu, req.arch)
        priced = estimate_price(req.provider, req.arch, req.vcpu, host.ram_mib)
        if priced is None:
            return rec
        note = explain.price_estimate_warning(req.vcpu, req.arch, host.ram_mib, *priced)
        return rec.model_copy(update={"warnings": [*rec.warnings, note]})

    def answer(
        self, req: Request, cluster_hosts: int = MAX_HOSTS_DEFAULT, sized_for: float | None = None
    ) -> Recommendation:
        """`recommend`, with the question asked first and the ways past it (answer/alternatives.py), each sized for
        the same rate."""
        from n8n_sizer.advisor.answer.alternatives import with_alternatives

        def recommend(r: Request) -> Recommendation:
            return self.recommend(r, sized_for)

        return with_alternatives(recommend, req, recommend(req), cluster_hosts)

    def _fits(
        self, profile: WorkflowProfile, req: Request, sizes: list[ServerSize], rate: float | None = None
    ) -> list[SizeFit]:
        """Every catalog size of the provider and arch, each with the setup the verdict's rule picks on it for `rate`
        (the rate the answer is sized for) and judged, as the verdict is, at the rate asked (the warnings name a
        larger size from it; the answer shows the ones --vcpu allows, `_finish`)."""
        rate = req.rps if rate is None else rate
        key = (profile, tuple(sizes), req.rps, req.p95_ms, rate)  # the alternatives ask it again: answered once
        if key not in self._fits_seen:
            self._fits_seen[key] = self._fits_of(profile, req, sizes, rate)
        return self._fits_seen[key]

    def _fits_of(self, profile: WorkflowProfile, req: Request, sizes: list[ServerSize], rate: float) -> list[SizeFit]:
        out = []
        for size in sizes:
            host = self.host_for_size(size)
            best = self.best_on_host(profile, host, rate, req.p95_ms, size.shared_core)
            if best is None:
                continue  # too little memory for the stack: not a size to offer
            c, comfortable, carries, p95 = best
            if rate != req.rps:
                p95 = self._p95(profile, c, host, req.rps, size.shared_core)
                carries = req.rps < c.mid and (req.p95_ms is None or (p95 is not None and p95 <= req.p95_ms))
                comfortable = carries and req.rps <= COMFORT_UTILISATION * c.mid
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
    estimated = any(g.size is None and g.monthly_eur is not None for g in rec.topology)
    return rec.model_copy(
        update={
            "comfortable": comfortable,
            "concurrency_setting": explain.concurrency_setting(rec),
            "fits": fits,
            "price_estimated": estimated,
            "held_mb": req.profile.held_mb,
        }
    )


def max_workers_on_host(host: HostShape) -> int:
    """Workers on a host that also runs main, Postgres and Redis (setup.most_workers: one per 2 vCPU). Grows with
    the host, so a bigger host never has fewer setups to choose from."""
    return most_workers(host.vcpu, shared=True)


def _cost1(opt: HostOption) -> tuple:
    return (opt.monthly_eur if opt.monthly_eur is not None else math.inf, 1)
