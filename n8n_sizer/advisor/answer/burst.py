"""What a burst does to a recommended setup: backlog, drain time, p95 during the burst, and what to put in front.

A fluid queue (operational laws, no distribution assumed): at base rate R the setup serves everything (R < C, its
capacity); a burst at R x PEAK for S seconds arrives faster than C, so work piles up at (R x PEAK - C) per second:

  backlog at the burst's end   B = max(0, R x PEAK - C) x S   (jobs waiting in Redis in queue mode; requests held
                                                              open in main in regular mode)
  time to drain it afterwards  D = B / (C - R)                 (the spare capacity at the base rate; never if C <= R)
  wait in queue during it      W(t) = backlog(t) / C           (Little's law: L = lambda W, drained at C)

The backlog grows linearly through the burst and arrivals are even, so the waits of the burst's requests are
spread evenly between 0 and B / C: their 95th percentile is 0.95 x B / C, added to the setup's own p95.
The advice follows the webhook-ingest benchmark (issue 16): past the ingest ceiling answer immediately (an early
202 from a Respond to Webhook node, the work after) so senders do not time out and retry into the backlog; above
about 3x the baseline put a buffer in front (a queue or ingest service that accepts and replays at C).
"""

from __future__ import annotations

from pydantic import Field
from n8n_sizer.safety.frozen import Frozen

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


def burst_advice(base_per_s: float, peak_multiple: float, burst_s: float, capacity_per_s: float,
                 service_p95_ms: float | None, mode: str) -> BurstAdvice:
    """The burst's effect on a setup of capacity `capacity_per_s` (see the module's docstring)."""
    peak = base_per_s * peak_multiple
    excess = max(0.0, peak - capacity_per_s)
    backlog = excess * burst_s
    spare = capacity_per_s - base_per_s
    drains = spare > 0
    drain_s = (backlog / spare if backlog > 0 else 0.0) if drains else None
    wait_ms = WAIT_QUANTILE * backlog / capacity_per_s * 1000.0
    p95 = None if service_p95_ms is None else service_p95_ms + wait_ms
    where = ("in Redis (Bull's wait list), run by the workers at capacity" if mode == "queue" else
             "as requests held open in main (memory), each within its sender's timeout")
    advice = _advice(base_per_s, peak, capacity_per_s, peak_multiple, backlog, drain_s, drains, where)
    return BurstAdvice(base_per_s=base_per_s, peak_multiple=peak_multiple, burst_s=burst_s,
                       capacity_per_s=capacity_per_s, peak_per_s=peak, backlog_max=backlog, drain_s=drain_s,
                       drains=drains, queue_wait_p95_ms=wait_ms, p95_ms=p95, where=where, advice=advice)


def _advice(base: float, peak: float, capacity: float, multiple: float, backlog: float, drain_s: float | None,
            drains: bool, where: str) -> str:
    if not drains:
        return (f"the base rate {base:g}/s alone is at or above the capacity {capacity:.1f}/s: the backlog never "
                f"drains (infinite drain time); size up first (more workers or a bigger host)")
    if backlog == 0:
        return (f"the burst fits: {peak:g}/s is within the capacity {capacity:.1f}/s, no backlog builds; answering "
                f"after the last node is fine")
    text = (f"{peak:g}/s is past the capacity {capacity:.1f}/s: {backlog:,.0f} executions wait ({where}) and drain in "
            f"{drain_s:,.0f} s; answer immediately (Respond to Webhook first: an early 202, the work after) so "
            f"senders do not time out and retry into the backlog")
    if multiple > BUFFER_MULTIPLE:
        text += (f"; a burst of {multiple:g}x baseline (above about {BUFFER_MULTIPLE:g}x) wants a buffer in front "
                 f"(a queue or ingest service that accepts at once and replays at {capacity:.0f}/s)")
    return text
