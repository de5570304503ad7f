"""Does the answer from an instance's history hold on real n8n? A measurement campaign (issue 38's last check).

1. A local stack (regular mode, Postgres) runs four workflows for `--drive-seconds`: a Webhook -> Set at 3/s, a
   Schedule every 2 s, a Webhook -> HTTP Request to the delayed HTTP stand-in (`--call-ms`) at 1/s and a Webhook ->
   Wait (`--wait-s`) -> No-Op at 1/s. Its history is read back through the public API (anonymised), as `history
   export` does, and saved.
2. Light's capacity in this sitting: a history of light alone replayed (`bench --history`'s machinery) at rising
   scales; the highest rate n8n finished is its capacity here.
3. The mix's capacity: the exported history replayed at rising scales, the same way.
4. The recommended concurrency: the mix replayed at an overload (1.3x its measured capacity) on regular mode with
   N8N_CONCURRENCY_PRODUCTION_LIMIT at each of `--limits`; where the finished rate stops rising is the knee.

The model is compared by ratios, as on every measurement on this shared machine (docs/workflow-price.md): the mix's
predicted capacity here is light's measured capacity x (the model's mix capacity / its light capacity) on the same
2-vCPU host; the recommended limit is the model's for that host at this sitting's speed (light's measured capacity
over the model's). The speed probe (lab/speed.py) runs before and after.

Run under the heavy lock (about 20 minutes):
    flock /work/heavy.lock env PYTHONPATH=.:benchmarks .venv/bin/python benchmarks/history_mix.py --out /tmp/hm
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import secrets
import time
import uuid
from pathlib import Path

from n8n_sizer.advisor.answer.mix import size_mix
from n8n_sizer.advisor.capacity import CapacityModel, HostShape
from n8n_sizer.advisor.engine import build_advisor
from n8n_sizer.advisor.profiles import LIGHT
from n8n_sizer.advisor.settings import production_limit_for
from n8n_sizer.advisor.setup import Setup
from n8n_sizer.advisor.workflow_price import load_node_costs
from n8n_sizer.bench.history_replay import run_history_bench
from n8n_sizer.bench.http_post import HttpPost
from n8n_sizer.bench.load import run_open
from n8n_sizer.history.arrivals import summarise
from n8n_sizer.history.file import history_json
from n8n_sizer.history.mix_input import mix_entries
from n8n_sizer.history.read import ReadRequest, read_history
from n8n_sizer.history.record import History, NodeInfo, NodeTime, ReadInfo, Trigger, WorkflowHistory
from n8n_sizer.history.timings import durations
from n8n_sizer.lab.speed import probe
from n8n_sizer.n8n.client import set_up_instance
from n8n_sizer.n8n.workflows import deploy_workflow
from n8n_sizer.native.install import install_n8n
from n8n_sizer.native.stack import LocalStack
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
        rates = {"hook": 3.0, "call": 1.0, "wait": 1.0}

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


def capacity(summary) -> tuple[float, list[dict]]:
    rows = [
        {
            "scale": s.scale,
            "offered_per_s": round(s.offered_per_s, 2),
            "finished_per_s": s.finished_per_s,
            "answered_per_s": round(s.answered_per_s, 2),
            "failed": s.failed,
            "p95_ms": s.p95_ms,
        }
        for s in summary.steps
    ]
    return max((s.finished_per_s or 0.0) for s in summary.steps), rows


def local_model(model: CapacityModel, light_measured: float, host: HostShape) -> tuple[CapacityModel, HostShape]:
    """The model at this sitting's speed: a host class whose CPU is (model light / measured light) times slower."""
    slower = model.throughput_at(LIGHT, Setup(mode="regular"), host) / light_measured
    params = dict(model.params, **{"speed:this-sitting": slower})
    here = CapacityModel(params, model.reference_class)
    return here, HostShape(vcpu=host.vcpu, arch=host.arch, host_class="this-sitting")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--drive-seconds", type=float, default=90.0)
    parser.add_argument("--call-ms", type=float, default=500.0)
    parser.add_argument("--wait-s", type=float, default=3.0)
    parser.add_argument("--step-seconds", type=float, default=30.0)
    parser.add_argument("--mix-scales", default="1,2,3,4,6")
    parser.add_argument("--light-rates", default="8,14,20,28,36")
    parser.add_argument("--limits", default="2,4,8,12,16,24,32")
    parser.add_argument("--sample-out", type=Path, help="also write the anonymised history here (docs/samples)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    install = install_n8n()
    speed_before = probe(install.node_bin)
    say(f"speed probe before: {speed_before['ms']:.1f} ms")
    tag = secrets.token_hex(3)
    history = drive_and_export(args, tag)
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
    code_ms = max(load_node_costs().row_by_id("code").cpu.ms, 0.0)  # the replay's loop is then empty: light
    light_rates = [float(x) for x in args.light_rates.split(",")]
    say("light's capacity in this sitting")
    light_run = run_history_bench(
        light_history(code_ms), Setup(mode="regular"), light_rates, args.step_seconds, args.out, source="light"
    )
    light_cap, light_rows = capacity(light_run)
    say(f"light: {light_cap:.2f}/s  {light_rows}")

    mix_in = mix_entries(history)
    mix = size_mix(
        list(mix_in.entries), model, advisor.ram.held_mb_per_execution, mix_in.burst_per_s, mix_in.p99_second_per_s
    )
    scales = [float(x) for x in args.mix_scales.split(",")]
    say(f"the mix's capacity (base {mix.rate_per_s:.2f}/s, scales {scales})")
    mix_run = run_history_bench(history, Setup(mode="regular"), scales, args.step_seconds, args.out, source="mix")
    mix_cap, mix_rows = capacity(mix_run)
    say(f"mix: {mix_cap:.2f}/s  {mix_rows}")

    regular = Setup(mode="regular")
    ratio = model.throughput_at(mix.profile, regular, host) / model.throughput_at(LIGHT, regular, host)
    predicted = light_cap * ratio
    here, here_host = local_model(model, light_cap, host)
    cap_here = here.throughput_at(mix.profile, regular, here_host)
    recommended = production_limit_for(here, mix.profile, here_host, cap_here)
    little = here.in_flight_at(mix.profile, regular, here_host, cap_here * 0.999)

    overload = 1.3 * mix_cap / mix.rate_per_s
    limits = [int(x) for x in args.limits.split(",")]
    sweep = []
    for limit in limits:
        say(f"production limit {limit} at x{overload:.2f}")
        run = run_history_bench(
            history,
            Setup(mode="regular", production_limit=limit),
            [overload],
            args.step_seconds,
            args.out,
            source=f"mix-limit-{limit}",
        )
        sweep.append(
            {
                "limit": limit,
                "finished_per_s": run.steps[0].finished_per_s,
                "p95_ms": run.steps[0].p95_ms,
                "failed": run.steps[0].failed,
            }
        )
        say(f"  {sweep[-1]}")
    best = max(s["finished_per_s"] or 0.0 for s in sweep)
    knee = next(s["limit"] for s in sweep if (s["finished_per_s"] or 0.0) >= KNEE * best)
    at_recommended = None
    if recommended is not None:
        below = [s for s in sweep if s["limit"] <= recommended]
        at_recommended = below[-1]["finished_per_s"] if below else None
    speed_after = probe(install.node_bin)
    figures = {
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "speed_probe_ms": {"before": speed_before["ms"], "after": speed_after["ms"]},
        "history": [
            {"trigger": w.trigger.kind, "rate_per_s": w.rates.per_s_mean, "running_ms": w.running_ms}
            for w in history.workflows
        ],
        "light": {"capacity_per_s": light_cap, "steps": light_rows},
        "mix": {
            "base_per_s": mix.rate_per_s,
            "capacity_per_s": mix_cap,
            "steps": mix_rows,
            "model_ratio_to_light": ratio,
            "predicted_per_s": predicted,
            "error_pct": 100.0 * (predicted / mix_cap - 1.0) if mix_cap else None,
        },
        "concurrency": {
            "offered_scale": overload,
            "sweep": sweep,
            "knee_limit": knee,
            "recommended_limit": recommended,
            "model_in_flight_at_capacity": little,
            "finished_at_recommended_per_s": at_recommended,
            "best_per_s": best,
        },
    }
    (args.out / "figures.json").write_text(json.dumps(figures, indent=2))
    print(json.dumps(figures, indent=2))
    err = figures["mix"]["error_pct"]
    print(
        f"\nmix capacity: measured {mix_cap:.2f}/s, predicted {predicted:.2f}/s ({err:+.1f}%; light here "
        f"{light_cap:.2f}/s x model ratio {ratio:.3f})\nproduction limit: recommended {recommended}, measured "
        f"knee {knee} (finished/s at the limits {[s['finished_per_s'] and round(s['finished_per_s'], 2) for s in sweep]}"
        f"); model in flight at capacity {little:.1f}\nspeed probe {speed_before['ms']:.1f} -> {speed_after['ms']:.1f} ms"
    )
    return 0 if err is not None and math.isfinite(err) else 1


if __name__ == "__main__":
    raise SystemExit(main())
