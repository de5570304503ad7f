"""The capacity model: operational laws over fitted CPU demands per execution.

Every execution costs CPU in the process that receives the webhook (main), in the process that runs it
(main in regular mode, a worker in queue mode), in its task runner (Code nodes) and in Postgres. An n8n
process is one event loop plus helper threads: notes/real-n8n.md saw main at 1.3-1.6 cores (expressions run
in isolated-vm off the loop's thread; GC and libuv threads add more), so a process's ceiling is
`process_cores` cores, a parameter the fit pins with the per-role CPU rows (worker 60 ms and main 12 ms per
execution beside 25.5/s on 2 cores, notes/real-n8n.md). A task runner runs Code nodes on its one loop:
seed 000's single runner topped out at 1 core (5.3/s x 187 ms). By the utilisation law (U = X * D),
throughput X on a host with V cores is bounded by

    X <= (V - idle) / D_total           (all cores busy, less each process's idle CPU)
    X <= process_cores / D_p            for each n8n process p (main, each worker)
    X <= 1 / D_runner                   for each task runner
    X <= slots / R(X)                   (Little's law: at most `slots` executions in flight, each for R seconds)

and the model predicts the smallest of these bounds (a soft minimum, so the knee where two bounds meet is
rounded as measured systems are). The demands are fitted from the embedded measurements (see `fit.py`);
this module only evaluates them.

Demands are seconds of CPU per execution on the reference host; a host class multiplies them by its speed
factor (and ARM by `arm_factor`). Queue mode multiplies n8n's overhead by `queue_factor` (Bull/Redis, the
hand-off between main and a worker, the worker re-reading the workflow), and splits it between main
(`main_share_queue`) and the worker (`worker_share_queue`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from n8n_sizer.advisor.measurements import LAB_ENVIRONMENT, environment_of
from n8n_sizer.advisor.profiles import WorkflowProfile
from n8n_sizer.advisor.setup import Setup

# Sharpness of the soft minimum: (sum b_i^-k)^(-1/k). With k = 20, two equal bounds give 0.966 of either;
# one bound 30% above the other changes the result by < 0.1%.
SOFTMIN_K = 20.0
# Squared coefficient of variation of service times for the latency approximation (Kingman / Sakasegawa):
# n8n executions of one workflow are close to deterministic; 0.5 leaves room for GC pauses and DB writes.
SERVICE_CV2 = 0.5
# ln(20): the 95th percentile of an exponential wait is ln(20) = 3.0 times its mean.
P95_OF_EXPONENTIAL = math.log(20.0)
# CPU an idle n8n process and its runner keep busy (Bull's stalled-job checks, heartbeats, the runner's
# health pings, the database ping every 2 s, a /metrics scrape). The prior; the fit pins `idle_cores` where
# per-role rows of one setup were measured at two rates (fit.predict_demand). It makes the N-th worker on a
# full host cost a little, so the search's "most capacity" has an interior optimum instead of "as many
# workers as allowed".
PROCESS_IDLE_CORES = 0.02
RUNNER_CORES = 1.0  # seed 000: one runner at 187 ms of Code CPU topped out at 5.3/s = one core


@dataclass(frozen=True)
class HostShape:
    """What the model needs to know of a host: sustained cores, architecture, and whose speed it has."""

    vcpu: float
    arch: str
    host_class: str
    ram_mib: int | None = None  # None where unknown (a measured host); bounds regular mode's production limit


@dataclass(frozen=True)
class Demands:
    """CPU seconds per execution on this host, by role, and the time an execution waits without CPU."""

    total_s: float
    main_s: float
    worker_s: float  # per execution, in the worker that runs it (0 in regular mode)
    runner_s: float  # per execution, in the task runner (the Code nodes)
    path_s: float  # CPU on one execution's critical path (main + worker + runner)
    wait_s: float


@dataclass(frozen=True)
class Bound:
    name: str  # cpu | main | workers | runners | slots
    per_s: float
    why: str


def softmin(values: list[float], k: float = SOFTMIN_K) -> float:
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return math.inf
    lo = min(finite)
    return lo * sum((lo / v) ** k for v in finite) ** (-1.0 / k)


def sakasegawa_wait_factor(rho: float, servers: float) -> float:
    """Mean queueing delay in units of service time for an M/M/c queue (Sakasegawa's approximation).

    Wq / S ~= rho^(sqrt(2(c+1)) - 1) / (c (1 - rho)). Exact for c = 1 (rho / (1 - rho)).
    """
    if rho >= 1.0:
        return math.inf
    if rho <= 0.0:
        return 0.0
    c = max(servers, 1.0)
    return rho ** (math.sqrt(2.0 * (c + 1.0)) - 1.0) / (c * (1.0 - rho))


class CapacityModel:
    """Fitted parameters plus the laws above. Methods are named after the questions they answer."""

    def __init__(self, params: dict[str, float], reference_class: str):
        self.params = dict(params)
        self.reference_class = reference_class

    @property
    def idle_cores(self) -> float:
        """CPU one idle n8n process keeps busy (fitted where per-role rows speak, else the prior)."""
        return self.params.get("idle_cores", PROCESS_IDLE_CORES)

    def idle_cores_on(self, host: HostShape, role: str = "main") -> float:
        """CPU one idle n8n process of `role` keeps busy on `host`: `idle_cores` x its environment's factor
        (`idle:<host class>`, fitted where per-role rows of that class measured it, else 1) x the role's own factor
        (`idle_role:worker`, `idle_role:webhook`, relative to main; fitted where rest windows measured that role,
        else 1) x that role's factor in its environment (`idle_role:worker@<class>`, where its rest windows were). Idle CPU is timers and polls, not work per execution, so it does not follow a host's speed factor:
        the lab's quota-bound hosts measured about a third of the local stack's, and an idle main 5-10 times an
        idle worker (docs/findings/role-costs-measured.md)."""
        return (
            self.idle_cores
            * self.params.get(f"idle:{host.host_class}", 1.0)
            * self.params.get(f"idle_role:{role}", 1.0)
            * self.params.get(f"idle_role:{role}@{environment_of(host.host_class)}", 1.0)
        )

    def idle_of(self, host: HostShape, main: int = 0, webhook: int = 0, workers: int = 0) -> float:
        """CPU a host's idle n8n processes keep busy: each role's processes x that role's idle cores."""
        counts = (("main", main), ("webhook", webhook), ("worker", workers))
        return sum(n * self.idle_cores_on(host, role) for role, n in counts if n)

    @property
    def process_cores(self) -> float:
        """Cores one n8n process can keep busy (its loop plus helper threads)."""
        return self.params.get("process_cores", 1.0)

    def process_cores_on(self, vcpu: float) -> float:
        """Cores one n8n process keeps busy on a host of `vcpu`: `process_cores`, never more than the host has."""
        return min(max(vcpu, 1e-9), self.process_cores)

    # --- demands -------------------------------------------------------------------------------
    def host_factor(self, host: HostShape) -> float:
        """CPU time multiplier of a host relative to the reference host class."""
        speed = 1.0 if host.host_class == self.reference_class else self.params.get(f"speed:{host.host_class}", 1.0)
        return speed * (self.params["arm_factor"] if host.arch == "arm" else 1.0)

    def usable_cores(self, host: HostShape) -> float:
        """Cores a stack at its ceiling keeps busy: vCPU x `cpu_usable`, fitted (the queue-mode test's stack used
        3.2-3.5 of its 4 cores at its ceiling with 2 workers and 3.6 with 4: the hypervisor, the OS and the load
        generator keep the rest). A lab host's share of its quota is measured apart (answer/lab_points.py)."""
        share = 1.0 if environment_of(host.host_class) == LAB_ENVIRONMENT else self.params.get("cpu_usable", 1.0)
        return host.vcpu * share

    def crowding(self, host: HostShape, processes: int) -> float:
        """CPU time multiplier of every process on a host shared by `processes` n8n processes (main, workers,
        webhook processors; each with its task runner): 1 + `crowding` x (processes - 1) / vCPU (a host of less than
        one vCPU, a lab host's quota, counted as one: switching is per process, not per fraction of a core). More processes on
        the same cores switch more and share caches: the queue-mode test's 4 workers on 4 vCPU answered 9.3/s
        against 8.6/s for 2 (3.5 cores busy with 2, 3.6 with 4), and two workers on 2 cores carried less than one
        (notes/real-n8n.md: 24.5 vs 25.5/s light; 12.9 vs 15.4/s with a Code node). Fitted; a lab host runs one
        n8n process, so its rows say the factor is 1 there."""
        return 1.0 + self.params.get("crowding", 0.0) * max(0, processes - 1) / max(host.vcpu, 1.0)

    def overhead_s(self, profile: WorkflowProfile) -> float:
        """n8n's CPU per execution outside Code nodes: the fitted figure of the profile's workflow, scaled by its
        per-node price where the workflow was priced from its nodes (1 otherwise)."""
        return self.params[f"overhead:{profile.overhead_key}"] * profile.overhead_ratio

    def runner_s(self, profile: WorkflowProfile) -> float:
        """Task-runner CPU per execution on the reference host: the Code nodes' JavaScript (x runner_factor) plus
        one round trip per Code node (fitted from the kernel's per-role counts). The Code nodes' CPU was measured on
        a host (the profile's `code_cpu_class`: seed 000's 187 ms on its own server): put at the reference host's
        speed first, so that the host it is scored on does not count that host's speed twice."""
        trip = self.params.get("runner_round_trip_ms", 0.0) / 1000.0
        code = profile.code_cpu_s * self.params["runner_factor"] / self.class_factor(profile.code_cpu_class)
        return code + profile.code_nodes * trip

    def class_factor(self, host_class: str | None) -> float:
        """CPU time on `host_class` relative to the reference host (1 for the reference or an unknown class)."""
        if host_class is None or host_class == self.reference_class:
            return 1.0
        return self.params.get(f"speed:{host_class}", 1.0)

    def demands(self, profile: WorkflowProfile, setup: Setup, host: HostShape) -> Demands:
        h = self.host_factor(host) * self.crowding(host, setup.n8n_processes)
        runner = self.runner_s(profile) * h
        overhead = self.overhead_s(profile) * h
        if setup.mode == "regular":
            # With SQLite the database runs inside main: main carries the whole overhead.
            main = (1.0 if setup.db == "sqlite" else self.params["main_share_regular"]) * overhead
            return Demands(
                total_s=overhead + runner,
                main_s=main,
                worker_s=0.0,
                runner_s=runner,
                path_s=main + runner,
                wait_s=profile.wait_s,
            )
        q_overhead = overhead * self.params["queue_factor"]
        main = self.params["main_share_queue"] * q_overhead
        worker = self.params["worker_share_queue"] * q_overhead
        return Demands(
            total_s=q_overhead + runner,
            main_s=main,
            worker_s=worker,
            runner_s=runner,
            path_s=main + worker + runner,
            wait_s=profile.wait_s,
        )

    # --- bounds --------------------------------------------------------------------------------
    def residence_s(self, d: Demands, host: HostShape, throughput_per_s: float) -> float:
        """Time one execution is in flight at a given throughput: its wait, its CPU path, and the CPU queue."""
        rho = throughput_per_s * d.total_s / host.vcpu
        stretch = 1.0 + sakasegawa_wait_factor(rho, host.vcpu)
        return d.wait_s + d.path_s * stretch

    def slots(self, setup: Setup) -> int | None:
        """Executions allowed in flight at once: workers x concurrency, or the production limit."""
        return setup.max_parallel_executions

    def bounds(self, profile: WorkflowProfile, setup: Setup, host: HostShape) -> list[Bound]:
        d = self.demands(profile, setup, host)
        pc = self.process_cores_on(host.vcpu)
        free = max(self.usable_cores(host) - self.idle_of(host, main=1, workers=setup.n8n_processes - 1), 1e-9)
        out = [Bound("cpu", free / d.total_s, f"{host.vcpu:g} vCPU / {d.total_s * 1000:.0f} ms CPU per execution")]
        out.append(Bound("main", pc / d.main_s, f"main: {pc:.2f} cores / {d.main_s * 1000:.0f} ms per execution"))
        if setup.mode == "queue":
            out.append(
                Bound(
                    "workers",
                    setup.workers * pc / d.worker_s,
                    f"{setup.workers} worker(s) x {pc:.2f} cores / {d.worker_s * 1000:.0f} ms",
                )
            )
        if d.runner_s > 0:
            runners = setup.workers if setup.mode == "queue" else 1
            out.append(
                Bound(
                    "runners",
                    runners * RUNNER_CORES / d.runner_s,
                    f"{runners} task runner(s) x 1 core / {d.runner_s * 1000:.0f} ms of Code node CPU",
                )
            )
        slots = self.slots(setup)
        if slots is not None:
            ceiling = min(b.per_s for b in out)
            out.append(
                Bound(
                    "slots",
                    self._little_bound(d, host, slots, ceiling),
                    f"{slots} execution slots / residence time (Little's law)",
                )
            )
        return sorted(out, key=lambda b: b.per_s)

    def _little_bound(self, d: Demands, host: HostShape, slots: int, ceiling: float) -> float:
        """Largest X with X <= slots / R(X), by bisection (R grows with X as the cores fill)."""
        if slots / self.residence_s(d, host, ceiling * 0.999999) >= ceiling:
            return math.inf  # the slots never bind before another bound does
        lo, hi = 0.0, ceiling
        for _ in range(40):  # 2^-40 of the ceiling: far below any measurement's resolution
            mid = (lo + hi) / 2.0
            if mid * self.residence_s(d, host, mid) <= slots:
                lo = mid
            else:
                hi = mid
        return lo

    # --- questions -----------------------------------------------------------------------------
    def throughput_at(self, profile: WorkflowProfile, setup: Setup, host: HostShape) -> float:
        """Executions per second the setup sustains on the host (the soft minimum of the bounds)."""
        return softmin([b.per_s for b in self.bounds(profile, setup, host)])

    def binding_bound(self, profile: WorkflowProfile, setup: Setup, host: HostShape) -> Bound:
        """The resource that limits throughput. Little's bound always sits a little under the resource whose
        queue it rides on, so when it is within 10% of the next bound, that next resource is the one to name."""
        ordered = self.bounds(profile, setup, host)
        if ordered[0].name == "slots" and len(ordered) > 1 and ordered[1].per_s <= 1.1 * ordered[0].per_s:
            return ordered[1]
        return ordered[0]

    def cpu_utilisation_at(self, profile: WorkflowProfile, setup: Setup, host: HostShape, rate_per_s: float) -> float:
        """Share of the host's cores the stack keeps busy at a rate (0..1, may exceed 1 past capacity)."""
        return rate_per_s * self.demands(profile, setup, host).total_s / host.vcpu

    def p95_ms_at(
        self, profile: WorkflowProfile, setup: Setup, host: HostShape, rate_per_s: float, arrival_cv2: float = 1.0
    ) -> float:
        """Approximate server-side p95 at an offered rate below capacity (Kingman-style G/G/c).

        p95 ~= wait + CPU path + ln(20) x mean queueing delay at the binding resource, the delay being
        Sakasegawa's M/M/c factor scaled by (ca^2 + cs^2) / 2. `arrival_cv2` is 1 for independent senders
        (Poisson) and 0 for a constant-rate load generator such as k6's constant-arrival-rate.
        """
        capacity = self.throughput_at(profile, setup, host)
        d = self.demands(profile, setup, host)
        rho = rate_per_s / capacity
        if rho >= 1.0:
            return math.inf
        bound = self.binding_bound(profile, setup, host)
        servers = {
            "cpu": host.vcpu,
            "workers": setup.workers,
            "runners": setup.workers if setup.mode == "queue" else 1,
        }.get(bound.name, 1)
        service = servers / capacity  # one server's time per execution at the binding resource
        wq = sakasegawa_wait_factor(rho, servers) * (arrival_cv2 + SERVICE_CV2) / 2.0 * service
        return 1000.0 * (d.wait_s + d.path_s + P95_OF_EXPONENTIAL * wq)

    def in_flight_at(self, profile: WorkflowProfile, setup: Setup, host: HostShape, rate_per_s: float) -> float:
        """Mean executions in flight at a rate (Little's law: N = X x R)."""
        d = self.demands(profile, setup, host)
        return rate_per_s * self.residence_s(d, host, rate_per_s)
