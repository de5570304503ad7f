"""`calibrate`: run a workflow a few dozen times at a low rate on the local stack and read each node's execution time
from n8n's execution data; the pure part (medians, the Code nodes' own JavaScript) is
`advisor.workflow_price.calibration`.

The stack is the one `bench --local` starts (regular mode, Postgres). Beside the user's workflow runs a reference,
the packaged `light` workflow (one trivial Code node), on the same stack: the Code node's runner round trip is
measured there and subtracted. The two run in batches (the workflow's calls, then the reference's), so the task
runner's CPU, read from /proc before and after each batch, is each batch's own: unlike an execution time, it does
not grow when other work on the machine keeps the runner waiting for a core.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.advisor.workflow_price.calibration import Calibration, summarize
from n8n_sizer.advisor.workflow_price.export import parse_export
from n8n_sizer.errors import InputError, RemoteError
from n8n_sizer.n8n.client import FINAL_STATUSES, N8nClient, set_up_instance
from n8n_sizer.n8n.workflows import DEFAULT_BODY, deploy_workflow, read_workflow, with_webhook_path
from n8n_sizer.native import services
from n8n_sizer.native.stack import LocalStack
from n8n_sizer.safety.files import read_user_bytes, read_user_text

TICK_MS = 1000.0 / os.sysconf("SC_CLK_TCK")
MAX_RUNS = 500
MAX_RATE = 10.0
REFERENCE_NODE = "Double"  # light's Code node (templates/workflows/light.json)
FIX = "pass the JSON file n8n's editor downloads (a workflow with a POST Webhook trigger)"


def load_export(path: Path) -> dict[str, Any]:
    """The workflow file through the one reader, parsed and checked as an export (one-line refusals)."""
    text = read_user_text(path, "workflow", fix=FIX)
    try:
        export = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise InputError(f"workflow {path}: not valid JSON ({getattr(exc, 'msg', 'nested too deep')}); {FIX}") from None
    parse_export(export)
    return export


def _check(runs: int, rate: float) -> None:
    if not 1 <= runs <= MAX_RUNS:
        raise InputError(f"--runs must be from 1 to {MAX_RUNS} (got {runs}); a few dozen is enough, try --runs 30")
    if not 0 < rate <= MAX_RATE:
        raise InputError(
            f"--rate must be above 0 and at most {MAX_RATE:g} req/s (got {rate:g}); a calibration runs "
            "at a low rate so that times are not queueing, try --rate 2"
        )


def _post(http: httpx.Client, url: str, body: bytes) -> None:
    answer = http.post(url, content=body, headers={"Content-Type": "application/json"})
    if answer.status_code >= 400:
        raise RemoteError(
            f"POST {url}: HTTP {answer.status_code}: {answer.text[:200]}; the workflow fails on this "
            "body: fix it in n8n's editor or pass the body it expects with --body"
        )


class _closing:
    """Close the stand-in (if any) when the block ends."""

    def __init__(self, server) -> None:
        self.server = server

    def __enter__(self):
        return self.server

    def __exit__(self, *exc: object) -> None:
        if self.server is not None:
            self.server.close()


def _redirected(client: N8nClient, definition: dict, export: dict, swap: bool, base_url: str, say) -> dict:
    """`definition` with its calls out pointed at the stand-in at `base_url`, the credentials it needs created."""
    from n8n_sizer.standins.rewrite import apply_rewrite

    plan = stand_in_plan(export, swap, base_url)
    ids = {}
    for key, spec in plan.credentials.items():
        made = client.create_credential(f"n8n-sizer stand-in {key}", spec["type"], spec["data"])
        ids[key] = {"id": str(made["id"]), "name": str(made["name"])}
    say(
        f"calls out redirected to local stand-ins ({plan.summary()}), each waiting its assumed time; none reaches a real service"
    )
    return apply_rewrite(definition, plan, base_url, ids)


def _finished(client: N8nClient, workflow_id: str, expected: int, timeout_s: float = 60.0) -> list[str]:
    """Ids of the workflow's successful executions once `expected` have finished (or the timeout passed)."""
    deadline = time.monotonic() + timeout_s
    while True:
        listed = client.list_executions(workflow_id)
        done = [e for e in listed if e.get("status") in FINAL_STATUSES]
        if len(done) >= expected or time.monotonic() > deadline:
            return [str(e["id"]) for e in done if e.get("status") == "success"]
        time.sleep(0.5)


def runner_cpu_ms(main_pid: int) -> float | None:
    """CPU so far (utime + stime, ms) of main's JavaScript task runner, or None when it is not found."""
    total, found = 0, False
    for pid in services.family_pids(main_pid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"task-runner" not in f.read():
                    continue
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # it ended between listing and reading
            continue
        total += int(fields[11]) + int(fields[12])
        found = True
    return total * TICK_MS if found else None


def _batch(http: httpx.Client, url: str, body: bytes, runs: int, rate: float, main_pid: int) -> float | None:
    """`runs` calls at `rate`; the task runner's CPU per call over the batch (None if the runner was not found)."""
    before = runner_cpu_ms(main_pid)
    for _ in range(runs):
        started = time.monotonic()
        _post(http, url, body)
        time.sleep(max(0.0, 1.0 / rate - (time.monotonic() - started)))
    after = runner_cpu_ms(main_pid)
    return None if before is None or after is None else (after - before) / runs


def stand_in_plan(export: dict[str, Any], swap: bool, base_url: str = "http://127.0.0.1:0"):
    """The rewrite of the workflow's calls out to the local stand-ins (standins/rewrite.py), each waiting what the
    pricer assumes for it (its family's default, waits.py); one InputError line when some call cannot be redirected
    and `swap` (--swap-calls) was not given."""
    from n8n_sizer.advisor.workflow_price import load_node_costs, price_workflow
    from n8n_sizer.advisor.workflow_price.families import family_of
    from n8n_sizer.advisor.workflow_price.pricer import stand_in_latencies
    from n8n_sizer.standins.rewrite import plan_rewrite

    price = price_workflow(export, load_node_costs())
    families = {line.name: line.family for line in price.lines}
    for node in export.get("nodes", []):
        if isinstance(node, dict) and str(node.get("name")) not in families:
            fam = family_of(str(node.get("type")))
            families[str(node.get("name"))] = fam.id if fam else ""
    plan = plan_rewrite(export, base_url, stand_in_latencies(export, price), families, swap=swap)
    if plan.unredirected:
        shown = "; ".join(plan.unredirected[:4]) + (" ..." if len(plan.unredirected) > 4 else "")
        raise InputError(
            f"the workflow calls out where no local stand-in can be put in the way ({shown}); a benchmark never "
            "calls the real services: pass --swap-calls to replace each by an HTTP call to a local stand-in "
            "that waits its assumed time (an app node is an HTTP call plus its mapping)"
        )
    return plan


def calibrate_workflow(
    path: Path,
    body_file: Path | None = None,
    runs: int = 30,
    rate: float = 2.0,
    warmup: int = 3,
    say: Callable[[str], None] = lambda _: None,
    swap_calls: bool = False,
) -> Calibration:
    """Bring the local stack up, run the workflow `runs` times at `rate`, then the reference as many times, read the
    execution data and the task runner's CPU, stop the stack. Calls out go to local stand-ins (`stand_in_plan`)."""
    _check(runs, rate)
    export = load_export(path)
    plan = stand_in_plan(export, swap_calls)
    body = read_user_bytes(body_file, "--body", fix="pass the JSON your webhook expects") if body_file else b"{}"
    hook = next(
        (
            n
            for n in export["nodes"]
            if isinstance(n, dict) and n.get("type") == "n8n-nodes-base.webhook" and not n.get("disabled")
        ),
        None,
    )
    if hook is None or str(hook.get("parameters", {}).get("httpMethod", "GET")).upper() != "POST":
        raise InputError(
            f"workflow {path}: no enabled POST Webhook node; calibrate calls the workflow through its "
            "webhook: add a Webhook trigger with HTTP Method POST"
        )
    tag = f"{int(time.time())}"
    measured = with_webhook_path(export, f"calibrate-{tag}", f"calibrate {path.stem}")
    reference = with_webhook_path(read_workflow("light"), f"calibrate-reference-{tag}", "calibrate reference")
    types = {str(n.get("name")): str(n.get("type")) for n in export["nodes"] if isinstance(n, dict)}
    say("starting the local stack (regular mode, Postgres)")
    standin = None
    if plan.changes:
        from n8n_sizer.standins.openai import StandInServer

        standin = StandInServer().serve()
    with LocalStack(Setup(mode="regular")) as stack, _closing(standin):
        session = set_up_instance(stack.main_url)
        with session.client(timeout_s=60) as client, httpx.Client(timeout=120) as http:
            if standin is not None:
                measured = _redirected(client, measured, export, swap_calls, standin.url, say)
            ids = {}
            for key, definition in (("measured", measured), ("reference", reference)):
                ids[key], hook_path = deploy_workflow(client, definition)
                ids[key + "_url"] = stack.main_url + hook_path
            say(f"running {path.name} {runs} times at {rate:g}/s, then the reference as many times")
            for _ in range(warmup):  # warm the runner and the engine; their data is left out below
                _post(http, ids["measured_url"], body)
                _post(http, ids["reference_url"], DEFAULT_BODY)
            # In batches, so the task runner's CPU (from the kernel, steady on a busy machine) is each one's own.
            runner = {
                key: _batch(http, ids[f"{key}_url"], b, runs, rate, stack.pid("main"))
                for key, b in (("measured", body), ("reference", DEFAULT_BODY))
            }
            version = None
            try:
                client.login(session.owner)
                version = client.version()
            except RemoteError:
                pass
            found = {
                key: sorted(_finished(client, ids[key], warmup + runs), key=int)[warmup:]
                for key in ("measured", "reference")
            }
            if not found["measured"]:
                raise RemoteError(
                    f"workflow {path}: no successful execution stored; open it in n8n's editor and run "
                    "it with this body to see why"
                )
            data = {key: [client.get_execution(i, include_data=True) for i in found[key]] for key in found}
    return summarize(
        path.name,
        types,
        data["measured"],
        data["reference"],
        REFERENCE_NODE,
        time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        version,
        runner_cpu_ms=runner["measured"],
        reference_runner_cpu_ms=runner["reference"],
    )
