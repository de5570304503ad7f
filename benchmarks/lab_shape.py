"""Prints, for several lab topologies whose hosts each have their own CPU, the advisor's predicted ceiling next to the
one the project's own bench measures over the lab, with the bound that binds. Needs root, the shared n8n install
(~/.cache/n8n-sizer, `bash scripts/test.sh`), Debian's postgresql, redis-server and caddy.

    .venv/bin/python benchmarks/lab_shape.py [--quick] [--step-seconds 20] [--scale 0.125]

Every topology runs at ONE scale (cores here per vCPU, `--scale`; default: the largest topology fills 1.5 cores),
so a 2-vCPU host has the same cores in each and one more worker host is one more budget: `lab up --cpu-cores
scale x total vCPU` (lab/cpu.py). Per topology: `lab up` (2 generators, `ls-` names, 10.213.9.0/24), `bench
--inventory` over a rate ladder around the topology's expected ceiling (bounded: 5 steps of --step-seconds, a
drain of at most 180 s), `lab down` whatever happened. Measured: the highest rate a step carried
(`runs.stats.step_throughput`), and the ledger (every accepted request matched to its stored execution). Predicted:
the advisor's capacity for the same topology with each host scored as its own host of `vcpu x scale` cores
(`lab.cpu.lab_host_cores`) at this machine's speed, with its binding bound, the advisor refitted on the embedded
measurements plus the per-role CPU rows of the OTHER topologies' runs (leave one topology out: this machine's speed
and how CPU splits between roles come from them; nothing a topology's own run measured informs its prediction).
The load average before and after each bench is printed beside its figure, and this machine's speed (lab/speed.py,
probed before and after each topology) with its steal time: each prediction is put at its own sitting's speed
against the other topologies' (lab_points.sitting_speed). `--quick` runs the first 3 topologies;
`--from FOLDER` predicts an earlier run's topologies again with the model as it is now, without a lab; with `--embed
PAGE` it writes them to n8n_sizer/data/lab_shape.json (`--add`: beside the earlier campaigns' points), each point
with its campaign's host class (advisor/measurements.py `sitting_class`).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from n8n_sizer.advisor.answer.lab_points import lab_host_class, sitting_speed
from n8n_sizer.bundle.topology import parse_topology
from n8n_sizer.lab.cpu import lab_host_cores, plan_for_topology
from n8n_sizer.lab.netns import lab_up, remove_lab
from n8n_sizer.runs.stats import step_rate, step_throughput
from n8n_sizer.runs.store import RunStore

CLI = [sys.executable, "-c", "from n8n_sizer.cli import main; main()"]
SUBNET = "10.213.9.0/24"
USABLE_CORES = 1.5  # the largest topology's budgets fill this many of the 2 cores; the generators have the rest
LADDER = (0.5, 0.75, 1.0, 1.25, 1.5)  # x the expected ceiling
REST_S = 40.0  # the no-load window after the warm-up (bench --rest-seconds): each process's idle CPU, measured
# The ladder's centre, from this machine's notes (docs/../shared notes real-n8n: a worker ~60 ms and main ~12-17 ms of
# CPU per light execution), not from the prediction under test: a ladder centred on a wrong prediction would cap
# what can be measured.
WORKER_MS, MAIN_MS, DATA_MS = 60.0, 17.0, 11.0
DATA = {"name": "ls-data", "provider": "hetzner", "size": "cx23", "roles": {"postgres": 1, "redis": 1}}
INGEST = {"name": "ls-ingest", "provider": "hetzner", "size": "cx23", "roles": {"main": 1}}


def workers(n: int) -> dict:
    return {"name": "ls-worker", "provider": "hetzner", "size": "cx23", "count": n, "roles": {"workers": 1}}


# (label, host groups, what should bind): chosen so that different roles bind. Every host is 2 vCPU.
TOPOLOGIES = [
    ("1 worker host", [DATA, INGEST, workers(1)], "the worker host"),
    ("2 worker hosts", [DATA, INGEST, workers(2)], "the worker hosts"),
    ("4 worker hosts, main takes the webhooks", [DATA, INGEST, workers(4)], "the ingest host"),
    # `lab deploy` starts webhook processors on the ingest host only (a webhook host of its own gets none and Caddy
    # answers 503), so the processor shares the ingest host with main and Caddy.
    (
        "4 worker hosts, a webhook processor behind Caddy",
        [DATA, {**INGEST, "roles": {"main": 1, "webhook": 1, "load_balancer": 1}}, workers(4)],
        "the ingest host",
    ),
    (
        "data and main on one host, 3 worker hosts",
        [{**INGEST, "name": "ls-app", "roles": {"main": 1, "postgres": 1, "redis": 1}}, workers(3)],
        "the app host",
    ),
]


def topology(groups: list[dict]) -> dict:
    return {"topology": groups, "subnet": SUBNET, "concurrency": 10}


def total_vcpu(groups: list[dict]) -> int:
    return sum(h.vcpu for h in parse_topology(topology(groups)).hosts())


def expected_ceiling(groups: list[dict], scale: float) -> float:
    """Each host's cores over the notes' CPU per execution of its roles (workers share the executions)."""
    hosts = parse_topology(topology(groups)).hosts()
    n_workers = sum(h.roles.workers for h in hosts)
    bounds = []
    for h in hosts:
        r = h.roles
        ms = WORKER_MS * r.workers / n_workers + MAIN_MS * (r.main or r.webhook) + DATA_MS * (r.postgres or r.redis)
        bounds.append(h.vcpu * scale * 1000.0 / ms)
    return min(bounds)


def _role_key(roles, topo_roles) -> str | None:
    """The n8n role a host's CPU (its task runners included) is charged to; main apart when it takes no webhooks."""
    if roles.workers:
        return "worker"
    if roles.webhook:
        return "webhook"
    if roles.main:
        return "main" if not topo_roles["webhook"] else "main-without-webhooks"
    return None


def _count(roles, key: str) -> int:
    return {"worker": roles.workers, "webhook": roles.webhook}.get(key, 1)


def role_demands(groups: list[dict], host_role_ms: dict[str, dict[str, float]], answered: int) -> dict[str, float]:
    """CPU ms per execution of each process kind, all its processes together, from one step's cpuacct figures per
    host; an n8n process's task runner is charged to it."""
    hosts = {h.name: h for h in parse_topology(topology(groups)).hosts()}
    totals = {"webhook": sum(h.roles.webhook for h in hosts.values())}
    out: dict[str, float] = {}
    for name, roles in host_role_ms.items():
        key = _role_key(hosts[name].roles, totals)
        if key is not None:
            n8n = sum(v for r, v in roles.items() if r in ("main", "webhook", "worker", "runner"))
            out[key] = out.get(key, 0.0) + n8n / answered
        for r in ("postgres", "redis", "load_balancer"):
            if r in roles:
                out[r] = roles[r] / answered
    return out


def predict_from_demands(
    groups: list[dict], scale: float, demands: dict[str, float], overhead_cores: float = 0.0
) -> tuple[float, str] | None:
    """Each host's cores over its share of the CPU per execution (a worker host: its workers' share of all the
    workers' CPU); the smallest, and its host. None when a process kind was measured in no other topology."""
    hosts = parse_topology(topology(groups)).hosts()
    totals = {"webhook": sum(h.roles.webhook for h in hosts)}
    per_kind = {"worker": sum(h.roles.workers for h in hosts), "webhook": totals["webhook"]}
    best = None
    for h in hosts:
        ms, key = 0.0, _role_key(h.roles, totals)
        needed = ([key] if key else []) + [r for r in ("postgres", "redis", "load_balancer") if getattr(h.roles, r)]
        if any(k not in demands for k in needed):
            return None
        if key is not None:
            ms += demands[key] * _count(h.roles, key) / per_kind.get(key, 1)
        ms += sum(demands[r] for r in needed[1 if key else 0 :])
        cap = max(h.vcpu * scale - overhead_cores, 0.0) * 1000.0 / ms if ms else float("inf")
        if best is None or cap < best[0]:
            best = (cap, h.name)
    return best


def step_costs(results: Path) -> list[tuple[str, float, bool, dict[str, float], float | None, float | None]]:
    """Per step of the run in `results`: (step, carried /s, kept up, role -> CPU ms per execution, Redis commands
    and Postgres transactions per execution), from the step's counters (cpuacct, INFO commandstats,
    pg_stat_database) over the executions it answered."""
    run = next(p for p in results.iterdir() if (p / "run.json").is_file())
    store = RunStore.open(run)
    records = store.read_requests()
    steps = store.manifest.extra.get("steps", {}).get("cluster", {})
    out = []
    for step in sorted({r.step for r in records}, key=lambda s: step_rate(s) or 0):
        t = step_throughput([r for r in records if r.step == step], step_rate(step))
        c = steps.get(step, {})
        if t is None or not t.answered or not c.get("role_cpu_ms"):
            continue
        per = {role: ms / t.answered for role, ms in c["role_cpu_ms"].items()}
        out.append(
            (
                step,
                t.throughput_per_s,
                not t.saturated,
                per,
                None if c.get("redis_commands") is None else c["redis_commands"] / t.answered,
                None if c.get("postgres_transactions") is None else c["postgres_transactions"] / t.answered,
            )
        )
    return out


def budget_used(results: Path, scale: float, groups: list[dict]) -> dict[str, float]:
    """Each host's share of its budget its whole group used (cpuacct) at the run's highest step."""
    run = next(p for p in results.iterdir() if (p / "run.json").is_file())
    steps = RunStore.open(run).manifest.extra.get("steps", {}).get("cluster", {})
    top = max((s for s in steps if steps[s].get("host_cpu_ms")), key=lambda s: step_rate(s) or 0, default=None)
    if top is None:
        return {}
    vcpu = {h.name: h.vcpu for h in parse_topology(topology(groups)).hosts()}
    return {h: ms / 1000.0 / steps[top]["counted_s"] / (vcpu[h] * scale) for h, ms in steps[top]["host_cpu_ms"].items()}


def busiest_host(results: Path, scale: float, groups: list[dict]) -> str:
    """The host nearest its budget at the highest step (cpuacct of its whole group): what measurably bound."""
    used = budget_used(results, scale, groups)
    if not used:
        return "n/a"
    name = max(used, key=used.get)
    second = max((v for h, v in used.items() if h != name), default=0.0)
    return f"{name} {used[name]:.0%} of its budget (next {second:.0%})"


def speed_probe() -> dict:
    """This machine's speed now (lab/speed.py: CPU ms of a fixed JavaScript workload on n8n's Node.js)."""
    from n8n_sizer.lab.speed import probe
    from n8n_sizer.native.install import install_n8n

    return probe(install_n8n(quiet=True).node_bin)


def steal_pct(results: Path) -> float | None:
    """The machine's mean steal time over the run (% of its CPU, /proc/stat as the sampler read it): the hypervisor
    running someone else on this VM's cores."""
    run = next(p for p in results.iterdir() if (p / "run.json").is_file())
    values = []
    with open(run / "samples.jsonl", encoding="utf-8") as fh:
        for line in fh:
            if '"host_cpu_pct"' in line and '"steal"' in line:
                values.append(json.loads(line)["value"])
    return statistics.mean(values) if values else None


def speed_text(got: dict, pred: dict) -> str:
    """The sitting's speed probe (CPU ms, lower is faster), the factor it put on the prediction, its steal time."""
    steal = got.get("steal_pct")
    if steal is None and "results" in got:
        steal = steal_pct(Path(got["results"]))
    probe = f"{got['speed_ms']:.1f} (x{pred.get('speed_factor', 1.0):.2f})" if got.get("speed_ms") else "n/a"
    return f"{probe}, {'n/a' if steal is None else f'{steal:.1f}%'}"


def loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def demand_rows(results: Path):
    """A lab run's per-role CPU rows (the kernel's counts per step of at least 2/s, and its rest window's idle CPU per
    process), with what its steps answered removed: evidence of this machine's speed, of each process's idle CPU and
    of how an execution's CPU splits between roles, not of a capacity (a lab's steps are several budgeted hosts, not
    one host)."""
    from n8n_sizer.runs.fit_input import load_results

    blank = {
        "answered_per_min": None,
        "executions_per_s": None,
        "errors": None,
        "p50_ms": None,
        "p95_ms": None,
        "p99_ms": None,
    }
    return [
        m.model_copy(update={"results": m.results.model_copy(update=blank)})
        for m in load_results(results)
        if (m.results.demand_executions_per_s or 0.0) >= 2.0 or m.load.kind == "idle"  # and the rest window
    ]


def predict(
    groups: list[dict], scale: float, evidence: list | None = None, usable: float = 1.0, outside_cores: float = 0.0
) -> dict:
    """The advisor's capacity for `groups` with each host its own `vcpu x scale` cores at this machine's speed,
    fitted on the embedded measurements plus `evidence` (the other topologies' per-role rows). A host's cores
    for its roles: its quota x `usable` (the share of a CFS quota a saturated host's processes reach) less
    `outside_cores` (what its group spends outside the roles: the sampler, sshd)."""
    from n8n_sizer.advisor.answer.contract import Roles
    from n8n_sizer.advisor.answer.given import GivenGroup, given_layout
    from n8n_sizer.advisor.answer.lab_points import lab_host
    from n8n_sizer.advisor.engine import build_advisor
    from n8n_sizer.advisor.profiles import profile_for
    from n8n_sizer.advisor.recommend import Request
    from n8n_sizer.cli.advise.given import this_machine
    from n8n_sizer.lab.cpu import plan_for_topology

    topo = parse_topology(topology(groups))
    cpu = plan_for_topology(topo, "000000", cores=scale * total_vcpu(groups))
    record = {"topology": topology(groups), "cpu": cpu.model_dump(mode="json")}
    machine = this_machine()
    advisor = build_advisor(evidence or None)
    given = [
        GivenGroup(
            name=h.name,
            provider="hetzner",
            size=None,
            count=1,
            roles=Roles(**h.roles),
            host=lab_host(h.cores, machine.arch, machine.host_class, usable, outside_cores),
            monthly_eur=None,
            vcpu=h.vcpu,
        )
        for h in lab_host_cores(record)
    ]
    layout = given_layout(given, topo.concurrency, topo.db_pool_size.of("worker"))
    try:
        rec = advisor.evaluate(
            Request(rps=1, profile=profile_for("light", None, None), max_hosts=len(given)), layout, len(given)
        )
    except (ValueError, TypeError) as exc:  # e.g. a host of less than one core, which the advisor cannot state yet
        return {"capacity": None, "bound": f"advisor could not score it: {' '.join(str(exc).split())[:160]}"}
    data = rec.model_dump(mode="json")
    return {
        "capacity": data["capacity_per_s"],
        "bound": bound_text(data.get("bound")),
        "warnings": [w for w in data.get("warnings", []) if "speed is taken" in w],
    }


def run_manifest(results: str):
    run = next(p for p in Path(results).iterdir() if (p / "run.json").is_file())
    return RunStore.open(run).manifest


def embed(rows: list, chosen: list, scale: float, page: str, add: bool = False) -> int:
    """Write the measured topologies to n8n_sizer/data/lab_shape.json (advisor/lab_points.py), replacing its points,
    or with `add` beside the earlier campaigns' points (a campaign of the same scale); their per-role rows go in with
    `scripts/embed_local_rows.py --counted --quiet-machine` (the same run tags, the same campaign class)."""
    group_of = {lab: g for lab, g, _ in chosen}
    measured = [r for r in rows if "results" in r[3]]
    start = min((run_manifest(r[3]["results"]).created_s for r in measured), default=0.0)
    points = []
    for label, _, pred, got, _ in measured:
        manifest = run_manifest(got["results"])
        run_id = manifest.run_id
        topo = parse_topology(topology(group_of[label]))
        cpu = plan_for_topology(topo, "000000", cores=scale * total_vcpu(group_of[label]))
        hosts = lab_host_cores({"topology": topology(group_of[label]), "cpu": cpu.model_dump(mode="json")})
        others = [o for r in rows if r[0] != label and "overhead" in r[3] for o in r[3]["overhead"]]
        points.append(
            {
                "id": f"lab-{run_id[-6:]}",
                "label": label,
                "concurrency": topo.concurrency,
                "worker_pool": topo.db_pool_size.of("worker"),
                "hosts": [{"name": h.name, "roles": h.roles, "cores": h.cores, "vcpu": h.vcpu} for h in hosts],
                "usable": round(pred["usable"], 4),
                "outside_cores": round(statistics.median(others), 4) if others else 0.0,
                "measured_per_s": round(got["measured"], 3),
                "accepted": got["ledger"]["accepted"],
                "lost": len(got["ledger"].get("lost_seqs") or []),
                "row_tag": run_id[-6:],
                "host_class": lab_host_class(start),  # its campaign's, as its rows (scripts/embed_local_rows.py)
                "machine_load_avg": list(got["load"]),
                **({"speed_probe_ms": round(got["speed_ms"], 2)} if got.get("speed_ms") else {}),
                "source": f"{page}, run {run_id}",
            }
        )
    out = Path(__file__).resolve().parent.parent / "n8n_sizer" / "data" / "lab_shape.json"
    if add:
        earlier = json.loads(out.read_text(encoding="utf-8"))
        if abs(earlier["scale"] - scale) > 1e-9:
            print(f"--add: {out} holds a campaign at scale {earlier['scale']:g}, this one is {scale:g}; embed alone")
            return 2
        ids = {p["id"] for p in points}
        points = [p for p in earlier["points"] if p["id"] not in ids] + points
    out.write_text(
        json.dumps(
            {
                "about": "lab topologies measured by benchmarks/lab_shape.py (advisor/lab_points.py)",
                "scale": scale,
                "points": points,
            },
            indent=1,
        )
        + "\n",
        encoding="utf-8",
    )
    print(f"{len(points)} lab topologies into {out}")
    return 0


def predict_all(rows: list, chosen: list, scale: float) -> list:
    """Each measured topology predicted by the advisor refitted on the OTHER topologies' per-role rows (leave one
    topology out: its own run never informs its prediction)."""
    rows_by = {r[0]: demand_rows(Path(r[3]["results"])) for r in rows if "results" in r[3]}
    group_of = {lab: g for lab, g, _ in chosen}
    # the busiest host's share of its quota at each run's top step: how much of a quota saturated n8n reaches
    reached = {
        r[0]: max(budget_used(Path(r[3]["results"]), scale, group_of[r[0]]).values(), default=None)
        for r in rows
        if "results" in r[3]
    }
    # this machine's speed in each sitting (speed_probe, before and after it): the other topologies' rows were
    # measured at theirs, so a prediction is put at its own sitting's speed (CPU-bound budgets: capacity ~ 1/CPU ms)
    speeds = {r[0]: r[3]["speed_ms"] for r in rows if r[3].get("speed_ms")}
    out = []
    for label, expect, _, got, took in rows:
        evidence = [m for other, ms in rows_by.items() if other != label for m in ms]
        shares = [v for other, v in reached.items() if other != label and v is not None]
        outside = [o for r in rows if r[0] != label and "overhead" in r[3] for o in r[3]["overhead"]]
        usable = min(statistics.median(shares), 1.0) if shares else 1.0
        pred = predict(group_of[label], scale, evidence, usable, statistics.median(outside) if outside else 0.0)
        factor = sitting_speed(speeds.get(label), [v for other, v in speeds.items() if other != label])
        if pred["capacity"] is not None:
            pred["capacity"] = {k: v * factor for k, v in pred["capacity"].items()}
        out.append((label, expect, {**pred, "usable": usable, "speed_factor": factor}, got, took))
    return out


def bound_text(bound) -> str:
    """The advisor's binding bound as one line (an earlier summary.json kept it as its dict)."""
    if not isinstance(bound, dict):
        return str(bound)
    return f"{bound.get('name')} {bound.get('host') or ''}: {bound.get('why', '')}".replace(" :", ":")


def measure(
    label: str, groups: list[dict], scale: float, expected: float, step_s: float, folder: Path, index: int
) -> dict:
    out = folder / f"lab-{index}.json"
    cores = scale * total_vcpu(groups)
    speed_before = speed_probe()
    state = lab_up(parse_topology(topology(groups)), 2, out, generator_prefix="ls-gen-", cpu_cores=cores)
    rates = ",".join(f"{max(0.5, round(expected * f, 1)):g}" for f in LADDER)
    results = folder / f"results-{index}"
    load_before = loadavg()
    try:
        res = subprocess.run(
            [
                *CLI,
                "bench",
                "--inventory",
                str(out),
                "--rates",
                rates,
                "--step-seconds",
                f"{step_s:g}",
                "--warmup",
                "10",
                "--drain-seconds",
                "180",
                "--rest-seconds",
                f"{REST_S:g}",
                "--out",
                str(results),
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=3600,
        )
    finally:
        load_after = loadavg()
        remove_lab(state)
    speed = {"before": speed_before, "after": speed_probe()}
    if res.returncode != 0:
        return {"error": res.stderr.strip()[-400:], "load": (load_before, load_after), "speed": speed}
    summary = json.loads(res.stdout)
    store = RunStore.open(summary["run_id"], results)
    records = store.read_requests()
    steps = store.manifest.extra.get("steps", {}).get("cluster", {})
    carried, cpu, demands, overhead = [], {}, [], []
    for step in sorted({r.step for r in records}, key=lambda s: step_rate(s) or 0):
        t = step_throughput([r for r in records if r.step == step], step_rate(step))
        if t is not None:
            carried.append((step_rate(step), t.throughput_per_s, not t.saturated))
        counted = steps.get(step, {})
        if counted.get("host_role_cpu_ms") and t is not None and t.answered:
            cpu[step] = {h: sum(r.values()) / t.answered for h, r in counted["host_role_cpu_ms"].items()}
            if not t.saturated:
                demands.append(role_demands(groups, counted["host_role_cpu_ms"], t.answered))
                for h, ms in (counted.get("host_cpu_ms") or {}).items():  # the budget's part no role used
                    rest = ms - sum(counted["host_role_cpu_ms"].get(h, {}).values())
                    overhead.append(rest / 1000.0 / max(counted.get("counted_s") or 0.0, 1.0))
    ledger = summary["ledgers"]["cluster"]
    rest = store.manifest.hosts.get("cluster", {}).get("rest") or {}
    return {
        "rest": rest,
        "carried": carried,
        "measured": max(c for _, c, _ in carried),
        "ledger": ledger,
        "cpu_ms": cpu,
        "top_kept_up": bool(carried) and carried[-1][2],
        "demands": demands,
        "overhead": overhead,
        "load": (load_before, load_after),
        "speed": speed,
        "speed_ms": statistics.median([speed["before"]["ms"], speed["after"]["ms"]]),
        "steal_pct": steal_pct(results),
        "results": str(results),
    }


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true", help="the first 3 topologies")
    p.add_argument("--step-seconds", type=float, default=20.0)
    p.add_argument(
        "--scale",
        type=float,
        default=None,
        help="cores here per vCPU (default: the largest topology fills "
        "1.5 cores, 0.125; the runs in docs/lab.md used 0.1071)",
    )
    p.add_argument(
        "--from",
        dest="again",
        type=Path,
        default=None,
        help="print the tables again from an earlier run's folder (its summary.json and results), no lab",
    )
    p.add_argument(
        "--embed",
        default=None,
        metavar="PAGE",
        help="with --from: write its topologies to n8n_sizer/data/lab_shape.json, PAGE their provenance",
    )
    p.add_argument("--add", action="store_true", help="with --embed: keep the earlier campaigns' points")
    a = p.parse_args()
    console = Console(width=200)  # the table is read from a log as often as from a terminal
    if a.again is not None:
        saved = json.loads((a.again / "summary.json").read_text())
        by_label = {label: (groups, expect) for label, groups, expect in TOPOLOGIES}
        chosen = [(r["topology"], *by_label[r["topology"]]) for r in saved]
        rows = [(r["topology"], by_label[r["topology"]][1], r["predicted"], r["measured"], None) for r in saved]
        scale = a.scale or saved[0].get("scale") or default_scale()
        rows = predict_all(rows, chosen, scale)
        if a.embed:
            return embed(rows, chosen, scale, a.embed, a.add)
        return report(rows, chosen, scale, console, a.again)
    chosen = TOPOLOGIES[:3] if a.quick else TOPOLOGIES
    scale = a.scale or default_scale()
    folder = Path(tempfile.mkdtemp(prefix="n8n-sizer-lab-shape-"))
    folder.chmod(0o755)  # Debian's postgres user passes through it to the data host's folder
    console.print(
        f"scale {scale:.4g} cores per vCPU (a 2-vCPU host has {2 * scale:.3g} cores); {len(chosen)} "
        f"topologies; folder {folder}"
    )
    rows = []
    with Progress(console=console, transient=False) as progress:
        task = progress.add_task("topologies", total=len(chosen))
        for i, (label, groups, expect) in enumerate(chosen, start=1):
            progress.update(task, description=f"{label}: lab up, deploy, bench")
            started = time.monotonic()
            got = measure(label, groups, scale, expected_ceiling(groups, scale), a.step_seconds, folder, i)
            rows.append((label, expect, None, got, time.monotonic() - started))
            progress.advance(task)
            if "error" in got:
                console.print(f"[red]{label}: bench failed[/red]: {got['error']}")
            else:
                console.print(
                    f"{label}: measured {got['measured']:.2f}/s "
                    f"(load average {got['load'][0]:.1f} -> {got['load'][1]:.1f}); steps "
                    + ", ".join(f"{o:g}->{c:.2f}{'' if k else '!'}" for o, c, k in got["carried"])
                )
    rows = predict_all(rows, chosen, scale)
    (folder / "summary.json").write_text(
        json.dumps(
            [{"topology": r[0], "predicted": r[2], "measured": r[3], "scale": scale} for r in rows],
            indent=1,
            default=str,
        )
    )
    return report(rows, chosen, scale, console, folder)


def default_scale() -> float:
    return USABLE_CORES / max(total_vcpu(g) for _, g, _ in TOPOLOGIES)


def report(rows: list, chosen: list, scale: float, console: Console, folder: Path) -> int:
    """The tables and the last line, from the measured rows (a run just made, or `--from` an earlier one)."""
    table = Table(title=f"lab topologies at {scale:.4g} cores per vCPU (predicted vs measured)")
    for col in (
        "topology",
        "should bind",
        "predicted /s (90%)",
        "bound (advisor)",
        "measured /s",
        "error",
        "lost",
        "load avg",
        "speed ms (x pred.), steal",
        "bound (measured, top step)",
        "CPU ms/exec per host (cpuacct, top step)",
    ):
        table.add_column(col)
    # Leave one out: each topology from the per-process CPU the kernel counted in the OTHER topologies' runs, at the
    # highest rate each of them kept up with (a lower step's CPU per execution carries more of the idle share).
    loo_errors, loo = [], {}
    for label, _expect, _pred, got, _took in rows:
        if "error" in got:
            continue
        pooled: dict[str, list[float]] = {}
        rest: list[float] = []
        for other in rows:
            if other[0] != label and "error" not in other[3]:
                rest += other[3]["overhead"]
                for d in other[3]["demands"][-1:]:  # its highest kept-up step: nearest its ceiling
                    for k, v in d.items():
                        pooled.setdefault(k, []).append(v)
        groups = next(g for lab, g, _ in chosen if lab == label)
        guess = predict_from_demands(
            groups,
            scale,
            {k: statistics.median(v) for k, v in pooled.items()},
            statistics.median(rest) if rest else 0.0,
        )
        if guess is None:
            console.print(
                f"{label}: from the other topologies' cpuacct figures: a process kind of it was measured "
                "in none of them"
            )
            continue
        err = 100.0 * (guess[0] - got["measured"]) / got["measured"]
        loo_errors.append(abs(err))
        loo[label] = guess[0]
        console.print(
            f"{label}: from the other topologies' cpuacct figures {guess[0]:.2f}/s, bound by host "
            f"{guess[1]} ({err:+.1f}%)"
        )
    if loo_errors:
        overheads = [o for r in rows if "error" not in r[3] for o in r[3]["overhead"]]
        if overheads:
            console.print(
                f"each host's budget outside its roles (sampler, sshd): median {statistics.median(overheads):.3f} cores"
            )
        console.print(
            f"from the kernel's per-process CPU of the other topologies: median |error| "
            f"{statistics.median(loo_errors):.1f}%, max |error| {max(loo_errors):.1f}%"
        )
    errors, pairs = [], []
    advised = all(r[2]["capacity"] is not None for r in rows if "error" not in r[3])
    for label, expect, pred, got, _took in rows:
        cap = pred["capacity"] or {"mid": math.nan, "low": math.nan, "high": math.nan}
        if "error" in got:
            table.add_row(
                label, expect, f"{cap['mid']:.2f}", bound_text(pred["bound"]), "failed", "", "", "", "", "", ""
            )
            continue
        mid = cap["mid"] if advised else loo.get(label)
        err = math.nan if mid is None else 100.0 * (mid - got["measured"]) / got["measured"]
        if mid is not None:
            errors.append(abs(err))
            pairs.append((mid, got["measured"]))
        lost = got["ledger"].get("lost_seqs")
        top = max(got["cpu_ms"], key=lambda s: step_rate(s) or 0) if got["cpu_ms"] else None
        per_host = (
            ", ".join(f"{h.removeprefix('ls-')} {ms:.0f}" for h, ms in got["cpu_ms"][top].items()) if top else "n/a"
        )
        table.add_row(
            label,
            expect,
            f"{cap['mid']:.2f} ({cap['low']:.2f}-{cap['high']:.2f})",
            bound_text(pred["bound"]),
            f"{'>=' if got['top_kept_up'] else ''}{got['measured']:.2f}",
            f"{err:+.1f}%",
            f"{'n/a' if lost is None else len(lost)} of {got['ledger']['accepted']}",
            f"{got['load'][0]:.1f}->{got['load'][1]:.1f}",
            speed_text(got, pred),
            busiest_host(Path(got["results"]), scale, next(g for lab, g, _ in chosen if lab == label)),
            per_host,
        )
    console.print(table)
    console.print(
        "per execution, from each step's counters (kept-up steps; CPU ms per role, Redis commands, "
        "Postgres transactions):"
    )
    for label, _expect, _pred, got, _took in rows:
        for step, carried, kept, per, redis, pg in step_costs(Path(got["results"])) if "results" in got else ():
            if kept:
                console.print(
                    f"  {label}, {step} ({carried:.2f}/s): "
                    + ", ".join(f"{r} {ms:.1f}" for r, ms in sorted(per.items(), key=lambda kv: -kv[1]))
                    + f"; Redis {redis if redis is None else round(redis, 1)}, Postgres {pg if pg is None else round(pg, 1)}"
                )
    rested = [(label, got["rest"]) for label, _, _, got, _ in rows if (got.get("rest") or {}).get("host_role_cpu_ms")]
    if rested:
        console.print(f"with no load ({REST_S:g} s after the warm-up; cores per host's role, the kernel's counts):")
    for label, rest in rested:
        secs = max(rest.get("counted_s") or 0.0, 1e-9)
        console.print(
            f"  {label}: "
            + "; ".join(
                f"{h} " + ", ".join(f"{r} {ms / 1000.0 / secs:.4f}" for r, ms in sorted(roles.items()))
                for h, roles in sorted(rest["host_role_cpu_ms"].items())
            )
        )
    if not errors:
        print("0 topologies: nothing measured")
        return 1
    if not advised:
        print(
            "the advisor could not score every topology at this scale (see its bound column); the last line is the "
            "leave-one-out from the kernel's per-process CPU of the other topologies"
        )
    order = all((p1 - p2) * (m1 - m2) >= 0 for i, (p1, m1) in enumerate(pairs) for p2, m2 in pairs[i + 1 :])
    print(
        f"{len(errors)} topologies: median |error| {statistics.median(errors):.1f}%, max |error| {max(errors):.1f}%, "
        f"order right: {'yes' if order else 'no'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
