"""The steps the lab drills are built from: log marks and lines, which worker host started which execution, waits
for readiness, restarts, an outage window under load, and a watch that reports progress."""

from __future__ import annotations

import re
import signal as signals
import time
from collections.abc import Callable

from n8n_sizer.drills.common import DrillFailed
from n8n_sizer.lab.cluster_record import N8N_ROLES, ClusterProcess
from n8n_sizer.lab.drills.context import LabDrillContext

STARTED = re.compile(r"Worker started execution (\d+)")


REDIS_LINES = r"Lost Redis connection|Recovered Redis connection|Unable to connect to Redis|Redis unavailable"


def sleep_until(t_s: float) -> None:
    delay = t_s - time.time()
    if delay > 0:
        time.sleep(delay)


def log_marks(ctx: LabDrillContext, procs: list[ClusterProcess]) -> dict[str, int]:
    return {p.name: ctx.lab.log_size(p) for p in procs}


def started_by_host(ctx: LabDrillContext, workers: list[ClusterProcess], marks: dict[str, int]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for p in workers:
        lines = ctx.lab.log_since(p, marks[p.name])
        out.setdefault(p.host, set()).update(m.group(1) for line in lines if (m := STARTED.search(line)))
    return out


def log_lines(
    ctx: LabDrillContext, procs: list[ClusterProcess], marks: dict[str, int], pattern: str, limit: int = 4
) -> dict[str, list[str]]:
    regex = re.compile(pattern)
    return {
        p.name: [line[:300] for line in ctx.lab.log_since(p, marks[p.name]) if regex.search(line)][:limit]
        for p in procs
    }


def wait_ready(
    ctx: LabDrillContext, names: list[str], since_s: float, timeout_s: float = 90.0
) -> dict[str, float | None]:
    """Seconds from `since_s` (unix) until each process was first seen answering its readiness check (None: not
    within `timeout_s`). The checks go one process after the other, each an SSH command: ~1 s resolution."""
    started, out = time.monotonic(), {}
    for name in names:
        while True:
            if ctx.lab.is_ready(name):
                out[name] = round(time.time() - since_s, 1)
                break
            if time.monotonic() - started > timeout_s:
                out[name] = None
                break
            time.sleep(1.0)
    return out


def restart_all(ctx: LabDrillContext, stopped: list[ClusterProcess]) -> list[tuple[str, float]]:
    """Start what a drill stopped (`StackHandle.start_process`, which waits for readiness), every one even if one
    fails (the first error is raised after); each started process's name with the seconds it took to be ready."""
    back, error = [], None
    for p in stopped:
        started = time.monotonic()
        try:
            ctx.lab.start_process(p.name)
            back.append((p.name, time.monotonic() - started))
        except Exception as exc:  # noqa: BLE001 - the others must still be started
            error = error or exc
    if error is not None:
        raise error
    return back


def outage(
    ctx: LabDrillContext,
    at_s: float,
    procs: list[ClusterProcess],
    signal: str,
    grace_s: float,
    down_for_s: float,
) -> tuple[dict[str, float], list[tuple[str, float]]]:
    """Stop `procs` at `at_s` (unix), keep them down until `down_for_s` after the stop, start them again.
    Times: stop (the signal), down (all stopped), restart, back (all ready). Whatever was stopped is started
    again also when a step fails, so a drill never leaves the cluster short of a process."""
    t: dict[str, float] = {}
    stopped: list[ClusterProcess] = []
    try:
        sleep_until(at_s)
        t["stop"] = time.time()
        for p in procs:  # through the StackHandle calls: SIGKILL as a crash (snapshot kept), else a graceful stop
            if signal == "KILL":
                ctx.lab.signal(p.name, signals.SIGKILL)
            else:
                ctx.lab.stop_process(p.name, timeout_s=grace_s)
            stopped.append(p)
        t["down"] = time.time()
        sleep_until(t["stop"] + down_for_s)
        t["restart"] = time.time()
        back = restart_all(ctx, stopped)
        stopped = []
        t["back"] = time.time()
    finally:
        if stopped:
            restart_all(ctx, stopped)
    return t, back


def n8n_on(ctx: LabDrillContext, host: str) -> list[ClusterProcess]:
    return [p for p in ctx.lab.find(host=host) if p.role in N8N_ROLES]


def worker_hosts(ctx: LabDrillContext, host: str | None) -> tuple[str, list[str]]:
    hosts = ctx.lab.worker_hosts()
    if len(hosts) < 2:
        raise DrillFailed(f"the lab has {len(hosts)} worker host(s); this drill needs 2 (one goes, one carries on)")
    victim = host or hosts[0]
    if victim not in hosts:
        raise DrillFailed(f"{victim} runs no worker; worker hosts: {', '.join(hosts)}")
    return victim, [h for h in hosts if h != victim]


def watch(
    until: Callable[[], float], ctx: LabDrillContext, procs: list[ClusterProcess], exited_at: dict[str, float]
) -> None:
    """Sleep through the partition, noting when a process of the cut-off host exits."""
    while time.time() < until():
        for p in procs:
            if p.name not in exited_at and not ctx.lab.is_running(p.name):
                exited_at[p.name] = time.time()
        time.sleep(min(1.0, max(0.0, until() - time.time())))
