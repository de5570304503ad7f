"""`bench --history FILE --local`: replay a history's mix of workflows on this machine, each at its measured rate
(times each step's scale), with their calls answered by the delayed HTTP stand-in after the measured waits.

1. The workflows are synthesised from the history (history/replay.py); the Code nodes' loop is calibrated on the
   installed Node.js first (CPU ms of a counted loop, `process.cpuUsage`).
2. The stand-in starts as its own process (standins/http.py, stopped by its PID), a local stack starts with the
   setup asked for (native/stack.py), n8n is set up (owner, API key) and every workflow deployed and warmed up.
3. Each step offers every workflow its rate x the step's scale at once (the open-model driver, one per workflow,
   bench/load.py), every request recorded in the run folder (target `local-<key>`, step `mix-<scale>x`).
4. After each step, the executions n8n finished inside the step's window (read back through the public API, the
   history reader's own path) give the measured throughput, counted on the server, whatever the callers saw.

Everything it started is stopped in `finally`, by PID. The run folder is an ordinary bench run (run.json,
requests.jsonl, samples.jsonl) plus `extra.history_replay` with each step's figures.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import Field

from n8n_sizer import versions
from n8n_sizer.advisor.setup import Setup
from n8n_sizer.bench.http_post import HttpPost
from n8n_sizer.bench.load import closed_count, run_open
from n8n_sizer.errors import InputError, RemoteError
from n8n_sizer.history.record import History
from n8n_sizer.history.replay import ReplayPlan, replay_plan
from n8n_sizer.n8n.client import set_up_instance
from n8n_sizer.n8n.history_api import read_executions
from n8n_sizer.n8n.public_api import PublicApi, ReadBounds
from n8n_sizer.n8n.workflows import deploy_workflow
from n8n_sizer.runs.records import RunManifest, StepTally
from n8n_sizer.runs.store import RunStore, new_run_id, summarize_step
from n8n_sizer.safety.frozen import Frozen
from n8n_sizer.standins.http import DelayedRoute, start_process, stop_process

SETTLE_S = 5.0  # the first seconds of a step are not counted: the rate ramps in from the previous step
LOOP_CALIBRATION_ITERATIONS = 40_000_000
Progress = Callable[[str, float], None]  # (what it is doing, fraction done)


class ReplayStep(Frozen):
    scale: float
    started_s: float  # unix seconds the step's load began
    ended_s: float
    offered_per_s: float
    answered_per_s: float  # 2xx answers over the span they needed (the callers' view)
    finished_per_s: float | None  # executions n8n finished in the step's window (after SETTLE_S), all workflows
    ok: int
    failed: int
    errors: dict[str, int] = {}
    p50_ms: float | None = None
    p95_ms: float | None = None
    per_workflow: dict[str, dict[str, float | None]] = {}


class ReplaySummary(Frozen):
    run_id: str
    folder: str
    setup: Setup
    workflows: list[dict]
    loop_iterations_per_ms: float
    steps: list[ReplayStep]
    executions_by_status: dict[str, int] = {}
    standin_latency_ms: dict[str, float] = {}
    speed_probe_ms: float | None = Field(None, gt=0)


def calibrate_loop(node_bin: Path) -> float:
    """Iterations per CPU millisecond of the replay's Code loop on this Node.js (median of 3 rounds)."""
    js = (
        "const n = Number(process.argv[1]); const out = [];\n"
        "for (let r = 0; r < 4; r++) { const t = process.cpuUsage(); let x = 0;\n"
        "  for (let i = 0; i < n; i++) { x = (x * 31 + i) % 1000003; }\n"
        "  const u = process.cpuUsage(t); out.push((u.user + u.system) / 1000 + (x < 0 ? 1 : 0)); }\n"
        "process.stdout.write(JSON.stringify(out));"
    )
    try:
        res = subprocess.run(
            [str(node_bin), "-e", js, str(LOOP_CALIBRATION_ITERATIONS)], capture_output=True, text=True, timeout=120
        )
        rounds = json.loads(res.stdout)[1:]  # the first round warms the JIT up
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        raise RemoteError(f"calibrating the replay's Code loop on {node_bin} failed: {exc}") from None
    return LOOP_CALIBRATION_ITERATIONS / max(statistics.median(rounds), 1e-3)


def run_history_bench(
    history: History,
    setup: Setup,
    scales: list[float],
    step_s: float,
    out_dir: Path,
    *,
    warmup_requests: int = 6,
    timeout_s: float = 60.0,
    max_in_flight: int = 1000,
    progress: Progress | None = None,
    source: str = "",
) -> ReplaySummary:
    """Replay the history's mix on a local stack of `setup`, one step per scale (module docstring)."""
    from n8n_sizer.native.install import install_n8n
    from n8n_sizer.native.stack import LocalStack

    say = progress or (lambda what, done: None)
    run_id = new_run_id()
    tag = run_id.rsplit("-", 1)[-1]
    install = install_n8n()
    say("calibrating the Code loop", 0.0)
    per_ms = calibrate_loop(install.node_bin)
    # the stand-in's paths do not depend on its address: plan once for them, again with the address it got
    plan = replay_plan(history, "http://127.0.0.1:1", per_ms, tag)
    if not plan.workflows:
        raise InputError(f"--history {source}: no workflow with executions to replay")
    routes = {path: DelayedRoute(latency_ms=ms) for w in plan.workflows for path, ms in w.routes_ms.items()}
    standin_pid = None
    stack = LocalStack(setup, install=install)
    store = None
    try:
        if routes:
            standin_pid, url = start_process(routes)
            plan = replay_plan(history, url, per_ms, tag)
        store = RunStore.create(out_dir, _manifest(run_id, plan, setup, scales, step_s, source))
        say("starting n8n", 0.02)
        stack.start()
        session = set_up_instance(stack.main_url)
        ids = deploy_plan(session, plan)
        steps = replay_steps(
            store, plan, stack.main_url, session, scales, step_s, timeout_s, max_in_flight, warmup_requests, say
        )
        say("counting executions", 0.97)
        by_status = count_by_status(session, ids)
    finally:
        stack.stop()
        if standin_pid is not None:
            stop_process(standin_pid)
        if store is not None:
            store.close()
    summary = ReplaySummary(
        run_id=run_id,
        folder=str(store.folder),
        setup=setup,
        workflows=[_plan_row(w) for w in plan.workflows],
        loop_iterations_per_ms=per_ms,
        steps=steps,
        executions_by_status=by_status,
        standin_latency_ms={p: r.latency_ms for p, r in routes.items()},
    )
    store.update_manifest(finished_s=time.time(), extra={"history_replay": summary.model_dump(mode="json")})
    say("done", 1.0)
    return summary


def deploy_plan(session, plan: ReplayPlan) -> dict[str, str]:
    """Create and activate every replay workflow on the instance; {key: workflow id}."""
    ids = {}
    with session.client() as client:
        for w in plan.workflows:
            ids[w.key], _ = deploy_workflow(client, w.definition)
    return ids


def replay_steps(
    store, plan, main_url, session, scales, step_s, timeout_s=60.0, max_in_flight=1000, warmup_requests=6, say=None
) -> list[ReplayStep]:
    """Warm every workflow up, then one step per scale, every workflow at its rate x the scale at once.
    `max_in_flight` bounds each workflow's open requests: one figure for all, or {key: figure} (a closed loop of that
    many users per workflow once the offered rate outruns it)."""
    say = say or (lambda what, done: None)
    say("warm-up", 0.05)
    _warm_up(plan, main_url, warmup_requests, timeout_s)
    steps = []
    for i, scale in enumerate(scales):
        say(f"step x{scale:g}", 0.05 + 0.9 * i / len(scales))
        steps.append(_step(store, plan, main_url, session, scale, step_s, timeout_s, max_in_flight))
    return steps


def count_by_status(session, ids: dict[str, str]) -> dict[str, int]:
    by_status: dict[str, int] = {}
    with session.client() as client:
        for wid in ids.values():
            for status, n in client.count_executions(wid).by_status.items():
                by_status[status] = by_status.get(status, 0) + n
    return by_status


def _plan_row(w) -> dict:
    return {
        "key": w.key,
        "name": w.name,
        "rate_per_s": w.rate_per_s,
        "wait_ms": w.wait_ms,
        "code_cpu_ms": w.code_cpu_ms,
        "calls_ms": w.routes_ms,
        "notes": list(w.notes),
    }


def _manifest(run_id, plan: ReplayPlan, setup: Setup, scales, step_s, source) -> RunManifest:
    return RunManifest(
        run_id=run_id,
        kind="bench",
        created_s=time.time(),
        spec={"history": source, "scales": scales, "step_s": step_s, "mix": [_plan_row(w) for w in plan.workflows]},
        setup={"local": setup.model_dump(mode="json")},
        workflow="history-mix",
        versions={name.lower(): v for name, v in vars(versions).items() if name.isupper() and isinstance(v, str)},
    )


def _warm_up(plan: ReplayPlan, main_url: str, requests: int, timeout_s: float) -> None:
    async def all_of():
        return await asyncio.gather(
            *(
                closed_count(
                    HttpPost(f"{main_url}/webhook/{w.webhook_path}", b"{}", timeout_s), 2, max(1, requests // 2)
                )
                for w in plan.workflows
            )
        )

    for w, got in zip(plan.workflows, asyncio.run(all_of()), strict=True):
        if got["ok"] == 0:
            raise RemoteError(
                f"replay workflow {w.key} ({w.name[:60]}) answered no warm-up request 2xx (first failure: "
                f"{got['first_error']}); check n8n's log"
            )


def _step(store, plan, main_url, session, scale, step_s, timeout_s, max_in_flight) -> ReplayStep:
    name = f"mix-{scale:g}x"
    offered = {w.key: w.rate_per_s * scale for w in plan.workflows}

    async def all_of():
        tasks = []
        for w in plan.workflows:
            if offered[w.key] <= 0:
                continue
            client = HttpPost(f"{main_url}/webhook/{w.webhook_path}", b"{}", timeout_s)
            target = f"local-{w.key}"
            tasks.append(
                run_open(
                    client,
                    rate_per_s=offered[w.key],
                    duration_s=step_s,
                    max_in_flight=max_in_flight.get(w.key, 1000) if isinstance(max_in_flight, dict) else max_in_flight,
                    step=name,
                    target=target,
                    seq_start=store.next_seq(target),
                    sink=store.append_request,
                )
            )
        return await asyncio.gather(*tasks)

    started = time.time()
    tallies: list[StepTally] = asyncio.run(all_of())
    ended = time.time()
    # this step's own records: a run may repeat a step's name (the same scale on another stack)
    records = [r for r in store.read_requests() if r.step == name and r.scheduled_s >= started - 1.0]
    per_workflow, ok_all, lat_all, errors = {}, 0, [], {}
    for w, tally in zip([w for w in plan.workflows if offered[w.key] > 0], tallies, strict=True):
        mine = [r for r in records if r.target == f"local-{w.key}"]
        for sample in summarize_step(mine, tally, f"local-{w.key}", "rate", offered[w.key], step_s):
            store.append_samples([sample])
        ok = [r.latency_ms for r in mine if r.status is not None and 200 <= r.status < 300]
        ok_all += len(ok)
        lat_all += ok
        for r in mine:
            if r.error_class is not None:
                errors[r.error_class] = errors.get(r.error_class, 0) + 1
        per_workflow[w.key] = {
            "offered_per_s": offered[w.key],
            "ok": float(len(ok)),
            "p50_ms": statistics.median(ok) if ok else None,
            "p95_ms": _p95(ok),
        }
    span = max((max((r.sent_s + (r.latency_ms or 0) / 1000 for r in records), default=ended) - started), step_s)
    return ReplayStep(
        scale=scale,
        started_s=started,
        ended_s=ended,
        offered_per_s=sum(offered.values()),
        answered_per_s=ok_all / span,
        finished_per_s=_finished_per_s(session, started + SETTLE_S, ended),
        ok=ok_all,
        failed=sum(errors.values()),
        errors=errors,
        p50_ms=statistics.median(lat_all) if lat_all else None,
        p95_ms=_p95(lat_all),
        per_workflow=per_workflow,
    )


def _p95(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def _finished_per_s(session, start_s: float, end_s: float) -> float | None:
    """Executions n8n finished in [start, end], counted from its own records (public API), per second."""
    if end_s - start_s < 1:
        return None
    time.sleep(1.0)  # the last executions of the window are saved just after it
    bounds = ReadBounds(max_pages=4000, max_seconds=120, timeout_s=30)
    with PublicApi(session.base_url, session.api_key, bounds) as api:
        done = sum(
            1
            for e in read_executions(api, start_s - 120, end_s)
            if e.stopped_s is not None and start_s <= e.stopped_s <= end_s and e.status == "success"
        )
    return done / (end_s - start_s)
