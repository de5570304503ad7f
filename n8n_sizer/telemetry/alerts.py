"""The three alerts seed 000 recommends, evaluated on a finished run's samples and requests. Pure.

Seed 000, "The 3 numbers to alert on":
  - n8n_scaling_mode_queue_jobs_waiting above 0 and rising for 5 minutes (healthy runs drained to 0,
    overloaded runs climbed to about 1,000);
  - runner CPU above 90% of one core for 5 minutes while the other cores idle (regular mode's runner at
    100% of one core with 3 of 4 cores idle), or, in queue mode, the whole server above 85% (2 workers ran
    at 3.5 of 4 cores without errors; 4 workers at 3.6 began failing);
  - any 503 {"message":"Database is not ready!"} from main (4 workers overloading 4 vCPU; 3 s during a
    Postgres restart).
Each rule says whether it fired, when first, and the evidence; a rule that could not be evaluated
(no such samples, a run shorter than its window) says that instead of reporting "fine".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from n8n_sizer.runs.records import RequestRecord, Sample
from n8n_sizer.runs.stats import per_label, select

WINDOW_S = 300.0  # seed 000: "for 5 minutes"
RUNNER_PINNED_CORES = 0.9  # seed 000: "above 90% of one core"
SERVER_BUSY_SHARE = 0.85  # seed 000: "the whole server above 85% (queue mode)"
MAX_GAP_S = 30.0  # a hole in the samples longer than this breaks a "sustained" stretch
DB_NOT_READY = "Database is not ready"


class Alert(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    rule: str
    status: Literal["fired", "quiet", "not evaluated"]
    first_s: float | None  # when the condition started (start of the sustained window)
    summary: str


def sustained(series: Sequence[tuple[float, float]], ok: Callable[[float], bool], window_s: float,
              max_gap_s: float = MAX_GAP_S) -> tuple[float, float] | None:
    """The first stretch (start, end) where every point satisfies `ok` for at least `window_s`."""
    start: float | None = None
    last: float | None = None
    for t, v in sorted(series):
        if not ok(v) or (last is not None and t - last > max_gap_s):
            start = None
        if ok(v):
            start = t if start is None else start
            if t - start >= window_s:
                return start, t
        last = t
    return None


def _span(series: Sequence[tuple[float, float]]) -> float:
    return series[-1][0] - series[0][0] if series else 0.0


def queue_waiting_rising(samples: Iterable[Sample], window_s: float = WINDOW_S) -> Alert:
    """Jobs waiting > 0 throughout `window_s` AND higher at its end than at its start, on any host."""
    rule = f"queue waiting above 0 and rising for {window_s / 60:g} min"
    samples = list(samples)
    waiting = select(samples, "n8n_scaling_mode_queue_jobs_waiting") or select(samples, "bull_jobs", state="waiting")
    if not waiting:
        return Alert(rule=rule, status="not evaluated", first_s=None, summary="no queue samples (regular mode, or queue probes off)")
    longest = 0.0
    for host, rows in per_label(waiting, "host").items():
        series = sorted((s.time_s, s.value) for s in rows)
        longest = max(longest, _span(series))
        for i, (t0, v0) in enumerate(series):
            if v0 <= 0:
                continue
            for t1, v1 in series[i + 1 :]:
                if v1 <= 0:
                    break
                if t1 - t0 >= window_s:
                    if v1 > v0:
                        return Alert(rule=rule, status="fired", first_s=t0,
                                     summary=f"{host}: waiting rose from {v0:,.0f} to {v1:,.0f} over {(t1 - t0) / 60:.1f} min")
                    break
    if longest < window_s:
        return Alert(rule=rule, status="not evaluated", first_s=None,
                     summary=f"queue samples span {longest:.0f} s, shorter than the {window_s:.0f} s window")
    peak = max(s.value for s in waiting)
    return Alert(rule=rule, status="quiet", first_s=None, summary=f"waiting peaked at {peak:,.0f} and did not keep rising")


def runner_cpu_pinned(samples: Iterable[Sample], window_s: float = WINDOW_S, pinned_cores: float = RUNNER_PINNED_CORES) -> Alert:
    """A task runner (process or container named *runner*) >= `pinned_cores` for `window_s` while the host
    had at least half of its other cores idle on average over that stretch."""
    rule = f"runner CPU >= {pinned_cores:.0%} of one core for {window_s / 60:g} min with other cores idle"
    samples = list(samples)
    runners = [s for s in samples if s.metric in ("process_cpu_cores", "container_cpu_cores")
               and "runner" in (s.labels.get("process") or s.labels.get("container") or "")]
    if not runners:
        return Alert(rule=rule, status="not evaluated", first_s=None, summary="no runner CPU samples")
    idle = select(samples, "host_cpu_cores", state="idle")
    cpus = {s.labels.get("host"): s.value for s in select(samples, "host_cpus")}
    longest = 0.0
    for name, rows in per_label(runners, "process" if "process" in runners[0].labels else "container").items():
        series = sorted((s.time_s, s.value) for s in rows)
        longest = max(longest, _span(series))
        hit = sustained(series, lambda v: v >= pinned_cores, window_s)
        if hit is None:
            continue
        host = rows[0].labels.get("host")
        idle_in = [s.value for s in idle if s.labels.get("host") == host and hit[0] <= s.time_s <= hit[1]]
        n = cpus.get(host)
        if not idle_in or n is None:
            return Alert(rule=rule, status="fired", first_s=hit[0],
                         summary=f"{name} pinned at >= {pinned_cores:g} core for {(hit[1] - hit[0]) / 60:.1f} min (host idle unknown)")
        mean_idle = sum(idle_in) / len(idle_in)
        if mean_idle >= 0.5 * (n - 1):
            return Alert(rule=rule, status="fired", first_s=hit[0],
                         summary=f"{name} pinned at >= {pinned_cores:g} core for {(hit[1] - hit[0]) / 60:.1f} min "
                                 f"while {mean_idle:.1f} of {n:.0f} cores sat idle")
    if longest < window_s:
        return Alert(rule=rule, status="not evaluated", first_s=None,
                     summary=f"runner samples span {longest:.0f} s, shorter than the {window_s:.0f} s window")
    peak = max(s.value for s in runners)
    return Alert(rule=rule, status="quiet", first_s=None, summary=f"runner CPU peaked at {peak:.2f} cores")


def server_cpu_high(samples: Iterable[Sample], window_s: float = WINDOW_S, share: float = SERVER_BUSY_SHARE) -> Alert:
    """All CPUs of the host busy (everything but idle and iowait) above `share` for `window_s`."""
    rule = f"whole server CPU above {share:.0%} for {window_s / 60:g} min"
    samples = list(samples)
    cpus = {s.labels.get("host"): s.value for s in select(samples, "host_cpus")}
    busy: dict[tuple[str | None, float], float] = {}
    for s in select(samples, "host_cpu_cores"):
        if s.labels.get("state") not in ("idle", "iowait"):
            busy[(s.labels.get("host"), s.time_s)] = busy.get((s.labels.get("host"), s.time_s), 0.0) + s.value
    if not busy or not cpus:
        return Alert(rule=rule, status="not evaluated", first_s=None, summary="no host CPU samples")
    longest = 0.0
    for host, n in cpus.items():
        series = sorted((t, v / n) for (h, t), v in busy.items() if h == host)
        longest = max(longest, _span(series))
        hit = sustained(series, lambda v: v > share, window_s)
        if hit is not None:
            peak = max(v for t, v in series if hit[0] <= t <= hit[1])
            return Alert(rule=rule, status="fired", first_s=hit[0],
                         summary=f"{host}: above {share:.0%} of {n:.0f} cores for {(hit[1] - hit[0]) / 60:.1f} min (peak {peak:.0%})")
    if longest < window_s:
        return Alert(rule=rule, status="not evaluated", first_s=None,
                     summary=f"host CPU samples span {longest:.0f} s, shorter than the {window_s:.0f} s window")
    return Alert(rule=rule, status="quiet", first_s=None, summary=f"peak {max(busy.values()) / max(cpus.values()):.0%} of the CPUs")


def database_not_ready(requests: Iterable[RequestRecord]) -> Alert:
    """Any HTTP 503 whose body says "Database is not ready"."""
    rule = 'any 503 "Database is not ready!"'
    hits = [r for r in requests if r.status == 503 and DB_NOT_READY in ((r.body_snippet or "") + (r.error or ""))]
    if not hits:
        return Alert(rule=rule, status="quiet", first_s=None, summary="none")
    first, last = min(r.scheduled_s for r in hits), max(r.scheduled_s for r in hits)
    steps = sorted({r.step for r in hits})
    return Alert(rule=rule, status="fired", first_s=first,
                 summary=f"{len(hits):,} requests over {last - first:.0f} s in {', '.join(steps)}")


def evaluate_alerts(samples: Sequence[Sample], requests: Sequence[RequestRecord]) -> list[Alert]:
    """Seed 000's three alerts on one run (its CPU alert in both forms: runner pinned, server full)."""
    return [queue_waiting_rising(samples), runner_cpu_pinned(samples), server_cpu_high(samples),
            database_not_ready(requests)]
