"""Real n8n in queue mode with 1 worker and 2 webhook processors behind Debian's Caddy (LocalStack's
`webhook_processors`): production webhooks are answered through Caddy and executed by the worker, main refuses
them (production webhooks off), both processors serve (their debug logs name each webhook they received), and
the per-role demands of the window hold webhook-processor and load-balancer CPU per execution."""

from __future__ import annotations

import shutil
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.hosts.host import LocalHost
from n8n_sizer.native.stack import StackOptions
from n8n_sizer.runs.stats import role_demands_ms
from n8n_sizer.stack.sampling import local_stack_telemetry
from n8n_sizer.telemetry.sampler import Sampler
from tests.integration.conftest import running_stack
from tests.integration.test_telemetry import read_samples

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("caddy") is None, reason="needs Debian's caddy (scripts/test.sh installs it)"),
]

REQUESTS = 24  # bounded: 24 light webhooks, 4 at a time
RECEIVED = 'Received webhook "POST" for path'


@pytest.fixture(scope="module")
def ingest_stack(n8n_install):
    options = StackOptions(webhook_processors=2, n8n_log_level="debug")  # debug: each webhook received is logged
    yield from running_stack(Setup(mode="queue", workers=1), n8n_install, options)


def test_webhooks_go_through_caddy_to_both_processors_and_are_executed(ingest_stack, tmp_path):
    stack = ingest_stack.stack
    assert set(stack.processes) == {"postgres", "redis", "main", "webhook-1", "webhook-2", "caddy", "worker-1"}
    assert stack.main_url == f"http://127.0.0.1:{stack.lb_port}" != stack.direct_main_url
    workflow_id, url = ingest_stack.deploy("light")  # the API call itself went through Caddy to main
    path = url.removeprefix(stack.main_url)
    assert path.startswith("/webhook/")

    # main serves no production webhook: the same path on main's own port is not registered there
    assert httpx.post(f"{stack.direct_main_url}{path}", json={"number": 1}, timeout=30).status_code == 404

    samples_path = tmp_path / "samples.jsonl"
    with Sampler(LocalHost(), samples_path, **local_stack_telemetry(stack)):
        started = time.time()
        with httpx.Client(timeout=60) as http, ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda i: http.post(url, json={"number": i}), range(REQUESTS)))
        ended = time.time()
        time.sleep(2.5)  # two more sampler ticks, so the window's CPU rates are read
    assert [a.status_code for a in answers] == [200] * REQUESTS, [a.text[:200] for a in answers if a.status_code != 200]

    # every answered webhook is a stored, successful execution
    deadline = time.monotonic() + 60
    with ingest_stack.client() as client:
        counts = client.count_executions(workflow_id)
        while counts.by_status.get("success", 0) < REQUESTS and time.monotonic() < deadline:
            time.sleep(1)
            counts = client.count_executions(workflow_id)
    assert counts.by_status.get("success", 0) == REQUESTS, counts.by_status

    # both processors received webhooks of this workflow; together exactly the ones sent
    served = {
        name: stack.log_path(name).read_text().count(f'{RECEIVED} "{path.removeprefix("/webhook/")}"')
        for name in ("webhook-1", "webhook-2")
    }
    assert all(n > 0 for n in served.values()) and sum(served.values()) == REQUESTS, served
    assert RECEIVED not in stack.log_path("main").read_text()

    demands = role_demands_ms(read_samples(samples_path), started - 1.0, ended + 1.0, REQUESTS)
    assert {"main", "webhook", "worker", "load_balancer", "postgres", "redis"} <= set(demands), demands
    assert demands["webhook"] > 0 and demands["load_balancer"] > 0 and demands["worker"] > 0, demands
