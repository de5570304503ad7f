"""What a burst does to a recommended setup: backlog, drain time, p95 during the burst, and what to put in front.

A fluid queue (operational laws, no distribution assumed): at base rate R the setup serves everything (R < C, its
capacity); a burst at R x PEAK for S seconds arrives faster than C, so work piles up at (R x PEAK - C) per second:

  backlog at the burst's end   B = max(0, R x PEAK - C) x S   (jobs waiting in Redis in queue mode; requests held
                                                              open in main in regular mode)
  time to drain it afterwards  D = B / (C - R)                 (the spare capacity at the base rate; never if C <= R)
  wait in queue during it      W(t) = backlog(t) / C           (Little's law: L = lambda W, drained at C)

The backlog grows linearly through the burst and arrivals are even, so the waits of the burst's requests are
spread evenly between 0 and B / C: their 95th percentile is 0.95 x B / C, added to the setup's own p95 (at the base
rate). A burst that stays below capacity builds no backlog: its p95 is the setup's own at the peak rate.
`misses` says which target a burst misses, in the figures that miss it, so a warning never blames the drain time
for a p95 (or the reverse).
The advice follows what was measured (docs/bursts.md): past capacity, answer at ingest with the Webhook node's own
"Respond: Immediately" (p95 37 ms through bursts), not with a Respond to Webhook node placed first (p95 1,303 ms: it
runs only once the execution starts, behind the backlog); above about 3x the baseline put a buffer in front (a queue
or ingest service that accepts and replays at C). `size_for_burst` raises the rate a setup is sized for until the
burst fits the user's p95 and drain targets.
"""

from __future__ import annotations

from pydantic import Field

from n8n_sizer.safety.frozen import Frozen

# docs/bursts.md, `bench --workflow signed-webhook --shape burst:...` in queue mode, p95 per `--respond` mode:
# received (the Webhook node's "Immediately") 37 ms, last-node 991 ms, immediately (a Respond node first) 1,303 ms.
RECEIVED_P95_MS, LAST_NODE_P95_MS, RESPOND_FIRST_P95_MS = 37, 991, 1303
BUFFER_MULTIPLE = 3.0  # the webhook-ingest benchmark: bursts above about 3x baseline need a buffer in front
WAIT_QUANTILE = 0.95


class BurstAdvice(Frozen):
    base_per_s: float = Field(gt=0)
    peak_multiple: float = Field(ge=1)
    burst_s: float = Field(gt=0)
    capacity_per_s: float = Field(gt=0)
    peak_per_s: float
    backlog_max: float = Field(ge=0)  # jobs (or open requests) waiting at the burst's end
    drain_s: float | None  # seconds to work the backlog off after the burst; None: it never drains (C <= R)
    drains: bool
    queue_wait_p95_ms: float = Field(ge=0)  # the burst's requests' p95 wait in queue (Little's law)
    # during the burst: the setup's own p95 at the peak when no backlog builds, else its p95 at the base rate plus
    # that wait; None when the setup's p95 is unknown
    p95_ms: float | None
    where: str  # where the backlog waits
    advice: str


def burst_advice(
    base_per_s: float,
    peak_multiple: float,
    burst_s: float,
    capacity_per_s: float,
    service_p95_ms: float | None,
    mode: str,
    peak_p95_ms: float | None = None,
) -> BurstAdvice:
    """The burst's effect on a setup of capacity `capacity_per_s` (see the module's docstring): `service_p95_ms` is
    the setup's p95 at the base rate, `peak_p95_ms` at the peak (None: past capacity, or not known)."""
    peak = base_per_s * peak_multiple
    excess = max(0.0, peak - capacity_per_s)
    backlog = excess * burst_s
    spare = capacity_per_s - base_per_s
    drains = spare > 0
    drain_s = (backlog / spare if backlog > 0 else 0.0) if drains else None
    wait_ms = WAIT_QUANTILE * backlog / capacity_per_s * 1000.0
    own = peak_p95_ms if backlog == 0 and peak_p95_ms is not None else service_p95_ms
    p95 = None if own is None else own + wait_ms
    where = (
        "in Redis (Bull's wait list), run by the workers at capacity"
        if mode == "queue"
        else "as requests held open in main (memory), each within its sender's timeout"
    )
    advice = _advice(base_per_s, peak, capacity_per_s, peak_multiple, backlog, drain_s, drains, where)
    return BurstAdvice(
        base_per_s=base_per_s,
        peak_multiple=peak_multiple,
        burst_s=burst_s,
        capacity_per_s=capacity_per_s,
        peak_per_s=peak,
        backlog_max=backlog,
        drain_s=drain_s,
        drains=drains,
        queue_wait_p95_ms=wait_ms,
        p95_ms=p95,
        where=where,
        advice=advice,
    )


def _advice(
    base: float,
    peak: float,
    capacity: float,
    multiple: float,
    backlog: float,
    drain_s: float | None,
    drains: bool,
    where: str,
) -> str:
    if not drains:
        return (
            f"the base rate {base:g}/s alone is at or above the capacity {capacity:.1f}/s: the backlog never "
            f"drains (infinite drain time); size up first (more workers or a bigger host)"
        )
    if backlog == 0:
        return (
            f"the burst fits: {peak:g}/s is within the capacity {capacity:.1f}/s, no backlog builds; answering "
            f"after the last node is fine"
        )
    text = (
        f"{peak:g}/s is past the capacity {capacity:.1f}/s: {backlog:,.0f} executions wait ({where}) and drain in "
        f'{drain_s:,.0f} s; answer at ingest with the Webhook node\'s own "Respond: Immediately" so senders do '
        f"not time out and retry into the backlog (measured here through bursts: p95 {RECEIVED_P95_MS} ms against "
        f"{LAST_NODE_P95_MS:,} ms answering after the last node; a Respond to Webhook node placed first answered no "
        f"earlier, p95 {RESPOND_FIRST_P95_MS:,} ms, because it runs only once the execution starts, behind the "
        f"backlog); validate the payload inside the workflow, after the 202"
    )
    if multiple > BUFFER_MULTIPLE:
        text += (
            f"; a burst of {multiple:g}x baseline (above about {BUFFER_MULTIPLE:g}x) wants a buffer in front "
            f"(a queue or ingest service that accepts at once and replays at {capacity:.0f}/s)"
        )
    return text


def misses(b: BurstAdvice, p95_target_ms: float | None, drain_target_s: float | None) -> list[str]:
    """What the burst misses, each in its own figures: it never drains; it drains later than `drain_target_s`; its
    p95 is above `p95_target_ms` (each target only when given). Empty: it stays within the targets."""
    out = []
    if not b.drains:
        out.append(
            f"its backlog never drains (the base rate {b.base_per_s:g}/s is at or above the capacity "
            f"{b.capacity_per_s:.1f}/s)"
        )
    elif drain_target_s is not None and (b.drain_s or 0.0) > drain_target_s:
        out.append(
            f"its backlog of {b.backlog_max:,.0f} drains in about {b.drain_s:,.0f} s, past --drain-seconds "
            f"{drain_target_s:g}"
        )
    if p95_target_ms is not None and (b.p95_ms is None or b.p95_ms > p95_target_ms):
        got = "is unknown (past capacity)" if b.p95_ms is None else f"is about {b.p95_ms:,.0f} ms"
        wait = f" ({b.queue_wait_p95_ms:,.0f} ms of it waiting in the backlog)" if b.queue_wait_p95_ms >= 1 else ""
        out.append(f"its p95 during the burst {got}{wait}, above --p95-ms {p95_target_ms:g}")
    return out


def absorbs(b: BurstAdvice, p95_target_ms: float | None, drain_target_s: float | None) -> bool:
    """Whether a burst stays within the targets (`misses` finds nothing)."""
    return not misses(b, p95_target_ms, drain_target_s)


def size_for_burst(
    answer,
    p95_at,
    base_per_s: float,
    multiple: float,
    burst_s: float,
    p95_target_ms: float | None,
    drain_target_s: float | None,
    step: float = 1.15,
):
    """(answer, its burst advice, the rate it was sized for, the burst advice of the answer at the base rate).
    `answer(rate)` is the answer sized for `rate` and judged at the base rate; `p95_at(rate, at)` its p95 at `at`
    (None past capacity). The rate climbs from the base rate in steps of `step` until the answer absorbs the burst
    within the targets, up to the burst's peak (where nothing queues) or until nothing carries the rate, whatever the
    targets say."""
    rate, first = base_per_s, None
    peak = base_per_s * multiple
    while True:
        rec = answer(rate)
        b = burst_advice(
            base_per_s,
            multiple,
            burst_s,
            rec.capacity_per_s.mid,
            p95_at(rate, base_per_s),
            rec.mode,
            p95_at(rate, peak),
        )
        first = first or b
        # nothing carries `rate` (the answer is the most capacity there is): a higher rate cannot get more
        if absorbs(b, p95_target_ms, drain_target_s) or rate >= peak or rec.capacity_per_s.mid <= rate:
            return rec, b, rate, first
        rate = min(rate * step, peak)
