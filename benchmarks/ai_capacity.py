"""An AI agent workflow on real n8n with a stand-in model answering in 2 s: is the predicted capacity and production
limit what a run measures?

One local stack (regular mode, Postgres), the local OpenAI-compatible stand-in answering every model call after
--latency-ms (2,000 by default). The workflow (tests/data/workflows/webhook-agent-memory.json's shape, built here):
Webhook -> AI Agent (the OpenAI Chat Model on the stand-in, a window memory) -> Set, answering the last node.
It did not feed the cost table (the table's AI rows are chains of agents after a Code node).

The run: closed loops of N users (each sends when its last answer came: N executions in flight, as a production
limit of N holds them under a load above capacity), N stepped up (--levels), each --step-s seconds after a short
warm-up; per step the throughput, the median latency, the CPU of main and Postgres per execution, and main's
resident memory (VmRSS of its process family, the largest sample). Light (the packaged workflow) runs at a few N in
the same sitting: its plateau is this machine's speed now.

The prediction: the advisor's answer for this workflow priced from its export (waits: the model at --latency-ms,
its default otherwise), on a host of this machine's cores whose speed is set so that light's predicted capacity is
light's measured plateau (the sitting's speed, from light, as every ratio here is taken): the regular-mode
candidate's capacity and its N8N_CONCURRENCY_PRODUCTION_LIMIT. Measured: the plateau (the median of the steps
within 5% of the best), and the knee, the smallest N whose throughput is within 5% of the plateau (where
throughput stops rising). Error = predicted / measured - 1; the memory at the knee against the stack's RAM model.

Run (under the heavy-command lock): flock /work/heavy.lock env PYTHONPATH=.:benchmarks .venv/bin/python
benchmarks/ai_capacity.py [--out FILE]. `--from FILE` prints a kept run again (with the table as it is now).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from node_costs_families import credentials, family_rss_mb
from nodecost_ai import unit
from nodecost_lib import BODY, chain, set_node, stack_cpu_ms

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.n8n.client import set_up_instance
from n8n_sizer.n8n.workflows import deploy_workflow, read_workflow, with_webhook_path
from n8n_sizer.native.install import install_n8n
from n8n_sizer.native.stack import LocalStack
from n8n_sizer.standins.openai import StandInConfig, StandInServer

LEVELS = (4, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96)
LIGHT_LEVELS = (8, 16, 24)


def say(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


def agent_workflow(ctx: dict) -> dict:
    """Webhook -> AI Agent (chat model on the stand-in, window memory) -> Set."""
    root, subs, links = unit("aiAgentMemory", 1, ctx)
    root["name"], root["parameters"]["text"] = "AI Agent", "={{ $json.body.n }} - say ok."
    names = {"aiAgentMemory 1 model": "OpenAI Chat Model", "aiAgentMemory 1 memory": "Simple Memory"}
    rename = {s["name"]: names[s["name"]] for s in subs}
    for s in subs:
        s["name"] = rename[s["name"]]
    wf = chain("ai capacity agent", "ai-capacity", [root, set_node("Set", 1, keep_other=True)])
    wf["nodes"] += subs
    for sub, _, kind in links:
        wf["connections"].setdefault(rename[sub], {}).setdefault(kind, [[]])[0].append(
            {"node": "AI Agent", "type": kind, "index": 0}
        )
    return wf


def closed_loop_step(url: str, users: int, seconds: float, main_pid: int, stack) -> dict[str, Any]:
    """`users` users for `seconds`: throughput, median latency, CPU per execution, main's largest RSS."""
    stop = time.monotonic() + seconds
    lock = threading.Lock()
    lat: list[float] = []
    state = {"ok": 0, "bad": 0}

    def user() -> None:
        with httpx.Client(timeout=120) as http:
            while time.monotonic() < stop:
                t0 = time.perf_counter()
                try:
                    good = http.post(url, content=BODY, headers={"Content-Type": "application/json"}).status_code == 200
                except httpx.HTTPError:
                    good = False
                with lock:
                    state["ok" if good else "bad"] += 1
                    if good:
                        lat.append((time.perf_counter() - t0) * 1000)

    before, t0 = stack_cpu_ms(stack), time.monotonic()
    threads = [threading.Thread(target=user) for _ in range(users)]
    for t in threads:
        t.start()
    rss = []
    while any(t.is_alive() for t in threads):
        rss.append(family_rss_mb(main_pid))
        time.sleep(1.0)
    wall = time.monotonic() - t0
    after = stack_cpu_ms(stack)
    done = max(state["ok"], 1)
    return {
        "users": users,
        "ok": state["ok"],
        "bad": state["bad"],
        "wall_s": round(wall, 2),
        "throughput_per_s": round(state["ok"] / wall, 3),
        "p50_ms": round(statistics.median(lat), 1) if lat else None,
        "cpu_ms": round((after["main"] - before["main"] + after["postgres"] - before["postgres"]) / done, 2),
        "rss_max_mb": round(max(rss), 1) if rss else None,
        "rss_median_mb": round(statistics.median(rss), 1) if rss else None,
    }


def plateau_and_knee(steps: list[dict]) -> tuple[float, int]:
    best = max(s["throughput_per_s"] for s in steps)
    near = [s for s in steps if s["throughput_per_s"] >= 0.95 * best]
    return statistics.median(s["throughput_per_s"] for s in near), min(s["users"] for s in near)


def predict(export: dict, latency_ms: float, light_plateau: float, vcpu: int) -> dict[str, Any]:
    """The advisor's regular-mode candidate for the workflow on a host of `vcpu` cores at the sitting's speed (light's
    predicted capacity made equal to its measured plateau)."""
    from n8n_sizer.advisor.capacity import HostShape
    from n8n_sizer.advisor.engine import build_advisor
    from n8n_sizer.advisor.profiles import LIGHT
    from n8n_sizer.advisor.workflow_price import load_node_costs, price_workflow
    from n8n_sizer.cli.advise.workflow import priced_profile

    advisor = build_advisor(None)
    ref = HostShape(vcpu=float(vcpu), arch="x86", host_class=advisor.model.reference_class, ram_mib=None)
    light_ref = advisor.host_options(LIGHT, ref)[0].mid
    speed = light_ref / light_plateau  # CPU time here relative to the reference host's
    advisor.model.params["speed:this-sitting"] = speed
    here = HostShape(vcpu=float(vcpu), arch="x86", host_class="this-sitting", ram_mib=None)
    path = Path("/tmp/ai-capacity-workflow.json")
    path.write_text(json.dumps(export))
    waits = (f"OpenAI Chat Model={latency_ms:.0f}",)
    profile, price = priced_profile(
        path, items=None, cpu_ms=None, wait_ms=None, calibration=None, engine="default", waits=waits
    )
    regular = advisor.host_options(profile, here)[0]
    limit = regular.setup.production_limit
    ram = advisor.ram
    return {
        "speed_vs_reference": round(speed, 3),
        "light_capacity_reference": round(light_ref, 2),
        "price_ratio": price.overhead_ratio_to_light,
        "wait_ms": price.wait_ms,
        "held_mb": price.held_mb,
        "capacity_per_s": round(regular.mid, 2),
        "production_limit": limit,
        "bound": regular.bound.name,
        "memory_at_limit_mb": round(
            ram.idle_mb(regular.setup) + (price.held_mb or ram.held_mb_per_execution) * (limit or 0), 0
        ),
        "table": load_node_costs().about.get("campaign"),
        "price_unknown": list(price_workflow(export, load_node_costs()).unknown_types),
    }


def report(doc: dict) -> None:
    steps, light = doc["steps"], doc["light_steps"]
    print(
        f"n8n {doc['n8n_version']}, stand-in model latency {doc['latency_ms']:.0f} ms; speed probe {doc.get('speed_probe')}"
    )
    print(f"{'N':>4s} {'req/s':>7s} {'p50 ms':>8s} {'CPU ms':>7s} {'main RSS max MB':>16s}   (AI agent)")
    for s in steps:
        print(
            f"{s['users']:4d} {s['throughput_per_s']:7.2f} {s['p50_ms'] or 0:8.0f} {s['cpu_ms']:7.1f} {s['rss_max_mb'] or 0:16.0f}"
        )
    for s in light:
        print(f"light N={s['users']}: {s['throughput_per_s']:.2f}/s, CPU {s['cpu_ms']:.1f} ms")
    plateau, knee = plateau_and_knee(steps)
    light_plateau = max(s["throughput_per_s"] for s in light)
    pred = predict(doc["workflow"], doc["latency_ms"], light_plateau, doc["vcpu"])
    knee_rss = next(s["rss_max_mb"] for s in steps if s["users"] == knee)
    print(
        f"measured: plateau {plateau:.2f}/s, knee at N = {knee} (throughput stops rising), main RSS there "
        f"{knee_rss:.0f} MB; light's plateau {light_plateau:.2f}/s"
    )
    print(
        f"predicted (at this sitting's speed, {pred['speed_vs_reference']}x the reference's CPU time): capacity "
        f"{pred['capacity_per_s']:.2f}/s ({pred['capacity_per_s'] / plateau - 1:+.0%}), production limit "
        f"{pred['production_limit']} ({(pred['production_limit'] or 0) / knee - 1:+.0%} against the knee), "
        f"bound {pred['bound']}; memory at the limit ~{pred['memory_at_limit_mb']:.0f} MB (stack RAM model)"
    )
    print(
        json.dumps(
            {"predicted": pred, "measured": {"plateau_per_s": plateau, "knee_users": knee, "knee_rss_mb": knee_rss}}
        )
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency-ms", type=float, default=2000.0)
    ap.add_argument("--levels", default=",".join(map(str, LEVELS)))
    ap.add_argument("--step-s", type=float, default=40.0)
    ap.add_argument("--warmup-s", type=float, default=8.0)
    ap.add_argument("--max-minutes", type=float, default=25.0)
    ap.add_argument("--out", type=Path, default=Path("/tmp/n8n-sizer-ai-capacity.json"))
    ap.add_argument("--from", dest="from_file", type=Path, default=None)
    args = ap.parse_args()
    if args.from_file is not None:
        report(json.loads(args.from_file.read_text()))
        return 0
    levels = [int(v) for v in args.levels.split(",") if v]
    if not levels or max(levels) > 256:
        raise SystemExit("--levels: whole numbers up to 256")
    deadline = time.monotonic() + args.max_minutes * 60
    install = install_n8n(quiet=True)
    from n8n_sizer.lab.speed import probe

    speed = probe(install.node_bin)
    standin = StandInServer(StandInConfig(latency_ms=args.latency_ms)).serve()
    stack = LocalStack(Setup(mode="regular"))
    doc: dict[str, Any] = {"latency_ms": args.latency_ms, "vcpu": os.cpu_count(), "speed_probe": speed}
    try:
        stack.start()
        client = set_up_instance(stack.main_url).client(timeout_s=120)
        ctx = credentials(client, standin)
        wf = agent_workflow(ctx)
        light = with_webhook_path(read_workflow("light"), "ai-capacity-light", "ai capacity light")
        urls = {}
        for key, definition in (("agent", wf), ("light", light)):
            _, path = deploy_workflow(client, definition, timeout_s=60)
            urls[key] = stack.main_url + path
            answer = httpx.post(urls[key], content=BODY, headers={"Content-Type": "application/json"}, timeout=60)
            if answer.status_code != 200:
                raise SystemExit(f"{key}: HTTP {answer.status_code} {answer.text[:200]}")
        pid = stack.pid("main")
        say(f"stack up, n8n and the stand-in ({args.latency_ms:.0f} ms) answer; speed probe {speed}")
        doc["light_steps"] = []
        for n in LIGHT_LEVELS:
            closed_loop_step(urls["light"], n, args.warmup_s, pid, stack)
            got = closed_loop_step(urls["light"], n, args.step_s / 2, pid, stack)
            doc["light_steps"].append(got)
            say(f"light N={n}: {got['throughput_per_s']:.2f}/s cpu {got['cpu_ms']} ms")
        doc["steps"] = []
        for n in levels:
            if time.monotonic() > deadline:
                say("deadline: stopping")
                break
            closed_loop_step(urls["agent"], n, args.warmup_s, pid, stack)
            got = closed_loop_step(urls["agent"], n, args.step_s, pid, stack)
            doc["steps"].append(got)
            say(
                f"agent N={n}: {got['throughput_per_s']:.2f}/s p50 {got['p50_ms']} ms cpu {got['cpu_ms']} ms rss {got['rss_max_mb']} MB bad {got['bad']}"
            )
        doc["light_after"] = closed_loop_step(urls["light"], LIGHT_LEVELS[-1], args.step_s / 2, pid, stack)
        doc["standin_requests"] = dict(standin.counts)
        doc["workflow"] = wf
        from n8n_sizer.versions import N8N_VERSION

        doc["n8n_version"] = N8N_VERSION
        doc["date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        doc["speed_probe_after"] = probe(install.node_bin)
    finally:
        stack.stop()
        standin.close()
    args.out.write_text(json.dumps(doc, indent=1))
    say(f"kept in {args.out}")
    report(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
