"""Does the answer from an instance's history hold on real n8n? A measurement campaign (issue 38's last check).

1. A local stack (regular mode, Postgres) runs four workflows for `--drive-seconds`, below its capacity: a Webhook
   -> Set at 3/s, a Schedule every 2 s, a Webhook -> HTTP Request to the delayed HTTP stand-in (`--call-ms`) at 1/s
   and a Webhook -> Wait (`--wait-s`) -> No-Op at 1/s, the webhooks' rates x `--drive-scale`. Its history is read
   back through the public API (anonymised), as `history export` does, and saved.
2. Capacity, light and the mix, on one stack (regular mode, no limit): light alone (a history of Webhook -> Code
   replayed) and the exported mix replayed (`bench --history`'s machinery), each offered far above what it can
   carry (`--light-offered`, `--mix-offered`) with at most `--max-in-flight` requests open per workflow (so the
   backlog stays bounded), in `--rounds` alternating rounds; what n8n finished per second in a step is the capacity.
3. The recommended concurrency: the mix, offered the same, on a fresh stack per N8N_CONCURRENCY_PRODUCTION_LIMIT in
   `--limits` (ascending, then descending); where the finished rate stops rising is the knee.

The model is compared by ratios, as every measurement on this shared machine is (docs/workflow-price.md): the mix's
predicted capacity here is light's measured capacity x (the model's mix capacity / its light capacity) on a 2-vCPU
host, per round; the recommended limit is the model's for that host at this sitting's speed (the model's light
capacity over the measured one). The speed probe (lab/speed.py) runs before and after.

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
from n8n_sizer.history.record import History, NodeInfo, NodeTime, ReadInfo, Trigger, WorkflowHistory
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
        trigger=Trigger(kind="webhook"),
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
    """One local stack (a setup) with the light and mix replay workflows deployed; steps at a fixed offered load."""

    def __init__(self, args, store, standin_url: str, setup: Setup, mix_history: History, per_ms: float) -> None:
        self.args, self.store, self.setup = args, store, setup
        tag = secrets.token_hex(3)
        self.plans = {"mix": replay_plan(mix_history, standin_url, per_ms, f"mix-{tag}")}
        if setup.production_limit is None:
            code_ms = max(load_node_costs().row_by_id("code").cpu.ms, 0.0)
            self.plans["light"] = replay_plan(light_history(code_ms), standin_url, per_ms, f"light-{tag}")
        self.stack = LocalStack(setup)

    def __enter__(self):
        self.stack.start()
        self.session = set_up_instance(self.stack.main_url)
        for plan in self.plans.values():
            deploy_plan(self.session, plan)
        return self

    def __exit__(self, *exc):
        self.stack.stop()

    def step(self, which: str, offered_per_s: float, warm: bool) -> dict:
        plan = self.plans[which]
        base = sum(w.rate_per_s for w in plan.workflows)
        (step,) = replay_steps(
            self.store,
            plan,
            self.stack.main_url,
            self.session,
            [offered_per_s / base],
            self.args.step_seconds,
            timeout_s=60.0,
            max_in_flight=self.args.max_in_flight,
            warmup_requests=6 if warm else 0,
        )
        row = {
            "which": which,
            "offered_per_s": round(step.offered_per_s, 2),
            "finished_per_s": step.finished_per_s,
            "answered_per_s": round(step.answered_per_s, 2),
            "dropped": step.errors.get("dropped", 0),
            "failed": step.failed - step.errors.get("dropped", 0),
            "p95_ms": step.p95_ms,
            "saturated": (step.finished_per_s or 0) < 0.9 * step.offered_per_s,
        }
        say(f"  {row}")
        return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--drive-seconds", type=float, default=90.0)
    parser.add_argument("--drive-scale", type=float, default=0.5)
    parser.add_argument("--call-ms", type=float, default=500.0)
    parser.add_argument("--wait-s", type=float, default=3.0)
    parser.add_argument("--step-seconds", type=float, default=30.0)
    parser.add_argument("--light-offered", type=float, default=40.0)
    parser.add_argument("--mix-offered", type=float, default=30.0)
    parser.add_argument("--max-in-flight", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--limits", default="2,4,8,16,32")
    parser.add_argument("--sample-out", type=Path, help="also write the anonymised history here (docs/samples)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    install = install_n8n()
    speed_before = probe(install.node_bin)
    say(f"speed probe before: {speed_before['ms']:.1f} ms")
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
    rounds, sweep = [], []
    try:
        say(f"capacity: light offered {args.light_offered:g}/s, the mix {args.mix_offered:g}/s, {args.rounds} rounds")
        with Bench(args, store, standin, regular, history, per_ms) as bench:
            for r in range(args.rounds):
                order = ("light", "mix") if r % 2 == 0 else ("mix", "light")
                got = {
                    w: bench.step(w, args.light_offered if w == "light" else args.mix_offered, warm=r == 0)
                    for w in order
                }
                rounds.append(got)
        limits = [int(x) for x in args.limits.split(",")]
        for limit in [*limits, *reversed(limits)]:
            say(f"production limit {limit}")
            with Bench(args, store, standin, Setup(mode="regular", production_limit=limit), history, per_ms) as bench:
                sweep.append({"limit": limit, **bench.step("mix", args.mix_offered, warm=True)})
    finally:
        stop_process(pid)
        store.close()
    speed_after = probe(install.node_bin)

    light_caps = [r["light"]["finished_per_s"] or 0.0 for r in rounds]
    mix_caps = [r["mix"]["finished_per_s"] or 0.0 for r in rounds]
    errors = [100.0 * (lc * ratio / mc - 1.0) for lc, mc in zip(light_caps, mix_caps, strict=True) if mc > 0]
    light_cap, mix_cap = statistics.median(light_caps), statistics.median(mix_caps)
    here, here_host = local_model(model, light_cap, host)
    cap_here = here.throughput_at(mix.profile, regular, here_host)
    recommended = production_limit_for(here, mix.profile, here_host, cap_here)
    d = here.demands(mix.profile, regular, here_host)
    little = cap_here * (d.wait_s + d.path_s)  # in flight at capacity without CPU queueing
    by_limit = {}
    for s_ in sweep:
        by_limit.setdefault(s_["limit"], []).append(s_["finished_per_s"] or 0.0)
    curve = {limit: statistics.fmean(v) for limit, v in sorted(by_limit.items())}
    best = max(curve.values())
    knee = next(limit for limit, v in curve.items() if v >= KNEE * best)
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
        "capacity_rounds": rounds,
        "light_capacity_per_s": light_cap,
        "mix": {
            "base_per_s": mix.rate_per_s,
            "capacity_per_s": mix_cap,
            "model_ratio_to_light": ratio,
            "predicted_per_s": light_cap * ratio,
            "error_pct_per_round": errors,
            "error_pct": statistics.median(errors) if errors else None,
        },
        "concurrency": {
            "sweep": sweep,
            "mean_by_limit": curve,
            "knee_limit": knee,
            "recommended_limit": recommended,
            "model_in_flight_at_capacity": little,
            "best_per_s": best,
        },
    }
    (args.out / "figures.json").write_text(json.dumps(figures, indent=2))
    print(json.dumps(figures, indent=2))
    err = figures["mix"]["error_pct"]
    print(
        f"\nmix capacity: measured {mix_cap:.2f}/s (rounds {[round(c, 2) for c in mix_caps]}), predicted "
        f"{light_cap * ratio:.2f}/s = light here {light_cap:.2f}/s x model ratio {ratio:.3f}; error per round "
        f"{[round(e, 1) for e in errors]}%\nproduction limit: recommended {recommended}, measured knee {knee} "
        f"(finished/s by limit { ({k: round(v, 2) for k, v in curve.items()}) }); the model's in flight at capacity "
        f"{little:.1f}\nspeed probe {speed_before['ms']:.1f} -> {speed_after['ms']:.1f} ms"
    )
    return 0 if err is not None and math.isfinite(err) else 1


if __name__ == "__main__":
    raise SystemExit(main())
