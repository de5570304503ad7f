"""How well the built-in open-model driver holds its schedule on this machine, and its overhead against `hey`.

Starts a trivial HTTP/1.1 keep-alive server (asyncio.Protocol, answers 200 `{}`) in its own process on a
free port of 127.0.0.1, then:
  1. offers 100 .. 2,000 req/s for a few seconds each, recording every request to a requests.jsonl as a
     real run does, and prints achieved/target rate (target >= 0.99), the send lag (sent - scheduled) p99
     and the latency p50;
  2. runs Debian's `hey` (closed model, `-c C -q Q`, keep-alive) at the same rate and prints its p50 next to
     the driver's p50 at that rate: the difference is the driver's overhead.

Run: .venv/bin/python benchmarks/load_driver.py [--seconds 5] [--rates 100,500,1000,1500,2000]
No asserts: it prints figures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


class _Trivial(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport, self.buf = transport, b""

    def data_received(self, data):
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].lower()
            m = re.search(rb"content-length:\s*(\d+)", head)
            total = end + 4 + (int(m.group(1)) if m else 0)
            if len(self.buf) < total:
                return
            self.buf = self.buf[total:]
            self.transport.write(RESPONSE)


def serve(port: int) -> None:
    async def main():
        loop = asyncio.get_running_loop()
        server = await loop.create_server(_Trivial, "127.0.0.1", port, backlog=4096)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=1000, method="inclusive")[int(q * 10) - 1] if len(values) > 1 else values[0]


async def _drive(url: str, rate: float, seconds: float):
    import tempfile
    import time as _time
    from pathlib import Path

    from n8n_sizer.bench.http_post import HttpPost
    from n8n_sizer.bench.load import run_open
    from n8n_sizer.runs.records import RunManifest
    from n8n_sizer.runs.store import RunStore

    records = []
    # The sink a real run uses: each record serialised and appended (flushed) to requests.jsonl.
    with tempfile.TemporaryDirectory() as tmp:
        store = RunStore.create(Path(tmp), RunManifest(run_id="bench", created_s=_time.time()))

        def sink(record):
            store.append_request(record)
            records.append(record)

        client = HttpPost(url, b'{"n":1}', timeout_s=30)
        out = await run_open(
            client, rate_per_s=rate, duration_s=seconds, max_in_flight=1000, step="b", target="b", sink=sink
        )
        client.close()
        store.close()
    return out, records


def measure_driver(url: str, rate: float, seconds: float) -> dict:
    out, records = asyncio.run(_drive(url, rate, seconds))
    ok = [r for r in records if r.status == 200]
    first = min(r.scheduled_s for r in records)
    span = out.last_sent_s - first + 1.0 / rate
    return {
        "rate": rate,
        "achieved": out.sent / span,
        "ok": len(ok),
        "total": len(records),
        "lag_p99_ms": _pct([(r.sent_s - r.scheduled_s) * 1000 for r in records], 99),
        "p50_ms": _pct([r.latency_ms for r in ok], 50),
    }


def measure_hey(url: str, rate: float, seconds: float) -> dict | None:
    if shutil.which("hey") is None:
        return None
    workers = max(1, int(rate // 50))  # hey's -q is per worker
    res = subprocess.run(
        [
            "hey",
            "-z",
            f"{seconds:g}s",
            "-c",
            str(workers),
            "-q",
            f"{rate / workers:g}",
            "-m",
            "POST",
            "-T",
            "application/json",
            "-d",
            '{"n":1}',
            url,
        ],
        capture_output=True,
        text=True,
        timeout=seconds + 60,
    )
    m50 = re.search(r"50%+ in ([\d.]+) secs", res.stdout)
    mrate = re.search(r"Requests/sec:\s+([\d.]+)", res.stdout)
    if not m50:
        return {"error": res.stdout[-300:] + res.stderr[-300:]}
    return {"p50_ms": float(m50.group(1)) * 1000, "rate": float(mrate.group(1)) if mrate else None}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rates", default="100,500,1000,1500,2000")
    parser.add_argument("--hey-rate", type=float, default=200.0)
    parser.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve)
        return
    port = _free_port()
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(port)])
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        url = f"http://127.0.0.1:{port}/webhook/bench"
        print(f"machine: {os.cpu_count()} cores; trivial server pid {server.pid}; {args.seconds:g} s per rate")
        print(f"{'target req/s':>12} {'achieved':>9} {'ratio':>6} {'ok/total':>13} {'lag p99 ms':>10} {'p50 ms':>7}")
        for rate in [float(r) for r in args.rates.split(",")]:
            m = measure_driver(url, rate, args.seconds)
            print(
                f"{rate:>12g} {m['achieved']:>9.1f} {m['achieved'] / rate:>6.3f} {m['ok']:>6}/{m['total']:<6} "
                f"{m['lag_p99_ms']:>10.2f} {m['p50_ms']:>7.2f}"
            )
        ours = measure_driver(url, args.hey_rate, args.seconds)
        hey = measure_hey(url, args.hey_rate, args.seconds)
        if hey is None:
            print("hey not installed (apt-get install -y hey): no overhead comparison")
        elif "error" in hey:
            print(f"hey failed: {hey['error']}")
        else:
            print(
                f"p50 at {args.hey_rate:g} req/s: driver {ours['p50_ms']:.3f} ms, hey {hey['p50_ms']:.3f} ms "
                f"(hey achieved {hey['rate']:.1f} req/s); driver overhead {ours['p50_ms'] - hey['p50_ms']:+.3f} ms"
            )
    finally:
        os.kill(server.pid, signal.SIGTERM)
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
