"""The queue-mode side of the per-node cost table: `benchmarks/node_costs.py --mode queue --kinds ...`.

One local queue stack (main, 1 worker, Postgres, Redis; the stack `bench --local --mode queue` uses). Every
process is put in a cgroup of its role by the bench's own accounting (`n8n_sizer/bench/accounting.py`: main,
worker, runner, postgres, redis), and a run's CPU per role is the difference of `cpuacct.usage` between its two
ends, per successful execution (`role_cpu_ms`, as in every bench step's record). The workflows are the regular
campaign's: a Webhook alone (the base), light, Webhook -> Code -> K copies of a node (K = 1 and `--k-high`; the
node's cost is the slope), Respond to Webhook against the base, one Set node with 1 and 16 expressions.

A campaign measures the node kinds it is given (a chunk that fits in ~10 minutes under the heavy lock) with the
base and light in every chunk, and appends its raw runs to `queue.rounds` of the table file; `derive_queue` then
derives the whole queue table from every chunk's runs (a round is `campaign/round`), so chunks add up.
"""

from __future__ import annotations

import time
from typing import Any

from nodecost_lib import Flow, chain, closed_loop, code_items, make_node, over_rounds, repeated, set_node

ROLES = ("main", "worker", "runner", "postgres", "redis")
EXPRESSIONS = (1, 16)
SUB_K = 4  # Execute Workflow's long chain: each copy is a whole sub-execution


def k_high_of(kind: str, k_high: int) -> int:
    return min(k_high, SUB_K) if kind == "executeWorkflow" else k_high


def build_queue_flows(ctx: dict, kinds: list[str], k_high: int, light_flow, extras: bool) -> list[Flow]:
    """base and light always; each kind at K = 1 and its high K; with `extras` Respond to Webhook and expressions."""
    one = code_items(1)
    flows = [
        Flow("base", "default", chain("nodecost q base", "nq-base", [])),
        Flow("light", "default", light_flow("nq-light")),
    ]
    for kind in kinds:
        for k in (1, k_high_of(kind, k_high)):
            flows.append(Flow(f"{kind}-k{k}", "default", repeated(kind, k, f"nq-{kind.lower()}-k{k}", ctx, [one])))
    if extras:
        respond = make_node("respondToWebhook", "Respond", ctx)
        flows.append(Flow("respond", "default", chain("nodecost q respond", "nq-respond", [respond], "responseNode")))
        for n in EXPRESSIONS:
            flows.append(
                Flow(
                    f"expr{n}",
                    "default",
                    chain(f"nodecost q expr {n}", f"nq-expr{n}", [set_node("Expr", 0, n, source="$json.body.n")]),
                )
            )
    return flows


def role_measure(accounting, settle_s: float = 1.0):
    """A `run_rounds` measure: one closed-loop run with each role's CPU (cgroups) per successful execution."""
    from n8n_sizer.bench.accounting import step_counters

    def measure(stack: Any, url: str, body: bytes, requests: int, concurrency: int, max_s: float) -> dict[str, Any]:
        before = accounting.read()
        run = closed_loop(url, body, requests, concurrency, max_s)
        time.sleep(settle_s)  # the worker saves the execution after main answered: let the last ones land
        counters = step_counters(before, accounting.read())
        done = max(run["ok"], 1)
        roles = {role: ms / done for role, ms in (counters.role_cpu_ms or {}).items()}
        run["role_ms"] = {role: round(ms, 3) for role, ms in roles.items()}
        run["main_ms"] = roles.get("main", 0.0)
        run["postgres_ms"] = roles.get("postgres", 0.0)
        run["cpu_ms"] = sum(roles.values())
        return run

    return measure


def queue_accounting(stack):
    """The bench's per-role groups for a local queue stack; refuses to measure without them (root, cgroup v1)."""
    from n8n_sizer.bench.accounting import local_accounting

    acc = local_accounting(stack)
    if acc is None:
        raise SystemExit("queue mode needs the kernel's per-role CPU accounting (root and cgroup v1 cpu, cpuacct)")
    acc.redis_command = acc.pg_command = None  # CPU only: no probe commands between runs
    return acc


def _per_round(raw: list[dict], fn) -> dict[str, dict[str, float]]:
    """{campaign/round: {flow key: fn(run)}}: rounds of every chunk, each its own."""
    out: dict[str, dict[str, float]] = {}
    for run in raw:
        out.setdefault(run["id"].rsplit("/", 2)[0], {})[run["key"]] = fn(run)
    return out


def derive_queue(raw: list[dict], kinds: dict[str, str], k_high: int) -> dict:
    """The queue table from every chunk's runs: total CPU figures (median, min..max over rounds) and each role's
    median share, for the base, light, every node kind measured, Respond to Webhook and expressions."""
    total = _per_round(raw, lambda run: run["cpu_ms"])
    by_role = {role: _per_round(raw, lambda run, role=role: run["role_ms"].get(role, 0.0)) for role in ROLES}

    def both(fn) -> tuple[dict | None, dict[str, float]]:
        fig = over_rounds(total, fn)
        roles = {role: (over_rounds(by_role[role], fn) or {}).get("ms", 0.0) for role in ROLES}
        return fig, roles

    out: dict[str, Any] = {}
    for key in ("base", "light"):
        fig, roles = both(lambda x, key=key: x[key])
        if fig:
            out[key] = fig | {"roles": roles}
    rows = []
    campaigns = sorted({run["id"].split("/", 1)[0] for run in raw})
    for kind, type_ in kinds.items():
        k = k_high_of(kind, k_high)
        fig, roles = both(lambda x, kind=kind, k=k: (x[f"{kind}-k{k}"] - x[f"{kind}-k1"]) / (k - 1))
        if fig:
            chunk = next(run["id"].split("/", 1)[0] for run in raw if run["key"] == f"{kind}-k1")
            rows.append(
                {
                    "id": kind,
                    "type": type_,
                    "cpu": fig,
                    "roles": roles,
                    "runs": [f"{chunk}/{kind}-k1", f"{chunk}/{kind}-k{k}"],
                }
            )
    fig, roles = both(lambda x: x["respond"] - x["base"])
    if fig:
        chunk = next(run["id"].split("/", 1)[0] for run in raw if run["key"] == "respond")
        rows.append(
            {
                "id": "respondToWebhook",
                "type": "n8n-nodes-base.respondToWebhook",
                "cpu": fig,
                "roles": roles,
                "runs": [f"{chunk}/respond", f"{chunk}/base"],
            }
        )
    out["nodes"] = rows
    lo, hi = EXPRESSIONS[0], EXPRESSIONS[-1]
    fig, roles = both(lambda x: (x[f"expr{hi}"] - x[f"expr{lo}"]) / (hi - lo))
    if fig:
        out["per_expression_ms"] = {"default": fig | {"roles": roles}}
    out["campaigns"] = campaigns
    return out


def queue_markdown(part: dict) -> list[str]:
    """The queue part as docs/workflow-price.md shows it: each figure, its spread, and its share per role."""
    t, a = part["table"], part["about"]

    def fig(f: dict) -> str:
        return f"{f['ms']:.2f} | {f['low_ms']:.2f} .. {f['high_ms']:.2f}"

    def roles(f: dict) -> str:
        return " | ".join(f"{f.get('roles', {}).get(r, 0.0):.2f}" for r in ROLES)

    rounds = len({run["id"].rsplit("/", 2)[0] for run in part["rounds"]})
    lines = [
        "",
        f"Queue mode (the worker's side): campaigns {', '.join(f'`{c}`' for c in t['campaigns'])}, "
        f"{a['date']}, n8n {a['n8n_version']}; 1 worker, Postgres, Redis, closed loop c={a['concurrency']}, "
        f"{a['requests_per_run']} requests per run, {rounds} rounds in all; chains of 1 and {a['k_high']} nodes "
        "(Execute Workflow: 4). CPU per role from the bench's cgroups (cpuacct).",
        "",
        "| row | CPU ms per node per execution | spread over rounds (min .. max) | " + " | ".join(ROLES) + " |",
        "| --- | --- | --- |" + " --- |" * len(ROLES),
    ]
    for key in ("base", "light"):
        if key in t:
            lines.append(f"| {key} | {fig(t[key])} | {roles(t[key])} |")
    for row in t["nodes"]:
        lines.append(f"| {row['id']} | {fig(row['cpu'])} | {roles(row)} |")
    if "per_expression_ms" in t:
        e = t["per_expression_ms"]["default"]
        lines.append(f"| per expression, default engine | {fig(e)} | {roles(e)} |")
    return lines
