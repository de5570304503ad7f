"""`Setup`: one n8n deployment shape, shared by the advisor, the renderer, the fleet and the bench driver.

Pool math follows seed 000 ("Postgres connections for n8n workers"): main holds pool + 1 connections
and each worker holds pool; peak `pg_stat_activity` matched (main pool + 1) + workers x pool in every
run with the default pool of 2 (3 / 5 / 7 / 11 for regular / 1 / 2 / 4 workers).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from n8n_sizer.safety.frozen import Frozen
from n8n_sizer.versions import N8N_VERSION

Mode = Literal["regular", "queue"]
Database = Literal["sqlite", "postgres"]

DEFAULT_WORKER_CONCURRENCY = 10  # n8n's `worker --concurrency` default; seed 000 kept it (519/min, 0 errors)
DEFAULT_RUNNER_CONCURRENCY = 5  # N8N_RUNNERS_MAX_CONCURRENCY in n8n's one-click template (seed 000)
MAX_WORKERS = 64  # the most workers a Setup (and `render --workers`) accepts
# The most executions one worker (or main's production limit) is sized for: far above what memory allows (advisor/
# ram.py caps it), far below absurdity; Little's law on long waits (a model call of seconds) passes 1,000.
MAX_CONCURRENCY = 100_000
DEFAULT_DB_POOL_SIZE = 2  # DB_POSTGRESDB_POOL_SIZE default (seed 000)
POSTGRES_DEFAULT_MAX_CONNECTIONS = 100
# psql sessions, backups, monitoring: seed 000's formula leaves room for them ("headroom").
CONNECTION_HEADROOM = 10
DEFAULT_GRACEFUL_SHUTDOWN_S = 30  # N8N_GRACEFUL_SHUTDOWN_TIMEOUT default (seed 000, drill 6)


def most_workers(vcpu: float, shared: bool) -> int:
    """The most workers a host runs, the one rule `advise` sizes with and `check` enforces.

    Beside main, Postgres and Redis: one worker per 2 vCPU, rounded up (at least 1). Seed 000: on 4 vCPU, 2
    workers answered the most and 4 answered no more while failing 1,013 requests at 50/s; notes/real-n8n.md: on
    2 vCPU, 1 worker answered 25.5/s and 2 workers 24.5/s. On a worker host of its own: one per vCPU (each is one
    event loop plus its runner's share), never more."""
    import math

    per_host = math.ceil(vcpu / 2.0) if shared else math.floor(vcpu)
    return min(MAX_WORKERS, max(1, per_host))


class Setup(Frozen):
    """How n8n runs on one host. `workers` is 0 in regular mode."""

    mode: Mode
    workers: int = Field(0, ge=0, le=MAX_WORKERS)
    # Executions one worker runs at once. Little's law on long waits (a model call of seconds) asks for more than
    # a thousand: an answer, not a refusal (memory caps it: advisor/ram.py), so the bound is only against absurdity.
    concurrency: int = Field(DEFAULT_WORKER_CONCURRENCY, ge=1, le=MAX_CONCURRENCY)
    runner_concurrency: int = Field(DEFAULT_RUNNER_CONCURRENCY, ge=1, le=1000)
    production_limit: int | None = Field(None, ge=1)  # None: N8N_CONCURRENCY_PRODUCTION_LIMIT=-1 (off)
    db: Database = "postgres"
    db_pool_size: int = Field(DEFAULT_DB_POOL_SIZE, ge=1, le=500)
    n8n_version: str = N8N_VERSION
    longest_execution_s: int = Field(DEFAULT_GRACEFUL_SHUTDOWN_S, ge=1, le=86400)
    # Memory one execution in flight holds (MiB; the workload's WorkflowProfile.held_mb), None: the light workflow's
    # measured figure (ram.py). The executing processes' memory limits are sized from it.
    held_mb: float | None = Field(None, gt=0, le=100_000)
    # Jobs Redis must hold waiting without refusing a write (its maxmemory), None: ram.DEFAULT_QUEUE_DEPTH_JOBS.
    queue_depth_jobs: int | None = Field(None, ge=1, le=100_000_000)

    @model_validator(mode="after")
    def _mode_fits(self) -> Setup:
        if self.mode == "queue" and self.workers < 1:
            raise ValueError("queue mode needs at least one worker (workers >= 1)")
        if self.mode == "queue" and self.db != "postgres":
            raise ValueError("queue mode needs Postgres (db=postgres); n8n does not support SQLite there")
        if self.mode == "regular" and self.workers != 0:
            raise ValueError("regular mode runs no workers (workers = 0); use mode=queue for workers")
        return self

    @property
    def n8n_processes(self) -> int:
        """n8n processes (main + workers); each has its own task runner."""
        return 1 + self.workers

    @property
    def max_parallel_executions(self) -> int | None:
        """Executions that may run at once, or None when regular mode has no limit."""
        if self.mode == "queue":
            per_worker = self.production_limit if self.production_limit is not None else self.concurrency
            return self.workers * per_worker
        return self.production_limit
