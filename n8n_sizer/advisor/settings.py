"""One small pure function per recommended setting, PGTune style, each with its reason.

The in-flight figures come from Little's law (N = X x R) on the capacity model; BURST_FACTOR leaves room
for arrivals that bunch up, so a setting sized for the mean does not cap a burst.
"""

from __future__ import annotations

import math

from n8n_sizer.advisor.capacity import CapacityModel, HostShape
from n8n_sizer.advisor.profiles import WorkflowProfile
from n8n_sizer.advisor.setup import (
    DEFAULT_DB_POOL_SIZE,
    DEFAULT_RUNNER_CONCURRENCY,
    DEFAULT_WORKER_CONCURRENCY,
    MAX_CONCURRENCY,
    Setup,
)

BURST_FACTOR = 1.5
# Regular mode's production limit: seed 000 ran 10 and kept main at 674 MB with the editor at 0.42 s.
MIN_PRODUCTION_LIMIT = 10


def worker_concurrency(
    model: CapacityModel, profile: WorkflowProfile, host: HostShape, workers: int, rate_per_s: float
) -> int:
    """`worker --concurrency`: Little's in-flight per worker x burst factor, never below n8n's default of 10.

    Below the default nothing is saved (concurrency only caps), and seed 000 measured the cost of going
    lower: 2 workers at 5 answered 426/min with 238 errors at 50 req/s, against 519/min with none at 10.
    """
    probe = Setup(mode="queue", workers=workers, concurrency=1000)
    in_flight = model.in_flight_at(profile, probe, host, rate_per_s) / workers
    # a recommendation, never a refusal: at most what a Setup holds (memory caps it far lower: ram.py)
    return min(MAX_CONCURRENCY, max(DEFAULT_WORKER_CONCURRENCY, math.ceil(BURST_FACTOR * in_flight)))


def production_limit(model: CapacityModel, profile: WorkflowProfile, host: HostShape, rate_per_s: float) -> int:
    """N8N_CONCURRENCY_PRODUCTION_LIMIT in regular mode: executions in flight at the rate x burst factor.

    It bounds main's memory when a burst outruns the host (seed 000: 6.9 GB without it), at the cost of a
    FIFO wait inside main; sized from Little's law so it does not queue what the host could run.
    """
    probe = Setup(mode="regular")
    in_flight = model.in_flight_at(profile, probe, host, rate_per_s)
    return min(MAX_CONCURRENCY, max(MIN_PRODUCTION_LIMIT, math.ceil(BURST_FACTOR * in_flight)))


# Seed 000's story: executions of ~0.7 s (187 ms of Code, a 0.5 s wait) piled up in main at 20 req/s, which grew
# from 354 MB to 6.9 GB; a production limit of 10 kept it at 674 MB and cut errors from 1,045 to 1, and below
# capacity it cost nothing (295 against 297 answered a minute at 5 req/s). Executions this long or longer are held
# long enough for a burst to pile them up; much shorter ones (light's ~60 ms) finish before they can.
LONG_EXECUTION_S = 0.5


def production_limit_for(
    model: CapacityModel, profile: WorkflowProfile, host: HostShape, capacity_per_s: float
) -> int | None:
    """Regular mode's N8N_CONCURRENCY_PRODUCTION_LIMIT, or None (-1, off) where it would not matter.

    Set where an execution lasts LONG_EXECUTION_S or more at the comfortable rate (0.7 of capacity): then a
    burst starts executions faster than they finish and each holds its memory in main until it does. The limit
    is `production_limit` (Little's in-flight x burst factor, at least 10), so it never queues what the host could
    run. What the host's memory holds caps it (recommend.py, ram.slots_that_fit): where that binds, the limit caps
    the capacity through Little's law (slots / time in flight), as it would in n8n."""
    rate = 0.7 * capacity_per_s
    probe = Setup(mode="regular")
    d = model.demands(profile, probe, host)
    if model.residence_s(d, host, rate) < LONG_EXECUTION_S:
        return None
    return production_limit(model, profile, host, rate)


def runner_concurrency(
    model: CapacityModel, profile: WorkflowProfile, setup: Setup, host: HostShape, rate_per_s: float
) -> int:
    """N8N_RUNNERS_MAX_CONCURRENCY: Code tasks one runner holds at once, at least the template's 5.

    Seed 000 found 10/5, 10/10 and 20/20 (worker/runner) within noise of each other on CPU-bound work, so
    more than Little's figure buys nothing; the runner is one event loop either way.
    """
    d = model.demands(profile, setup, host)
    runners = setup.workers if setup.mode == "queue" else 1
    if d.runner_s <= 0:
        return DEFAULT_RUNNER_CONCURRENCY
    in_runner = rate_per_s / runners * d.runner_s * (model.residence_s(d, host, rate_per_s) - d.wait_s) / d.path_s
    return max(DEFAULT_RUNNER_CONCURRENCY, math.ceil(BURST_FACTOR * in_runner))


def db_pool_size() -> int:
    """DB_POSTGRESDB_POOL_SIZE: n8n's default of 2.

    Seed 000: with 2, connections stayed at (pool + 1) + workers x pool in every run (3/5/7/11); raising it
    to 10 on 4 workers took Postgres to 44 connections and removed errors in one run but not the repeat.
    """
    return DEFAULT_DB_POOL_SIZE


# N8N_EXECUTIONS_QUEUE_KEEP_LAST_COMPLETED / _FAILED in queue mode (n8n's default is 0).
QUEUE_KEEP_LAST_JOBS = 1000
QUEUE_KEEP_LAST_ENV = ("N8N_EXECUTIONS_QUEUE_KEEP_LAST_COMPLETED", "N8N_EXECUTIONS_QUEUE_KEEP_LAST_FAILED")


def queue_keep_last_env() -> dict[str, str]:
    """Keep the last 1,000 finished Bull jobs instead of n8n's 0, so main cannot wait forever on a fast job.

    With 0, Bull deletes a job the moment a worker finishes it. Main waits for the job with Bull's
    `job.finished()`: it asks Redis whether the job is in the completed set, and if not, listens for the
    completion event. A job that finishes between main enqueuing it and asking is already gone from the
    set, its event already passed, and the webhook never answers. benchmarks/queue_webhook_hang.py, with
    main's core contended: 11 of 7,970 light webhooks hung with 0, none of 9,922 with 1,000. A kept job
    answers the question at once; Bull's 5 s re-check covers up to 1,000 / 5 s = 200 jobs/s. Redis holds
    about 2.8 KB per kept job (1,000 jobs: 3.5 MB used in all).
    """
    return {name: str(QUEUE_KEEP_LAST_JOBS) for name in QUEUE_KEEP_LAST_ENV}


REDIS_SETTINGS = (
    "--appendonly yes --appendfsync everysec  (the queue-mode test: 20 of 20 waiting jobs survived a SIGKILL; without AOF all 20 crashed)",
    "--maxmemory-policy noeviction  (Bull keeps jobs in ordinary keys; an evicting policy can delete them silently)",
    "--requirepass <generated> for the operator; n8n logs in as its own ACL user n8n  (QUEUE_BULL_REDIS_USERNAME: "
    "its keys and channels only, nothing @dangerous but INFO)",
)
