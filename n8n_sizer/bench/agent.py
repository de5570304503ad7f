"""One load generator's share of a step, run ON the generator host (over SSH) with the built-in driver.

    python -m n8n_sizer.remote.load_agent --url http://10.89.0.11:5678/webhook/PATH --rate 2 --duration 15 \
        --seq-start 1040 --step rate-4 --target cluster --generator gen-1 --out /tmp/FILE.jsonl

It offers `--rate` for `--duration` (open model, `load.run_open`), writes one RequestRecord per request (with
`generator` set) to `--out` as JSON lines, and prints the step's tally as one JSON line. Bounded in count (the
schedule of rate x duration requests, at most `--max-in-flight` open) and in time (`--deadline-s` after which
open requests are cancelled and still recorded). The body comes from a file, so nothing is read from stdin.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import asdict
from pathlib import Path

from n8n_sizer.bench.http_post import HttpPost
from n8n_sizer.bench.load import run_open
from n8n_sizer.runs.records import RequestRecord


def run_agent(
    *,
    url: str,
    body: bytes,
    rate_per_s: float,
    duration_s: float,
    seq_start: int,
    step: str,
    target: str,
    generator: str,
    out: Path,
    timeout_s: float,
    max_in_flight: int,
    deadline_s: float,
) -> dict:
    """Run the share and write its records to `out` (created 0600, never overwritten); the tally as a dict."""
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    handle = os.fdopen(fd, "w")
    stop_at = time.monotonic() + deadline_s

    def sink(record: RequestRecord) -> None:
        handle.write(record.model_copy(update={"generator": generator}).model_dump_json() + "\n")

    async def share():
        client = HttpPost(url, body, timeout_s)
        try:
            return await run_open(
                client,
                rate_per_s=rate_per_s,
                duration_s=duration_s,
                max_in_flight=max_in_flight,
                step=step,
                target=target,
                seq_start=seq_start,
                sink=sink,
                should_stop=lambda: time.monotonic() >= stop_at,
                abort=lambda: time.monotonic() >= stop_at,
            )
        finally:
            client.close()  # inside the loop: its connections' transports need it to close

    try:
        tally = asyncio.run(share())
    finally:
        handle.close()
    return asdict(tally)
