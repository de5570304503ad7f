"""Turn `n8n-sizer bench --local` run folders into embedded per-role CPU rows of n8n_sizer/data/measurements.json.

    .venv/bin/python scripts/embed_local_rows.py --page docs/findings/webhook-processors-measured.md RUN_DIR...

Each finished steady step becomes one row: CPU milliseconds per execution by role (`runs/fit_input.py`, the
utilisation law over the step's window), the setup (workers, webhook processors), the machine's facts, the date
and the command that made it (rebuilt from run.json's `spec`). Throughput is NOT embedded: these runs share a
2-core machine with other work, so what a step answered says how busy the machine was, not what the setup
carries; CPU seconds per execution hold up far better (each process's own CPU time). The runner row of a
workflow without a measured Code-node cost (light) is left out: the model has no runner demand for it.
A step whose window answered fewer than MIN_RATE_PER_S executions a second is left out: there the model's own idle
figure (0.02 cores per n8n process) is 10 ms or more per execution, as large as what is measured, so the row says
more about background work than about an execution. Rows whose id starts with `local-` are replaced; every other
row is kept. Then run scripts/refit_embedded.py.

`--counted` takes runs whose steps the kernel counted per role (cgroups, `bench/accounting.py`: the local stack or
the lab): only steps counted so, every role, with the Redis commands and Postgres transactions per execution; their
rows are `cg-` (replaced as a set). docs/findings/role-costs-measured.md says what such rows measured and what they
did to the fit.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from n8n_sizer.advisor.answer.lab_points import lab_host_class
from n8n_sizer.advisor.measurements import sitting_class
from n8n_sizer.advisor.profiles import BUILTIN
from n8n_sizer.runs.fit_input import measurements_from_run
from n8n_sizer.runs.store import RunStore

DATA = Path(__file__).resolve().parent.parent / "n8n_sizer" / "data" / "measurements.json"
# The same kind of machine as the notes' (2 x86 cores, 24 GiB, Debian 12), but shared with other work while
# these ran (load average 8-18): CPU time per operation runs higher than on the quiet machine of the notes, so
# the rows get a speed factor of their own (advisor/fit.py) and pin how CPU splits between roles, not its level.
HOST_CLASS = "local-shared"
PREFIX = "local-"
# Rows whose CPU the kernel counted per role (cgroup v1 cpuacct, bench/accounting.py), on the lab and the local
# stack of the same machine while it was shared (load average 10-17): their own speed factor, like the above.
CG_HOST_CLASS = "cgroup-shared"
CG_PREFIX = "cg-"
# The same counts made on the quiet machine (benchmarks/role_costs.py and benchmarks/lab_shape.py with nothing else
# running): a speed factor of their own too, since the machine's load moves CPU time per operation.
CGQ_HOST_CLASS = "cgroup-quiet"
# The lab's quiet rows: hosts under a CFS quota each (advisor/answer/lab_points.py `lab_host_class`). Every class
# here is written with its campaign's start (advisor/measurements.py `sitting_class`): the runs of one call are one
# campaign, with one speed factor.
CGQ_PREFIX = "cgq-"
ALL_ROLES = "main,webhook,worker,runner,postgres,redis,load_balancer"
MIN_RATE_PER_S = 2.0


def command_of(spec: dict) -> str:
    setup, plan = spec["local_setup"], spec["plan"]
    rates = ",".join(f"{s['rate_per_s']:g}" for s in plan["steps"] if s["kind"] == "rate")
    words = ["n8n-sizer bench --local", f"--mode {setup['mode']}"]
    if setup["mode"] == "queue":
        words.append(f"--workers {setup['workers']}")
    if spec.get("webhook_processors"):
        words.append(f"--webhook-processors {spec['webhook_processors']}")
    words += [
        f"--workflow {spec['workflow']}",
        f"--rates {rates}",
        f"--step-seconds {plan['steps'][0]['duration_s']:g}",
        f"--warmup {plan['warmup_requests']}",
        f"--drain-seconds {plan['drain_s']:g}",
    ]
    return " ".join(words)


def rows_of(
    folder: Path, page: str, keep: set[str], counted: bool = False, quiet: bool = False, start_s: float | None = None
) -> list[dict]:
    """The embedded rows of one run. `counted`: the kernel's accounting (cgroup cpuacct per role, issue 25) made
    its figures: only steps it counted, every role, ids `cg-`, host class CG_HOST_CLASS; else the sampled rows of
    before (`local-`, host class HOST_CLASS)."""
    store = RunStore.open(folder)
    manifest = store.manifest
    run = json.loads((folder / "run.json").read_text())
    spec = run["spec"]
    target = next(iter(manifest.hosts))
    steps = run.get("extra", {}).get("steps", {}).get(target, {})
    loads = [
        s.value for s in store.read_samples() if s.metric == "host_load_avg" and s.labels.get("window", "1m") == "1m"
    ]
    facts = manifest.hosts[target]["facts"]
    date = time.strftime("%Y-%m-%d", time.gmtime(manifest.created_s))
    command = (
        command_of(spec) if spec.get("local_setup") else "benchmarks/lab_shape.py (bench --inventory over the lab)"
    )
    out = []
    prefix, base = (
        ((CGQ_PREFIX, CGQ_HOST_CLASS) if quiet else (CG_PREFIX, CG_HOST_CLASS)) if counted else (PREFIX, HOST_CLASS)
    )
    where = "lab" if target == "cluster" else "local"
    host_class = (
        lab_host_class(start_s or manifest.created_s)
        if counted and quiet and where == "lab"
        else sitting_class(base, start_s or manifest.created_s)
    )
    hardware = {
        "provider": "local",
        "size": None,
        "vcpu": facts["vcpu"],
        "arch": "x86",
        "ram_mib": int(facts["ram_mib"]),
        "shared_core": False,
        "host_class": host_class,
    }
    machine = {
        "generator": "n8n-sizer bench",
        "note": command,
        **({"machine_load_avg": round(statistics.mean(loads), 1)} if loads else {}),
        "machine_shared": not quiet,
    }
    for m in measurements_from_run(folder):
        step = m.id.rsplit(f"-{target}-", 1)[1]
        wh = m.setup.webhook_processors
        if m.load.kind == "idle":  # the rest window (bench --rest-seconds): counted by the kernel, or not at all
            if counted and m.results.idle_cores:
                out.append(
                    {
                        "id": f"{prefix}{where}-{m.workflow}-q{m.setup.workers}w-wh{wh}-{manifest.run_id[-6:]}-rest",
                        "source": page,
                        "table": f"run {manifest.run_id}, rest window",
                        "n8n_version": m.n8n_version,
                        "hardware": hardware,
                        "workflow": m.workflow,
                        "setup": {**m.setup.model_dump(), "webhook_processors": wh},
                        "load": {
                            "kind": "idle",
                            "offered_rps": 0,
                            "duration_s": round(m.load.duration_s, 1),
                            **machine,
                        },
                        "results": {"idle_cores": {r: round(c, 5) for r, c in m.results.idle_cores.items()}},
                        "note": f"{date}, {facts['cpu_model']}, {facts['os']}; each n8n process's CPU with no load",
                    }
                )
            continue
        info = steps.get(step, {})
        if counted and info.get("cpu_source") != "cpuacct":
            continue  # the rule: CPU from the kernel's accounting only, never sampled from ps
        roles = {
            k: v
            for k, v in m.results.model_dump().items()
            if k.endswith("_cpu_ms") and v is not None and k.removesuffix("_cpu_ms") in keep
        }
        if not counted and BUILTIN[m.workflow].code_cpu_ms == 0:
            roles.pop("runner_cpu_ms", None)
        if not roles or (m.results.demand_executions_per_s or 0.0) < MIN_RATE_PER_S:
            continue
        answered = (m.results.answered_per_min or 0.0) / 60.0 * (m.load.duration_s or 0.0)
        ops = {}
        if counted and answered > 0:
            if info.get("redis_commands") is not None:
                ops["redis_commands_per_execution"] = round(info["redis_commands"] / answered, 1)
            if info.get("postgres_transactions") is not None:
                ops["postgres_transactions_per_execution"] = round(info["postgres_transactions"] / answered, 1)
        out.append(
            {
                "id": f"{prefix}{where}-{m.workflow}-q{m.setup.workers}w-wh{wh}-{manifest.run_id[-6:]}-{step}",
                "source": page,
                "table": f"run {manifest.run_id}, step {step}",
                "n8n_version": m.n8n_version,
                "hardware": hardware,
                "workflow": m.workflow,
                "setup": {**m.setup.model_dump(), "webhook_processors": wh},
                "load": {
                    "kind": "open",
                    "offered_rps": m.load.offered_rps,
                    "duration_s": m.load.duration_s,
                    **machine,
                },
                "results": {
                    **{k: round(v, 2) for k, v in roles.items()},
                    "demand_executions_per_s": round(m.results.demand_executions_per_s, 3),
                    **ops,
                },
                "note": (
                    f"{date}, {facts['cpu_model']}, {facts['os']}; per-role CPU per execution over the step "
                    f"(answered {m.results.answered_per_min / 60:.2f}/s of {m.load.offered_rps:g}/s offered; "
                    f"machine load average {statistics.mean(loads):.1f} on 2 cores"
                    + (", nothing else measuring)" if quiet else ", shared with other work)")
                    if loads
                    else f"{date}, {facts['cpu_model']}, {facts['os']}"
                ),
            }
        )
    return out


def campaign_start(folders: list[Path]) -> float:
    """When the first of `folders`' runs began: the runs of one call are one campaign (one host class each)."""
    return min(RunStore.open(folder).manifest.created_s for folder in folders)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--page", required=True, help="the docs page with the runs' provenance (repo-relative)")
    parser.add_argument("--roles", default=ALL_ROLES, help=f"roles whose CPU rows are embedded (default {ALL_ROLES})")
    parser.add_argument(
        "--counted",
        action="store_true",
        help="runs whose steps the kernel counted per role (cgroups): rows `cg-`, replacing those",
    )
    parser.add_argument(
        "--quiet-machine",
        action="store_true",
        help="with --counted: runs made with nothing else measuring (rows `cgq-`, replacing those)",
    )
    parser.add_argument(
        "--add",
        action="store_true",
        help="keep the rows of earlier runs; replace only rows of these runs (the same ids)",
    )
    args = parser.parse_args()
    data = json.loads(DATA.read_text())
    prefix = (CGQ_PREFIX if args.quiet_machine else CG_PREFIX) if args.counted else PREFIX
    start = campaign_start(args.runs)
    new = [
        row
        for folder in args.runs
        for row in rows_of(folder, args.page, set(args.roles.split(",")), args.counted, args.quiet_machine, start)
    ]
    ids = {row["id"] for row in new}
    kept = [m for m in data["measurements"] if (m["id"] not in ids if args.add else not m["id"].startswith(prefix))]
    data["measurements"] = kept + new
    DATA.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(new)} rows from {len(args.runs)} runs into {DATA}")


if __name__ == "__main__":
    main()
