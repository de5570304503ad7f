"""What a burst does to a recommended setup: backlog, drain time, p95 during the burst, and what to put in front.

A fluid queue (operational laws, no distribution assumed): at base rate R the setup serves everything (R < C, its
capacity); a burst at R x PEAK for S seconds arrives faster than C, so work piles up at (R x PEAK - C) per second:

  backlog at the burst's end   B = max(0, R x PEAK - C) x S   (jobs waiting in Redis in queue mode; requests held
                                                              open in main in regular mode)
  time to drain it afterwards  D = B / (C - R)                 (the spare capacity at the base rate; never if C <= R)
  wait in queue during it      W(t) = backlog(t) / C           (Little's law: L = lambda W, drained at C)

The backlog grows linearly through the burst and arrivals are even, so the waits of the burst's requests are
spread evenly between 0 and B / C: their 95th percentile is 0.95 x B / C, added to the setup's own p95.
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
    p95_ms: float | None  # the setup's own p95 plus that wait; None when the setup's p95 is unknown
    where: str  # where the backlog waits
    advice: str


def burst_advice(
    base_per_s: float,
    peak_multiple: float,
    burst_s: float,
    capacity_per_s: float,
    service_p95_ms: float | None,
    mode: str,
) -> BurstAdvice:
    """The burst's effect on a setup of capacity `capacity_per_s` (see the module's docstring)."""
    peak = base_per_s * peak_multiple
    excess = max(0.0, peak - capacity_per_s)
    backlog = excess * burst_s
    spare = capacity_per_s - base_per_s
    drains = spare > 0
    drain_s = (backlog / spare if backlog > 0 else 0.0) if drains else None
    wait_ms = WAIT_QUANTILE * backlog / capacity_per_s * 1000.0
    p95 = None if service_p95_ms is None else service_p95_ms + wait_ms
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


def absorbs(b: BurstAdvice, p95_target_ms: float | None, drain_target_s: float | None) -> bool:
    """Whether a burst stays within the targets: it drains, within `drain_target_s`, and its p95 within
    `p95_target_ms` (each only when given)."""
    if not b.drains:
        return False
    if drain_target_s is not None and (b.drain_s or 0.0) > drain_target_s:
        return False
    return p95_target_ms is None or (b.p95_ms is not None and b.p95_ms <= p95_target_ms)


def size_for_burst(
    answer,
    base_per_s: float,
    multiple: float,
    burst_s: float,
    p95_target_ms: float | None,
    drain_target_s: float | None,
    step: float = 1.15,
):
    """(answer, its burst advice, the rate it was sized for): `answer(rate)` at the base rate, or at the lowest
    rate (in steps of `step`, up to the burst's peak) whose answer absorbs the burst within the targets. At the peak
    nothing queues, so the search ends there whatever the targets say."""
    rate = base_per_s
    while True:
        rec = answer(rate)
        b = burst_advice(base_per_s, multiple, burst_s, rec.capacity_per_s.mid, rec.p95_ms, rec.mode)
        if absorbs(b, p95_target_ms, drain_target_s) or rate >= base_per_s * multiple or not rec.feasible:
            return rec, b, rate
        rate = min(rate * step, base_per_s * multiple)
