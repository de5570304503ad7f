"""Issue 38 on real n8n 2.41.1 (the session's regular stack): four workflows driven at known rates, then read back.

- a Webhook -> Set at 3/s, a Schedule every 2 s (0.5/s), a Webhook -> HTTP Request to the delayed HTTP stand-in
  (300 ms) at 1/s and a Webhook -> Wait 1 s -> No-Op at 1/s, for 60 s;
- `advise --from-n8n` over that window recovers each workflow's rate within 10% and the stand-in's latency within
  20%; `history export --anonymise` then `advise --history` gives the same answer;
- the exported history replayed (`bench --history`'s steps, on the same n8n, a stand-in of its own) offers and
  carries each workflow's rate, and the replay's own history recovers the same rates and waits.

The capacity and concurrency checks of the mix are a measurement campaign: benchmarks/history_mix.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import json
import os
import secrets
import sys
import time
import uuid
from datetime import UTC, datetime

import pytest

from n8n_sizer.bench.http_post import HttpPost
from n8n_sizer.bench.load import run_open
from n8n_sizer.n8n.workflows import deploy_workflow
from n8n_sizer.standins.http import DelayedRoute, start_process, stop_process

DRIVE_S = 60.0
LATENCY_MS = 300.0
RATES = {"hook": 3.0, "call": 1.0, "wait": 1.0}


def _node(type_, version, params, name, **extra):
    return {
        "parameters": params,
        "id": str(uuid.uuid4()),
        "name": name,
        "type": f"n8n-nodes-base.{type_}",
        "typeVersion": version,
        "position": [0, 0],
        **extra,
    }


def _hook(path):
    params = {"httpMethod": "POST", "path": path, "responseMode": "lastNode", "options": {}}
    return _node("webhook", 2, params, "Webhook", webhookId=str(uuid.uuid4()))


def _chain(name, nodes):
    links = {
        a["name"]: {"main": [[{"node": b["name"], "type": "main", "index": 0}]]} for a, b in itertools.pairwise(nodes)
    }
    return {"name": name, "nodes": nodes, "connections": links, "settings": {"executionOrder": "v1"}}


def _flows(tag, standin):
    setter = {
        "assignments": {"assignments": [{"id": "a", "name": "n", "value": "={{ $json.body.n }}", "type": "string"}]}
    }
    return {
        "hook": _chain(
            f"hist-hook-{tag}", [_hook(f"hist-hook-{tag}"), _node("set", 3.4, {**setter, "options": {}}, "Set")]
        ),
        "sched": _chain(
            f"hist-sched-{tag}",
            [
                _node(
                    "scheduleTrigger", 1.2, {"rule": {"interval": [{"field": "seconds", "secondsInterval": 2}]}}, "Tick"
                ),
                _node("noOp", 1, {}, "NoOp"),
            ],
        ),
        "call": _chain(
            f"hist-call-{tag}",
            [_hook(f"hist-call-{tag}"), _node("httpRequest", 4.2, {"url": f"{standin}/crm", "options": {}}, "CRM")],
        ),
        "wait": _chain(
            f"hist-wait-{tag}",
            [
                _hook(f"hist-wait-{tag}"),
                _node("wait", 1.1, {"amount": 1, "unit": "seconds"}, "Pause", webhookId=str(uuid.uuid4())),
                _node("noOp", 1, {}, "After"),
            ],
        ),
    }


def _iso(unix: float) -> str:
    return datetime.fromtimestamp(unix, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@contextlib.contextmanager
def _api_key(key: str):
    before = os.environ.get("N8N_API_KEY")
    os.environ["N8N_API_KEY"] = key
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("N8N_API_KEY", None)
        else:
            os.environ["N8N_API_KEY"] = before


def _advise(args):
    from n8n_sizer.cli import advise_main

    out, err = io.StringIO(), io.StringIO()
    argv, sys.argv = sys.argv, ["advise", *args]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                advise_main()
                code = 0
            except SystemExit as exc:
                code = exc.code
    finally:
        sys.argv = argv
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def driven(regular_stack):
    """The four workflows on the session's n8n, driven for DRIVE_S; (stack, names, window, stand-in calls)."""
    tag = secrets.token_hex(3)
    pid, standin = start_process({"/crm": DelayedRoute(latency_ms=LATENCY_MS)})
    flows = _flows(tag, standin)
    ids = {}
    try:
        with regular_stack.client() as client:
            for key, flow in flows.items():
                if key == "sched":
                    made = client.create_workflow(flow)
                    client.activate_workflow(made["id"])
                    ids[key] = made["id"]
                else:
                    ids[key], _ = deploy_workflow(client, flow)

        async def drive():
            clients = {k: HttpPost(f"{regular_stack.main_url}/webhook/hist-{k}-{tag}", b'{"n": 1}', 30) for k in RATES}
            return await asyncio.gather(
                *(
                    run_open(clients[k], rate_per_s=r, duration_s=DRIVE_S, max_in_flight=500, step="s", target=k)
                    for k, r in RATES.items()
                )
            )

        started = time.time()
        asyncio.run(drive())
        yield {
            "stack": regular_stack,
            "names": {k: f["name"] for k, f in flows.items()},
            "since": _iso(started),
            "until": _iso(started + DRIVE_S),
        }
    finally:
        if "sched" in ids:
            with regular_stack.client() as client:
                client.deactivate_workflow(ids["sched"])
        stop_process(pid)


def _rows(answer: dict) -> dict:
    return {row["name"]: row for row in answer["mix"]["rows"]}


def test_advise_from_n8n_recovers_rates_and_latency(driven, tmp_path):
    window = ["--since", driven["since"], "--until", driven["until"]]
    with _api_key(driven["stack"].api_key):
        code, out, err = _advise(["--from-n8n", driven["stack"].main_url, *window, "--vcpu", "2", "--json"])
    assert code == 0, err
    answer = json.loads(out)
    rows = _rows(answer)
    names = driven["names"]
    for key, rate in (*RATES.items(), ("sched", 0.5)):
        assert rows[names[key]]["rate_per_s"] == pytest.approx(rate, rel=0.10), key
    assert rows[names["sched"]]["trigger"] == "schedule (every 2 seconds)"
    # the stand-in's latency is the call's waiting time
    assert rows[names["call"]]["wait_ms"] == pytest.approx(LATENCY_MS, rel=0.20)
    assert rows[names["wait"]]["wait_ms"] == pytest.approx(1000.0, rel=0.20)
    assert answer["request"]["rps"] == pytest.approx(5.5, rel=0.10)


def test_export_anonymised_answers_the_same(driven, tmp_path):
    import typer

    from n8n_sizer.cli import _run, app

    out = tmp_path / "history.json"
    window = ["--since", driven["since"], "--until", driven["until"]]
    url = driven["stack"].main_url
    with _api_key(driven["stack"].api_key):
        with pytest.raises(SystemExit) as done:
            _run(
                typer.main.get_command(app),
                "n8n-sizer",
                ["history", "export", url, "--out", str(out), "--anonymise", *window],
            )
        assert done.value.code == 0
        code, from_url, err = _advise(["--from-n8n", url, *window, "--vcpu", "2", "--json"])
    assert code == 0, err
    text = out.read_text()
    assert all(name not in text for name in driven["names"].values()) and url not in text
    history = json.loads(text)
    call = next(t for w in history["workflows"] for t in w["node_timings"] if t["type"] == "n8n-nodes-base.httpRequest")
    assert call["per_run_p50_ms"] == pytest.approx(LATENCY_MS, rel=0.20)
    code, from_file, err = _advise(["--history", str(out), "--vcpu", "2", "--json"])
    assert code == 0, err
    a, b = json.loads(from_url), json.loads(from_file)
    for d in (a, b):
        for key in ("source", "anonymised", "notes"):
            d["mix"].pop(key)
        for row in d["mix"]["rows"]:
            row.pop("name")
    assert a == b


def test_the_history_replayed_carries_the_same_shape(driven, tmp_path, n8n_install):
    """The replay (bench --history's steps) on the same n8n: each workflow offered and carried at its rate, and the
    replay's own history reads back the same rates and waits."""
    from n8n_sizer.bench.history_replay import calibrate_loop, deploy_plan, replay_steps
    from n8n_sizer.cli.history import read_instance
    from n8n_sizer.history.read import ReadRequest, read_history
    from n8n_sizer.history.replay import replay_plan
    from n8n_sizer.runs.records import RunManifest
    from n8n_sizer.runs.store import RunStore

    stack = driven["stack"]
    with _api_key(stack.api_key):
        original = read_instance(stack.main_url, None, driven["since"], driven["until"])
    mine = original.model_copy(
        update={"workflows": tuple(w for w in original.workflows if w.name in driven["names"].values())}
    )
    assert len(mine.workflows) == 4
    per_ms, tag = calibrate_loop(n8n_install.node_bin), secrets.token_hex(3)
    routes = {
        p: DelayedRoute(latency_ms=ms)
        for w in replay_plan(mine, "http://127.0.0.1:1", per_ms, tag).workflows
        for p, ms in w.routes_ms.items()
    }
    assert len(routes) == 1 and next(iter(routes.values())).latency_ms == pytest.approx(LATENCY_MS, rel=0.20)
    pid, url = start_process(routes)
    plan = replay_plan(mine, url, per_ms, tag)
    store = RunStore.create(tmp_path, RunManifest(run_id="replay-test", created_s=time.time()))
    try:
        deploy_plan(stack.session, plan)
        (step,) = replay_steps(store, plan, stack.main_url, stack.session, [1.0], 30.0)
    finally:
        stop_process(pid)
        store.close()
    for w in plan.workflows:
        got = step.per_workflow[w.key]
        assert got["ok"] == pytest.approx(w.rate_per_s * 30.0, rel=0.10, abs=1), w.name
    assert step.failed == 0
    assert step.finished_per_s == pytest.approx(step.offered_per_s, rel=0.15)
    bounds = ReadRequest(url=stack.main_url, since_s=step.started_s, until_s=step.started_s + 30.0)
    again = read_history(bounds, stack.session.api_key)
    replayed = {w.name: w for w in again.workflows}
    for w in plan.workflows:
        r = replayed[f"n8n-sizer replay {w.key}"]
        assert r.rates.per_s_mean == pytest.approx(w.rate_per_s, rel=0.10)
        calls = [t for t in r.node_timings if t.family == "call"]
        if w.routes_ms:
            assert calls[0].per_run_p50_ms == pytest.approx(next(iter(w.routes_ms.values())), rel=0.20)
