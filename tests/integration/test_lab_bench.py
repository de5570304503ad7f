"""`bench --inventory lab.json` on a real lab: the cluster deployed by the module's fixture (reused, not deployed
again), loaded through Caddy at 4 and 8 req/s from two generator namespaces, every accepted request matched to
a stored execution, telemetry from every host, and a report with CPU per host and role.

Real n8n 2.41.1 (the shared install), Debian's Postgres, Redis, Caddy and sshd; only the lab's own subnet
(10.213.7.0/24, on a bridge the lab makes) is contacted. Steps are short (15 s): this proves the path; the
figures come from benchmarks/lab_ceiling.py.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from tests.integration.lab_cluster_fixture import GENERATORS, HOSTS, TOPOLOGY, deployed_lab  # noqa: F401 (the fixture)
from tests.integration.test_lab import CLI, pytestmark

# the lab's marks (root, sshd) with this module's own timeout: a deploy and two benches take minutes
pytestmark = [m for m in pytestmark if m.name != "timeout"] + [pytest.mark.timeout(900)]


def _cli(*args: str, timeout_s: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout_s)


def test_bench_on_the_lab_loses_nothing_and_sees_every_host(deployed_lab):  # noqa: F811
    lab = deployed_lab
    results = lab.workdir / "results"
    res = _cli(
        "bench",
        "--inventory",
        str(lab.inventory),
        "--rates",
        "4,8",
        "--step-seconds",
        "15",
        "--warmup",
        "8",
        "--drain-seconds",
        "90",
        "--out",
        str(results),
        "--json",
    )
    assert res.returncode == 0, res.stderr[-2000:]
    summary = json.loads(res.stdout)
    ledger = summary["ledgers"]["cluster"]
    assert ledger["fired"] == 4 * 15 + 8 * 15 and ledger["accepted"] == ledger["fired"], ledger
    assert ledger["accepted_then_lost"] == 0 and ledger["lost_seqs"] == [], ledger
    manifest = json.loads((results / summary["run_id"] / "run.json").read_text())
    info = manifest["hosts"]["cluster"]
    assert info["lab_reused"] is True and info["lab_url"] == lab.cluster.url  # the fixture's deploy, not a second
    assert sorted(info["generators"]) == GENERATORS

    folder = results / summary["run_id"]
    requests = [json.loads(line) for line in (folder / "requests.jsonl").read_text().splitlines()]
    assert Counter((r["step"], r["generator"]) for r in requests) == {
        ("rate-4", "bl-gen-1"): 30,
        ("rate-4", "bl-gen-2"): 30,
        ("rate-8", "bl-gen-1"): 60,
        ("rate-8", "bl-gen-2"): 60,
    }
    assert len({r["seq"] for r in requests}) == len(requests)

    samples = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]
    cpu = [s for s in samples if s["metric"] == "process_cpu_cores"]
    assert {s["labels"]["host"] for s in cpu} == set(HOSTS)
    roles = {(s["labels"]["host"], s["labels"]["role"]) for s in cpu}
    assert {
        ("bl-data", "postgres"),
        ("bl-data", "redis"),
        ("bl-ingest", "main"),
        ("bl-ingest", "webhook"),
        ("bl-ingest", "load_balancer"),
        ("bl-worker-1", "worker"),
        ("bl-worker-2", "worker"),
    } <= roles
    assert any(s["metric"] == "bull_jobs" and s["labels"]["host"] == "bl-data" for s in samples)
    errors = [s for s in samples if s["metric"] == "probe_error"]
    assert not errors, errors[:3]

    report = lab.workdir / "report"
    res = _cli("report", str(folder), "--out", str(report), "--no-plots", timeout_s=300)
    assert res.returncode == 0, res.stderr[-2000:]
    text = (report / "report.md").read_text()
    table = text.split("### CPU per host and role", 1)[1].split("###", 1)[0]
    for host in HOSTS:
        assert f"| cluster | rate-8 | {host} |" in table, table
    assert "### CPU per execution by role" in text and '503 "Database is not ready!" sustained for 1 min' in text

    # the advisor, refitted on this run, scores the lab's own topology with every host on this machine's cores
    topology = lab.workdir / "topology.json"
    topology.write_text(json.dumps(TOPOLOGY))
    res = _cli(
        "advise",
        "--rps",
        "8",
        "--topology",
        str(topology),
        "--on-this-machine",
        "--results",
        str(results),
        "--json",
        timeout_s=300,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    advice = json.loads(res.stdout)
    assert [(g["name"], g["roles"]["webhook"], g["roles"]["workers"]) for g in advice["topology"]] == [
        ("this-machine", 2, 2)
    ]
    assert advice["request"]["topology"] == {"hosts": len(HOSTS), "machine_vcpu": os.cpu_count()}
    # the run's per-role rows come from this machine's CPU, so this machine is the host every other is scored
    # against (its speed is 1 by definition), not seed 002's
    assert not [w for w in advice["warnings"] if "is in the fit" in w], advice["warnings"]
    reference = advice["changes"]["reference_host"]
    assert reference["after"] != reference["before"] and reference["after"].startswith("user:"), reference
    assert advice["capacity_per_s"]["low"] < advice["capacity_per_s"]["mid"] < advice["capacity_per_s"]["high"]


def test_a_second_bench_reuses_the_cluster_and_sets_nothing_up_twice(deployed_lab):  # noqa: F811
    lab = deployed_lab
    results = lab.workdir / "results-2"
    res = _cli(
        "bench",
        "--inventory",
        str(lab.inventory),
        "--rates",
        "2",
        "--step-seconds",
        "5",
        "--warmup",
        "4",
        "--out",
        str(results),
        "--json",
    )
    assert res.returncode == 0, res.stderr[-2000:]
    summary = json.loads(res.stdout)
    assert summary["ledgers"]["cluster"]["accepted_then_lost"] == 0
    info = json.loads((results / summary["run_id"] / "run.json").read_text())["hosts"]["cluster"]
    assert info["lab_reused"] is True
    # every process the fixture's deploy started is the one still serving (same PIDs, none started again)
    record = json.loads((Path(lab.state.folder) / "hosts" / "cluster.json").read_text())
    assert record["processes"] == json.loads(lab.cluster.model_dump_json())["processes"]
