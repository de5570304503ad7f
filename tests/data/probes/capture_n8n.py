"""Capture real n8n /metrics (queue mode, queue gauges on) into tests/data/probes/ (run by hand).

    .venv/bin/python tests/data/probes/capture_n8n.py

Starts the LocalStack (queue mode, 1 worker, Postgres, Redis, all on 127.0.0.1 free ports) with
N8N_METRICS=true and N8N_METRICS_INCLUDE_QUEUE_METRICS=true, sends a few webhooks so the gauges move,
waits for n8n's queue-metrics refresh (N8N_METRICS_QUEUE_METRICS_INTERVAL, 20 s by default; 2 s here)
and saves GET /metrics as `n8n_metrics_real_queue.txt`; then stops the stack.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.native.stack import LocalStack, StackOptions
from n8n_sizer.n8n.client import set_up_instance
from n8n_sizer.n8n.workflows import deploy_workflow, read_workflow, with_webhook_path
from n8n_sizer.telemetry.probes.services import N8N_QUEUE_METRICS, parse_prometheus

HERE = Path(__file__).parent
ENV = {"N8N_METRICS": "true", "N8N_METRICS_INCLUDE_QUEUE_METRICS": "true", "N8N_METRICS_QUEUE_METRICS_INTERVAL": "2"}


def main() -> None:
    stack = LocalStack(Setup(mode="queue", workers=1), StackOptions(extra_env=ENV))
    try:
        stack.start()
        session = set_up_instance(stack.main_url)
        with session.client() as client:
            _, path = deploy_workflow(client, with_webhook_path(read_workflow("light"), "metrics-capture"))
        with httpx.Client(timeout=60) as http:
            for i in range(20):
                http.post(f"{stack.main_url}{path}", json={"number": i}).raise_for_status()
            for _ in range(30):
                text = http.get(f"{stack.main_url}/metrics").text
                values = parse_prometheus(text)
                if values.get("n8n_scaling_mode_queue_jobs_completed", 0) >= 20:
                    break
                time.sleep(1)
        missing = [m for m in N8N_QUEUE_METRICS if m not in values]
        (HERE / "n8n_metrics_real_queue.txt").write_text(text)
        print(f"wrote n8n_metrics_real_queue.txt ({len(text)} chars); queue gauges missing: {missing or 'none'}")
    finally:
        stack.stop()


if __name__ == "__main__":
    main()
