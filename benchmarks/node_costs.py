"""Measure the per-node cost table (n8n_sizer/data/node_costs.json) on real n8n on this machine.

For each node type a workflow Webhook -> Code (one item) -> K copies of the node, K = 1 and 6: the node's cost is
the slope, (cost at 6 - cost at 1) / 5, so the Webhook, the Code node and the response cancel out. The base is a
Webhook alone; `light` is the packaged workflow. Items: Set copies after a Code node that emits 1, 10 or 50 items.
Saved data: a Code node that emits 0, 64 or 256 KiB. Expressions: one Set node with 1, 4 or 16 expressions, on
the default engine and on a second stack with N8N_EXPRESSION_ENGINE=legacy.

Cost = CPU per execution of main (with its task runner) plus Postgres (with its backends), from /proc before and
after each run (benchmarks/nodecost_lib.py); each run is a closed loop of --requests at --concurrency. All
workflows run interleaved, in an order rotated every round, for --rounds rounds, and every figure is the median
over rounds with its min..max. Every workflow is checked first (HTTP 200 and stored successful executions).

Run: PYTHONPATH=.:benchmarks .venv/bin/python benchmarks/node_costs.py [--rounds 3] [--requests 100] [--out FILE]
Then `--refine-nodes 16` re-measures the node rows of --out with chains of 1 and 16 nodes (a cheap node's cost is
small next to the run-to-run noise; a longer chain multiplies it), and `--show` prints --out as Markdown.
Bounded: --max-minutes for the whole campaign (the round in progress finishes), --max-run-s per run.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import statistics
import sys
import time
from pathlib import Path

from nodecost_lib import (
    SUB_WORKFLOW,
    Flow,
    StubServer,
    chain,
    code_items,
    code_payload,
    deploy_flows,
    final_check,
    make_node,
    over_rounds,
    per_round,
    repeated,
    run_rounds,
    set_node,
)
from nodecost_queue import build_queue_flows, derive_queue, queue_accounting, queue_markdown, role_measure

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.n8n.client import set_up_instance
from n8n_sizer.n8n.workflows import read_workflow, with_webhook_path
from n8n_sizer.native.install import install_n8n
from n8n_sizer.native.stack import LocalStack, StackOptions
from n8n_sizer.safety.write import write_atomic
from n8n_sizer.versions import N8N_VERSION

# node kind -> n8n node type (the table's row id is the kind)
KINDS = {
    "set": "n8n-nodes-base.set",
    "noOp": "n8n-nodes-base.noOp",
    "if": "n8n-nodes-base.if",
    "filter": "n8n-nodes-base.filter",
    "switch": "n8n-nodes-base.switch",
    "merge": "n8n-nodes-base.merge",
    "code": "n8n-nodes-base.code",
    "httpRequest": "n8n-nodes-base.httpRequest",
    "wait": "n8n-nodes-base.wait",
    "dateTime": "n8n-nodes-base.dateTime",
    "crypto": "n8n-nodes-base.crypto",
    "splitOut": "n8n-nodes-base.splitOut",
    "aggregate": "n8n-nodes-base.aggregate",
    "executeWorkflow": "n8n-nodes-base.executeWorkflow",
}
ITEMS = (10, 50)
PAYLOAD_KIB = (0, 64, 256)
EXPRESSIONS = (1, 4, 16)
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "n8n_sizer" / "data" / "node_costs.json"


def say(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {text}", flush=True)


def light_flow(path: str) -> dict:
    return with_webhook_path(read_workflow("light"), path, f"nodecost {path}")


def build_flows(ctx: dict) -> list[Flow]:
    one = code_items(1)
    flows = [
        Flow("base", "default", chain("nodecost base", "nc-base", [])),
        Flow("light", "default", light_flow("nc-light")),
    ]
    for kind in KINDS:
        for k in (1, 6):
            flows.append(Flow(f"{kind}-k{k}", "default", repeated(kind, k, f"nc-{kind.lower()}-k{k}", ctx, [one])))
    respond = make_node("respondToWebhook", "Respond", ctx)
    flows.append(Flow("respond", "default", chain("nodecost respond", "nc-respond", [respond], "responseNode")))
    for n in ITEMS:
        for k in (1, 6):
            flows.append(
                Flow(f"items{n}-set-k{k}", "default", repeated("set", k, f"nc-items{n}-k{k}", ctx, [code_items(n)]))
            )
    for kib in PAYLOAD_KIB:
        flows.append(
            Flow(
                f"payload{kib}",
                "default",
                chain(f"nodecost payload {kib}", f"nc-payload{kib}", [code_payload(kib), set_node("Small")]),
            )
        )
    for engine in ("default", "legacy"):
        prefix = "" if engine == "default" else "legacy-"
        for n in EXPRESSIONS:
            flows.append(
                Flow(
                    f"{prefix}expr{n}",
                    engine,
                    chain(
                        f"nodecost expr {n} {engine}",
                        f"nc-{prefix}expr{n}",
                        [set_node("Expr", 0, n, source="$json.body.n")],
                    ),
                )
            )
    flows += [
        Flow("legacy-base", "legacy", chain("nodecost base legacy", "nc-legacy-base", [])),
        Flow("legacy-light", "legacy", light_flow("nc-legacy-light")),
    ]
    return flows


def build_node_flows(ctx: dict, k_high: int, kinds: list[str]) -> list[Flow]:
    """The node rows only, with a longer chain (K = 1 and `k_high`): a finer slope for the cheap nodes."""
    one = code_items(1)
    flows = [
        Flow("base", "default", chain("nodecost base", "nr-base", [])),
        Flow("light", "default", light_flow("nr-light")),
    ]
    for kind in kinds:
        for k in (1, k_high):
            flows.append(Flow(f"{kind}-k{k}", "default", repeated(kind, k, f"nr-{kind.lower()}-k{k}", ctx, [one])))
    return flows


def _over(table: dict[int, dict[str, float]], fn) -> dict:
    return over_rounds(table, fn)


def derive_rows(raw: list[dict], kinds: dict[str, str], k_high: int, campaign: str) -> list[dict]:
    """One row per node kind: the slope (K=k_high - K=1) / (k_high - 1), within each round."""
    cpu, main = per_round(raw, "cpu_ms"), per_round(raw, "main_ms")
    rows = []
    for kind, type_ in kinds.items():

        def slope(x, kind=kind):
            return (x[f"{kind}-k{k_high}"] - x[f"{kind}-k1"]) / (k_high - 1)

        rows.append(
            {
                "id": kind,
                "type": type_,
                "cpu": _over(cpu, slope),
                "main_ms": _over(main, slope)["ms"],
                "runs": [f"{campaign}/{kind}-k1", f"{campaign}/{kind}-k{k_high}"],
            }
        )
    return rows


def derive(raw: list[dict], kinds: dict[str, str], campaign: str = "") -> dict:
    """The table from the raw runs: every figure computed within each round, then median and min..max over rounds."""
    cpu, main = per_round(raw, "cpu_ms"), per_round(raw, "main_ms")

    def over(fn, source=cpu) -> dict:
        return _over(source, fn)

    def slope(kind: str):
        return lambda x: (x[f"{kind}-k6"] - x[f"{kind}-k1"]) / 5

    rows = derive_rows(raw, kinds, 6, campaign)
    rows.append(
        {
            "id": "respondToWebhook",
            "type": "n8n-nodes-base.respondToWebhook",
            "cpu": over(lambda x: x["respond"] - x["base"]),
            "runs": [f"{campaign}/respond", f"{campaign}/base"],
            "main_ms": over(lambda x: x["respond"] - x["base"], main)["ms"],
        }
    )
    set_slope = slope("set")
    per_item = over(lambda x: ((x["items50-set-k6"] - x["items50-set-k1"]) / 5 - set_slope(x)) / 49)
    per_item_10 = over(lambda x: ((x["items10-set-k6"] - x["items10-set-k1"]) / 5 - set_slope(x)) / 9)
    lo, hi = PAYLOAD_KIB[0], PAYLOAD_KIB[-1]
    per_kib = over(lambda x: (x[f"payload{hi}"] - x[f"payload{lo}"]) / (hi - lo), cpu)
    e_lo, e_hi = EXPRESSIONS[0], EXPRESSIONS[-1]
    per_expr = {
        "default": over(lambda x: (x[f"expr{e_hi}"] - x[f"expr{e_lo}"]) / (e_hi - e_lo)),
        "legacy": over(lambda x: (x[f"legacy-expr{e_hi}"] - x[f"legacy-expr{e_lo}"]) / (e_hi - e_lo)),
    }
    return {
        "base": over(lambda x: x["base"]),
        "light": over(lambda x: x["light"]),
        "legacy_base": over(lambda x: x["legacy-base"]),
        "legacy_light": over(lambda x: x["legacy-light"]),
        "nodes": rows,
        "per_item_ms": per_item,
        "per_item_ms_at_10": per_item_10,
        "per_kib_saved_ms": per_kib,
        "per_expression_ms": per_expr,
        "light_throughput_ratio_legacy": over(
            lambda x: x["legacy-light"] / x["light"], per_round(raw, "throughput_per_s")
        ),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=100, help="requests per run (closed loop)")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--max-run-s", type=float, default=60.0)
    ap.add_argument("--max-minutes", type=float, default=40.0)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--only", default="", help="comma-separated flow keys (a quick check of some workflows)")
    ap.add_argument("--show", action="store_true", help="print --out's table as Markdown (for docs) and exit")
    ap.add_argument(
        "--refine-nodes",
        type=int,
        default=0,
        metavar="K",
        help="re-measure the node rows of --out with chains of 1 and K nodes (sub-workflow apart)",
    )
    ap.add_argument(
        "--mode",
        choices=("regular", "queue"),
        default="regular",
        help="queue: measure on a queue stack (1 worker) with per-role CPU, into --out's `queue` part",
    )
    ap.add_argument("--kinds", default="", help="queue mode: the node kinds of this chunk (comma-separated)")
    ap.add_argument("--k-high", type=int, default=8, help="queue mode: the long chain's length")
    ap.add_argument("--extras", action="store_true", help="queue mode: also Respond to Webhook and expressions")
    ap.add_argument(
        "--families",
        default="",
        help="the families campaign: these kinds (comma-separated, or `all`) of benchmarks/nodecost_ai.py, with "
        "the local OpenAI stand-in; into --out's `families` part",
    )
    ap.add_argument(
        "--rederive-families",
        action="store_true",
        help="derive the families rows of --out again from the raw runs it keeps (no measuring)",
    )
    ap.add_argument(
        "--from-log",
        type=Path,
        default=None,
        help="with --rederive-families: the families rows from a campaign's log (its per-step lines), for a sitting "
        "stopped before it wrote --out; its rounds replace the part's",
    )
    ap.add_argument("--parked", action="store_true", help="families: a 66 s Wait (parked) against a 0.05 s one")
    ap.add_argument("--parked-requests", type=int, default=200)
    ap.add_argument("--parked-rounds", type=int, default=2)
    ap.add_argument("--held", action="store_true", help="families: memory an in-flight AI execution holds in main")
    ap.add_argument("--held-in-flight", type=int, default=100)
    ap.add_argument("--held-latency-ms", type=float, default=20000.0)
    args = ap.parse_args()
    if args.show:
        print(markdown(json.loads(args.out.read_text())))
        return 0
    if args.mode == "queue":
        return queue_campaign(args)
    if args.rederive_families:
        doc = json.loads(args.out.read_text())
        if args.from_log is not None:
            doc["families"] = families_from_log(args.from_log, args.k_high)
        doc["families"] = derive_families(doc, doc["families"], args.k_high)
        write_atomic(args.out, json.dumps(doc, indent=1) + "\n", private=False)
        print(f"derived {len(doc['families'].get('nodes', []))} families rows of {args.out} again")
        return 0
    if args.families or args.parked or args.held:
        return families_campaign(args)
    deadline = time.monotonic() + args.max_minutes * 60
    campaign = "nodecost-" + time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    install = install_n8n(quiet=True)
    stub = StubServer()
    stacks: dict[str, LocalStack] = {}
    clients = {}
    try:
        stacks["default"] = LocalStack(Setup(mode="regular")).start()
        if not args.refine_nodes:
            stacks["legacy"] = LocalStack(
                Setup(mode="regular"), StackOptions(extra_env={"N8N_EXPRESSION_ENGINE": "legacy"})
            ).start()
        say(f"stacks up: n8n {N8N_VERSION}, Node {install.node_version}, regular mode, Postgres")
        for label, stack in stacks.items():
            clients[label] = set_up_instance(stack.main_url).client(timeout_s=120)
        sub = clients["default"].create_workflow(SUB_WORKFLOW)
        clients["default"].activate_workflow(sub["id"])  # 2.x calls only published sub-workflows
        ctx = {"stub_url": stub.url, "sub_id": sub["id"], "wait_s": 0.05}
        refine = {k: t for k, t in KINDS.items() if k != "executeWorkflow"}  # its slope is large already
        flows = build_node_flows(ctx, args.refine_nodes, list(refine)) if args.refine_nodes else build_flows(ctx)
        if args.only:
            keep = set(args.only.split(","))
            flows = [f for f in flows if f.key in keep]
        deploy_flows(flows, stacks, clients, say)
        raw = run_rounds(
            flows,
            stacks,
            rounds=args.rounds,
            requests=args.requests,
            concurrency=args.concurrency,
            max_run_s=args.max_run_s,
            deadline=deadline,
            warmup=args.warmup,
            say=say,
            campaign=campaign,
        )
        checks = final_check(flows, clients, raw)
        ok_total = {f.key: sum(r["ok"] for r in raw if r["key"] == f.key) for f in flows}
        say("stored executions by status: " + json.dumps(checks))
        if args.only:
            return 0
        if args.refine_nodes:
            doc = json.loads(args.out.read_text())
            fresh = {row["id"]: row for row in derive_rows(raw, refine, args.refine_nodes, campaign)}
            doc["table"]["nodes"] = [fresh.get(row["id"], row) for row in doc["table"]["nodes"]]
            doc["about"]["node_rows"] = (
                f"{campaign}: chains of 1 and {args.refine_nodes} nodes, "
                f"{max(r['round'] for r in raw)} rounds (Execute Workflow, Respond to Webhook: "
                f"{doc['about']['campaign']})"
            )
            doc["node_rounds"] = raw
            doc["node_executions_by_status"] = checks
            write_atomic(args.out, json.dumps(doc, indent=1) + "\n", private=False)
            say(f"refined the node rows of {args.out}")
            return 0
        table = derive(raw, KINDS, campaign)
        doc = {
            "about": {
                "what": "CPU per execution (main with its task runner, plus Postgres with its backends) of n8n's "
                "per-node work, measured by benchmarks/node_costs.py",
                "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "n8n_version": N8N_VERSION,
                "node_version": install.node_version,
                "machine": f"{platform.node()}: {platform.machine()}, {_cpu_model()}, {_cores()} cores (shared)",
                "mode": "regular",
                "db": "postgres",
                "concurrency": args.concurrency,
                "requests_per_run": args.requests,
                "rounds": max(r["round"] for r in raw),
                "method": "closed loop per workflow, all workflows interleaved per round; per-node cost = "
                "(K=6 - K=1)/5; CPU from /proc/<pid>/stat of main's and Postgres' process families",
                "campaign": campaign,
            },
            "table": table,
            "executions_by_status": checks,
            "answered_ok": ok_total,
            "rounds": raw,
        }
        write_atomic(args.out, json.dumps(doc, indent=1) + "\n", private=False)
        say(f"wrote {args.out}")
        return 0
    finally:
        stub.close()
        for client in clients.values():
            client.close()
        for stack in stacks.values():
            stack.stop()


def queue_campaign(args) -> int:
    """One chunk of the queue-mode campaign (nodecost_queue.py): its kinds on a queue stack, per-role CPU from the
    bench's cgroups; its raw runs are added to --out's `queue.rounds` and the queue table derived from all of them."""
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise SystemExit(f"--kinds: unknown node kinds {unknown}; accepted: {', '.join(KINDS)}")
    deadline = time.monotonic() + args.max_minutes * 60
    campaign = "nodecostq-" + time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    install = install_n8n(quiet=True)
    stub = StubServer()
    stack = client = acc = None
    try:
        stack = LocalStack(Setup(mode="queue", workers=1)).start()
        acc = queue_accounting(stack)
        say(
            f"queue stack up: n8n {N8N_VERSION}, Node {install.node_version}, 1 worker, Postgres, Redis; "
            f"cgroups {acc.top}: {sorted({r for _, r in acc.groups})}"
        )
        client = set_up_instance(stack.main_url).client(timeout_s=120)
        sub = client.create_workflow(SUB_WORKFLOW)
        client.activate_workflow(sub["id"])
        ctx = {"stub_url": stub.url, "sub_id": sub["id"], "wait_s": 0.05}
        flows = build_queue_flows(ctx, kinds, args.k_high, light_flow, args.extras)
        stacks, clients = {"default": stack}, {"default": client}
        deploy_flows(flows, stacks, clients, say)
        raw = run_rounds(
            flows,
            stacks,
            rounds=args.rounds,
            requests=args.requests,
            concurrency=args.concurrency,
            max_run_s=args.max_run_s,
            deadline=deadline,
            warmup=args.warmup,
            say=say,
            campaign=campaign,
            measure=role_measure(acc),
        )
        checks = final_check(flows, clients, raw)
        say("stored executions by status: " + json.dumps(checks))
        keep = Path("/tmp") / f"{campaign}.json"  # the raw runs, kept should deriving fail
        write_atomic(keep, json.dumps({"rounds": raw, "checks": checks}) + "\n", private=False)
        doc = json.loads(args.out.read_text())
        part = doc.get("queue") or {"rounds": [], "executions_by_status": {}}
        part["rounds"] += raw
        part["executions_by_status"][campaign] = checks
        part["about"] = {
            "what": "CPU per execution in queue mode, per role (main, worker, its task runner, Postgres, Redis), "
            "from the bench's cgroups (cpuacct), measured by benchmarks/node_costs.py --mode queue",
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "n8n_version": N8N_VERSION,
            "mode": "queue",
            "workers": 1,
            "db": "postgres",
            "concurrency": args.concurrency,
            "requests_per_run": args.requests,
            "k_high": args.k_high,
            "method": "as the regular table, per chunk of node kinds with base and light in every chunk; a round "
            "is campaign/round; per-node cost = (K=k_high - K=1)/(k_high - 1), Execute Workflow K=1..4",
        }
        part["table"] = derive_queue(part["rounds"], {**KINDS}, args.k_high)
        doc["queue"] = part
        write_atomic(args.out, json.dumps(doc, indent=1) + "\n", private=False)
        say(f"added {len(raw)} queue runs of {campaign} to {args.out}")
        return 0
    finally:
        stub.close()
        if client is not None:
            client.close()
        if acc is not None:
            acc.close()
        if stack is not None:
            stack.stop()


def families_campaign(args) -> int:
    """One chunk of the families campaign (node_costs_families.py): its kinds, and/or the parked Wait, and/or the
    memory held in flight, on a regular stack beside the OpenAI stand-in; appended to --out's `families` part."""
    from node_costs_families import (
        FAMILY_KINDS,
        PARK_S,
        build_family_flows,
        credentials,
        held_in_flight,
        measure_window,
        preload_vectors,
        wait_flow,
    )

    from n8n_sizer.n8n.workflows import deploy_workflow
    from n8n_sizer.standins.openai import StandInConfig, StandInServer

    kinds = list(FAMILY_KINDS) if args.families == "all" else [k for k in args.families.split(",") if k]
    unknown = [k for k in kinds if k not in FAMILY_KINDS]
    if unknown:
        raise SystemExit(f"--families: unknown kinds {unknown}; accepted: {', '.join(FAMILY_KINDS)}")
    deadline = time.monotonic() + args.max_minutes * 60
    campaign = "nodecostf-" + time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    install = install_n8n(quiet=True)
    standin = StandInServer(StandInConfig()).serve()
    stack = client = None
    part: dict = {}
    from n8n_sizer.lab.speed import probe as speed_probe

    probe = speed_probe(install.node_bin)  # recorded beside the figures (house rule)
    try:
        stack = LocalStack(Setup(mode="regular")).start()
        client = set_up_instance(stack.main_url).client(timeout_s=120)
        say(f"stack up: n8n {N8N_VERSION}, Node {install.node_version}, regular, Postgres; stand-in {standin.url}")
        ctx = credentials(client, standin)
        doc = json.loads(args.out.read_text())
        part = doc.get("families") or {"rounds": [], "executions_by_status": {}, "parked": [], "held": []}
        part.setdefault("speed_probes", []).append({"campaign": campaign, "probe": probe})
        if kinds:
            if "aiVectorLoad" in kinds:
                preload_vectors(client, stack.main_url, ctx)
            flows = build_family_flows(ctx, kinds, args.k_high, light_flow)
            stacks, clients = {"default": stack}, {"default": client}
            deploy_flows(flows, stacks, clients, say)
            raw = run_rounds(
                flows,
                stacks,
                rounds=args.rounds,
                requests=args.requests,
                concurrency=args.concurrency,
                max_run_s=args.max_run_s,
                deadline=deadline,
                warmup=args.warmup,
                say=say,
                campaign=campaign,
            )
            checks = final_check(flows, clients, raw)
            say("stored executions by status: " + json.dumps(checks))
            part["rounds"] += raw
            part["executions_by_status"][campaign] = checks
            part["standin_requests"] = {**part.get("standin_requests", {}), campaign: dict(standin.counts)}
        if args.parked:
            parked = wait_flow("nf-parked", PARK_S)
            short = wait_flow("nf-short-wait", 0.05)
            ids = {}
            for key, wf in (("parked", parked), ("short", short)):
                wid, path = deploy_workflow(client, wf, timeout_s=60)
                ids[key] = (wid, stack.main_url + path)
            window = PARK_S + 75.0  # the tracker polls every 60 s; a resume lands within one poll of its time
            for r in range(args.parked_rounds):
                for key in ("parked", "short") if r % 2 == 0 else ("short", "parked"):
                    wid, url = ids[key]
                    say(f"parked round {r + 1}: {key}, {args.parked_requests} executions, {window:.0f} s window")
                    got = measure_window(stack, client, url, wid, args.parked_requests, window, say)
                    part["parked"].append({"id": f"{campaign}/r{r + 1}/{key}", "key": key, "round": r + 1} | got)
        if args.held:
            standin.config = standin.config.model_copy(update={"latency_ms": args.held_latency_ms})
            from node_costs_families import _with_units
            from nodecost_ai import unit

            agent = _with_units("nodecost held agent", "nf-held-agent", [unit("aiAgent", 1, ctx)])
            waiting = wait_flow("nf-held-wait", args.held_latency_ms / 1000.0)
            waiting["nodes"][0]["parameters"]["responseMode"] = "lastNode"
            for key, wf in (("ai", agent), ("wait", waiting)):
                _, path = deploy_workflow(client, wf, timeout_s=60)
                half = max(1, args.held_in_flight // 2)
                say(f"held in flight: {key}, {half} and {args.held_in_flight} executions")
                got = held_in_flight(
                    stack, stack.main_url + path, (half, args.held_in_flight), args.held_latency_ms / 1000.0, say
                )
                part["held"].append({"id": f"{campaign}/{key}", "key": key} | got)
        part["about"] = {
            "what": "further node kinds (AI roots with their sub-nodes against a local OpenAI-compatible stand-in, "
            "app nodes against a stand-in, legacy and core nodes), a parked Wait, and the memory an in-flight "
            "execution holds; measured by benchmarks/node_costs.py --families / --parked / --held",
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "n8n_version": N8N_VERSION,
            "node_version": install.node_version,
            "mode": "regular",
            "db": "postgres",
            "concurrency": args.concurrency,
            "requests_per_run": args.requests,
            "k_high": args.k_high,
            "method": "as the first campaign: slope of chains of K = 1 and k_high copies within a round; chunks "
            "add up (a round is campaign/round)",
        }
        doc["families"] = derive_families(doc, part, args.k_high)
        write_atomic(args.out, json.dumps(doc, indent=1) + "\n", private=False)
        say(f"wrote the families part of {args.out}: {len(part.get('nodes', []))} rows")
        return 0
    finally:
        standin.close()
        if client is not None:
            client.close()
        if stack is not None:
            stack.stop()


_STEP_LINE = re.compile(
    r"^(\d\d:\d\d:\d\d) round (\d+)/\d+ \[(\d+)/\d+\] (\S+)\s+([\d.]+)/s cpu\s+([\d.]+) ms "
    r"\(main\s+([\d.]+), pg\s+([\d.]+)\)$"
)


def families_from_log(log: Path, k_high: int) -> dict:
    """A families part from a campaign's log: one raw run per step line (`round R/N [i/M] KEY  rate/s cpu X ms (main
    Y, pg Z)`, figures as printed, to 0.1 ms), the stored executions' check line, and what the first line says of
    the stack. The campaign's name is the log's (families-<date>T<hhmm>Z.log)."""
    text = log.read_text()
    campaign = "nodecostf-" + log.stem.split("-", 1)[1]
    raw, checks = [], {}
    for line in text.splitlines():
        m = _STEP_LINE.match(line)
        if m:
            at, rnd, seq, key, rate, cpu, main, pg = m.groups()
            raw.append(
                {
                    "id": f"{campaign}/r{rnd}/{seq}/{key}",
                    "round": int(rnd),
                    "seq": int(seq) - 1,
                    "key": key,
                    "throughput_per_s": float(rate),
                    "cpu_ms": float(cpu),
                    "main_ms": float(main),
                    "postgres_ms": float(pg),
                    "stack": "default",
                    "at": at,
                }
            )
        elif " stored executions by status: " in line:
            checks = json.loads(line.split(" stored executions by status: ", 1)[1])
    if not raw:
        raise SystemExit(f"{log}: no step lines")
    first = text.splitlines()[0]
    return {
        "rounds": raw,
        "executions_by_status": {campaign: checks},
        "parked": [],
        "held": [],
        "about": {
            "what": "further node kinds (AI roots with their sub-nodes against a local OpenAI-compatible stand-in, "
            "app nodes against a stand-in, legacy and core nodes), measured by benchmarks/node_costs.py --families",
            "date": campaign.split("-", 1)[1],
            "stack": first.split(" ", 1)[1],
            "k_high": k_high,
            "source": f"benchmarks/node_costs_runs/{log.name}: the sitting's log (it was stopped in its parked "
            "phase, before it wrote its file); every step line of its rounds",
            "method": "as the first campaign: slope of chains of K = 1 and k_high copies within a round; a round "
            "is campaign/round",
        },
    }


def derive_families(doc: dict, part: dict, k_high: int) -> dict:
    """The families part's rows, held memory and parked Wait, from its raw runs (in the table's milliseconds)."""
    from node_costs_families import derive_family_rows, round_scales

    reference = (doc["table"]["base"]["ms"] + doc["table"]["light"]["ms"]) / 2
    if part.get("rounds"):
        part["nodes"] = derive_family_rows(part["rounds"], part.get("about", {}).get("k_high", k_high), reference)
        scales = round_scales(part["rounds"], reference)
        part.setdefault("about", {})["scale"] = (
            "each round's figures x the table's base-and-light mean over the round's own "
            f"({reference:.1f} ms over the round's; factors {min(scales.values()):.2f} .. "
            f"{max(scales.values()):.2f}): ratios of one sitting, in the table's milliseconds"
        )
    part["held_mb"] = derive_held(part.get("held", []))
    park = derive_parked(part.get("parked", []), doc, part.get("rounds", []), reference)
    if park is not None:
        part["nodes"] = [r for r in part.get("nodes", []) if r["id"] != "waitParked"] + [park]
    return part


def derive_held(held: list[dict]) -> dict:
    """held_mb per kind: the median over measurements of the rise per execution between the two counts, its spread
    from every per-execution figure (also each count against its own baseline)."""
    out = {}
    for key, what in (
        ("ai", "the AI Agent with its chat model, waiting on the model (stand-in), per execution in flight"),
        ("wait", "Webhook -> Wait (held in memory) -> Set, per execution in flight"),
    ):
        got = [h for h in held if h["key"] == key]
        if not got:
            continue
        values = [h["per_execution_mb"] for h in got]
        spread = values + [v for h in got for v in h["per_execution_from_baseline_mb"]]
        out[key] = {
            "mb": round(statistics.median(values), 2),
            "low_mb": round(min(spread), 2),
            "high_mb": round(max(spread), 2),
            "what": what,
            "runs": [h["id"] for h in got],
        }
    return out


def derive_parked(parked: list[dict], doc: dict, rounds: list[dict], reference: float) -> dict | None:
    """waitParked: (parked - short) CPU per execution over same-length windows, in the table's milliseconds (the
    campaign's base-and-light scale, its rounds' median), plus the Wait row."""
    by_round: dict[int, dict[str, float]] = {}
    for p in parked:
        by_round.setdefault(p["round"], {})[p["key"]] = (p["main_ms"] + p["postgres_ms"]) / max(p["requests"], 1)
    from node_costs_families import round_scales

    scales = list(round_scales(rounds, reference).values())
    k = statistics.median(scales) if scales else 1.0
    diffs = [(x["parked"] - x["short"]) * k for x in by_round.values() if "parked" in x and "short" in x]
    if not diffs:
        return None
    wait_row = next(r for r in doc["table"]["nodes"] if r["id"] == "wait")["cpu"]["ms"]
    values = [d + wait_row for d in diffs]
    return {
        "id": "waitParked",
        "type": "n8n-nodes-base.wait",
        "cpu": {
            "ms": round(statistics.median(values), 2),
            "low_ms": round(min(values), 2),
            "high_ms": round(max(values), 2),
            "per_round": [round(v, 2) for v in values],
        },
        "runs": [p["id"] for p in parked],
        "when": {"_parked": "yes"},
        "what": "a Wait n8n parks (66 s): saved as waiting, resumed by the wait tracker; against a 0.05 s Wait, "
        "plus the Wait row",
    }


def markdown(doc: dict) -> str:
    """The table as docs/workflow-price.md shows it: every figure with its spread over rounds."""
    t, a = doc["table"], doc["about"]

    def fig(f: dict) -> str:
        return f"{f['ms']:.2f} | {f['low_ms']:.2f} .. {f['high_ms']:.2f}"

    light = t["light"]["ms"]
    lines = [
        f"Campaign `{a['campaign']}`, {a['date']}, n8n {a['n8n_version']}, Node {a['node_version']}, "
        f"{a['machine']}; {a['mode']} mode, {a['db']}, closed loop c={a['concurrency']}, "
        f"{a['requests_per_run']} requests per run, {a['rounds']} interleaved rounds."
        + (f" Node rows: {a['node_rows']}." if a.get("node_rows") else ""),
        "",
        "| row | n8n node type | CPU ms per node per execution | spread over rounds (min .. max) | of it main + runner | share of light |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    lines.append(
        f"| base | Webhook alone (receive, start, save, respond) | {fig(t['base'])} | | {t['base']['ms'] / light:.0%} |"
    )
    for row in t["nodes"]:
        lines.append(
            f"| {row['id']} | `{row['type']}` | {fig(row['cpu'])} | {row['main_ms']:.2f} | "
            f"{row['cpu']['ms'] / light:.0%} |"
        )
    lines += [
        "",
        "| figure | ms | spread (min .. max) |",
        "| --- | --- | --- |",
        f"| light, measured whole | {fig(t['light'])} |",
        f"| per extra item per node (Set, 1 to 50 items) | {fig(t['per_item_ms'])} |",
        f"| per extra item per node (Set, 1 to 10 items) | {fig(t['per_item_ms_at_10'])} |",
        f"| per KiB of execution data saved | {fig(t['per_kib_saved_ms'])} |",
        f"| per expression, default engine | {fig(t['per_expression_ms']['default'])} |",
        f"| per expression, legacy engine | {fig(t['per_expression_ms']['legacy'])} |",
        f"| base, legacy engine | {fig(t['legacy_base'])} |",
        f"| light, legacy engine | {fig(t['legacy_light'])} |",
        f"| light's rate, legacy over default (ratio, not ms) | {fig(t['light_throughput_ratio_legacy'])} |",
    ]
    if (doc.get("queue") or {}).get("table", {}).get("base"):
        lines += queue_markdown(doc["queue"])
    return "\n".join(lines)


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def _cores() -> int:
    import os

    return os.cpu_count() or 0


if __name__ == "__main__":
    sys.exit(main())
