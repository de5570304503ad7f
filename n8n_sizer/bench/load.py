"""The built-in load driver: open model (constant arrival rate) and closed model (fixed concurrency).

Open model: request i is due at start + i / rate (or at its shape's time, bench.shapes), whatever the server does. The scheduler never waits for
a response, so a slow server cannot slow the offered load (no coordinated omission), and latency is
measured from the *scheduled* time. When `max_in_flight` requests are open, the due request is not sent
and is recorded as `dropped` (k6 calls these dropped iterations): nothing is silently skipped.

Every request becomes one `RequestRecord` handed to `sink` as it finishes (the results store appends and
flushes it), with its failure class and the full error string. Nothing is caught and dropped.

The HTTP client is bench/http_post.py's.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from n8n_sizer.bench.http_post import BODY_SNIPPET_BYTES, HttpPost, RequestFailed, execution_id_of
from n8n_sizer.bench.payloads import Payloads
from n8n_sizer.bench.shapes import arrival_times, constant
from n8n_sizer.errors import InputError
from n8n_sizer.runs.records import RequestRecord, StepTally

STOP_POLL_S = 0.25  # how often a step asks whether to stop early (e.g. its target's SSH connection dropped)
ABORT_GRACE_S = 2.0  # after Ctrl-C, how long requests in flight may still answer before they are cancelled

Sink = Callable[[RequestRecord], None]


class _Clock:
    """Monotonic time for scheduling, converted to unix seconds for the records."""

    def __init__(self) -> None:
        self.offset = time.time() - time.monotonic()

    def unix(self, mono: float) -> float:
        return mono + self.offset


class _Recorder:
    def __init__(self, step: str, target: str, seq_start: int, sink: Sink | None, clock: _Clock) -> None:
        self.step, self.target, self.seq, self.sink, self.clock = step, target, seq_start, sink, clock

    def next_seq(self) -> int:
        seq = self.seq
        self.seq += 1
        return seq

    async def fire(
        self, client: HttpPost, seq: int, due: float, raw: bytes | None = None, payload_class: str | None = None
    ) -> None:
        cls = payload_class
        try:
            status, body, sent = await client.post(raw)
        except RequestFailed as exc:
            self.emit(seq, due, exc.sent, None, None, exc.error_class, exc.error, payload_class=cls)
            return
        except asyncio.CancelledError:  # the run was stopped (Ctrl-C): still one record for this request
            self.emit(
                seq,
                due,
                due,
                None,
                None,
                "other",
                "cancelled before a response: the run was stopped (Ctrl-C); it may have reached the server",
                payload_class=cls,
            )
            return
        now = time.monotonic()
        if 200 <= status < 300:
            self.emit(
                seq, due, sent, status, (now - due) * 1000.0, execution_id=execution_id_of(body), payload_class=cls
            )
        else:  # a refusal may name its execution too (signed-webhook does): the ledger counts those executions
            snippet = body[:BODY_SNIPPET_BYTES].decode("utf-8", "replace")
            self.emit(
                seq,
                due,
                sent,
                status,
                (now - due) * 1000.0,
                "non-2xx",
                f"HTTP {status}",
                snippet,
                execution_id=execution_id_of(body),
                payload_class=cls,
            )

    def emit(
        self,
        seq,
        due,
        sent,
        status,
        latency_ms,
        error_class=None,
        error=None,
        snippet=None,
        execution_id=None,
        payload_class=None,
    ) -> None:
        if self.sink is None:
            return
        self.sink(
            RequestRecord(
                seq=seq,
                step=self.step,
                target=self.target,
                scheduled_s=self.clock.unix(due),
                sent_s=self.clock.unix(sent),
                status=status,
                latency_ms=latency_ms,
                error_class=error_class,
                error=error,
                body_snippet=snippet,
                execution_id=execution_id,
                payload_class=payload_class,
            )
        )


async def run_open(
    client: HttpPost,
    *,
    rate_per_s: float,
    duration_s: float,
    max_in_flight: int,
    step: str,
    target: str,
    seq_start: int = 0,
    sink: Sink | None = None,
    should_stop: Callable[[], bool] | None = None,
    abort: Callable[[], bool] | None = None,
    abort_grace_s: float = ABORT_GRACE_S,
    times: Sequence[float] | None = None,
    payloads: Payloads | None = None,
) -> StepTally:
    """Offer `rate_per_s` for `duration_s` (open model), or, given `times` (seconds from the step's start, from
    bench.shapes.arrival_times), one request at each of them (a ramp or a burst). `should_stop` is polled to end a
    step early (the requests in flight still complete); `abort` also cancels them after a short grace (Ctrl-C).
    `payloads` gives each request its own body, headers and class (bench.payloads), by its place in the step."""
    if rate_per_s <= 0 or duration_s <= 0:
        raise InputError(f"rate {rate_per_s} req/s for {duration_s} s: both must be > 0; try --rates 5,20,50")
    if times is None:
        times = arrival_times(constant(rate_per_s), duration_s)
    clock = _Clock()
    rec = _Recorder(step, target, seq_start, sink, clock)
    tasks: set[asyncio.Task] = set()
    start = time.monotonic() + 0.01
    next_check = start
    out = StepTally(step=step, started_s=clock.unix(start), finished_s=0.0)
    for offset in times:
        due = start + offset
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        if should_stop is not None and time.monotonic() >= next_check:
            if should_stop():
                break
            next_check = time.monotonic() + STOP_POLL_S
        seq = rec.next_seq()
        raw, cls = None, None
        if payloads is not None:
            body, headers, cls = payloads.request(seq - seq_start)
            raw = client.request_bytes(body, headers)
        out.scheduled += 1
        if len(tasks) >= max_in_flight:
            rec.emit(
                seq,
                due,
                due,
                None,
                None,
                "dropped",
                f"not sent: {max_in_flight} requests already in flight (max in flight)",
                payload_class=cls,
            )
            continue
        task = asyncio.create_task(rec.fire(client, seq, due, raw, cls))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        out.sent += 1
        out.last_sent_s = clock.unix(time.monotonic())
    await _finish(tasks, abort, abort_grace_s)
    out.finished_s = clock.unix(time.monotonic())
    return out


async def _finish(tasks: set[asyncio.Task], abort: Callable[[], bool] | None, grace_s: float = ABORT_GRACE_S) -> None:
    """Wait for the requests in flight; after an abort (Ctrl-C) give them ABORT_GRACE_S, then cancel the
    rest (each cancelled request is still recorded, as class "other")."""
    if not tasks:
        return
    pending = set(tasks)
    while pending:
        _, pending = await asyncio.wait(pending, timeout=STOP_POLL_S)
        if pending and abort is not None and abort():
            _, pending = await asyncio.wait(pending, timeout=grace_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            return


async def run_closed(
    client: HttpPost,
    *,
    concurrency: int,
    duration_s: float,
    step: str,
    target: str,
    seq_start: int = 0,
    sink: Sink | None = None,
    should_stop: Callable[[], bool] | None = None,
    abort: Callable[[], bool] | None = None,
) -> StepTally:
    """`concurrency` users, each sending its next request when the previous one answered (seed 002's ab)."""
    clock = _Clock()
    rec = _Recorder(step, target, seq_start, sink, clock)
    start = time.monotonic()
    deadline = start + duration_s
    out = StepTally(step=step, started_s=clock.unix(start), finished_s=0.0)

    async def user() -> None:
        while time.monotonic() < deadline and not (should_stop is not None and should_stop()):
            seq = rec.next_seq()
            out.scheduled += 1
            out.sent += 1
            await rec.fire(client, seq, time.monotonic())
            out.last_sent_s = clock.unix(time.monotonic())

    await _finish({asyncio.create_task(user()) for _ in range(concurrency)}, abort)
    out.finished_s = clock.unix(time.monotonic())
    return out


async def closed_count(client: HttpPost, users: int, per_user: int) -> dict:
    """Warm-up: `users` loops of `per_user` requests each; returns counts (sent, ok, per failure class) and
    the first failure's full error string."""
    summary: dict = {"sent": 0, "ok": 0, "errors": {}, "first_error": None}

    def failed(cls: str, error: str) -> None:
        summary["errors"][cls] = summary["errors"].get(cls, 0) + 1
        summary["first_error"] = summary["first_error"] or error

    async def user() -> None:
        for _ in range(per_user):
            summary["sent"] += 1
            try:
                status, body, _ = await client.post()
            except RequestFailed as exc:
                failed(exc.error_class, exc.error)
                continue
            if 200 <= status < 300:
                summary["ok"] += 1
            else:
                failed("non-2xx", f"HTTP {status}: {body[:200].decode('utf-8', 'replace')}")

    await asyncio.gather(*(user() for _ in range(users)))
    client.close()
    return summary
