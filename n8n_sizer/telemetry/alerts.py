"""The three alerts seed 000 recommends, evaluated on a finished run's samples and requests. Pure.

Seed 000, "The 3 numbers to alert on":
  - n8n_scaling_mode_queue_jobs_waiting above 0 and rising for 5 minutes (healthy runs drained to 0,
    overloaded runs climbed to about 1,000);
  - runner CPU above 90% of one core for 5 minutes while the other cores idle (regular mode's runner at
    100% of one core with 3 of 4 cores idle), or, in queue mode, the whole server above 85% (2 workers ran
    at 3.5 of 4 cores without errors; 4 workers at 3.6 began failing);
  - 503 {"message":"Database is not ready!"} from main, sustained over 1 minute (4 workers overloading 4 vCPU
    kept answering it; a Postgres restart caused 3 s of it, which is not worth a page);
  - in regular mode, main's memory (it held every waiting request: 0.35 GB to 6.9 GB in about 3 minutes, while a
    healthy queue-mode main stayed between 440 and 590 MB).
On a lab (lab.bench) every sample also names its host and role, and two rules read them: any role's process
pinned at one core while its host has idle cores, and main's memory growing, per host.
Each rule says whether it fired, when first, and the evidence; a rule that could not be evaluated
(no such samples, a run shorter than its window) says that instead of reporting "fine".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from n8n_sizer.runs.records import RequestRecord, Sample
from n8n_sizer.runs.stats import per_label, select
from n8n_sizer.safety.frozen import Frozen

WINDOW_S = 300.0  # seed 000: "for 5 minutes"
RUNNER_PINNED_CORES = 0.9  # seed 000: "above 90% of one core"
SERVER_BUSY_SHARE = 0.85  # seed 000: "the whole server above 85% (queue mode)"
MAX_GAP_S = 30.0  # a hole in the samples longer than this breaks a "sustained" stretch
DB_NOT_READY = "Database is not ready"
DB_NOT_READY_WINDOW_S = 60.0  # seed 000: "any, sustained over 1 minute"
DB_NOT_READY_GAP_S = 15.0  # a quiet spell longer than this ends a stretch of those 503s (a restart's 3 s does not)
MAIN_RSS_WINDOW_S = 180.0  # seed 000: main went from 0.35 GB to 6.9 GB "in about 3 minutes"
MAIN_RSS_GROWTH = 0.5  # +50% within the window: a healthy main moved 440 -> 590 MB (+34%) over a whole run
MAIN_RSS_MIN_GROWTH_MIB = 256.0  # and by at least this much, so a small process' noise does not fire it


class Alert(Frozen):
    rule: str
    status: Literal["fired", "quiet", "not evaluated"]
    first_s: float | None  # when the condition started (start of the sustained window)
    summary: str


def sustained(
    series: Sequence[tuple[float, float]], ok: Callable[[float], bool], window_s: float, max_gap_s: float = MAX_GAP_S
) -> tuple[float, float] | None:
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


def _too_short(rule: str, what: str, longest_s: float, window_s: float) -> Alert:
    """Not evaluated: no series was as long as the rule's window, so "quiet" would claim more than was seen."""
    return Alert(
        rule=rule,
        status="not evaluated",
        first_s=None,
        summary=f"{what} samples span {longest_s:.0f} s, shorter than the {window_s:.0f} s window",
    )


def _span(series: Sequence[tuple[float, float]]) -> float:
    return series[-1][0] - series[0][0] if series else 0.0


def queue_waiting_rising(samples: Iterable[Sample], window_s: float = WINDOW_S) -> Alert:
    """Jobs waiting > 0 throughout `window_s` AND higher at its end than at its start, on any host."""
    rule = f"queue waiting above 0 and rising for {window_s / 60:g} min"
    samples = list(samples)
    waiting = select(samples, "n8n_scaling_mode_queue_jobs_waiting") or select(samples, "bull_jobs", state="waiting")
    if not waiting:
        return Alert(
            rule=rule,
            status="not evaluated",
            first_s=None,
            summary="no queue samples (regular mode, or queue probes off)",
        )
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
                        return Alert(
                            rule=rule,
                            status="fired",
                            first_s=t0,
                            summary=f"{host}: waiting rose from {v0:,.0f} to {v1:,.0f} over {(t1 - t0) / 60:.1f} min",
                        )
                    break
    if longest < window_s:
        return _too_short(rule, "queue", longest, window_s)
    peak = max(s.value for s in waiting)
    return Alert(
        rule=rule, status="quiet", first_s=None, summary=f"waiting peaked at {peak:,.0f} and did not keep rising"
    )


def runner_cpu_pinned(
    samples: Iterable[Sample], window_s: float = WINDOW_S, pinned_cores: float = RUNNER_PINNED_CORES
) -> Alert:
    """A task runner (process or container named *runner*) >= `pinned_cores` for `window_s` while the host
    had at least half of its other cores idle on average over that stretch."""
    rule = f"runner CPU >= {pinned_cores:.0%} of one core for {window_s / 60:g} min with other cores idle"
    samples = list(samples)
    runners = [
        s
        for s in samples
        if s.metric in ("process_cpu_cores", "container_cpu_cores")
        and "runner" in (s.labels.get("process") or s.labels.get("container") or "")
    ]
    if not runners:
        return Alert(rule=rule, status="not evaluated", first_s=None, summary="no runner CPU samples")
    groups = {
        (rows[0].labels.get("host"), name): rows
        for name, rows in per_label(runners, "process" if "process" in runners[0].labels else "container").items()
    }
    longest = 0.0
    for p in _pinned(groups, samples, pinned_cores, window_s):
        longest = max(longest, p.span_s)
        if p.hit is None:
            continue
        if p.mean_idle is None or p.cores is None:
            return Alert(
                rule=rule,
                status="fired",
                first_s=p.hit[0],
                summary=f"{p.name} pinned at >= {pinned_cores:g} core for {p.minutes:.1f} min (host idle unknown)",
            )
        if p.host_idle:
            return Alert(
                rule=rule,
                status="fired",
                first_s=p.hit[0],
                summary=f"{p.name} pinned at >= {pinned_cores:g} core for {p.minutes:.1f} min "
                f"while {p.mean_idle:.1f} of {p.cores:.0f} cores sat idle",
            )
    if longest < window_s:
        return _too_short(rule, "runner", longest, window_s)
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
            return Alert(
                rule=rule,
                status="fired",
                first_s=hit[0],
                summary=f"{host}: above {share:.0%} of {n:.0f} cores for {(hit[1] - hit[0]) / 60:.1f} min (peak {peak:.0%})",
            )
    if longest < window_s:
        return _too_short(rule, "host CPU", longest, window_s)
    return Alert(
        rule=rule,
        status="quiet",
        first_s=None,
        summary=f"peak {max(busy.values()) / max(cpus.values()):.0%} of the CPUs",
    )


def database_not_ready(
    requests: Iterable[RequestRecord], window_s: float = DB_NOT_READY_WINDOW_S, max_gap_s: float = DB_NOT_READY_GAP_S
) -> Alert:
    """HTTP 503s whose body says "Database is not ready" kept coming for `window_s` (no quiet spell longer than
    `max_gap_s` between two of them); a shorter burst is reported, not fired."""
    rule = f'503 "Database is not ready!" sustained for {window_s / 60:g} min'
    hits = [r for r in requests if r.status == 503 and DB_NOT_READY in ((r.body_snippet or "") + (r.error or ""))]
    if not hits:
        return Alert(rule=rule, status="quiet", first_s=None, summary="none")
    first, last = min(r.scheduled_s for r in hits), max(r.scheduled_s for r in hits)
    steps = ", ".join(sorted({r.step for r in hits}))
    hit = sustained([(r.scheduled_s, 1.0) for r in hits], lambda v: True, window_s, max_gap_s)
    if hit is None:
        return Alert(
            rule=rule,
            status="quiet",
            first_s=None,
            summary=f"{len(hits):,} such 503s over {last - first:.0f} s in {steps}, never for {window_s:.0f} s on end",
        )
    during = [r for r in hits if hit[0] <= r.scheduled_s <= hit[1]]
    return Alert(
        rule=rule,
        status="fired",
        first_s=hit[0],
        summary=f"{len(hits):,} requests over {last - first:.0f} s in {steps}; {len(during):,} of them "
        f"in {hit[1] - hit[0]:.0f} s without a {max_gap_s:.0f} s pause",
    )


def main_memory_growing(
    samples: Iterable[Sample],
    window_s: float = MAIN_RSS_WINDOW_S,
    growth: float = MAIN_RSS_GROWTH,
    min_mib: float = MAIN_RSS_MIN_GROWTH_MIB,
) -> Alert:
    """Main's RSS (process "main", on any host) up by `growth` and `min_mib` within `window_s`."""
    rule = f"main's memory up {growth:.0%} within {window_s / 60:g} min"
    rss = [x for x in select(samples, "process_rss_mib") if x.labels.get("process") == "main"]
    if not rss:
        return Alert(rule=rule, status="not evaluated", first_s=None, summary="no RSS samples of main")
    for host, rows in per_label(rss, "host").items():
        series = sorted((x.time_s, x.value) for x in rows)
        for i, (t0, v0) in enumerate(series):
            for t1, v1 in series[i + 1 :]:
                if t1 - t0 > window_s:
                    break
                if v1 >= v0 * (1 + growth) and v1 - v0 >= min_mib:
                    return Alert(
                        rule=rule,
                        status="fired",
                        first_s=t0,
                        summary=f"{host}: main grew from {v0:,.0f} to {v1:,.0f} MiB in {t1 - t0:.0f} s",
                    )
    low, high = min(x.value for x in rss), max(x.value for x in rss)
    return Alert(rule=rule, status="quiet", first_s=None, summary=f"main between {low:,.0f} and {high:,.0f} MiB")


def role_cpu_pinned(
    samples: Iterable[Sample], window_s: float = WINDOW_S, pinned_cores: float = RUNNER_PINNED_CORES
) -> Alert:
    """Seed 000's pinned-runner rule for every role on a lab: any process with a `role` label (main, a webhook
    processor, a worker, its runner, Postgres, Redis, Caddy) >= `pinned_cores` for `window_s` while its own host
    had at least half of its other cores idle (one process on one core cannot use the rest)."""
    rule = f"a role >= {pinned_cores:.0%} of one core for {window_s / 60:g} min while its host has idle cores"
    samples = list(samples)
    procs = [x for x in select(samples, "process_cpu_cores") if "role" in x.labels]
    if not procs:
        return Alert(rule=rule, status="not evaluated", first_s=None, summary="no per-role CPU samples")
    longest = 0.0
    for p in _pinned(_by_host_process(procs), samples, pinned_cores, window_s):
        longest = max(longest, p.span_s)
        if p.hit is not None and p.host_idle:  # a host whose idle is unknown is not judged on a lab
            return Alert(
                rule=rule,
                status="fired",
                first_s=p.hit[0],
                summary=f"{p.host}: {p.name} ({p.rows[0].labels['role']}) at >= {pinned_cores:g} core for "
                f"{p.minutes:.1f} min while {p.mean_idle:.1f} of {p.cores:.0f} cores sat idle",
            )
    if longest < window_s:
        return _too_short(rule, "per-role", longest, window_s)
    peak = max(procs, key=lambda x: x.value)
    return Alert(
        rule=rule,
        status="quiet",
        first_s=None,
        summary=f"peak {peak.value:.2f} cores ({peak.labels.get('host')}: {peak.labels.get('process')})",
    )


@dataclass(frozen=True)
class _Pinned:
    """One process's CPU series judged against a pinned-at-one-core rule."""

    host: str | None
    name: str | None
    rows: list[Sample]
    span_s: float
    hit: tuple[float, float] | None  # the sustained stretch at >= the pinned share, if any
    mean_idle: float | None  # the host's mean idle cores over that stretch (None: unknown)
    cores: float | None

    @property
    def minutes(self) -> float:
        return 0.0 if self.hit is None else (self.hit[1] - self.hit[0]) / 60

    @property
    def host_idle(self) -> bool:
        """At least half of the host's other cores idle: one process on one core could not use them."""
        return self.mean_idle is not None and self.cores is not None and self.mean_idle >= 0.5 * (self.cores - 1)


def _pinned(
    groups: dict[tuple[str | None, str | None], list[Sample]],
    samples: list[Sample],
    pinned_cores: float,
    window_s: float,
) -> Iterator[_Pinned]:
    idle = select(samples, "host_cpu_cores", state="idle")
    cpus = {x.labels.get("host"): x.value for x in select(samples, "host_cpus")}
    for (host, name), rows in groups.items():
        series = sorted((x.time_s, x.value) for x in rows)
        hit = sustained(series, lambda v: v >= pinned_cores, window_s)
        idle_in = (
            []
            if hit is None
            else [x.value for x in idle if x.labels.get("host") == host and hit[0] <= x.time_s <= hit[1]]
        )
        yield _Pinned(
            host=host,
            name=name,
            rows=rows,
            span_s=_span(series),
            hit=hit,
            mean_idle=sum(idle_in) / len(idle_in) if idle_in else None,
            cores=cpus.get(host),
        )


def _by_host_process(samples: Iterable[Sample]) -> dict[tuple[str | None, str | None], list[Sample]]:
    out: dict[tuple[str | None, str | None], list[Sample]] = {}
    for x in samples:
        out.setdefault((x.labels.get("host"), x.labels.get("process")), []).append(x)
    return out


def evaluate_alerts(samples: Sequence[Sample], requests: Sequence[RequestRecord]) -> list[Alert]:
    """Seed 000's three alerts on one run (its CPU alert in both forms: runner pinned, server full) and main's
    memory; a lab's run (samples with a `role`) checks every role for a pinned core, not only the runners."""
    per_role = any("role" in x.labels for x in samples)
    return [
        queue_waiting_rising(samples),
        role_cpu_pinned(samples) if per_role else runner_cpu_pinned(samples),
        server_cpu_high(samples),
        database_not_ready(requests),
        main_memory_growing(samples),
    ]
