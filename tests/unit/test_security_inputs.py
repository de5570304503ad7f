"""Issue 24: every input model bounded and every room on the one reader. Runs and reports, check's pool rule
and drift rules, inventories (one host grammar), stack ranges, teardown and cost, the last-resort handler.
Each test fails on the code before the fix."""

from __future__ import annotations

import copy
import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from n8n_sizer.bundle.checks.one_host import check_compose
from n8n_sizer.errors import InputError
from n8n_sizer.fleet.inventory import load_inventory
from n8n_sizer.runs.records import RequestRecord, RunManifest
from n8n_sizer.runs.store import RunStore
from tests.unit.test_security_cluster import cli  # the real entry point, in-process

ROOT = Path(__file__).resolve().parents[2]
TOPOLOGIES = ROOT / "tests" / "data" / "topologies"


def one_line(code, err, *words, exit_code=2):
    assert code == exit_code, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("n8n-sizer: "), err
    for word in words:
        assert word in err, (word, err)


# ---- runs and reports ---------------------------------------------------------------------------------------


def _run(tmp_path: Path, finished: bool = True, kind: str = "bench") -> Path:
    manifest = RunManifest(
        run_id="r1",
        kind=kind,
        created_s=1.0,
        finished_s=2.0 if finished else None,
        setup={"mode": "regular"},
        hosts={"t1": {"setup": {"mode": "regular"}}},
    )
    store = RunStore.create(tmp_path / "results", manifest)
    store.close()
    return store.folder


def _request() -> str:
    return RequestRecord(
        seq=0, step="s", target="t1", scheduled_s=1.0, sent_s=1.0, status=200, latency_ms=5.0
    ).model_dump_json()


@pytest.mark.parametrize("command", ["report", "advise"])
def test_a_non_utf8_byte_in_requests_is_one_line(tmp_path, monkeypatch, capsys, command):
    run = _run(tmp_path)
    (run / "requests.jsonl").write_bytes(_request().encode() + b"\n\xff\xfe{}\n")
    (run / "samples.jsonl").write_bytes(b"\xff\n")  # advise reads the samples first: the same reader
    args = ["report", run, "--no-plots"] if command == "report" else ["advise", "--rps", "5", "--results", run.parent]
    code, _, err = cli(monkeypatch, capsys, *args)
    one_line(code, err, "not UTF-8")


@pytest.mark.timeout(60)
def test_a_fifo_as_requests_is_refused_not_read(tmp_path, monkeypatch, capsys):
    run = _run(tmp_path)
    (run / "requests.jsonl").unlink()
    os.mkfifo(run / "requests.jsonl")
    code, _, err = cli(monkeypatch, capsys, "report", run, "--no-plots")
    one_line(code, err, "not a regular file")


def test_report_on_a_finished_run_without_records_never_advises_a_refused_resume(tmp_path, monkeypatch, capsys):
    run = _run(tmp_path, finished=True)
    code, out, err = cli(monkeypatch, capsys, "report", run, "--no-plots")
    one_line(code, err, "no request records", "cannot be resumed")
    assert "--resume" not in err


def test_report_advises_resume_only_where_bench_accepts_it(tmp_path, monkeypatch, capsys):
    run = _run(tmp_path, finished=False)
    code, _, err = cli(monkeypatch, capsys, "report", run, "--no-plots")
    one_line(code, err, "bench --resume r1")


# ---- check: the pool rule and the drift rules --------------------------------------------------------------

COMPOSE = """services:
  n8n:
    image: n8nio/n8n:2.41.1
    environment: {{DB_TYPE: postgresdb, DB_POSTGRESDB_POOL_SIZE: "{pool}"}}
  postgres:
    image: postgres:16
    command: ["postgres", "-c", "max_connections={conns}"]
"""


@pytest.mark.parametrize(
    "pool,conns",
    [
        ("-5", "100"),
        ("abc", "100"),
        ("0", "100"),
        ("2.5", "100"),
        ("99999", "100"),
        ("2", "abc"),
        ("2", "-1"),
        ("2", "1e3"),
    ],
)
def test_postgres_pool_fails_unreadable_pools_and_max_connections(pool, conns):
    results = {r.rule: r for r in check_compose(COMPOSE.format(pool=pool, conns=conns), {}, None)}
    assert results["postgres-pool"].status == "fail", results["postgres-pool"]


def test_postgres_pool_still_passes_a_sound_file():
    results = {r.rule: r for r in check_compose(COMPOSE.format(pool="2", conns="100"), {}, None)}
    assert results["postgres-pool"].status == "pass"


@pytest.fixture
def cluster(tmp_path, monkeypatch, capsys) -> Path:
    out = tmp_path / "cluster"
    assert (
        cli(
            monkeypatch,
            capsys,
            "render",
            "--topology",
            TOPOLOGIES / "advise-rps-400.json",
            "--out",
            out,
            "--public-url",
            "http://n8n.example.com:5678/",
        )[0]
        == 0
    )
    return out


def _rules(monkeypatch, capsys, folder) -> dict[str, dict]:
    code, out, err = cli(monkeypatch, capsys, "check", "--topology", folder, "--json")
    assert code in (0, 1), err
    return {r["rule"]: r for r in json.loads(out)}


def test_drift_rules_pass_on_a_fresh_render(cluster, monkeypatch, capsys):
    rules = _rules(monkeypatch, capsys, cluster)
    assert {rules[r]["status"] for r in ("host-folders", "cluster-n8n-version", "cluster-concurrency")} == {"pass"}


def _a_worker_compose(cluster: Path) -> Path:
    return next(p for p in sorted(cluster.glob("*/docker-compose.yml")) if "command: worker" in p.read_text())


def test_one_host_on_another_n8n_version_fails(cluster, monkeypatch, capsys):
    compose = _a_worker_compose(cluster)
    compose.write_text(compose.read_text().replace("n8nio/n8n:2.41.1", "n8nio/n8n:2.40.0"))
    assert _rules(monkeypatch, capsys, cluster)["cluster-n8n-version"]["status"] == "fail"


def test_one_worker_with_another_concurrency_fails(cluster, monkeypatch, capsys):
    compose = _a_worker_compose(cluster)
    text = compose.read_text()
    import re

    changed = re.sub(r"command: worker --concurrency=\d+", "command: worker --concurrency=7", text, count=1)
    assert changed != text
    compose.write_text(changed)
    assert _rules(monkeypatch, capsys, cluster)["cluster-concurrency"]["status"] == "fail"


def test_a_missing_or_extra_host_folder_fails(cluster, monkeypatch, capsys):
    gone = _a_worker_compose(cluster).parent
    shutil.rmtree(gone)
    rule = _rules(monkeypatch, capsys, cluster)["host-folders"]
    assert rule["status"] == "fail" and gone.name in rule["message"]
    shutil.copytree(cluster / sorted(p.name for p in cluster.iterdir() if p.is_dir())[0], cluster / "stranger")
    assert "stranger" in _rules(monkeypatch, capsys, cluster)["host-folders"]["message"]


# ---- inventories: one grammar for hosts and users ----------------------------------------------------------

INVENTORY = {
    "stack": "single",
    "provider": "hetzner",
    "location": "hel1",
    "expires_at": "2026-12-01t10-00z",
    "hosts": {
        "loadgen": {
            "name": "loadgen",
            "role": "loadgen",
            "provider": "hetzner",
            "size": "cx23",
            "vcpu": 2,
            "arch": "x86",
            "public_ip": "198.51.100.7",
            "ssh_user": "root",
        },
        "t1": {
            "name": "t1",
            "role": "target",
            "provider": "hetzner",
            "size": "cax11",
            "vcpu": 2,
            "arch": "arm",
            "public_ip": "198.51.100.9",
            "ssh_user": "root",
            "setup": {"mode": "regular"},
        },
    },
}


@pytest.mark.parametrize(
    "field,value",
    [
        ("public_ip", "198.51.100.9:2222"),
        ("public_ip", "root@198.51.100.9"),
        ("public_ip", "ssh://198.51.100.9/"),
        ("public_ip", "a" * 500_000),
        ("public_ip", "host\nname"),
        ("public_ip", "198.51.100.9\n"),
        ("public_ip", ""),
        ("public_ip", "-oProxyCommand=x"),
        ("ssh_user", "root\n"),
        ("ssh_user", "ro ot"),
        ("ssh_user", "x" * 100),
        ("ssh_user", "-oProxyCommand=x"),
        ("name", "t1\nimport x"),
        ("size", "cx\n33"),
        ("private_ip", "10.0.0.1:22"),
    ],
)
def test_hostile_inventory_hosts_are_refused_in_one_line(tmp_path, monkeypatch, capsys, field, value):
    inv = copy.deepcopy(INVENTORY)
    inv["hosts"]["t1"][field] = value
    if field == "name":
        inv["hosts"][value] = inv["hosts"].pop("t1")
    path = tmp_path / "inv.json"
    path.write_text(json.dumps(inv))
    with pytest.raises(InputError) as exc:
        load_inventory(path.read_text())
    assert len(str(exc.value)) < 600 and "\n" not in str(exc.value)
    code, _, err = cli(monkeypatch, capsys, "bench", "--inventory", path)
    one_line(code, err, "--inventory")


def test_a_good_inventory_still_loads():
    assert load_inventory(json.dumps(INVENTORY)).targets()[0].public_ip == "198.51.100.9"


# ---- stacks, teardown, cost --------------------------------------------------------------------------------


def _project(tmp_path: Path, cidr: str | None = None) -> Path:
    project = tmp_path / "project"
    (project / "stacks").mkdir(parents=True)
    (project / "Pulumi.yaml").write_text("name: n8n-sizer\nruntime: python\n")
    text = (ROOT / "stacks" / "Pulumi.single.yaml").read_text()
    if cidr is not None:
        text = text.replace("203.0.113.7/32", cidr)
    (project / "stacks" / "Pulumi.single.yaml").write_text(text)
    return project


@pytest.mark.parametrize("cidr", ["0.0.0.0/1", "10.0.0.0/8", "128.0.0.0/2", "203.0.113.7/24", "::/1", "1.2.3.4/33"])
def test_wide_or_malformed_ssh_ranges_are_refused(tmp_path, monkeypatch, capsys, cidr):
    project = _project(tmp_path, cidr)
    code, _, err = cli(monkeypatch, capsys, "cost", "--stack", "single", "--stacks-dir", project / "stacks")
    one_line(code, err, "operator_cidr")


def test_teardown_dry_run_json_prints_only_json(tmp_path, monkeypatch, capsys):
    project = _project(tmp_path)
    monkeypatch.setenv("HCLOUD_TOKEN", "x")
    monkeypatch.setenv("N8N_SIZER_HCLOUD_URL", "http://127.0.0.1:9/v1")  # nothing listens: the sweep fails
    # every retry still happens, without its backoff (15 s of sleep that this output check does not need)
    monkeypatch.setattr("n8n_sizer.fleet.api.MAX_BACKOFF_S", 0.0)
    code, out, err = cli(
        monkeypatch, capsys, "teardown", "--stack", "single", "--stacks-dir", project / "stacks", "--dry-run", "--json"
    )
    if code == 0:
        json.loads(out)
    else:
        assert out == "" and code in (1, 2), (out, err)


@pytest.mark.parametrize("other", ["Pulumi.json", "Pulumi.yml"])
def test_another_project_file_beside_pulumi_yaml_fails_the_project_check(tmp_path, monkeypatch, capsys, other):
    project = _project(tmp_path)
    (project / other).write_text('{"name": "shop", "runtime": "nodejs"}')
    code, _, err = cli(
        monkeypatch, capsys, "teardown", "--stack", "single", "--stacks-dir", project / "stacks", "--dry-run"
    )
    one_line(code, err, other)


def test_cost_refuses_a_cluster_stack_the_program_would_refuse(tmp_path, monkeypatch, capsys):
    project = _project(tmp_path)
    text = (ROOT / "stacks" / "Pulumi.cluster-hetzner.yaml").read_text()
    assert "    max_connections: 120\n" in text
    (project / "stacks" / "Pulumi.cluster-hetzner.yaml").write_text(
        text.replace("max_connections: 120", "max_connections: 12")
    )
    code, _, err = cli(monkeypatch, capsys, "cost", "--stack", "cluster-hetzner", "--stacks-dir", project / "stacks")
    one_line(code, err, "max_connections")


def test_cost_prices_the_committed_cluster_stacks(monkeypatch, capsys):
    for stack in ("cluster-hetzner", "cluster-gcp"):  # what pulumi up builds (its public_url included) is priced
        code, out, err = cli(monkeypatch, capsys, "cost", "--stack", stack, "--stacks-dir", ROOT / "stacks")
        assert code == 0 and "total:" in out, err


# ---- the last resort ---------------------------------------------------------------------------------------


def test_an_unexpected_exception_is_one_line_exit_70_and_a_private_traceback(tmp_path, monkeypatch, capsys):
    import n8n_sizer.bundle.render as render

    def boom(*args, **kwargs):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(render, "write_bundle", boom)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    code, _, err = cli(monkeypatch, capsys, "render", "--mode", "queue", "--out", tmp_path / "o")
    one_line(code, err, "internal error (ZeroDivisionError)", "traceback.txt", exit_code=70)
    saved = Path(err.split("the traceback is in ", 1)[1].split(";", 1)[0])
    assert "ZeroDivisionError: a bug" in saved.read_text()
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600 and stat.S_IMODE(saved.parent.stat().st_mode) == 0o700


def test_the_tool_raises_no_bare_runtime_error():
    """Errors the user sees are the project's own types (errors.py): RuntimeError reached users as a traceback."""
    import ast

    for path in (ROOT / "n8n_sizer").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Raise) and node.exc is not None:
                called = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                assert not (isinstance(called, ast.Name) and called.id == "RuntimeError"), f"{path}:{node.lineno}"


# ---- the lab's n8n owner comes from main's environment ------------------------------------------------------


def test_lab_main_gets_its_owner_from_a_private_file_never_over_the_network(tmp_path):
    """No local user can claim the owner setup of a lab's n8n: main creates the owner at start from
    N8N_INSTANCE_OWNER_* (a bcrypt hash, from a 0600 file); a file others can read, or no hash, is refused."""
    import bcrypt

    from n8n_sizer.lab.n8n_role import owner_env

    good = tmp_path / "owner.json"
    hashed = bcrypt.hashpw(b"Nz9-secret", bcrypt.gensalt(rounds=4)).decode()
    good.write_text(json.dumps({"email": "lab-owner@n8n-sizer.invalid", "password_hash": hashed}))
    good.chmod(0o600)
    env = owner_env(good)
    assert env == {
        "N8N_INSTANCE_OWNER_MANAGED_BY_ENV": "true",
        "N8N_INSTANCE_OWNER_EMAIL": "lab-owner@n8n-sizer.invalid",
        "N8N_INSTANCE_OWNER_PASSWORD_HASH": hashed,
    }
    good.chmod(0o644)
    with pytest.raises(InputError, match="chmod 600"):
        owner_env(good)
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"email": "a@b.invalid", "password_hash": "Nz9-secret"}))
    plain.chmod(0o600)
    with pytest.raises(InputError, match="bcrypt"):
        owner_env(plain)


@pytest.mark.parametrize("finished", [True, False])
def test_advise_results_never_advises_a_resume_bench_refuses(tmp_path, monkeypatch, capsys, finished):
    run = _run(tmp_path, finished=finished)
    code, _, err = cli(monkeypatch, capsys, "advise", "--rps", "5", "--results", run.parent)
    one_line(code, err, "no finished load steps")
    assert ("--resume r1" in err) == (not finished), err


def test_cost_prices_the_placeholder_stack_but_warns_that_pulumi_up_refuses_it(tmp_path, monkeypatch, capsys):
    project = _project(tmp_path)  # the shipped stack file, with its RFC 5737 placeholder
    code, out, err = cli(monkeypatch, capsys, "cost", "--stack", "single", "--stacks-dir", project / "stacks")
    assert code == 0 and "total:" in out
    assert "documentation example range" in err and "pulumi up" in err
