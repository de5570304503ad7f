"""Validate the per-node pricer on workflows that did not feed the table: predicted vs measured, relative to light.

Each workflow below (node mixes, items, a sub-workflow, an HTTP call to a local stub, Respond to Webhook, a Webhook
-> Set with two expressions) is priced by `price_workflow` from the embedded table, then measured on one local
stack (regular mode, Postgres) with the packaged light workflow run just before and after each of them: --rounds
rounds, each run a closed loop of --requests at --concurrency. Measured, per run against the mean of its two light
neighbours, then the median over rounds: light's throughput over the workflow's (what the capacity model divides
by) and the workflow's CPU per execution over light's (main with its runner, plus Postgres). Predicted:
`overhead_ratio_to_light`. Error = predicted / measured - 1.

Run: PYTHONPATH=.:benchmarks .venv/bin/python benchmarks/workflow_price.py [--rounds 3] [--requests 100]
Last line: `N workflows: median |error| X%, max |error| Y%` (of the throughput ratio; the line before it: of the
CPU ratio). `--from A.json B.json` prices runs kept by earlier `--save`s again, pooled, without measuring.
"""

from __future__ import annotations

import argparse
import json
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
    deploy_flows,
    final_check,
    make_node,
    run_rounds,
    set_node,
)

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.advisor.workflow_price import load_node_costs, price_workflow
from n8n_sizer.n8n.client import set_up_instance
from n8n_sizer.n8n.workflows import read_workflow, with_webhook_path
from n8n_sizer.native.stack import LocalStack


def say(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


def _n(kind: str, name: str, ctx: dict) -> dict:
    return make_node(kind, name, ctx)


def workflows(ctx: dict) -> list[tuple[str, dict, int]]:
    """(key, definition, items per execution): none of these shapes was measured for the table."""
    body = "$json.body.n"
    return [
        ("webhook-set-2expr", chain("v set2", "v-set2", [set_node("Set", 0, 2, source=body)]), 1),
        (
            "if-set3-code-noop",
            chain(
                "v mix",
                "v-mix",
                [
                    _n("if", "If", ctx),
                    set_node("Set", 0, 3, source=body),
                    _n("code", "Code", ctx),
                    _n("noOp", "Done", ctx),
                ],
            ),
            1,
        ),
        (
            "items10-set-filter-agg",
            chain(
                "v items",
                "v-items",
                [
                    code_items(10),
                    set_node("Set", 1, 1, True),
                    _n("filter", "Filter", ctx),
                    _n("aggregate", "Aggregate", ctx),
                ],
            ),
            10,
        ),
        (
            "set-subworkflow-set",
            chain(
                "v sub",
                "v-sub",
                [
                    set_node("Before", 2, 0),
                    _n("executeWorkflow", "Sub", ctx),
                    set_node("After", 1, 1, True, source="$json.c0.length"),
                ],
            ),
            1,
        ),
        (
            "http-set-if",
            chain(
                "v http",
                "v-http",
                [_n("httpRequest", "Call", ctx), set_node("Set", 0, 1, source="$json.n"), _n("if", "If", ctx)],
            ),
            1,
        ),
        # Date & Time 2 (getCurrentDate) passes on only its own field: what follows reads the hash
        (
            "long-mix-9",
            chain(
                "v long",
                "v-long",
                [
                    code_items(1),
                    _n("splitOut", "Split", ctx),
                    _n("dateTime", "Now", ctx),
                    _n("crypto", "Hash", ctx),
                    _n("switch", "Route", ctx),
                    _n("merge", "Merge", ctx),
                    _n("noOp", "A", ctx),
                    set_node("Set", 2, 2, True, source="$json.h.length"),
                    _n("noOp", "B", ctx),
                ],
            ),
            1,
        ),
        (
            "respond-node",
            chain(
                "v respond",
                "v-respond",
                [set_node("Set", 1, 1, True, source=body), _n("respondToWebhook", "Respond", ctx)],
                "responseNode",
            ),
            1,
        ),
        (
            "code-x3",
            chain("v code3", "v-code3", [_n("code", "C1", ctx), _n("code", "C2", ctx), _n("code", "C3", ctx)]),
            1,
        ),
        (
            "webhook-eight-sets",
            chain("v set8", "v-set8", [set_node(f"Set {i}", 1, 1, True, source="$json.body.n") for i in range(1, 9)]),
            1,
        ),
        ("ai-agent-2s", ai_agent(ctx), 1),
        ("app-telegram-set-if", app_flow(ctx), 1),
    ]


# Workflows that wait (a model answering in 2 s, an app): their closed-loop throughput is set by the wait, not by
# the CPU the price is about; they are compared by CPU per execution (the capacity under waiting is
# benchmarks/ai_capacity.py's question).
WAITING = {"ai-agent-2s", "app-telegram-set-if"}


def _attach(wf: dict, subs: list[dict], links: list[tuple[str, str, str]]) -> dict:
    wf["nodes"] += subs
    for sub, root, kind in links:
        wf["connections"].setdefault(sub, {}).setdefault(kind, [[]])[0].append({"node": root, "type": kind, "index": 0})
    return wf


def ai_agent(ctx: dict) -> dict:
    """Webhook -> Set (the prompt, one expression) -> AI Agent (its chat model answering in 2 s: a stand-in
    credential of its own) -> Set: not a shape the table's chains of agents measured."""
    from nodecost_ai import unit

    slow = {**ctx, "openai_cred_id": ctx["openai_slow_id"], "openai_cred_name": ctx["openai_slow_name"]}
    root, subs, links = unit("aiAgent", 1, slow)
    root["name"], root["parameters"]["text"] = "Agent", "={{ $json.e0 }} - say ok."
    subs[0]["name"] = "OpenAI Chat Model"
    links = [("OpenAI Chat Model", "Agent", "ai_languageModel")]
    wf = chain("v agent", "v-agent", [set_node("Prompt", 0, 1, source="$json.body.n"), root, set_node("After", 1)])
    return _attach(wf, subs, links)


def app_flow(ctx: dict) -> dict:
    """Webhook -> Telegram (send a message to the stand-in, its credential's baseUrl) -> Set -> IF."""
    from nodecost_ai import unit

    tg, _, _ = unit("appTelegram", 1, ctx)
    tg["name"] = "Telegram"
    return chain("v app", "v-app", [tg, set_node("Set", 0, 1, source="$json.ok"), _n("if", "If", ctx)])


def neighbour_ratios(raw: list[dict]) -> dict[str, dict[str, list[float]]]:
    """Per workflow run, against the mean of the light runs just before and after it (same round): light's rate
    over the workflow's, and the workflow's CPU per execution over light's."""
    out: dict[str, dict[str, list[float]]] = {}
    for i, run in enumerate(raw):
        if run["key"] == "light":
            continue
        near = [
            raw[j]
            for j in (i - 1, i + 1)
            if 0 <= j < len(raw) and raw[j]["key"] == "light" and raw[j]["round"] == run["round"]
        ]
        if not near:
            continue
        light_rate = statistics.mean(n["throughput_per_s"] for n in near)
        light_cpu = statistics.mean(n["cpu_ms"] for n in near)
        entry = out.setdefault(run["key"], {"rate": [], "cpu": []})
        entry["rate"].append(light_rate / run["throughput_per_s"])
        entry["cpu"].append(run["cpu_ms"] / light_cpu)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=100)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--max-run-s", type=float, default=60.0)
    ap.add_argument("--max-minutes", type=float, default=25.0)
    ap.add_argument(
        "--save",
        type=Path,
        default=Path("/tmp/n8n-sizer-workflow-price.json"),
        help="where the measured runs are kept (to price them again with --from)",
    )
    ap.add_argument(
        "--from",
        dest="from_files",
        type=Path,
        nargs="+",
        default=None,
        help="price the runs kept by earlier --save files again (pooled), without measuring",
    )
    ap.add_argument(
        "--embed",
        type=Path,
        default=None,
        help="with --from: write the validation points advise --validate lists (package data)",
    )
    args = ap.parse_args()
    if args.from_files is not None:
        kept = [json.loads(f.read_text()) for f in args.from_files]
        statuses: dict[str, dict[str, int]] = {}
        for k in kept:
            for key, by in k["statuses"].items():
                for status, n in by.items():
                    statuses.setdefault(key, {}).setdefault(status, 0)
                    statuses[key][status] += n
        defs = workflows(
            {
                "stub_url": "http://127.0.0.1:1/stub",
                "sub_id": "sub",
                "app_url": "http://127.0.0.1:1",
                **dict.fromkeys(
                    (
                        "openai_cred_id",
                        "openai_cred_name",
                        "openai_slow_id",
                        "openai_slow_name",
                        "telegram_cred_id",
                        "telegram_cred_name",
                    ),
                    "c",
                ),
            }
        )
        report(defs, [k["raw"] for k in kept], kept[0]["requests"], kept[0]["concurrency"], statuses)
        if args.embed is not None:
            embed(args.embed, defs, [k["raw"] for k in kept], kept[0]["requests"], kept[0]["concurrency"], statuses)
        return 0
    deadline = time.monotonic() + args.max_minutes * 60
    stub = StubServer()
    from node_costs_families import credentials

    from n8n_sizer.standins.openai import StandInServer

    standin = StandInServer().serve()  # the AI agent's model (2 s) and the app node's service (0.5 s, its default)
    stack = LocalStack(Setup(mode="regular"))
    client = None
    try:
        stack.start()
        client = set_up_instance(stack.main_url).client(timeout_s=120)
        sub = client.create_workflow(SUB_WORKFLOW)
        client.activate_workflow(sub["id"])
        creds = credentials(client, standin)
        slow = client.create_credential(
            "stand-in openai 2 s", "openAiApi", {"apiKey": "sk-stand-in", "url": standin.base_url(2000)}
        )
        tg = client.create_credential(
            "stand-in telegram 0.5 s", "telegramApi", {"accessToken": "1:s", "baseUrl": standin.url + "/lat/500"}
        )
        ctx = {
            "stub_url": stub.url,
            "sub_id": sub["id"],
            **creds,
            "openai_slow_id": slow["id"],
            "openai_slow_name": slow["name"],
            "telegram_cred_id": tg["id"],
            "telegram_cred_name": tg["name"],
        }
        defs = workflows(ctx)
        light = with_webhook_path(read_workflow("light"), "v-light", "v light")
        flows = [Flow("light", "s", light)] + [Flow(key, "s", d) for key, d, _ in defs]
        deploy_flows(flows, {"s": stack}, {"s": client}, say)
        raw = run_rounds(
            flows,
            {"s": stack},
            rounds=args.rounds,
            requests=args.requests,
            concurrency=args.concurrency,
            max_run_s=args.max_run_s,
            deadline=deadline,
            warmup=args.warmup,
            say=say,
            campaign="validate-" + time.strftime("%Y%m%dT%H%M%SZ"),
            partner=flows[0],
        )
        statuses = final_check(flows, {"s": client}, raw)
    finally:
        stub.close()
        standin.close()
        if client is not None:
            client.close()
        stack.stop()
    args.save.write_text(
        json.dumps({"requests": args.requests, "concurrency": args.concurrency, "raw": raw, "statuses": statuses})
    )
    report(defs, [raw], args.requests, args.concurrency, statuses)
    return 0


def embed(
    out: Path,
    defs: list[tuple[str, dict, int]],
    raws: list[list[dict]],
    requests: int,
    concurrency: int,
    statuses: dict[str, dict[str, int]],
) -> None:
    """The validation points as package data: each workflow's definition, items, and what was measured (every
    round's ratio to its light neighbours, by rate and by CPU), for `advise --validate` to price with the table."""
    from n8n_sizer.safety.write import write_atomic

    ratios: dict[str, dict[str, list[float]]] = {}
    for raw in raws:
        for key, got in neighbour_ratios(raw).items():
            for what, values in got.items():
                ratios.setdefault(key, {}).setdefault(what, []).extend(round(v, 4) for v in values)
    campaigns = sorted({run["id"].split("/", 1)[0] for raw in raws for run in raw})
    points = [
        {
            "key": key,
            "items": items,
            "definition": definition,
            "measured_rate_ratio": ratios[key]["rate"],
            "measured_cpu_ratio": ratios[key]["cpu"],
            "statuses": statuses.get(key, {}),
            "waits": key in WAITING,
            "runs": sorted({run["id"] for raw in raws for run in raw if run["key"] == key}),
        }
        for key, definition, items in defs
        if key in ratios
    ]
    doc = {
        "about": {
            "what": "workflows that did not feed the node cost table, measured against light run just before "
            "and after each (benchmarks/workflow_price.py): light's rate over the workflow's, and "
            "the workflow's CPU per execution over light's, per round",
            "campaigns": campaigns,
            "mode": "regular",
            "db": "postgres",
            "requests_per_run": requests,
            "concurrency": concurrency,
        },
        "points": points,
    }
    write_atomic(out, json.dumps(doc, indent=1) + "\n", private=False)
    print(f"wrote {len(points)} validation points to {out}")


def report(
    defs: list[tuple[str, dict, int]],
    raws: list[list[dict]],
    requests: int,
    concurrency: int,
    statuses: dict[str, dict[str, int]],
) -> None:
    """Predicted (from the embedded table, read now) against measured, one line per workflow, and the summary.
    `raws`: one list of runs per measurement (neighbours are looked up within a list; the ratios are pooled)."""
    table = load_node_costs()
    ratios: dict[str, dict[str, list[float]]] = {}
    for raw in raws:
        for key, got in neighbour_ratios(raw).items():
            for what, values in got.items():
                ratios.setdefault(key, {}).setdefault(what, []).extend(values)
    rounds = sum(len({run["round"] for run in raw}) for raw in raws)
    failed = sum(run["bad"] for raw in raws for run in raw)
    not_ok = {key: by for key, by in statuses.items() if set(by) != {"success"}}
    print(f"answers other than 200: {failed}; stored executions not all successful: {not_ok or 'none'}")
    print(
        f"table: {table.about.get('campaign')}, node rows {table.about.get('node_rows', 'same')} "
        f"(n8n {table.about.get('n8n_version')}); measured: {rounds} "
        f"rounds x {requests} requests at c={concurrency}, light run before and after every workflow"
    )
    print(
        f"{'workflow':24s} {'items':>5s} {'predicted':>18s} {'measured rate':>13s} {'err':>6s} "
        f"{'measured CPU':>12s} {'err':>6s}"
    )
    errors, errors_cpu = [], []
    for key, definition, items in defs:
        if key not in ratios:  # a workflow these runs did not measure (an older campaign's)
            continue
        price = price_workflow(definition, table, items=items)
        mid, low, high = price.overhead_ratio_to_light
        by_rate = statistics.median(ratios[key]["rate"])
        by_cpu = statistics.median(ratios[key]["cpu"])
        err, err_cpu = mid / by_rate - 1, mid / by_cpu - 1
        if key not in WAITING:  # a waiting workflow's closed-loop rate is its wait's, not its price's
            errors.append(abs(err))
        errors_cpu.append(abs(err_cpu))
        print(
            f"{key:24s} {items:5d} {mid:5.2f} [{low:4.2f}-{high:4.2f}] {by_rate:13.2f} {err:+6.0%} "
            f"{by_cpu:12.2f} {err_cpu:+6.0%}"
            + ("  (waits: by CPU)" if key in WAITING else "")
            + (f"  unknown: {price.unknown_types}" if price.unknown_types else "")
        )
    print(
        f"by CPU per execution: {len(errors_cpu)} workflows: median |error| {statistics.median(errors_cpu):.0%}, "
        f"max |error| {max(errors_cpu):.0%}"
    )
    print(
        f"{len(errors)} workflows without waits, by rate: median |error| {statistics.median(errors):.0%}, "
        f"max |error| {max(errors):.0%}"
    )


if __name__ == "__main__":
    sys.exit(main())
