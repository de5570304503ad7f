"""The built-in driver against a real asyncio HTTP server on 127.0.0.1 (in the test's own event loop)."""

from __future__ import annotations

import asyncio
import socket
from itertools import pairwise

import pytest

from n8n_sizer.bench.http_post import HttpPost
from n8n_sizer.bench.load import run_closed, run_open
from n8n_sizer.errors import InputError


async def _handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                (int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")), 0
            )
            await reader.readexactly(length)
            path = head.split(b" ")[1].decode()
            _STATE["open"] += 1
            _STATE["peak"] = max(_STATE["peak"], _STATE["open"])
            try:
                if path == "/slow":
                    await asyncio.sleep(0.3)
                if path == "/hang":
                    await asyncio.sleep(5)
                if path == "/reset":
                    writer.transport.abort()
                    return
                if path == "/fail":
                    body = b'{"code":503,"message":"Database is not ready!"}'
                    writer.write(
                        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
                    )
                elif path == "/chunked":
                    writer.write(
                        b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{"a"\r\n3\r\n:1}\r\n0\r\n\r\n'
                    )
                else:
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
                await writer.drain()
            finally:
                _STATE["open"] -= 1
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()


_STATE = {"open": 0, "peak": 0}


async def _with_server(body):
    _STATE.update(open=0, peak=0)
    server = await asyncio.start_server(_handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        return await body(port)
    finally:
        server.close()


def _collect():
    records = []
    return records, records.append


def test_open_model_keeps_schedule_and_records_every_request():
    records, sink = _collect()

    async def body(port):
        client = HttpPost(f"http://127.0.0.1:{port}/ok", b'{"n":1}')
        return await run_open(
            client,
            rate_per_s=200,
            duration_s=0.5,
            max_in_flight=100,
            step="rate-200",
            target="t",
            seq_start=7,
            sink=sink,
        )

    out = asyncio.run(_with_server(body))
    assert out.scheduled == out.sent == 100 == len(records)
    assert sorted(r.seq for r in records) == list(range(7, 107))
    assert all(r.status == 200 and r.error_class is None and r.latency_ms >= 0 for r in records)
    sched = sorted(r.scheduled_s for r in records)
    gaps = [b - a for a, b in pairwise(sched)]
    assert min(gaps) == pytest.approx(0.005, abs=1e-6) and max(gaps) == pytest.approx(0.005, abs=1e-6)


def test_slow_server_does_not_slow_the_schedule_latency_from_scheduled_time():
    records, sink = _collect()

    async def body(port):
        client = HttpPost(f"http://127.0.0.1:{port}/slow", b"{}")
        return await run_open(
            client, rate_per_s=40, duration_s=0.3, max_in_flight=1000, step="s", target="t", sink=sink
        )

    asyncio.run(_with_server(body))
    assert len(records) == 12
    # The schedule did not wait for answers: a driver that did would never have had more than one open.
    assert _STATE["peak"] >= 10
    # Latency runs from the scheduled time, so any lag in sending is inside it, on top of the 300 ms answer
    # (no wall-clock threshold: this machine is shared, and the lag itself is what the benchmark script measures).
    for r in records:
        assert r.latency_ms / 1000.0 >= (r.sent_s - r.scheduled_s) + 0.3 - 0.005


def test_in_flight_cap_records_dropped_requests_with_their_class():
    records, sink = _collect()

    async def body(port):
        client = HttpPost(f"http://127.0.0.1:{port}/slow", b"{}")
        return await run_open(client, rate_per_s=100, duration_s=0.2, max_in_flight=3, step="s", target="t", sink=sink)

    out = asyncio.run(_with_server(body))
    dropped = [r for r in records if r.error_class == "dropped"]
    assert len(records) == out.scheduled == 20 and out.sent == 3 and len(dropped) == 17
    assert all(r.status is None and "in flight" in r.error for r in dropped)


def test_failure_classes_carry_error_string_and_body():
    records, sink = _collect()

    async def body(port):
        for path in ("fail", "reset", "chunked"):
            await run_open(
                HttpPost(f"http://127.0.0.1:{port}/{path}", b"{}"),
                rate_per_s=20,
                duration_s=0.1,
                max_in_flight=10,
                step=path,
                target="t",
                sink=sink,
            )
        await run_open(
            HttpPost(f"http://127.0.0.1:{port}/hang", b"{}", timeout_s=0.2),
            rate_per_s=20,
            duration_s=0.1,
            max_in_flight=10,
            step="hang",
            target="t",
            sink=sink,
        )
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            closed = s.getsockname()[1]
        await run_open(
            HttpPost(f"http://127.0.0.1:{closed}/", b"{}"),
            rate_per_s=20,
            duration_s=0.1,
            max_in_flight=10,
            step="closed",
            target="t",
            sink=sink,
        )

    asyncio.run(_with_server(body))
    by = {step: [r for r in records if r.step == step] for step in ("fail", "reset", "chunked", "hang", "closed")}
    assert all(len(v) == 2 for v in by.values())
    assert all(
        r.error_class == "non-2xx" and r.status == 503 and "Database is not ready" in r.body_snippet for r in by["fail"]
    )
    assert all(r.error_class == "reset" and r.status is None and r.error for r in by["reset"])
    assert all(r.status == 200 and r.error_class is None for r in by["chunked"])
    assert all(r.error_class == "timeout" and "0.2 s" in r.error for r in by["hang"])
    assert all(r.error_class == "refused" and "Connect" in r.error for r in by["closed"])


def test_closed_model_never_exceeds_its_concurrency():
    records, sink = _collect()

    async def body(port):
        client = HttpPost(f"http://127.0.0.1:{port}/ok", b"{}")
        return await run_closed(client, concurrency=2, duration_s=0.3, step="c-2", target="t", sink=sink)

    out = asyncio.run(_with_server(body))
    assert len(records) == out.sent > 10 and _STATE["peak"] <= 2
    assert len({r.seq for r in records}) == len(records)


def test_https_and_bad_rates_are_input_errors():
    with pytest.raises(InputError, match="plain http"):
        HttpPost("https://example.invalid/x", b"")
    with pytest.raises(InputError, match="--rates"):
        asyncio.run(
            run_open(
                HttpPost("http://127.0.0.1:1/", b""), rate_per_s=0, duration_s=1, max_in_flight=1, step="s", target="t"
            )
        )


def test_abort_cancels_requests_in_flight_and_still_records_each():
    records, sink = _collect()

    async def body(port):
        client = HttpPost(f"http://127.0.0.1:{port}/hang", b"{}", timeout_s=30)
        started = asyncio.get_running_loop().time()

        def stop():
            return asyncio.get_running_loop().time() - started > 0.2

        return await run_open(
            client,
            rate_per_s=50,
            duration_s=5,
            max_in_flight=100,
            step="s",
            target="t",
            sink=sink,
            should_stop=stop,
            abort=stop,
            abort_grace_s=0.1,
        )

    out = asyncio.run(_with_server(body))
    assert 5 <= out.scheduled < 30 and len(records) == out.scheduled
    assert all(r.error_class == "other" and "cancelled" in r.error for r in records)
