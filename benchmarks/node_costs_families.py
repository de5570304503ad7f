"""The families campaign of the per-node cost table: `benchmarks/node_costs.py --families KINDS [--parked] [--held]`.

One local stack (regular mode, Postgres, as the first campaign) and, beside it, the local OpenAI-compatible
stand-in (n8n_sizer/standins/openai.py, answering at once: the CPU n8n spends, not the model's time), reached
through an `openAiApi` credential whose base URL is the stand-in's and a `telegramApi` credential whose `baseUrl`
is. For each kind (benchmarks/nodecost_ai.py) a chain Webhook -> Code (one item) -> K copies, K = 1 and --k-high;
the row is the slope, as for the first campaign. A sub-node alone (memory, a tool, an output parser) is the
difference of two kinds' slopes (`DELTAS`). Stop and Error ends the execution: measured once against a No-Op in
its place (its webhook answers 500, every stored execution must be an error). Each chunk of kinds runs under the
heavy-command lock with the base and light, and its raw runs are appended to the table file's `families.rounds`,
from which every row is derived again (a round is `campaign/round`, so chunks add up).

`--parked`: a Wait of 66 s, which n8n parks in the database (waits.py), against a Wait of 0.05 s held in
memory: --parked-requests executions of each (the webhook answers on receipt), the CPU of main and Postgres over a
fixed window that holds every resume (the wait tracker polls every 60 s), each run's window of the same length;
the row `waitParked` is the difference per execution plus the Wait row (what parking and resuming cost beyond a
short wait).

`--held`: the memory an in-flight execution holds in main (with its task runner): --held-in-flight executions of
the AI Agent (the stand-in answering after --held-latency-ms) and of a Webhook -> Wait (in memory) -> Set held in
flight together; main's resident memory (VmRSS of its process family) sampled before and while they are held;
the held figure is the rise over the executions, at two counts (half and all), per execution.
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

import httpx
from nodecost_ai import DELTAS, ROWS, unit
from nodecost_lib import BODY, Flow, chain, code_items, node, over_rounds, stack_cpu_ms

from n8n_sizer.native import services

FAMILY_KINDS = tuple(ROWS) + tuple({d[2] for d in DELTAS.values()} - set(ROWS))
PARK_S = 66.0  # n8n parks waits of 65 s or more (Wait.node.ts)


def credentials(client, standin) -> dict[str, Any]:
    oc = client.create_credential("stand-in openai", "openAiApi", {"apiKey": "sk-stand-in", "url": standin.base_url()})
    tc = client.create_credential(
        "stand-in telegram", "telegramApi", {"accessToken": "1:stand-in", "baseUrl": standin.url}
    )
    return {
        "openai_cred_id": oc["id"],
        "openai_cred_name": oc["name"],
        "telegram_cred_id": tc["id"],
        "telegram_cred_name": tc["name"],
        "app_url": standin.url,
    }


def _with_units(name: str, path: str, units: list[tuple[dict, list[dict], list[tuple[str, str, str]]]]) -> dict:
    """Webhook -> Code (one item) -> the units' main nodes in a chain, their sub-nodes attached."""
    wf = chain(name, path, [code_items(1), *[u[0] for u in units]])
    for _, subs, links in units:
        wf["nodes"] += subs
        for sub, root, kind in links:
            wf["connections"].setdefault(sub, {}).setdefault(kind, [[]])[0].append(
                {"node": root, "type": kind, "index": 0}
            )
    return wf


def _loop_chain(name: str, path: str, k: int) -> dict:
    """Webhook -> Code -> k x (Loop Over Items, its loop output through a No-Op back to it; its done output on)."""
    wf = chain(name, path, [code_items(1)])
    prev = "Items"
    for i in range(1, k + 1):
        sib, body = f"Loop {i}", f"Body {i}"
        wf["nodes"] += [node("splitInBatches", 3, {"options": {}}, sib), node("noOp", 1, {}, body)]
        wf["connections"].setdefault(prev, {"main": [[]]})["main"][0].append({"node": sib, "type": "main", "index": 0})
        wf["connections"][sib] = {"main": [[], [{"node": body, "type": "main", "index": 0}]]}
        wf["connections"][body] = {"main": [[{"node": sib, "type": "main", "index": 0}]]}
        prev = sib
    # the last Loop's done output ends the chain (its item is the answer)
    return wf


def kind_flow(kind: str, k: int, ctx: dict) -> dict:
    path = f"nf-{kind.lower()}-k{k}"
    if kind == "splitInBatches":
        return _loop_chain(f"nodecost {path}", path, k)
    return _with_units(f"nodecost {path}", path, [unit(kind, i, ctx) for i in range(1, k + 1)])


def build_family_flows(ctx: dict, kinds: list[str], k_high: int, light_flow) -> list[Flow]:
    """base and light always; each kind at K = 1 and `k_high`; Stop and Error against a No-Op."""
    flows = [
        Flow("base", "default", chain("nodecost f base", "nf-base", [])),
        Flow("light", "default", light_flow("nf-light")),
    ]
    for kind in kinds:
        if kind == "stopAndError":
            stop = Flow("stop", "default", _with_units("nodecost f stop", "nf-stop", [unit("stopAndError", 1, ctx)]))
            stop.ok_status, stop.ok_execution = 500, "error"
            flows += [
                stop,
                Flow(
                    "stop-ref",
                    "default",
                    chain("nodecost f stop ref", "nf-stop-ref", [code_items(1), node("noOp", 1, {}, "NoOp")]),
                ),
            ]
            continue
        for k in (1, k_high):
            flows.append(Flow(f"{kind}-k{k}", "default", kind_flow(kind, k, ctx)))
    return flows


def preload_vectors(client, base_url: str, ctx: dict) -> None:
    """The in-memory store the load kind searches (key `shared`) gets one document first."""
    from n8n_sizer.n8n.workflows import deploy_workflow

    root, subs, links = unit("aiVectorInsert", 0, ctx)
    root["parameters"]["memoryKey"]["value"] = "shared"
    _, path = deploy_workflow(
        client, _with_units("nodecost f preload", "nf-preload", [(root, subs, links)]), timeout_s=60
    )
    answer = httpx.post(base_url + path, content=BODY, headers={"Content-Type": "application/json"}, timeout=60)
    if answer.status_code != 200:
        raise SystemExit(f"preloading the in-memory vector store failed: HTTP {answer.status_code} {answer.text[:200]}")


def round_scales(raw: list[dict], reference_ms: float) -> dict[str, float]:
    """Per round (campaign/round): the table's base-and-light mean over the round's own (CPU per execution moves
    with the machine's load between sittings; ratios within a round do not), to put the round's figures in the
    table's milliseconds."""
    by: dict[str, dict[str, float]] = {}
    for run in raw:
        if run["key"] in ("base", "light"):
            by.setdefault(run["id"].rsplit("/", 2)[0], {})[run["key"]] = run["cpu_ms"]
    return {rnd: reference_ms / ((x["base"] + x["light"]) / 2) for rnd, x in by.items() if len(x) == 2}


def derive_family_rows(raw: list[dict], k_high: int, reference_ms: float) -> list[dict]:
    """Every row the rounds hold: a kind's slope, a sub-node's difference of slopes, Stop and Error's difference;
    each round's figure scaled into the table's milliseconds (`round_scales`, `reference_ms` the table's base and
    light mean)."""
    scales = round_scales(raw, reference_ms)
    table: dict[str, dict[str, float]] = {}
    main: dict[str, dict[str, float]] = {}
    for run in raw:
        rnd = run["id"].rsplit("/", 2)[0]
        k = scales.get(rnd, 1.0)
        table.setdefault(rnd, {})[run["key"]] = run["cpu_ms"] * k
        main.setdefault(rnd, {})[run["key"]] = run["main_ms"] * k

    def slope(kind: str):
        return lambda x: (x[f"{kind}-k{k_high}"] - x[f"{kind}-k1"]) / (k_high - 1)

    def chunk_of(key: str) -> str:
        return next(run["id"].split("/", 1)[0] for run in raw if run["key"] == key)

    rows = []
    for kind, (row_id, type_, when, what) in ROWS.items():
        fn = (lambda x: x["stop"] - x["stop-ref"]) if kind == "stopAndError" else slope(kind)
        fig = over_rounds(table, fn)
        if fig is None:
            continue
        keys = ["stop", "stop-ref"] if kind == "stopAndError" else [f"{kind}-k1", f"{kind}-k{k_high}"]
        rows.append(
            {
                "id": row_id,
                "type": type_,
                "cpu": fig,
                "main_ms": over_rounds(main, fn)["ms"],
                "runs": [f"{chunk_of(keys[0])}/{k}" for k in keys],
                "when": when,
                "what": what,
                "campaign": chunk_of(keys[0]),
            }
        )
    for row_id, type_, with_, without in DELTAS.values():

        def diff(x, with_=with_, without=without):
            return slope(with_)(x) - slope(without)(x)

        fig = over_rounds(table, diff)
        if fig is None:
            continue
        rows.append(
            {
                "id": row_id,
                "type": type_,
                "cpu": fig,
                "main_ms": over_rounds(main, diff)["ms"],
                "runs": [f"{chunk_of(f'{with_}-k1')}/{k}" for k in (f"{with_}-k1", f"{with_}-k{k_high}")],
                "what": f"{with_} less {without}, per copy",
                "campaign": chunk_of(f"{with_}-k1"),
            }
        )
    return rows


# --- a parked Wait -----------------------------------------------------------------------------------


def _fire(url: str, n: int, concurrency: int = 8) -> int:
    """n POSTs (the webhook answers on receipt), `concurrency` at a time; how many answered 200."""
    lock, state = threading.Lock(), {"left": n, "ok": 0}

    def user() -> None:
        with httpx.Client(timeout=60) as http:
            while True:
                with lock:
                    if state["left"] <= 0:
                        return
                    state["left"] -= 1
                ok = http.post(url, content=BODY, headers={"Content-Type": "application/json"}).status_code == 200
                with lock:
                    state["ok"] += ok

    threads = [threading.Thread(target=user) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return state["ok"]


def wait_flow(path: str, seconds: float) -> dict:
    wait = node("wait", 1.1, {"amount": seconds}, "Wait") | {"webhookId": path}
    wf = chain(
        f"nodecost {path}",
        path,
        [wait, node("set", 3.4, {"assignments": {"assignments": []}, "options": {}}, "Set")],
        "onReceived",
    )
    return wf


def measure_window(stack, client, url: str, workflow_id: str, n: int, window_s: float, say) -> dict[str, Any]:
    """n executions fired at once, then the CPU of main and Postgres over `window_s` from the first request, and how
    many executions finished successfully within it."""
    before, started = stack_cpu_ms(stack), time.monotonic()
    ok = _fire(url, n)
    while time.monotonic() - started < window_s:
        time.sleep(1.0)
    after = stack_cpu_ms(stack)
    done = client.count_executions(workflow_id).by_status
    say(f"  {url.rsplit('/', 1)[-1]}: {ok}/{n} answered, executions {done}")
    return {
        "answered": ok,
        "statuses": done,
        "main_ms": after["main"] - before["main"],
        "postgres_ms": after["postgres"] - before["postgres"],
        "window_s": window_s,
        "requests": n,
    }


# --- memory held in flight ---------------------------------------------------------------------------


def family_rss_mb(pid: int) -> float:
    total = 0.0
    for p in services.family_pids(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += float(line.split()[1]) / 1024.0
                        break
        except OSError:
            continue
    return total


def held_in_flight(stack, url: str, counts: tuple[int, ...], hold_s: float, say) -> dict[str, Any]:
    """Main's RSS (its family) with 0 and with each count of executions in flight, each held ~hold_s by the
    workflow itself (a model answering late, a Wait); per count the median of samples taken while all are held."""
    pid = stack.pid("main")
    out: dict[str, Any] = {"counts": list(counts), "rss_mb": {}, "baseline_mb": []}
    for n in counts:
        time.sleep(3.0)
        base = [family_rss_mb(pid) for _ in range(5) if not time.sleep(0.2)]
        threads = [
            threading.Thread(
                target=lambda: httpx.post(
                    url, content=BODY, headers={"Content-Type": "application/json"}, timeout=hold_s + 120
                )
            )
            for _ in range(n)
        ]
        for t in threads:
            t.start()
        time.sleep(min(hold_s * 0.4, 8.0))  # every request arrived and is waiting
        samples = []
        deadline = time.monotonic() + hold_s * 0.4
        while time.monotonic() < deadline:
            samples.append(family_rss_mb(pid))
            time.sleep(0.5)
        for t in threads:
            t.join()
        out["baseline_mb"].append(round(statistics.median(base), 1))
        out["rss_mb"][str(n)] = round(statistics.median(samples), 1)
        say(
            f"  {n} in flight: main family {statistics.median(samples):.0f} MB (before: {statistics.median(base):.0f} MB)"
        )
    lo, hi = counts[0], counts[-1]
    per = (out["rss_mb"][str(hi)] - out["rss_mb"][str(lo)]) / (hi - lo)
    per_from_base = [(out["rss_mb"][str(n)] - b) / n for n, b in zip(counts, out["baseline_mb"], strict=True)]
    out["per_execution_mb"] = round(per, 2)
    out["per_execution_from_baseline_mb"] = [round(v, 2) for v in per_from_base]
    return out
