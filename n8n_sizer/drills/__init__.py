"""Failure drills, automated: set the situation up on a running stack, act, observe, and record the outcome next to
what the 2025 queue-mode benchmark (seed 000) saw.

    with drill_stack() as ctx:                      # queue stack, 2 workers, n8n set up over HTTP
        store = run_drill("kill-worker", ctx, Path("results"))

Each drill restores what it broke (try/finally; processes stopped and started by PID) and `run_drill`
writes `results/<run-id>/run.json` (kind "drill") with `extra` = {drill, checks, verdict, observed,
timings_s, log_lines, settings}, which `n8n-sizer report` renders as a table.

The cluster drills on a deployed lab live in the lab's room (`lab/drills/`) and use this room's outcome types.

May import: stack (the handle a drill acts on), bench, native, n8n, hosts, runs, advisor, errors, fleet (the
inventory model only).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.drills.binary import binary_filesystem
from n8n_sizer.drills.blip import redis_blip
from n8n_sizer.drills.common import DrillContext, DrillFailed, DrillOutcome
from n8n_sizer.drills.stores import postgres_restart, redis_restart
from n8n_sizer.drills.workers import graceful_shutdown, kill_worker, wrong_key
from n8n_sizer.errors import InputError
from n8n_sizer.n8n.client import set_up_instance
from n8n_sizer.native.stack import LocalStack, StackOptions
from n8n_sizer.runs.records import RunManifest
from n8n_sizer.runs.store import RunStore, new_run_id
from n8n_sizer.stack.handle import StackHandle
from n8n_sizer.stack.local import LocalHandle
from n8n_sizer.versions import N8N_VERSION

DRILLS: dict[str, Callable[..., DrillOutcome]] = {
    "kill-worker": kill_worker,
    "wrong-key": wrong_key,
    "redis-restart": redis_restart,
    "postgres-restart": postgres_restart,
    "graceful-shutdown": graceful_shutdown,
    "binary-filesystem": binary_filesystem,
    "redis-blip": redis_blip,
}

# Bull's stalled-job timing, shortened so kill-worker ends in well under a minute instead of seed 000's
# ~70 s. n8n 2.41.1 reads them in @n8n/config (scaling-mode.config.js): lock 60 s, renew 10 s, stalled
# check every 30 s by default, with maxStalledCount fixed at 0 (a stalled job fails, never retried).
FAST_STALL_ENV = {
    "QUEUE_WORKER_LOCK_DURATION": "10000",
    "QUEUE_WORKER_LOCK_RENEW_TIME": "2000",
    "QUEUE_WORKER_STALLED_INTERVAL": "5000",
}


def drill_setup(workers: int = 2) -> Setup:
    return Setup(mode="queue", workers=workers)


@contextmanager
def drill_stack(
    stack_dir: Path | None = None, fast_stall: bool = True, start_timeout_s: float = 180.0
) -> Iterator[DrillContext]:
    """A local queue stack (Postgres, Redis AOF, main, 2 workers) with n8n set up; stopped on exit."""
    options = StackOptions(
        redis_persistence="aof", extra_env=dict(FAST_STALL_ENV) if fast_stall else {}, start_timeout_s=start_timeout_s
    )
    with LocalStack(drill_setup(), options, stack_dir=stack_dir) as stack:
        session = set_up_instance(stack.main_url)
        yield DrillContext(stack=LocalHandle(stack), session=session)


def run_drill(name: str, ctx: DrillContext, out_dir: Path, **params: Any) -> RunStore:
    """Run one drill and record it; a drill that could not finish is recorded too (verdict "incomplete")."""
    if name not in DRILLS:
        raise InputError(f"drill {name!r} is unknown; try one of {', '.join(DRILLS)}")
    manifest = RunManifest(
        run_id=new_run_id(),
        kind="drill",
        created_s=time.time(),
        spec={"drill": name, "params": params, "target": ctx.stack.name},
        setup=ctx.stack.setup.model_dump(),
        versions={"n8n": N8N_VERSION},
        extra={"drill": name, "verdict": "running"},
    )
    store = RunStore.create(out_dir, manifest)
    ctx.request_sink = store.append_request
    try:
        ctx.restore()  # a previous drill (or a crash) may have left a process down: start from a whole stack
        outcome = DRILLS[name](ctx, **params)
    except BaseException as exc:
        store.update_manifest(
            finished_s=time.time(),
            extra={
                "drill": name,
                "verdict": "incomplete",
                "error": f"{type(exc).__name__}: {exc}"[:1000],
                "checks": [
                    {
                        "observation": f"drill did not finish: {type(exc).__name__}: {str(exc)[:300]}",
                        "expected": "n/a",
                        "verdict": "incomplete",
                    }
                ],
            },
        )
        store.close()
        raise
    finally:
        ctx.request_sink = None
    store.update_manifest(finished_s=time.time(), extra=outcome_extra(outcome))
    store.close()
    return store


def outcome_extra(outcome: DrillOutcome) -> dict[str, Any]:
    """run.json's `extra` for a drill: what `report.render_drill` reads (checks) plus the raw record."""
    data = outcome.model_dump()
    return {
        "drill": outcome.drill,
        "verdict": outcome.verdict,
        "checks": [
            {
                "observation": c["observation"],
                "expected": c["expected"],
                "verdict": c["verdict"],
                "matches": c["matches"],
            }
            for c in data["checks"]
        ],
        "observed": data["observed"],
        "timings_s": data["timings_s"],
        "log_lines": data["log_lines"],
        "settings": data["settings"],
    }


__all__ = [
    "DRILLS",
    "FAST_STALL_ENV",
    "DrillContext",
    "DrillFailed",
    "DrillOutcome",
    "StackHandle",
    "LocalHandle",
    "drill_stack",
    "run_drill",
    "outcome_extra",
]
