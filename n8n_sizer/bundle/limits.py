"""Memory per container (compose `mem_reservation` / `mem_limit`), from the advisor's RAM model with headroom.

The advisor's model (`advisor/ram.py`, fitted on seed 000's whole-stack figures) says, in MB:

- queue mode: idle 474 + 225 x workers, peak 700 + 529 x workers;
- regular mode (main runs every execution, with a production limit): idle 476, peak 900.

Each container gets its share of the modelled peak as its reservation, and `LIMIT_FACTOR` times that as its
limit, rounded up to 64 MiB, never below `MIN_LIMIT_MIB`. The model's figures come from seed 000's stacks; an
n8n 2.41.1 process was seen idle at 730-760 MB here (notes/real-n8n.md), above the model's share for a
worker, so no n8n process is given less than that observed idle size (`N8N_IDLE_MB`) as its base:

- a worker and its task runner are what one more worker adds: the peak slope (529 MB). The runner keeps its idle
  size (`RUNNER_MB`, 146 MB: a JS runner's idle RSS, notes/real-n8n.md); the worker process the rest (383 MB).
  A webhook processor is the same n8n process without executions: the worker's share. Both are raised to
  `N8N_IDLE_MB` (760): reservation 768, limit 1,536 MiB.
- main serves the editor, the API and (in regular mode) every execution: the regular-mode peak less its runner
  (754 MB, or `N8N_IDLE_MB` if more), in both modes: reservation 768, limit 1,536 MiB.
- a runner: reservation 192, limit 512 MiB (the floor).
- Postgres and Redis get a reservation and no limit. Postgres is bounded by its own settings (shared_buffers
  plus work_mem per connection, written in its command); Redis holds the queue's backlog, which noeviction must
  keep: at a limit the kernel would kill it and the waiting jobs with it.

The limit is there for the overload the model does not cover: main was seen growing from about 0.8 to 2.2 GB
under overload (notes/real-n8n.md), and a main without a limit takes the host, its workers and Postgres with
it. At the limit the kernel stops that container alone and Docker restarts it (`restart: unless-stopped`).
"""

from __future__ import annotations

import math
from functools import lru_cache

from n8n_sizer.safety.frozen import Frozen

LIMIT_FACTOR = 2.0  # limit = 2 x the modelled peak share: room for a busy hour, not for a runaway
RUNNER_MB = 146  # a JS task runner's idle RSS (notes/real-n8n.md, n8n 2.41.1)
N8N_IDLE_MB = 760  # main's idle RSS, n8n 2.41.1 (notes/real-n8n.md: 730-760 MB): no n8n process gets less
MIN_LIMIT_MIB = 512  # below this a Node.js process meets the limit before its own heap limit
POSTGRES_RESERVATION_MB = 256
REDIS_RESERVATION_MB = 64
STEP_MIB = 64


class Memory(Frozen):
    """One container's memory, in MiB."""

    reservation_mib: int
    limit_mib: int | None  # None: no hard limit (Postgres, Redis; see the module's docstring)


@lru_cache(maxsize=1)
def _ram_model():
    from n8n_sizer.advisor.measurements import load_embedded
    from n8n_sizer.advisor.ram import fit_ram

    return fit_ram(load_embedded())


def _round_up(mb: float) -> int:
    return int(math.ceil(mb / STEP_MIB) * STEP_MIB)


def _share(peak_mb: float) -> Memory:
    return Memory(reservation_mib=_round_up(peak_mb), limit_mib=max(MIN_LIMIT_MIB, _round_up(peak_mb * LIMIT_FACTOR)))


def role_memory(role: str) -> Memory:
    """Memory for a container of `role`: main, webhook, worker, runner, postgres or redis."""
    model = _ram_model()
    per_worker_peak = model.queue_peak_mb[1]
    if role == "main":
        return _share(max(N8N_IDLE_MB, model.regular_peak_mb - RUNNER_MB))
    if role in ("worker", "webhook"):
        return _share(max(N8N_IDLE_MB, per_worker_peak - RUNNER_MB))
    if role == "runner":
        return _share(RUNNER_MB)
    if role == "postgres":
        return Memory(reservation_mib=POSTGRES_RESERVATION_MB, limit_mib=None)
    if role == "redis":
        return Memory(reservation_mib=REDIS_RESERVATION_MB, limit_mib=None)
    raise ValueError(f"no memory figure for role {role!r}")


def memory_table() -> dict[str, Memory]:
    """Every role's figures, for the rendered files and docs/cluster.md."""
    return {role: role_memory(role) for role in ("main", "webhook", "worker", "runner", "postgres", "redis")}


def parse_memory_mib(value: object) -> float | None:
    """Compose's memory value (`768m`, `1g`, `512M`, bytes as a number) in MiB; None when absent or unreadable."""
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) / (1 << 20)
    text = str(value).strip().lower().removesuffix("b")
    units = {"k": 1 / 1024, "m": 1.0, "g": 1024.0, "t": 1024.0 * 1024}
    try:
        if text and text[-1] in units:
            return float(text[:-1]) * units[text[-1]]
        return float(text) / (1 << 20)
    except ValueError:
        return None
