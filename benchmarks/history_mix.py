"""Does the answer from an instance's history hold on real n8n? A measurement campaign (issue 38's last check).

1. A local stack (regular mode, Postgres) runs four workflows for `--drive-seconds`, below its capacity: a Webhook
   -> Set at 3/s, a Schedule every 2 s, a Webhook -> HTTP Request to the delayed HTTP stand-in (`--call-ms`) at 1/s
   and a Webhook -> Wait (`--wait-s`) -> No-Op at 1/s, the webhooks' rates x `--drive-scale`. Its history is read
   back through the public API (anonymised), as `history export` does, and saved (or `--history FILE` is reused).
2. On one fresh stack (regular mode, no production limit), the mix replayed (`bench --history`'s machinery) with
   N executions in flight, for each N of `--in-flight` (up, then down): each workflow offered far more than it can
   carry, its open requests held at its share of N (its rate x its measured time in flight, Little's law), so the
   mix keeps its proportions and n8n runs N executions at once, as a production limit of N would let it. After each
   mix step, light alone (a history of Webhook -> Code replayed) with `--light-in-flight` open: the sitting's speed,
   step by step. What n8n finished per second (its own records) is each step's throughput.
3. The mix's capacity is its plateau; the recommended concurrency is checked against the knee (the smallest N within
   5% of the plateau). Both are compared by ratio to light measured beside them, as every measurement on this shared
   machine is (docs/workflow-price.md): the model's mix/light capacity ratio on a 2-vCPU host against the measured
   one, and the model's production limit for that host at this sitting's speed (the model's light capacity over
   the measured one). The speed probe (lab/speed.py) runs before and after.

The first version offered the mix with 48 open requests per workflow (192 at once): main started them all, its
Postgres pool of 2 fell behind, and n8n answered "Database is not ready!" (503) and failed executions (2026-12-03
15:27): not a capacity. A production limit (or a bound on what arrives) is what keeps that from happening.

Run under the heavy lock (about 15 minutes):
    flock /work/heavy.lock env PYTHONPATH=.:benchmarks .venv/bin/python benchmarks/history_mix.py --out /tmp/hm
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import secrets
import statistics
import time
import uuid
from pathlib import Path

from n8n_sizer.advisor.capacity import CapacityModel, HostShape
from n8n_sizer.advisor.engine import build_advisor
from n8n_sizer.advisor.mix import size_mix
from n8n_sizer.advisor.profiles import LIGHT
from n8n_sizer.advisor.settings import production_limit_for
from n8n_sizer.advisor.setup import Setup
from n8n_sizer.advisor.workflow_price import load_node_costs
from n8n_sizer.bench.history_replay import calibrate_loop, deploy_plan, replay_steps
from n8n_sizer.bench.http_post import HttpPost
from n8n_sizer.bench.load import run_open
from n8n_sizer.history.arrivals import summarise
from n8n_sizer.history.file import history_json
from n8n_sizer.history.mix_input import mix_entries
from n8n_sizer.history.read import ReadRequest, read_history
from n8n_sizer.history.record import History, NodeInfo, NodeTime, ReadInfo, SeenTrigger, WorkflowHistory
from n8n_sizer.history.replay import replay_plan
from n8n_sizer.history.timings import durations
from n8n_sizer.lab.speed import probe
from n8n_sizer.n8n.client import set_up_instance
from n8n_sizer.n8n.workflows import deploy_workflow
from n8n_sizer.native.install import install_n8n
from n8n_sizer.native.stack import LocalStack
from n8n_sizer.runs.records import RunManifest
from n8n_sizer.runs.store import RunStore
from n8n_sizer.standins.http import DelayedRoute, start_process, stop_process

KNEE = 0.95  # throughput has stopped rising once it is within 5% of the best


def say(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {text}", flush=True)


def node(type_, version, params, name, **extra):
    return {
        "parameters": params,
        "id": str(uuid.uuid4()),
        "name": name,
        "type": f"n8n-nodes-base.{type_}",
        "typeVersion": version,
        "position": [0, 0],
        **extra,
    }


def hook(path):
    return node(
        "webhook",
        2,
        {"httpMethod": "POST", "path": path, "responseMode": "lastNode", "options": {}},
        "Webhook",
        webhookId=str(uuid.uuid4()),
    )


def chain(name, nodes):
    links = {
        a["name"]: {"main": [[{"node": b["name"], "type": "main", "index": 0}]]} for a, b in itertools.pairwise(nodes)
    }
    return {"name": name, "nodes": nodes, "connections": links, "settings": {"executionOrder": "v1"}}


def drive_and_export(args, tag: str) -> History:
    """Phase 1: the four workflows on a stack of their own, driven, and their history read back."""
    pid, standin = start_process({"/crm": DelayedRoute(latency_ms=args.call_ms)})
    stack = LocalStack(Setup(mode="regular"))
    try:
        stack.start()
        session = set_up_instance(stack.main_url)
        setter = {
            "assignments": {
                "assignments": [{"id": "a", "name": "n", "value": "={{ $json.body.n }}", "type": "string"}]
            },
            "options": {},
        }
        flows = {
            "hook": chain(f"mix-hook-{tag}", [hook(f"mix-hook-{tag}"), node("set", 3.4, setter, "Set")]),
            "call": chain(
                f"mix-call-{tag}",
                [hook(f"mix-call-{tag}"), node("httpRequest", 4.2, {"url": f"{standin}/crm", "options": {}}, "CRM")],
            ),
            "wait": chain(
                f"mix-wait-{tag}",
                [
                    hook(f"mix-wait-{tag}"),
                    node("wait", 1.1, {"amount": args.wait_s, "unit": "seconds"}, "Pause", webhookId=str(uuid.uuid4())),
                    node("noOp", 1, {}, "After"),
                ],
            ),
        }
        sched = chain(
            f"mix-sched-{tag}",
            [
                node(
                    "scheduleTrigger", 1.2, {"rule": {"interval": [{"field": "seconds", "secondsInterval": 2}]}}, "Tick"
                ),
                node("noOp", 1, {}, "NoOp"),
            ],
        )
        with session.client() as client:
            for flow in flows.values():
                deploy_workflow(client, flow)
            made = client.create_workflow(sched)
            client.activate_workflow(made["id"])
        rates = {"hook": 3.0 * args.drive_scale, "call": 1.0 * args.drive_scale, "wait": 1.0 * args.drive_scale}

        async def drive():
            return await asyncio.gather(
                *(
                    run_open(
                        HttpPost(f"{stack.main_url}/webhook/mix-{k}-{tag}", b'{"n": 1}', 60),
                        rate_per_s=r,
                        duration_s=args.drive_seconds,
                        max_in_flight=500,
                        step="drive",
                        target=k,
                    )
                    for k, r in rates.items()
                )
            )

        say(f"driving the four workflows for {args.drive_seconds:g} s")
        started = time.time()
        asyncio.run(drive())
        req = ReadRequest(url=stack.main_url, since_s=started, until_s=started + args.drive_seconds, anonymise=True)
        history = read_history(req, session.api_key)
    finally:
        stack.stop()
        stop_process(pid)
    return history


def light_history(table_code_ms: float) -> History:
    """Light (Webhook -> Code) as a history of one workflow at 1/s, for the replay to measure in this sitting."""
    t0, window = 1_800_000_000.0, 600.0
    code = NodeTime(
        name="Code",
        type="n8n-nodes-base.code",
        family="code",
        runs_per_execution=1,
        per_execution_ms=table_code_ms,
        cpu_ms=table_code_ms,
        wait_ms=0,
    )
    w = WorkflowHistory(
        id="light",
        name="light",
        trigger=SeenTrigger(kind="webhook"),
        nodes=(
            NodeInfo(name="Webhook", type="n8n-nodes-base.webhook"),
            NodeInfo(name="Code", type="n8n-nodes-base.code"),
        ),
        rates=summarise([t0 + i for i in range(600)], t0, window),
        durations=durations([60.0]),
        node_timings=(code,),
        running_ms=60.0,
        sampled=1,
    )
    info = ReadInfo(
        instance=None,
        read_at_s=t0 + window,
        since_s=t0,
        until_s=t0 + window,
        window_start_s=t0,
        window_end_s=t0 + window,
    )
    return History(read=info, total=w.rates, workflows=(w,))


def local_model(model: CapacityModel, light_measured: float, host: HostShape) -> tuple[CapacityModel, HostShape]:
    """The model at this sitting's speed: a host class whose CPU is (model light / measured light) times slower."""
    slower = model.throughput_at(LIGHT, Setup(mode="regular"), host) / light_measured
    params = dict(model.params, **{"speed:this-sitting": slower})
    here = CapacityModel(params, model.reference_class)
    return here, HostShape(vcpu=host.vcpu, arch=host.arch, host_class="this-sitting")


class Bench:
    """One local stack with the light and mix replay workflows deployed; steps with a bounded number in flight."""

    def __init__(self, args, store, standin_url: str, mix_history: History, per_ms: float) -> None:
        self.args, self.store = args, store
        tag = secrets.token_hex(3)
        code_ms = max(load_node_costs().row_by_id("code").cpu.ms, 0.0)
        self.plans = {
            "mix": replay_plan(mix_history, standin_url, per_ms, f"mix-{tag}"),
            "light": replay_plan(light_history(code_ms), standin_url, per_ms, f"light-{tag}"),
        }
        # each workflow's share of what is in flight: its rate x its measured time in flight (Little's law)
        running = {w.name: max(w.running_ms or 100.0, 1.0) for w in mix_history.workflows}
        load = {w.key: w.rate_per_s * running[w.name] for w in self.plans["mix"].workflows}
        self.share = {k: v / sum(load.values()) for k, v in load.items()}
        self.stack = LocalStack(Setup(mode="regular"))

    def __enter__(self):
        self.stack.start()
        self.session = set_up_instance(self.stack.main_url)
        for plan in self.plans.values():
            deploy_plan(self.session, plan)
        return self

    def __exit__(self, *exc):
        self.stack.stop()

    def step(self, which: str, in_flight: int, warm: bool) -> dict:
        plan = self.plans[which]
        base = sum(w.rate_per_s for w in plan.workflows)
        offered = self.args.light_offered if which == "light" else self.args.mix_offered
        if which == "mix":
            caps = {w.key: max(1, round(in_flight * self.share[w.key])) for w in plan.workflows}
        else:
            caps = {w.key: in_flight for w in plan.workflows}
        (step,) = replay_steps(
            self.store,
            plan,
            self.stack.main_url,
            self.session,
            [offered / base],
            self.args.step_seconds,
            timeout_s=120.0,
            max_in_flight=caps,
            warmup_requests=6 if warm else 2,
        )
        dropped = step.errors.get("dropped", 0)
        row = {
            "which": which,
            "in_flight": sum(caps.values()),
            "offered_per_s": round(step.offered_per_s, 2),
            "finished_per_s": step.finished_per_s,
            "answered_per_s": round(step.answered_per_s, 2),
            "failed": step.failed - dropped,
            "p95_ms": step.p95_ms,
            "per_workflow_ok": {k: v["ok"] for k, v in step.per_workflow.items()},
        }
        say(f"  {row}")
        return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--history", type=Path, help="replay this history instead of driving and reading a new one")
    parser.add_argument("--drive-seconds", type=float, default=90.0)
    parser.add_argument("--drive-scale", type=float, default=0.5)
    parser.add_argument("--call-ms", type=float, default=500.0)
    parser.add_argument("--wait-s", type=float, default=3.0)
    parser.add_argument("--step-seconds", type=float, default=20.0)
    parser.add_argument("--light-offered", type=float, default=60.0)
    parser.add_argument("--mix-offered", type=float, default=60.0)
    parser.add_argument("--light-in-flight", type=int, default=12)
    parser.add_argument("--in-flight", default="4,8,12,16,24,32,48")
    parser.add_argument("--sample-out", type=Path, help="also write the anonymised history here (docs/samples)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    install = install_n8n()
    speed_before = probe(install.node_bin)
    say(f"speed probe before: {speed_before['ms']:.1f} ms")
    if args.history is not None:
        from n8n_sizer.history.file import load_history

        history = load_history(args.history)
    else:
        history = drive_and_export(args, secrets.token_hex(3))
    (args.out / "history.json").write_text(history_json(history))
    if args.sample_out:
        args.sample_out.write_text(history_json(history))
    for w in history.workflows:
        say(
            f"history: {w.trigger.kind:9} {w.rates.per_s_mean:.3f}/s  running {w.running_ms or 0:.0f} ms  "
            + ", ".join(f"{t.type.split('.')[-1]} {t.per_execution_ms:.0f} ms" for t in w.node_timings)
        )

    advisor = build_advisor(None)
    model = advisor.model
    host = HostShape(vcpu=2.0, arch="x86", host_class=model.reference_class)
    mix_in = mix_entries(history)
    mix = size_mix(
        list(mix_in.entries), model, advisor.ram.held_mb_per_execution, mix_in.burst_per_s, mix_in.p99_second_per_s
    )
    regular = Setup(mode="regular")
    ratio = model.throughput_at(mix.profile, regular, host) / model.throughput_at(LIGHT, regular, host)
    per_ms = calibrate_loop(install.node_bin)
    routes = {
        p: DelayedRoute(latency_ms=ms)
        for w in replay_plan(history, "http://127.0.0.1:1", per_ms, "x").workflows
        for p, ms in w.routes_ms.items()
    }
    pid, standin = start_process(routes)
    store = RunStore.create(args.out, RunManifest(run_id=f"history-mix-{secrets.token_hex(3)}", created_s=time.time()))
    steps = []
    ns = [int(x) for x in args.in_flight.split(",")]
    try:
        with Bench(args, store, standin, history, per_ms) as bench:
            for i, n in enumerate([*ns, *reversed(ns)]):
                say(f"{n} in flight")
                mixed = bench.step("mix", n, warm=i == 0)
                light = bench.step("light", args.light_in_flight, warm=i == 0)
                steps.append({"in_flight": mixed["in_flight"], "asked": n, "mix": mixed, "light": light})
    finally:
        stop_process(pid)
        store.close()
    speed_after = probe(install.node_bin)

    by_n: dict[int, list[tuple[float, float]]] = {}
    for s_ in steps:
        by_n.setdefault(s_["in_flight"], []).append(
            (s_["mix"]["finished_per_s"] or 0.0, s_["light"]["finished_per_s"] or 0.0)
        )
    curve = {n: statistics.fmean(m for m, _ in v) for n, v in sorted(by_n.items())}
    normalised = {n: statistics.fmean(m / li for m, li in v if li > 0) for n, v in sorted(by_n.items())}
    light_cap = statistics.median(li for v in by_n.values() for _, li in v)
    best = max(normalised.values())
    knee = next(n for n, v in normalised.items() if v >= KNEE * best)
    here, here_host = local_model(model, light_cap, host)
    cap_here = here.throughput_at(mix.profile, regular, here_host)
    recommended = production_limit_for(here, mix.profile, here_host, cap_here)
    raw_limit = math.ceil(1.5 * here.in_flight_at(mix.profile, regular, here_host, 0.7 * cap_here))
    error = 100.0 * (ratio / best - 1.0)
    figures = {
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "speed_probe_ms": {"before": speed_before["ms"], "after": speed_after["ms"]},
        "history": [
            {
                "trigger": w.trigger.kind,
                "rate_per_s": w.rates.per_s_mean,
                "running_ms": w.running_ms,
                "nodes": {t.type: round(t.per_execution_ms, 1) for t in w.node_timings},
            }
            for w in history.workflows
        ],
        "steps": steps,
        "mix_finished_by_in_flight": curve,
        "mix_over_light_by_in_flight": normalised,
        "light_capacity_per_s": light_cap,
        "capacity": {
            "model_ratio_to_light": ratio,
            "measured_ratio_to_light": best,
            "error_pct": error,
            "mix_plateau_per_s": max(curve.values()),
            "predicted_per_s": light_cap * ratio,
        },
        "concurrency": {
            "knee_in_flight": knee,
            "recommended_limit": recommended,
            "little_limit_before_floor": raw_limit,
            "model_capacity_here_per_s": cap_here,
        },
    }
    (args.out / "figures.json").write_text(json.dumps(figures, indent=2))
    print(json.dumps(figures, indent=2))
    print(
        f"\nmix over light by executions in flight: { ({n: round(v, 3) for n, v in normalised.items()}) }\n"
        f"mix finished/s by in flight: { ({n: round(v, 2) for n, v in curve.items()}) }; light {light_cap:.2f}/s\n"
        f"capacity: the mix carries {best:.3f} of light's (its plateau), the model says {ratio:.3f}: {error:+.1f}%\n"
        f"concurrency: throughput stops rising at {knee} in flight; the model recommends a production limit of "
        f"{recommended} here (Little x 1.5 = {raw_limit} before the floor of 10)\n"
        f"speed probe {speed_before['ms']:.1f} -> {speed_after['ms']:.1f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
