"""`advise` through its real entry points: output, JSON shape, bad input, --validate, --results."""

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest

from n8n_sizer.runs.records import RunManifest, Sample
from n8n_sizer.runs.store import RunStore

ADVISE = [sys.executable, "-c", "from n8n_sizer.cli import advise_main; advise_main()"]
SIZER = [sys.executable, "-c", "from n8n_sizer.cli import main; main()"]


def run(args, base=ADVISE):
    return subprocess.run(base + args, capture_output=True, text=True, timeout=120)


def test_human_output_echoes_inputs_and_names_every_setting():
    p = run(["--rps", "20", "--vcpu", "4", "--workload", "code-heavy", "--max-hosts", "1"])
    assert p.returncode == 0, p.stderr
    for text in (
        "20 req/s, 4 vCPU x86, workload code-heavy",
        "worker --concurrency",
        "N8N_RUNNERS_MAX_CONCURRENCY",
        "DB_POSTGRESDB_POOL_SIZE",
        "appendonly",
        "noeviction",
        "90% interval",
        "evidence:",
        "next: n8n-sizer render",
    ):
        assert text in p.stdout, text


def test_n8n_sizer_advise_is_the_same_command():
    a = run(["--rps", "5", "--vcpu", "4", "--json"])
    b = run(["advise", "--rps", "5", "--vcpu", "4", "--json"], base=SIZER)
    assert a.returncode == b.returncode == 0
    assert json.loads(a.stdout) == json.loads(b.stdout)


def test_json_shape():
    p = run(["--rps", "40", "--vcpu", "4", "--max-hosts", "1", "--json"])
    data = json.loads(p.stdout)
    for key in (
        "mode",
        "workers",
        "concurrency",
        "runner_concurrency",
        "production_limit",
        "db_pool_size",
        "postgres_connections",
        "capacity_per_s",
        "headroom",
        "feasible",
        "server",
        "warnings",
        "evidence",
    ):
        assert key in data, key
    assert set(data["capacity_per_s"]) == {"low", "mid", "high"}
    assert {"provider", "size", "vcpu", "monthly_eur"} <= set(data["server"])
    assert data["feasible"] is False and data["evidence"]


@pytest.mark.parametrize(
    "args, names",
    [
        (["--rps", "0"], "--rps"),
        (["--rps", "-3"], "--rps"),
        (["--rps", "5", "--vcpu", "0"], "--vcpu"),
        (["--rps", "5", "--workload", "heavy"], "light, code-heavy"),
        (["--rps", "5", "--provider", "aws"], "hetzner, gcp"),
        (["--rps", "5", "--arch", "risc"], "x86, arm"),
        (["--rps", "abc"], "--rps"),
        ([], "--rps"),
        (["--rps", "5", "--results", "/nonexistent/results"], "--results"),
        (["--rps", "5", "--max-hosts", "0"], "--max-hosts"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, names):
    p = run(args)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and names in lines[0] and "Traceback" not in p.stderr


def test_results_folder_without_runs_is_a_clear_error(tmp_path):
    p = run(["--rps", "5", "--results", str(tmp_path)])
    assert p.returncode == 2 and "no bench runs" in p.stderr and "n8n-sizer bench" in p.stderr


@pytest.fixture(scope="module")
def validation(advise_validate) -> dict:
    """`advise --validate --json` through its entry point, its fit shared with the other --validate tests
    (tests/unit/conftest.py)."""
    code, out, err = advise_validate["json"]
    assert code == 0, err
    return json.loads(out)


def test_validate_json_reports_leave_one_out(validation):
    data = validation
    assert data["median_abs_pct_error"] <= 10 and data["max_abs_pct_error"] <= 25
    assert len(data["points"]) >= 15 and all("error_pct" in pt for pt in data["points"])
    assert any("latency" in e["reason"] for e in data["excluded"])
    assert any("other work shared the machine" in e["reason"] for e in data["excluded"])
    demand = data["demand_rows"]
    assert {r["role"] for r in demand["rows"]} >= {
        "main",
        "webhook",
        "worker",
        "runner",
        "postgres",
        "redis",
        "load_balancer",
    }
    lab = data["lab_shape"]
    assert len(lab["points"]) >= 5 and all(p["lost"] == 0 and p["accepted"] > 0 for p in lab["points"])
    assert all(math.isfinite(p["error_pct"]) for p in lab["points"]) and lab["order_right"] in (True, False)


def test_validate_per_role_rows_hold_their_median(validation):
    demand = validation["demand_rows"]
    assert len(demand["rows"]) >= 150
    # 15 (11.3% now): one class per campaign; two campaigns in one class had moved it to 15.3%
    assert demand["median_abs_pct_error"] <= 15


@pytest.mark.xfail(
    strict=True,
    reason="issue 36's targets, not all met yet: per-role rows max (idle rows of a rest window its campaign measured "
    "alone), lab topologies max (the 06:47 campaign's 4 worker hosts carried 13.6/s where its other topologies' rows "
    "give 8.0/s; data and main on one host carried 7.0/s where the sum of its roles gives 4.7/s) "
    "(docs/advise-topology.md#validation-advise---validate-embedded-data)",
)
def test_validate_meets_the_targets_it_prints(validation):
    t = validation["targets"]
    assert validation["median_abs_pct_error"] <= t["throughput"][0]
    assert validation["max_abs_pct_error"] <= t["throughput"][1]
    assert validation["interval_coverage"] >= t["coverage"]
    demand, lab = validation["demand_rows"], validation["lab_shape"]
    assert demand["median_abs_pct_error"] <= t["demand"][0] and demand["max_abs_pct_error"] <= t["demand"][1]
    assert lab["median_abs_pct_error"] <= t["lab"][0] and lab["max_abs_pct_error"] <= t["lab"][1]
    assert lab["order_right"]


def test_validate_streams_a_line_per_held_out_point_and_quick_leaves_the_steps_out(advise_validate):
    code, out, err = advise_validate["text"]
    assert code == 0, err
    lines = out.splitlines()
    first = lines.index("leave-one-out: each capacity point predicted by a fit without it")
    assert lines[first + 1].strip().startswith(("notes-", "s00"))  # the first point's line follows the header
    assert any(line.startswith("throughput rows: median |error|") for line in lines)
    assert any(line.startswith("per-role demand rows:") for line in lines)
    code, out, err = _advise_in_process_quick()
    assert code == 0, err
    assert "per-role demand rows:" not in out and "--quick: the per-role steps were not held out" in out
    assert "lab topologies:" in out or "lab topologies (each host" in out


def _advise_in_process_quick():
    from tests.unit.conftest import _advise_in_process

    return _advise_in_process(["--validate", "--quick"])


def _write_run(out: Path, answered_per_min: float, workflow: str = "light") -> None:
    """A finished bench run as `n8n-sizer bench` writes it: a light workflow saturated on a 2-vCPU host."""
    manifest = RunManifest(
        run_id="20261130T000000Z-abc123",
        created_s=time.time(),
        workflow=workflow,
        hosts={
            "local": {
                "setup": {"mode": "regular", "workers": 0, "db": "postgres"},
                "facts": {"vcpu": 2, "cpu_model": "Test CPU", "arch": "x86_64", "ram_mib": 4096},
                "n8n_version": "2.41.1",
            }
        },
    )
    store = RunStore.create(out, manifest)
    for step, rate in (("rate-40", 40.0), ("rate-60", 60.0)):
        labels = {"target": "local", "step": step, "source": "load"}
        store.append_samples(
            [
                Sample(metric="offered_rate", value=rate, unit="req/s", labels=labels, time_s=1.0),
                Sample(metric="answered_per_min", value=answered_per_min, unit="req/min", labels=labels, time_s=1.0),
                Sample(metric="step_duration", value=60.0, unit="s", labels=labels, time_s=1.0),
                Sample(metric="errors", value=0, unit="count", labels={**labels, "class": "timeout"}, time_s=1.0),
                Sample(metric="errors", value=500, unit="count", labels={**labels, "class": "dropped"}, time_s=1.0),
            ]
        )
    store.close()


def test_results_refit_makes_the_users_host_the_reference_and_says_what_changed(tmp_path):
    _write_run(tmp_path, answered_per_min=1800.0)  # 30/s on 2 vCPU: twice seed 002's CX23
    p = run(["--rps", "20", "--vcpu", "2", "--results", str(tmp_path), "--json"])
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    changes = data["changes"]
    assert changes["reference_host"]["after"] == "user:Test CPU"
    light = changes["params"]["overhead:light"]
    assert light["after"] < 0.8 * light["before"]  # the user's host does the light workflow in less CPU
    assert 24 <= data["capacity_per_s"]["mid"] <= 36
    human = run(["--rps", "20", "--vcpu", "2", "--results", str(tmp_path)])
    assert "what your results changed" in human.stdout and "overhead:light" in human.stdout


def test_results_of_your_own_workflow_are_advised_on_its_own_demand(tmp_path):
    _write_run(tmp_path, answered_per_min=600.0, workflow="/home/me/orders.json")
    p = run(["--rps", "5", "--vcpu", "2", "--workload", "orders", "--results", str(tmp_path), "--json"])
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["request"]["workload"] == "orders"
    assert "overhead:orders" in data["changes"]["params"]
    assert 7 <= data["capacity_per_s"]["mid"] <= 13  # 10/s measured on this 2-vCPU host
    p = run(["--rps", "5", "--workload", "invoices", "--results", str(tmp_path)])
    assert p.returncode == 2 and "light, code-heavy" in p.stderr


CONTRACT_KEYS = {
    "topology",
    "webhook_processors",
    "workers",
    "concurrency",
    "concurrency_per_vcpu",
    "db_pool_size",
    "postgres_connections",
    "max_connections",
    "monthly_eur",
    "capacity_per_s",
    "feasible",
    "bound",
    "render_command",
}


@pytest.mark.parametrize("rps", ["200", "400"])
def test_json_topology_contract_for_200_and_400_per_s(rps):
    p = run(["--rps", rps, "--json"])
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert CONTRACT_KEYS <= set(data)
    assert data["feasible"] and data["webhook_processors"] >= 1 and data["workers"] >= 2
    assert data["postgres_connections"] <= data["max_connections"] and data["monthly_eur"] > 0
    for g in data["topology"]:
        assert set(g) >= {"name", "provider", "size", "vcpu", "count", "roles"}
        assert set(g["roles"]) == {"main", "webhook", "workers", "postgres", "redis", "load_balancer"}
    assert set(data["db_pool_size"]) == {"main", "webhook", "worker"}
    assert set(data["bound"]) >= {"name", "role", "host"}
    assert (
        data["render_command"]
        == "n8n-sizer render --topology advice.json --out cluster/ --public-url http://n8n.example.com:5678/"
    )


def test_human_topology_output_names_hosts_roles_and_the_render_command():
    p = run(["--rps", "200"])
    assert p.returncode == 0, p.stderr
    for text in (
        "topology (process counts per host):",
        "webhook",
        "load_balancer 1",
        "EUR/month",
        "concurrency per vCPU",
        "render --topology advice.json",
        "Postgres transactions/s",
    ):
        assert text in p.stdout, text


def test_max_hosts_1_and_compose_on_a_topology():
    p = run(["--rps", "200", "--max-hosts", "1", "--json"])
    data = json.loads(p.stdout)
    assert data["hosts"] == 1 and len(data["topology"]) == 1 and not data["feasible"]
    p = run(["--rps", "200", "--max-hosts", "5", "--compose", "/tmp/never-written-by-this-test"])
    assert p.returncode == 2 and "--max-hosts 1" in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_compose_alone_asks_the_single_server_question(tmp_path):
    p = run(["--rps", "20", "--vcpu", "4", "--workload", "code-heavy", "--compose", str(tmp_path / "stack"), "--json"])
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["hosts"] == 1 and data["request"]["max_hosts"] == 1
    assert (tmp_path / "stack" / "docker-compose.yml").is_file()
