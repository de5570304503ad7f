"""Shared by benchmarks/node_costs.py (the per-node cost table) and benchmarks/workflow_price.py (its validation):
workflow builders, a stub HTTP server on 127.0.0.1, CPU accounting per process family from /proc, and a bounded
closed-loop driver that runs workflows interleaved on one local stack.

CPU, not throughput, is the measure: on a machine shared with other work the throughput of a run moves by 20-50%
(docs/findings), while the CPU that main (with its task runner) and Postgres (with its backends) spend per
execution is read from the kernel's per-process accounting (/proc/<pid>/stat, utime+stime of every process of the
family, plus the children's that have exited) before and after each run, and moves much less.
"""

from __future__ import annotations

import copy
import os
import statistics
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import pairwise
from typing import Any

import httpx

from n8n_sizer.native import services

TICK_MS = 1000.0 / os.sysconf("SC_CLK_TCK")


# --- workflows -------------------------------------------------------------------------------------


def _uid() -> str:
    return str(uuid.uuid4())


def node(type_: str, version: float, parameters: dict[str, Any], name: str) -> dict[str, Any]:
    return {
        "parameters": parameters,
        "id": _uid(),
        "name": name,
        "type": f"n8n-nodes-base.{type_}",
        "typeVersion": version,
        "position": [0, 0],
    }


def webhook(path: str, response_mode: str = "lastNode") -> dict[str, Any]:
    hook = node(
        "webhook", 2, {"httpMethod": "POST", "path": path, "responseMode": response_mode, "options": {}}, "Webhook"
    )
    hook["webhookId"] = _uid()
    return hook


def _condition(operator_type: str = "number") -> dict[str, Any]:
    """A condition that is always true, with no expression: 1 equals 1."""
    return {
        "options": {"caseSensitive": True, "leftValue": "", "typeValidation": "strict", "version": 2},
        "conditions": [
            {"id": _uid(), "leftValue": 1, "rightValue": 1, "operator": {"type": operator_type, "operation": "equals"}}
        ],
        "combinator": "and",
    }


def set_node(
    name: str, fields: int = 1, expressions: int = 0, keep_other: bool = False, source: str = "$json.n"
) -> dict[str, Any]:
    """Edit Fields (Set) 3.4: `fields` constant assignments and `expressions` that read `source` (a number)."""
    assignments = [{"id": _uid(), "name": f"c{i}", "value": f"v{i}", "type": "string"} for i in range(fields)]
    assignments += [
        {"id": _uid(), "name": f"e{i}", "value": f"={{{{ {source} + {i} }}}}", "type": "number"}
        for i in range(expressions)
    ]
    params: dict[str, Any] = {"assignments": {"assignments": assignments}, "options": {}}
    if keep_other:
        params["includeOtherFields"] = True
    return node("set", 3.4, params, name)


def make_node(kind: str, name: str, ctx: dict[str, Any]) -> dict[str, Any]:
    """One node of `kind` with parameters that make it succeed and pass one item on, no expressions in them.
    Checked against n8n 2.41.1's node definitions (n8n-nodes-base, dist/nodes/*) and by running each workflow."""
    if kind == "set":
        return set_node(name, fields=1, keep_other=True)
    if kind == "noOp":
        return node("noOp", 1, {}, name)
    if kind == "if":
        return node("if", 2.2, {"conditions": _condition(), "options": {}}, name)
    if kind == "filter":
        return node("filter", 2.2, {"conditions": _condition(), "options": {}}, name)
    if kind == "switch":
        return node("switch", 3.2, {"rules": {"values": [{"conditions": _condition()}]}, "options": {}}, name)
    if kind == "merge":  # two inputs (the chain feeds both), one item out
        return node("merge", 3.1, {"mode": "combine", "combineBy": "combineByPosition", "options": {}}, name)
    if kind == "code":
        return node("code", 2, {"jsCode": "return $input.all();"}, name)
    if kind == "httpRequest":
        return node("httpRequest", 4.2, {"url": ctx["stub_url"], "options": {}}, name)
    if kind == "wait":
        return node("wait", 1.1, {"amount": ctx.get("wait_s", 0.05)}, name) | {"webhookId": _uid()}
    if kind == "dateTime":
        return node(
            "dateTime",
            2,
            {"operation": "getCurrentDate", "includeTime": True, "outputFieldName": "now", "options": {}},
            name,
        )
    if kind == "crypto":
        return node(
            "crypto", 1, {"action": "hash", "type": "SHA256", "value": "n8n-sizer", "dataPropertyName": "h"}, name
        )
    if kind == "splitOut":
        return node("splitOut", 1, {"fieldToSplitOut": "list", "include": "noOtherFields", "options": {}}, name)
    if kind == "aggregate":
        return node(
            "aggregate", 1, {"aggregate": "aggregateAllItemData", "destinationFieldName": "list", "options": {}}, name
        )
    if kind == "executeWorkflow":
        return node(
            "executeWorkflow",
            1.2,
            {
                "source": "database",
                "workflowId": {"__rl": True, "mode": "id", "value": ctx["sub_id"]},
                "options": {"waitForSubWorkflow": True},
            },
            name,
        )
    if kind == "respondToWebhook":
        return node("respondToWebhook", 1.1, {"respondWith": "firstIncomingItem", "options": {}}, name)
    raise ValueError(f"no builder for node kind {kind!r}")


def chain(name: str, path: str, nodes: list[dict[str, Any]], response_mode: str = "lastNode") -> dict[str, Any]:
    """Webhook -> nodes[0] -> nodes[1] ...; a Merge gets the previous node on both of its inputs."""
    hook = webhook(path, response_mode)
    all_nodes = [hook, *nodes]
    for i, item in enumerate(all_nodes):
        item["position"] = [220 * i, 0]
    connections: dict[str, Any] = {}
    for prev, nxt in pairwise(all_nodes):
        inputs = 2 if nxt["type"] == "n8n-nodes-base.merge" else 1
        connections[prev["name"]] = {
            "main": [[{"node": nxt["name"], "type": "main", "index": i} for i in range(inputs)]]
        }
    return {"name": name, "nodes": all_nodes, "connections": connections, "settings": {"executionOrder": "v1"}}


def repeated(
    kind: str,
    k: int,
    path: str,
    ctx: dict[str, Any],
    prefix: list[dict[str, Any]] | None = None,
    response_mode: str = "lastNode",
) -> dict[str, Any]:
    nodes = [copy.deepcopy(n) for n in (prefix or [])]
    nodes += [make_node(kind, f"{kind} {i + 1}", ctx) for i in range(k)]
    return chain(f"nodecost {path}", path, nodes, response_mode)


def code_items(n: int, name: str = "Items") -> dict[str, Any]:
    """A Code node that emits `n` items, each with a one-element list: Split Out (2.41.1) splits it into
    {list: i}, and a later Split Out wraps that number into a list again, so a chain of them keeps one item."""
    js = f"return Array.from({{length: {n}}}, (_, i) => ({{json: {{i, n: i, list: [i]}}}}));"
    return node("code", 2, {"jsCode": js}, name)


def code_payload(kib: int, name: str = "Payload") -> dict[str, Any]:
    """A Code node whose one item carries `kib` KiB of text: what the execution saves grows by that much."""
    return node("code", 2, {"jsCode": f"return [{{json: {{n: 1, blob: 'x'.repeat({kib * 1024})}}}}];"}, name)


SUB_WORKFLOW = {
    "name": "nodecost sub-workflow",
    "nodes": [
        {
            "parameters": {"inputSource": "passthrough"},
            "id": _uid(),
            "name": "When called",
            "type": "n8n-nodes-base.executeWorkflowTrigger",
            "typeVersion": 1.1,
            "position": [0, 0],
        }
    ],
    "connections": {},
    "settings": {"executionOrder": "v1"},
}


# --- a stub HTTP server on 127.0.0.1 ---------------------------------------------------------------


class _Stub(BaseHTTPRequestHandler):
    delay_s = 0.0

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.delay_s:
            time.sleep(self.delay_s)
        body = b'{"ok": true, "n": 1}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, *args: Any) -> None:
        pass


class StubServer:
    """A JSON answer on 127.0.0.1 (free port) after `delay_s`; stopped in `close`."""

    def __init__(self, delay_s: float = 0.0) -> None:
        handler = type("Stub", (_Stub,), {"delay_s": delay_s})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/stub"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# --- CPU accounting ----------------------------------------------------------------------------------


def _ticks(pid: int, with_children: bool) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:  # the process ended between listing and reading
        return 0
    # after the command: state=0 ... utime=11 stime=12 cutime=13 cstime=14
    total = int(fields[11]) + int(fields[12])
    if with_children:
        total += int(fields[13]) + int(fields[14])
    return total


def family_cpu_ms(root_pid: int) -> float:
    """CPU of a process and its family (threads included), with its exited children's, in ms."""
    pids = services.family_pids(root_pid)
    return sum(_ticks(pid, with_children=(pid == root_pid)) for pid in pids) * TICK_MS


def stack_cpu_ms(stack: Any) -> dict[str, float]:
    """main (with its task runner) and Postgres (with its backends), ms of CPU so far."""
    return {"main": family_cpu_ms(stack.pid("main")), "postgres": family_cpu_ms(stack.pid("postgres"))}


# --- the closed-loop driver --------------------------------------------------------------------------


def closed_loop(
    url: str, body: bytes, requests: int, concurrency: int, max_s: float, ok_status: int = 200
) -> dict[str, Any]:
    """`requests` POSTs by `concurrency` users, each sending when its last answered; stops at `max_s`. An answer
    counts as ok with `ok_status` (500 for a workflow that ends in Stop and Error)."""
    lock = threading.Lock()
    state = {"next": 0, "ok": 0, "bad": 0, "first_error": None}
    latencies: list[float] = []
    deadline = time.monotonic() + max_s

    def user() -> None:
        with httpx.Client(timeout=60) as http:
            while time.monotonic() < deadline:
                with lock:
                    if state["next"] >= requests:
                        return
                    state["next"] += 1
                started = time.perf_counter()
                try:
                    answer = http.post(url, content=body, headers={"Content-Type": "application/json"})
                    good = answer.status_code == ok_status
                    error = None if good else f"HTTP {answer.status_code}: {answer.text[:200]}"
                except httpx.HTTPError as exc:
                    good, error = False, f"{type(exc).__name__}: {exc}"
                with lock:
                    state["ok" if good else "bad"] += 1
                    if error and state["first_error"] is None:
                        state["first_error"] = error
                    latencies.append((time.perf_counter() - started) * 1000)

    started = time.monotonic()
    with ThreadPoolExecutor(concurrency) as pool:
        for _ in range(concurrency):
            pool.submit(user)
    wall = time.monotonic() - started
    return {
        "ok": state["ok"],
        "bad": state["bad"],
        "first_error": state["first_error"],
        "wall_s": wall,
        "throughput_per_s": state["ok"] / wall if wall else 0.0,
        "p50_ms": statistics.median(latencies) if latencies else None,
    }


def measure_run(
    stack: Any,
    url: str,
    body: bytes,
    requests: int,
    concurrency: int,
    max_s: float,
    settle_s: float = 0.7,
    ok_status: int = 200,
) -> dict[str, Any]:
    """One closed-loop run with the CPU main and Postgres spent on it, per successful execution."""
    before = stack_cpu_ms(stack)
    run = closed_loop(url, body, requests, concurrency, max_s, ok_status)
    time.sleep(settle_s)  # n8n saves the execution after it answers: let the last ones land
    after = stack_cpu_ms(stack)
    done = max(run["ok"], 1)
    run["main_ms"] = (after["main"] - before["main"]) / done
    run["postgres_ms"] = (after["postgres"] - before["postgres"]) / done
    run["cpu_ms"] = run["main_ms"] + run["postgres_ms"]
    return run


# --- flows on stacks: deploy, check, run interleaved -------------------------------------------------

BODY = b'{"n": 21, "number": 21}'


class Flow:
    """One workflow to measure: its key, the stack (label) it runs on, its definition; `url` once deployed."""

    def __init__(self, key: str, stack: str, definition: dict[str, Any]) -> None:
        self.key, self.stack, self.definition = key, stack, definition
        self.url = ""
        self.workflow_id = ""
        self.ok_status = 200  # what its webhook answers when the execution did what it should
        self.ok_execution = "success"  # ... and the status its stored executions must have


def deploy_flows(flows: list[Flow], stacks: dict[str, Any], clients: dict[str, Any], say: Any) -> None:
    """Create and activate every flow on its stack; then call each twice and require HTTP 200 and two
    successful stored executions (a workflow that errors would price its error path, not its nodes)."""
    from n8n_sizer.n8n.workflows import deploy_workflow

    failed: dict[str, str] = {}
    for flow in flows:
        try:
            flow.workflow_id, path = deploy_workflow(clients[flow.stack], flow.definition, timeout_s=60)
        except Exception as exc:  # collect every failure: one campaign start shows them all
            failed[flow.key] = str(exc)[:400]
            continue
        flow.url = stacks[flow.stack].main_url + path
        with httpx.Client(timeout=60) as http:
            for _ in range(2):
                answer = http.post(flow.url, content=BODY, headers={"Content-Type": "application/json"})
                if answer.status_code != flow.ok_status:
                    failed[flow.key] = f"HTTP {answer.status_code}: {answer.text[:300]}"
    deadline = time.monotonic() + 60
    for flow in flows:
        if flow.key in failed:
            continue
        while True:
            counts = clients[flow.stack].count_executions(flow.workflow_id)
            if counts.by_status.get(flow.ok_execution, 0) >= 2 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        if counts.by_status.get(flow.ok_execution, 0) < 2:
            failed[flow.key] = f"executions not {flow.ok_execution}: {counts.by_status}"
    if failed:
        for key, why in failed.items():
            say(f"FAILED {key}: {why}")
        raise SystemExit(f"{len(failed)} of {len(flows)} workflows do not run; fix them first")
    say(f"deployed and checked {len(flows)} workflows: every one answered 200 and stored successful executions")


def run_rounds(
    flows: list[Flow],
    stacks: dict[str, Any],
    *,
    rounds: int,
    requests: int,
    concurrency: int,
    max_run_s: float,
    deadline: float,
    warmup: int,
    say: Any,
    campaign: str,
    partner: Flow | None = None,
    measure: Any = None,
) -> list[dict[str, Any]]:
    """Warm every flow up, then `rounds` rounds; in each, every flow once, in an order rotated per round so no
    flow always follows the same neighbour. Stops at `deadline` (monotonic) after the round in progress.
    `measure(stack, url, body, requests, concurrency, max_s)` is one run (default `measure_run`, /proc families)."""
    measure = measure or measure_run
    for flow in flows:
        closed_loop(flow.url, BODY, warmup, concurrency, max_run_s, flow.ok_status)
    say(f"warmed up ({warmup} requests each)")
    raw: list[dict[str, Any]] = []
    for r in range(rounds):
        if time.monotonic() > deadline:
            say(f"deadline reached before round {r + 1}; stopping")
            break
        shift = (r * 7) % len(flows)
        order = flows[shift:] + flows[:shift]
        if r % 2:
            order.reverse()
        if partner is not None:  # the partner runs before and after every other flow
            others = [f for f in order if f is not partner]
            order = [partner]
            for flow in others:
                order += [flow, partner]
        for i, flow in enumerate(order):
            if flow.ok_status == 200:
                run = measure(stacks[flow.stack], flow.url, BODY, requests, concurrency, max_run_s)
            else:
                run = measure(
                    stacks[flow.stack], flow.url, BODY, requests, concurrency, max_run_s, ok_status=flow.ok_status
                )
            run.update(
                id=f"{campaign}/r{r + 1}/{i + 1}/{flow.key}",
                round=r + 1,
                seq=i,
                key=flow.key,
                stack=flow.stack,
                at=time.strftime("%H:%M:%S"),
            )
            raw.append(run)
            say(
                f"round {r + 1}/{rounds} [{i + 1}/{len(order)}] {flow.key:28s} {run['throughput_per_s']:6.1f}/s "
                f"cpu {run['cpu_ms']:7.1f} ms (main {run['main_ms']:6.1f}, pg {run['postgres_ms']:5.1f})"
                + (f" BAD {run['bad']}: {run['first_error']}" if run["bad"] else "")
            )
    return raw


def final_check(flows: list[Flow], clients: dict[str, Any], raw: list[dict[str, Any]]) -> dict[str, Any]:
    """Every stored execution of every flow, by status: the answers counted as ok must all be successes."""
    out = {}
    for flow in flows:
        counts = clients[flow.stack].count_executions(flow.workflow_id)
        out[flow.key] = counts.by_status
    return out


def per_round(raw: list[dict[str, Any]], field: str = "cpu_ms") -> dict[int, dict[str, float]]:
    """{round: {key: value}}"""
    table: dict[int, dict[str, float]] = {}
    for run in raw:
        table.setdefault(run["round"], {})[run["key"]] = run[field]
    return table


def figure(values: list[float], digits: int = 2) -> dict[str, Any]:
    """Median with the spread over rounds (min..max) and the per-round values."""
    return {
        "ms": round(statistics.median(values), digits),
        "low_ms": round(min(values), digits),
        "high_ms": round(max(values), digits),
        "per_round": [round(v, digits) for v in values],
    }


def over_rounds(table: dict, fn: Any) -> dict[str, Any] | None:
    """`figure` of fn(round's runs) over the rounds of `table` ({round: {key: value}}) that have what fn reads;
    None when none has."""
    values = []
    for r in sorted(table):
        try:
            values.append(fn(table[r]))
        except KeyError:
            continue
    return figure(values) if values else None
