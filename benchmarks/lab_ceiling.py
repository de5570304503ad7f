"""Prints the lab's ingest ceiling with 1 and with 2 webhook processors, next to what `advise --topology FILE
--on-this-machine --results DIR` predicts for the same topology with every lab host on this machine's cores,
refitted on the other topology's run and on both. Needs root, the shared n8n install, postgresql, redis-server,
caddy.

    .venv/bin/python benchmarks/lab_ceiling.py [--rates 4,8,12,16,20] [--step-seconds 20]

For each count: `lab up` (data; ingest with main, N webhook processors and Caddy; 2 worker hosts; 2 generators,
on 10.213.7.0/24 with `bl-` names), `bench --inventory` over a rate ladder through the CLI (which deploys the
cluster), then `lab down`, whatever happened. The ceiling is the highest rate a step carried (answered per
second over the span its answers needed, `runs.stats.step_throughput`); a step that did not keep up says so.
Every lab host shares this machine's cores, so the absolute figures are this machine's, not a fleet's.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from n8n_sizer.bundle.topology import parse_topology
from n8n_sizer.lab.netns import lab_up, remove_lab
from n8n_sizer.report.cluster import cpu_by_host_role
from n8n_sizer.runs.stats import step_rate, step_throughput, step_windows
from n8n_sizer.runs.store import RunStore

CLI = [sys.executable, "-c", "from n8n_sizer.cli import main; main()"]


def topology(webhooks: int) -> dict:
    return {
        "topology": [
            {"name": "bl-data", "provider": "hetzner", "size": "cx33", "roles": {"postgres": 1, "redis": 1}},
            {
                "name": "bl-ingest",
                "provider": "hetzner",
                "size": "cx33",
                "roles": {"main": 1, "webhook": webhooks, "load_balancer": 1},
            },
            {"name": "bl-worker", "provider": "hetzner", "size": "cx33", "count": 2, "roles": {"workers": 1}},
        ],
        "subnet": "10.213.7.0/24",
    }


def ladder(webhooks: int, rates: str, step_s: float, folder: Path) -> tuple[list[tuple], dict, Path]:
    """[(offered, carried per s, kept up, {role: CPU cores over the step, all hosts}, machine busy cores)] per
    step, the ledger, and the results folder."""
    out = folder / f"lab-{webhooks}.json"
    state = lab_up(
        parse_topology(topology(webhooks)), 2, out, generator_prefix="bl-gen-", cpu_budget=False
    )  # what shared cores carry; lab_shape.py gives each host its own
    results = folder / f"results-{webhooks}"
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
                "20",
                "--drain-seconds",
                "180",
                "--out",
                str(results),
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=3600,
        )
    finally:
        remove_lab(state)
    if res.returncode != 0:
        raise SystemExit(f"bench with {webhooks} webhook processor(s) failed: {res.stderr.strip()[-500:]}")
    summary = json.loads(res.stdout)
    store = RunStore.open(summary["run_id"], results)
    records, samples = store.read_requests(), store.read_samples()
    rows = []
    for step, (start, end) in step_windows(records).items():
        rate = step_rate(step)
        carried = step_throughput([r for r in records if r.step == step], rate) if rate else None
        roles: dict[str, float] = {}
        for per_role in cpu_by_host_role(samples, start, end).values():
            for role, cores in per_role.items():
                roles[role] = roles.get(role, 0.0) + cores
        if carried is not None:
            rows.append(
                (rate, carried.throughput_per_s, not carried.saturated, roles, machine_busy(samples, start, end))
            )
    return rows, summary["ledgers"]["cluster"], results


def merged_results(results: list[Path], folder: Path, name: str) -> Path:
    """One folder holding the runs of `results` (what `advise --results` reads), secrets left out."""
    merged = folder / name
    merged.mkdir(exist_ok=True)
    for r in results:
        for run in r.iterdir():
            if not (merged / run.name).exists():
                shutil.copytree(run, merged / run.name, ignore=shutil.ignore_patterns("secrets"))
    return merged


def predict(webhooks: int, results: Path, folder: Path) -> dict:
    """`advise --topology <the lab's topology> --on-this-machine --results RESULTS`: the capacity the advisor
    predicts for this topology with every host on this machine's cores, refitted on those runs."""
    topo = folder / f"topology-{webhooks}.json"
    topo.write_text(json.dumps(topology(webhooks)))
    res = subprocess.run(
        [
            *CLI,
            "advise",
            "--rps",
            "1",
            "--topology",
            str(topo),
            "--on-this-machine",
            "--results",
            str(results),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if res.returncode != 0:
        return {"error": res.stderr.strip()[-300:]}
    data = json.loads(res.stdout)
    return {"capacity_per_s": data["capacity_per_s"], "bound": data["bound"]}


def machine_busy(samples, start: float, end: float) -> float | None:
    """Mean busy cores of the whole machine over a window (the lab's hosts all read one /proc/stat)."""
    from collections import defaultdict

    from n8n_sizer.runs.stats import within

    per_time: dict[tuple[str, float], float] = defaultdict(float)
    for s in within(samples, start, end):
        if s.metric == "host_cpu_cores" and s.labels.get("state") not in ("idle", "iowait"):
            per_time[(s.labels.get("host", "?"), s.time_s)] += s.value
    hosts = sorted({h for h, _ in per_time})
    if not hosts:
        return None
    values = [v for (h, _), v in per_time.items() if h == hosts[0]]
    return sum(values) / len(values)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--rates", default="4,8,12,16,20")
    p.add_argument("--step-seconds", type=float, default=20.0)
    a = p.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="n8n-sizer-lab-ceiling-"))
    folder.chmod(0o755)  # Debian's postgres user passes through it to the data host's folder
    try:
        ceilings, results = {}, []
        for webhooks in (1, 2):
            rows, ledger, res = ladder(webhooks, a.rates, a.step_seconds, folder)
            results.append(res)
            unmatched = "n/a" if ledger["lost_seqs"] is None else len(ledger["lost_seqs"])
            print(
                f"{webhooks} webhook processor(s): ledger fired {ledger['fired']}, accepted {ledger['accepted']}, "
                f"accepted minus successful executions {ledger['accepted_then_lost']}, accepted without a stored "
                f"execution {unmatched}"
            )
            for offered, carried, kept, roles, busy_all in rows:
                busy = ", ".join(f"{role} {cores:.2f}" for role, cores in sorted(roles.items(), key=lambda kv: -kv[1]))
                machine = "n/a" if busy_all is None else f"{busy_all:.2f}"
                print(
                    f"  offered {offered:5.1f}/s  carried {carried:5.2f}/s  {'kept up' if kept else 'did not keep up':15}"
                    f"  CPU cores: {busy} (n8n stack {sum(roles.values()):.2f}, whole machine {machine})"
                )
            ceilings[webhooks] = max(row[1] for row in rows)
            print(f"  ceiling {ceilings[webhooks]:.2f}/s")
        print(f"ratio 2/1 webhook processors: {ceilings[2] / ceilings[1]:.2f}")
        # The advisor's prediction for each topology on this machine: refitted on the other topology's run
        # (out of sample) and on both runs.
        for webhooks, other in ((1, 2), (2, 1)):
            fits = {
                "the other run": merged_results([results[other - 1]], folder, f"fit-{other}"),
                "both runs": merged_results(results, folder, "fit-both"),
            }
            for label, fit_on in fits.items():
                got = predict(webhooks, fit_on, folder)
                if "error" in got:
                    print(f"advise for {webhooks} webhook processor(s), refitted on {label}: failed: {got['error']}")
                    continue
                cap, b = got["capacity_per_s"], got["bound"]
                err = 100.0 * (cap["mid"] - ceilings[webhooks]) / ceilings[webhooks]
                print(
                    f"advise --topology (lab, {webhooks} webhook processor(s)) --on-this-machine, refitted on {label}: "
                    f"{cap['mid']:.2f}/s ({cap['low']:.2f}-{cap['high']:.2f}), bound by {b['name']} ({b['why']}); "
                    f"measured {ceilings[webhooks]:.2f}/s: {err:+.1f}%"
                )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
