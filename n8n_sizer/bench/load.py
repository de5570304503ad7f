"""The built-in load driver: open model (constant arrival rate) and closed model (fixed concurrency).

Open model: request i is due at start + i / rate (or at its shape's time, bench.shapes), whatever the server does. The scheduler never waits for
a response, so a slow server cannot slow the offered load (no coordinated omission), and latency is
measured from the *scheduled* time. When `max_in_flight` requests are open, the due request is not sent
and is recorded as `dropped` (k6 calls these dropped iterations): nothing is silently skipped.

Every request becomes one `RequestRecord` handed to `sink` as it finishes (the results store appends and
flushes it), with its failure class and the full error string. Nothing is caught and dropped.

The HTTP client is a lean asyncio HTTP/1.1 keep-alive client (plain http only, POST of a fixed body):
httpx's async client spends several times more CPU per request, which on 2 cores is the difference
between holding 2,000 req/s and not (`benchmarks/load_driver.py` measures it).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence
from urllib.parse import urlsplit

from n8n_sizer.bench.payloads import Payloads
from n8n_sizer.bench.shapes import arrival_times, constant
from n8n_sizer.runs.records import RequestRecord, StepTally
from n8n_sizer.errors import InputError

BODY_SNIPPET_BYTES = 300
EXECUTION_ID_MAX_BODY = 65536  # larger answers are not parsed for their execution id


def execution_id_of(body: bytes) -> str | None:
    """`executionId` from a JSON answer (object, or a list whose first item has it), else None."""
    if b'"executionId"' not in body or len(body) > EXECUTION_ID_MAX_BODY:
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if isinstance(data, list) and data:
        data = data[0]
    value = data.get("executionId") if isinstance(data, dict) else None
    return None if value is None else str(value)


# Node's http server closes idle keep-alive sockets after 5 s (server.keepAliveTimeout); reusing one just
# before that races the server's close, so idle connections are retired earlier.
IDLE_RETIRE_S = 4.0
STOP_POLL_S = 0.25  # how often a step asks whether to stop early (e.g. its target's SSH connection dropped)
ABORT_GRACE_S = 2.0  # after Ctrl-C, how long requests in flight may still answer before they are cancelled

Sink = Callable[[RequestRecord], None]


class RequestFailed(Exception):
    def __init__(self, error_class: str, error: str, sent: float):
        super().__init__(error)
        self.error_class, self.error, self.sent = error_class, error, sent


@dataclass
class _Conn:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    idle_since: float = 0.0


@dataclass
class HttpPost:
    """POST `body` to `url` over pooled keep-alive connections."""

    url: str
    body: bytes
    timeout_s: float = 120.0
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)  # sent with every request (e.g. a signature)
    _idle: list[_Conn] = field(default_factory=list)

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme != "http" or not parts.hostname:
            raise InputError(
                f"load URL {self.url!r} is not plain http://host[:port]/path; the built-in driver "
                f"speaks HTTP/1.1 without TLS (use k6 for https)"
            )
        self.host, self.port = parts.hostname, parts.port or 80
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._netloc = parts.netloc
        self._head = self.request_bytes(self.body, self.headers)

    def request_bytes(self, body: bytes, headers: dict[str, str]) -> bytes:
        extra = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        return (
            f"POST {self._path} HTTP/1.1\r\nHost: {self._netloc}\r\nContent-Type: {self.content_type}\r\n"
            f"{extra}Content-Length: {len(body)}\r\nConnection: keep-alive\r\n\r\n"
        ).encode() + body

    async def _connection(self) -> _Conn:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if now - conn.idle_since < IDLE_RETIRE_S and not conn.reader.at_eof() and not conn.writer.is_closing():
                return conn
            conn.writer.close()
        reader, writer = await asyncio.open_connection(self.host, self.port)
        return _Conn(reader, writer)

    async def post(self, raw: bytes | None = None) -> tuple[int, bytes, float]:
        """POST the fixed body, or `raw` (a whole request from `request_bytes`). Returns (status, body, monotonic
        time the request was written). Raises `RequestFailed`."""
        conn = None
        sent = time.monotonic()
        try:
            async with asyncio.timeout(self.timeout_s):
                conn = await self._connection()
                sent = time.monotonic()
                conn.writer.write(self._head if raw is None else raw)
                status, body, keep = await _read_response(conn.reader)
        except TimeoutError:
            _close(conn)
            raise RequestFailed("timeout", f"no response within {self.timeout_s:g} s (client timeout)", sent) from None
        except ConnectionRefusedError as exc:
            raise RequestFailed("refused", f"{type(exc).__name__}: {exc}", sent) from None
        except (ConnectionResetError, BrokenPipeError, asyncio.IncompleteReadError) as exc:
            _close(conn)
            what = str(exc) or "connection closed before a complete response"
            raise RequestFailed("reset", f"{type(exc).__name__}: {what}", sent) from None
        except (OSError, ValueError, asyncio.LimitOverrunError) as exc:
            _close(conn)
            raise RequestFailed("other", f"{type(exc).__name__}: {exc}", sent) from None
        if keep:
            conn.idle_since = time.monotonic()
            self._idle.append(conn)
        else:
            _close(conn)
        return status, body, sent

    def close(self) -> None:
        while self._idle:
            self._idle.pop().writer.close()


def _close(conn: _Conn | None) -> None:
    if conn is not None:
        conn.writer.close()


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
        raise ValueError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
    status = int(parts[1])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    keep = headers.get("connection", "").lower() != "close" and parts[0] == "HTTP/1.1"
    if "chunked" in headers.get("transfer-encoding", "").lower():
        chunks = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                    pass
                break
            chunks.append((await reader.readexactly(size + 2))[:-2])
        return status, b"".join(chunks), keep
    if "content-length" in headers:
        return status, await reader.readexactly(int(headers["content-length"])), keep
    if status in (204, 304) or 100 <= status < 200:
        return status, b"", keep
    return status, await reader.read(), False  # body until the server closes


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
