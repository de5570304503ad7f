"""What a run's records may say together: the checks no single record can make (issue 40).

Each record is typed and bounded on its own (runs.records). Together they must still describe a run that could
have happened: a constant-rate step cannot hold more requests than its rate could schedule over its span (10,000
requests "at rate-20" scheduled within one second made the report answer millions per minute), a step's load
summary cannot answer more than it was offered or more than it sent, its percentiles are ordered, and a process
cannot keep more cores busy than its host has. A run that breaks one of them is refused with one line naming the
file, the target and the step, instead of a report or a refit built on nonsense.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

from n8n_sizer.errors import InputError
from n8n_sizer.runs.records import RequestRecord, Sample
from n8n_sizer.safety.numbers import IN_FLIGHT, RATE_PER_S
from n8n_sizer.safety.text import printable

FIX = "the file was edited or damaged: restore it, or run the step again"
SCHEDULE_SLACK = 1.1  # a step's schedule may run this much denser than its rate (a resumed step, rounding) ...
SCHEDULE_EXTRA = 10  # ... plus this many requests (one per block of a re-run step, k6's dropped ticks)
SHARE_SLACK = 1.01  # a figure may exceed its bound by this share (float rounding of rates and spans)
MAX_STEP_S = 31 * 86_400.0  # a step's schedule: a soak runs at most 30 days (safety.numbers), one step of it
MAX_SHAPED_STEP_S = 86_400.0 * 1.1  # a ramp or burst is one step of at most --step-seconds' day
CORES_SLACK = 1.25  # a process's CPU cores over its host's vCPUs (sampling jitter of a short interval)


def step_max_rate(step: str) -> float | None:
    """The highest rate a step's name offers: `rate-20` (and `rate-20-confirm`), `ramp-2-20`, `burst-2-8-10-30`
    (base and peak); None for a closed (`c-10`) or unnamed step."""
    m = re.fullmatch(r"rate-(\d+(?:\.\d+)?)(?:-.*)?", step)
    if m:
        return float(m.group(1))
    m = re.fullmatch(r"(?:ramp|burst)-(\d+(?:\.\d+)?)-(\d+(?:\.\d+)?)(?:-[\d.]+)*", step)
    if m:
        return max(float(m.group(1)), float(m.group(2)))
    return None


def _step_concurrency(step: str) -> int | None:
    m = re.fullmatch(r"c-(\d{1,12})(?:-.*)?", step)
    return int(m.group(1)) if m else None


def _refuse(path: Path, target: str, step: str, why: str) -> InputError:
    where = f"target {printable(target, limit=60)}, step {printable(step, limit=60)}"
    return InputError(f"{path}: {where}: {why}; {FIX}")


def check_step_name(path: Path, target: str, step: str) -> None:
    """A rate a step's name gives lies in bench's own range (0, 100,000]/s, a concurrency in [1, 100,000]."""
    rate, users = step_max_rate(step), _step_concurrency(step)
    if rate is not None and not RATE_PER_S.holds(rate):
        raise _refuse(path, target, step, f"its rate {rate:g}/s is outside {RATE_PER_S.text()} (what bench sends)")
    if users is not None and not IN_FLIGHT.holds(users):
        raise _refuse(path, target, step, f"its {users:,} users are outside {IN_FLIGHT.text()}")


def check_requests(records: Sequence[RequestRecord], path: Path) -> None:
    """Every step's schedule fits its rate, and no request is recorded twice."""
    steps: dict[tuple[str, str], list[float]] = defaultdict(list)
    done: dict[tuple[str, str], float] = {}
    waits: dict[tuple[str, str], list[float]] = defaultdict(list)
    seen: set[tuple[str, int, str, float]] = set()
    for r in records:
        key = (r.target, r.seq, r.step, r.scheduled_s)
        if key in seen:
            raise _refuse(path, r.target, r.step, f"request {r.seq} is recorded twice")
        seen.add(key)
        steps[(r.target, r.step)].append(r.scheduled_s)
        end = r.scheduled_s + (r.latency_ms or 0.0) / 1000.0
        done[(r.target, r.step)] = max(done.get((r.target, r.step), end), end)
        if r.latency_ms is not None:
            waits[(r.target, r.step)].append(r.latency_ms / 1000.0)
    for (target, step), times in steps.items():
        _check_closed(path, target, step, times, done[(target, step)], waits[(target, step)])
        check_step_name(path, target, step)
        longest = MAX_SHAPED_STEP_S if step.startswith(("ramp-", "burst-")) else MAX_STEP_S
        if max(times) - min(times) > longest:
            raise _refuse(
                path,
                target,
                step,
                f"its requests are scheduled over {max(times) - min(times):,.0f} s, longer than "
                f"a step runs ({longest:,.0f} s)",
            )
        rate = step_max_rate(step)
        if rate is None:
            continue
        span = max(times) - min(times) + 1.0 / rate
        most = rate * span * SCHEDULE_SLACK + SCHEDULE_EXTRA
        if len(times) > most:
            raise _refuse(
                path,
                target,
                step,
                f"{len(times):,} requests are scheduled within {span:.3g} s, more than its {rate:g}/s could send "
                f"(at most {most:,.0f})",
            )


def _check_closed(path: Path, target: str, step: str, times: list[float], done: float, waits: list[float]) -> None:
    """Any step: no more requests than bench can send (RATE_PER_S's top) over the time they took. A closed step of
    C users: no more than Little's law lets C users finish one after another (C / mean latency, latencies read at
    no less than the clocks' 1 ms)."""
    span = max(done, max(times)) - min(times)
    most = RATE_PER_S.high * span + SCHEDULE_EXTRA
    users = _step_concurrency(step)
    if users is not None and waits:
        mean = max(sum(waits) / len(waits), 0.001)
        most = min(most, users * (span + mean) / mean * SCHEDULE_SLACK * 1.5 + users + SCHEDULE_EXTRA)
    if len(times) > most:
        raise _refuse(
            path,
            target,
            step,
            f"{len(times):,} requests within {span:.3g} s are more than it could send (at most {most:,.0f})",
        )


def check_samples(samples: Iterable[Sample], path: Path, vcpu_of: dict[str, float]) -> None:
    """Every step's load summary is consistent with itself, and no process uses more cores than its host has
    (`vcpu_of`: target or host -> vCPUs, where the run recorded them)."""
    load: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    errors: dict[tuple[str, str], float] = defaultdict(float)
    for s in samples:
        labels = s.labels
        if labels.get("source") == "load" and "step" in labels:
            key = (labels.get("target", "local"), labels["step"])
            if s.metric == "errors":
                errors[key] += s.value
            else:
                load[key][s.metric] = s.value
        elif s.metric in ("process_cpu_cores", "container_cpu_cores"):
            host = labels.get("host") or labels.get("target") or ""
            vcpu = vcpu_of.get(host)  # only the host the facts were read on (a load generator is another host)
            if vcpu is not None and s.value > vcpu * CORES_SLACK + 0.5:
                raise InputError(
                    f"{path}: {s.metric} {s.value:g} of {printable(labels.get('process') or labels.get('container'))} "
                    f"on {printable(host)} is more than its host's {vcpu:g} vCPUs could run; {FIX}"
                )
    for (target, step), v in load.items():
        _check_load_summary(path, target, step, v, errors[(target, step)])


def _check_load_summary(path: Path, target: str, step: str, v: dict[str, float], errors: float) -> None:
    check_step_name(path, target, step)
    problems: list[str] = []
    for name in ("requests", "answered", "answered_in_window", "concurrency"):
        if name in v and not float(v[name]).is_integer():
            problems.append(f"{name} {v[name]:g} is not a whole number")
    offered = v.get("offered_rate")
    named = step_max_rate(step)
    if offered is not None:
        if not RATE_PER_S.holds(offered):
            problems.append(f"offered_rate {offered:g} is outside {RATE_PER_S.text()}")
        elif named is not None and offered > named * SHARE_SLACK:
            problems.append(f"offered_rate {offered:g}/s is above the {named:g}/s its name says")
    if "concurrency" in v and not IN_FLIGHT.holds(v["concurrency"]):
        problems.append(f"concurrency {v['concurrency']:g} is outside {IN_FLIGHT.text()}")
    requests, answered = v.get("requests"), v.get("answered")
    if requests is not None and answered is not None and answered > requests:
        problems.append(f"answered {answered:g} is more than its {requests:g} requests")
    if requests is not None and errors > requests:
        problems.append(f"{errors:g} errors are more than its {requests:g} requests")
    if answered is not None and v.get("answered_in_window", 0) > answered:
        problems.append("answered_in_window is more than answered")
    per_min = v.get("answered_per_min")
    if per_min is not None:
        ceiling = (offered if offered is not None else RATE_PER_S.high) * 60 * SHARE_SLACK + 1e-9
        if per_min > ceiling:
            problems.append(f"answered_per_min {per_min:,.6g} is more than its offered rate could answer")
        if answered == 0 and per_min > 0:
            problems.append(f"answered_per_min {per_min:g} with nothing answered")
    if "step_duration" in v and v["step_duration"] <= 0:
        problems.append("step_duration is not positive")
    if v.get("saturated") not in (None, 0.0, 1.0):
        problems.append(f"saturated {v['saturated']:g} is neither 0 nor 1")
    p = [v.get(f"latency_p{q}") for q in (50, 95, 99)]
    known = [x for x in p if x is not None]
    if any(b < a * (2 - SHARE_SLACK) for a, b in zip(known, known[1:], strict=False)):
        problems.append("its latency percentiles are not in order (p50 <= p95 <= p99)")
    if problems:
        raise _refuse(path, target, step, problems[0])
