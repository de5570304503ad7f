"""Redis at its maxmemory, on real Redis with real n8n 2.41.1 in queue mode (the session's `queue_stack`).

The rendered Redis runs `--maxmemory` with `noeviction` (bundle/limits.py): at the limit it refuses writes instead of
evicting Bull's keys or growing until the kernel kills it. Here the worker is stopped, so every accepted webhook's
job waits in Redis, and Redis' maxmemory is set a little above what it holds. Webhooks (Respond: Immediately) are
sent until Redis refuses: n8n then answers each with an error status, never a 2xx, and stays up. With the limit
lifted and the worker back, every 2xx became a successful execution: nothing accepted was lost, and the rest were
refused visibly (docs/findings/redis-at-maxmemory.md).
"""

from __future__ import annotations

import re
import time

import httpx
import pytest

from n8n_sizer.advisor import ram
from n8n_sizer.native.redis import redis_command

pytestmark = pytest.mark.integration

ROOM_BYTES = 150 * ram.REDIS_WAITING_JOB_BYTES  # about 150 waiting jobs' worth above what Redis holds now
MOST_SENT = 600


def test_at_maxmemory_n8n_refuses_webhooks_visibly_and_loses_none_it_accepted(queue_stack):
    stack = queue_stack.stack
    workflow_id, url = queue_stack.deploy("long-wait")  # Webhook (Respond: Immediately) -> Wait body.seconds

    def redis(*args: str):
        return redis_command(stack.redis_port, stack.secrets.redis_password, *args)

    stack.stop_worker(1)
    used = int(re.search(r"^used_memory:(\d+)", redis("INFO", "memory"), re.M).group(1))
    redis("CONFIG", "SET", "maxmemory", str(used + ROOM_BYTES))
    accepted, refused = [], []
    try:
        with httpx.Client(timeout=30) as http:
            for i in range(MOST_SENT):
                r = http.post(url, json={"seconds": 1, "n": i})
                (accepted if r.is_success else refused).append(r)
                if len(refused) >= 5:
                    break
        health = httpx.get(f"{stack.direct_main_url}/healthz", timeout=10).status_code
        waiting = int(redis("LLEN", "bull:jobs:wait"))
    finally:
        redis("CONFIG", "SET", "maxmemory", "0")
        stack.start_worker(1)
    log = stack.log_tail("main", 400)
    oom = [line for line in log.splitlines() if "OOM command not allowed" in line]
    print(  # the finding's figures (docs/findings/redis-at-maxmemory.md): run with -s to see them
        f"\nmaxmemory {used + ROOM_BYTES:,} B (used {used:,}); accepted {len(accepted)}, then refused "
        f"{[r.status_code for r in refused]} {refused[0].text[:300] if refused else ''!r}; main's log: "
        f"{oom[0].strip()[:300] if oom else 'no OOM line'}"
    )
    assert accepted and len(refused) == 5, (len(accepted), len(refused))
    assert oom, "main's log names Redis' refusal"
    assert {r.status_code for r in refused} == {500}, [(r.status_code, r.text[:200]) for r in refused]
    assert health == 200  # main stays up while Redis refuses
    assert waiting == len(accepted)  # every accepted webhook's job is in Redis, waiting for a worker
    with queue_stack.client() as client:
        deadline = time.monotonic() + 120
        while True:
            counts = client.count_executions(workflow_id)
            if counts.by_status.get("success", 0) >= len(accepted) or time.monotonic() > deadline:
                break
            time.sleep(1)
    assert counts.by_status.get("success", 0) == len(accepted), counts.by_status
    # a refused webhook left no execution that would run later: anything else stored is an error, not a success
    assert set(counts.by_status) <= {"success", "error", "crashed"}, counts.by_status
