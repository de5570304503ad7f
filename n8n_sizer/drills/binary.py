"""Drill 5: filesystem binary-data mode without a shared volume, then n8n's default (database in queue mode)."""

from __future__ import annotations

import json
import time

from n8n_sizer.drills.common import DrillContext, DrillOutcome, check
from n8n_sizer.n8n.workflows import read_workflow, webhook_path

# Seed 000, "Failure drills", 5 (n8n 2.40.7): a 300 kB upload read by a Code node on a worker.
BINARY_EXPECTED = {
    "filesystem": (
        "N8N_DEFAULT_BINARY_DATA_MODE=filesystem, no shared volume: the worker could not read the file, "
        'the caller got {"message":"Error in workflow"} (HTTP 500); the node error is only the path '
        "workflows/<workflow id>/executions/temp/binary_data/<uuid>"
    ),
    "database": "mode unset (database in queue mode): the worker read all 300,000 bytes",
}
UPLOAD_BYTES = 300_000


def _restart_with(ctx: DrillContext, names: list[str], env: dict[str, str]) -> None:
    for name in names:
        ctx.stack.stop_process(name, timeout_s=30)
    for name in names:
        ctx.stack.start_process(name, env_overrides=env)
    with ctx.client() as client:  # main registers the active workflows' webhooks again after its start
        for template in ctx.workflows:
            client.wait_webhook_registered(webhook_path(read_workflow(template)))


def _upload(ctx: DrillContext) -> tuple[int | None, str, float]:
    started = time.monotonic()
    upload = (bytes(range(256)) * (UPLOAD_BYTES // 256 + 1))[:UPLOAD_BYTES]
    status, body = ctx.post(
        "binary-read", content=upload, headers={"content-type": "application/octet-stream"}, timeout_s=60
    )
    return status, body, round(time.monotonic() - started, 2)


def binary_filesystem(ctx: DrillContext) -> DrillOutcome:
    """Main and worker-1 in filesystem mode, each with its own folder (no shared volume); worker-2 stopped so
    the Code node runs on worker-1. Then both back to n8n's default and the same upload again."""
    stack = ctx.stack
    ctx.workflow_id("binary-read")
    names = ["main", "worker-1"]
    results: dict[str, dict] = {}
    marks = {}
    try:
        for name in stack.worker_names[1:]:
            stack.stop_process(name, timeout_s=30)
        _restart_with(ctx, names, {"N8N_DEFAULT_BINARY_DATA_MODE": "filesystem"})
        marks["filesystem"] = ctx.mark("worker-1")
        status, body, took = _upload(ctx)
        results["filesystem"] = {"status": status, "body": body, "took_s": took}
        _restart_with(ctx, names, {})  # the variable unset: n8n's default
        marks["database"] = ctx.mark("worker-1")
        status, body, took = _upload(ctx)
        results["database"] = {"status": status, "body": body, "took_s": took}
    finally:
        ctx.restore()
    path_lines = marks["filesystem"].find(r"filePath|binary_data|ENOENT|no such file", 4)
    fs, db = results["filesystem"], results["database"]
    try:
        read = json.loads(db["body"]).get("bytes")
    except (ValueError, AttributeError):
        read = None
    return DrillOutcome(
        drill="binary-filesystem",
        checks=[
            check(
                f"filesystem mode: HTTP {fs['status']} {fs['body'][:120]}; worker log: "
                f"{path_lines[0] if path_lines else '(no file path line)'}",
                BINARY_EXPECTED["filesystem"],
                fs["status"] == 500 and "Error in workflow" in fs["body"],
                "the worker read the file although main and worker share no folder",
            ),
            check(
                f"default mode: HTTP {db['status']}, the worker read {read} bytes",
                BINARY_EXPECTED["database"],
                db["status"] == 200 and read == UPLOAD_BYTES,
                "the worker did not read the whole upload",
            ),
        ],
        observed={"upload_bytes": UPLOAD_BYTES, "filesystem": fs, "database": db | {"bytes_read": read}},
        timings_s={"filesystem_request_s": fs["took_s"], "database_request_s": db["took_s"]},
        log_lines={"worker-1 (filesystem)": path_lines},
        settings={"N8N_DEFAULT_BINARY_DATA_MODE": "filesystem, then unset"},
    )
