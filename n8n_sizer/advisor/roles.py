"""CPU per execution by role (main, webhook processor, worker, task runner, Postgres, Redis, load balancer).

The fitted model knows n8n's overhead per execution (all processes together), how queue mode scales it
(`queue_factor`), and how it splits between the process that receives a webhook (`main_share_queue`) and
the worker that runs it (`worker_share_queue`); the per-role CPU rows (notes/real-n8n.md: worker 60 ms,
main 12 ms per execution) pin that split. What no embedded row measures yet is written down here as a
named prior, with its reason, and `advise` lists the ones an answer rests on in its notes. A bench run
that records per-role CPU (`<role>_cpu_ms` in its results) turns the matching prior into data: the fit
takes those rows (see fit.py) and `advise --validate` reports their error.
"""

from __future__ import annotations

from dataclasses import dataclass

from n8n_sizer.advisor.capacity import CapacityModel, HostShape
from n8n_sizer.advisor.profiles import WorkflowProfile


@dataclass(frozen=True)
class Prior:
    name: str
    value: float
    why: str


# In queue mode with webhook processors, a webhook processor does for each production webhook what main
# did without them (parse, create the execution, enqueue, wait for the job, answer): same share of the
# queue-mode overhead. n8n's hosting docs route /webhook/* to them; nothing embedded has measured one yet.
WEBHOOK_FACTOR = Prior(
    "webhook_factor",
    1.0,
    "a webhook processor's CPU per webhook relative to main's in queue "
    "mode without webhook processors (same job: receive, enqueue, wait, answer); held only "
    "where no webhook row is fitted",
)
# Main keeps the editor, the API, timers and job-status events; per production execution it does little.
MAIN_RESIDUAL_SHARE = Prior(
    "main_residual_share",
    0.005,
    "main's share of the queue-mode overhead once webhook "
    "processors take production webhooks (editor, timers, job events only); held only where "
    "no main row beside webhook processors is fitted",
)
# notes/real-n8n.md: on 2 saturated cores at 25.5/s (78 ms per execution), worker + main took 72 ms: the 6 ms
# left (8%) is Postgres, Redis and the kernel together. Postgres gets most of it, Redis little.
POSTGRES_SHARE = Prior(
    "postgres_share",
    0.05,
    "Postgres server CPU as a share of the queue-mode overhead; the "
    "notes' per-process rows leave ~8% for Postgres, Redis and the kernel together",
)
REDIS_SHARE = Prior(
    "redis_share",
    0.001,
    "Redis CPU as a share of the queue-mode overhead (a guess of ~0.14 ms "
    "per light execution; the kernel counted ~50 Bull commands and 1.2-2.3 ms per execution, the "
    "cg rows); single-threaded, so one core is its ceiling; held only where no Redis row is fitted",
)
# A reverse proxy (Caddy/nginx) forwarding a small JSON webhook: well under a millisecond of CPU.
LB_CPU_MS = Prior(
    "load_balancer_cpu_ms",
    0.3,
    "load balancer CPU per proxied request on the reference host; held only where no load-balancer row is fitted",
)
PRIORS = (WEBHOOK_FACTOR, MAIN_RESIDUAL_SHARE, POSTGRES_SHARE, REDIS_SHARE, LB_CPU_MS)
MEASURED_ROLES = ("main", "webhook", "worker", "runner", "postgres", "redis", "load_balancer")
# Which per-role rows pin which prior (a main row pins main's residual share only with webhook processors).
PINNED_BY = {
    "webhook_factor": "webhook",
    "main_residual_share": "main",
    "postgres_share": "postgres",
    "redis_share": "redis",
    "load_balancer_cpu_ms": "load_balancer",
}


def prior_value(params: dict[str, float], prior: Prior) -> float:
    """The fitted value where the fit carries the prior as a parameter (fit.py), else the prior itself."""
    return params.get(prior.name, prior.value)


@dataclass(frozen=True)
class RoleDemands:
    """CPU seconds per execution on the reference host, by role, in queue mode.

    `ingest_s` is the process that receives the webhook: main without webhook processors, each webhook
    processor (its share of the executions) with them. `rest_*` is CPU no process row accounts for (the
    kernel's network and disk work), charged to the hosts of the processes that cause it.
    """

    ingest_s: float
    main_residual_s: float
    worker_s: float
    runner_s: float
    postgres_s: float
    redis_s: float
    rest_ingest_s: float
    rest_worker_s: float
    load_balancer_s: float
    wait_s: float

    @property
    def total_s(self) -> float:
        return (
            self.ingest_s
            + self.main_residual_s
            + self.worker_s
            + self.runner_s
            + self.postgres_s
            + self.redis_s
            + self.rest_ingest_s
            + self.rest_worker_s
        )


def role_demands(model: CapacityModel, profile: WorkflowProfile, webhook_processors: bool) -> RoleDemands:
    """Queue-mode demands on the reference host (multiply by `model.host_factor(host)` for a host)."""
    p = model.params
    q = model.overhead_s(profile) * p["queue_factor"]
    m, w = p["main_share_queue"], p["worker_share_queue"]
    pg, redis = prior_value(p, POSTGRES_SHARE), prior_value(p, REDIS_SHARE)
    rest = max(0.0, 1.0 - m - w - pg - redis) * q
    ingest = m * q * (prior_value(p, WEBHOOK_FACTOR) if webhook_processors else 1.0)
    return RoleDemands(
        ingest_s=ingest,
        main_residual_s=prior_value(p, MAIN_RESIDUAL_SHARE) * q if webhook_processors else 0.0,
        worker_s=w * q,
        runner_s=model.runner_s(profile),
        postgres_s=pg * q,
        redis_s=redis * q,
        rest_ingest_s=rest * m / (m + w),
        rest_worker_s=rest * w / (m + w),
        load_balancer_s=prior_value(p, LB_CPU_MS) / 1000.0,
        wait_s=profile.wait_s,
    )


def predicted_role_cpu_s(
    model: CapacityModel,
    profile: WorkflowProfile,
    mode: str,
    webhook_processors: int,
    host: HostShape,
    role: str,
    db: str = "postgres",
    processes: int = 1,
) -> float | None:
    """The model's CPU seconds per execution for one process of `role` (per-role demand rows are compared
    with this). Per process: a webhook processor's figure is per execution it received. None when the
    role does not exist in that setup. In regular mode an execution's overhead is main's and the database's:
    Postgres does what main does not (with SQLite main does it all). `processes`: the n8n processes sharing the
    row's host (CapacityModel.crowding)."""
    h = model.host_factor(host) * model.crowding(host, processes)
    if mode == "regular":
        d = model.demands(profile, _regular(db), host)
        database = d.total_s - d.runner_s - d.main_s if db == "postgres" else None
        return {"main": d.main_s, "runner": d.runner_s or None, "postgres": database}.get(role)
    r = role_demands(model, profile, webhook_processors > 0)
    values = {
        "main": r.main_residual_s if webhook_processors else r.ingest_s,
        "webhook": r.ingest_s if webhook_processors else None,
        "worker": r.worker_s,
        "runner": r.runner_s or None,
        "postgres": r.postgres_s,
        "redis": r.redis_s,
        "load_balancer": r.load_balancer_s if webhook_processors else None,
    }
    v = values.get(role)
    return None if v is None else v * h


def _regular(db: str):
    from n8n_sizer.advisor.setup import Setup

    return Setup(mode="regular", db=db)
