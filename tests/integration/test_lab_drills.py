"""The cluster drills on a real lab: a data host, an ingest host (main, 2 webhook processors, Caddy), 2 worker
hosts with one worker each and a generator, as network namespaces on 10.213.8.0/24 (this module's own subnet),
deployed once over SSH and taken down at the end. Each drill runs once through the CLI
(`drill NAME --inventory lab.json --json`) with its short bounded load (2 req/s for 30-40 s, from this machine
to the lab's load balancer over the lab's bridge); the test asserts the recorded verdicts and the ledger, and
that the drill left the cluster as it found it: every process running and ready, no snapshot, no rule.

The rolling restart (issue 28) restarts both webhook processors and both workers one at a time under the load
and reads the executions' statuses from Postgres on the data host: nothing accepted lost, none failed.

Real n8n, Postgres, Redis, Caddy and sshd; only the lab's own subnet is contacted. Several minutes.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from n8n_sizer.bundle.topology import parse_topology
from n8n_sizer.hosts.host import HostError
from n8n_sizer.lab.cluster_handle import LabClusterHandle
from n8n_sizer.lab.deploy import LabCluster, cluster_record, deploy_lab
from n8n_sizer.lab.netns import lab_up, remove_lab
from n8n_sizer.native.install import find_installed
from tests.integration.test_lab import CLI, _namespaces, _processes_mentioning

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the lab needs root (network namespaces)"),
    pytest.mark.skipif(not Path("/usr/sbin/sshd").exists(), reason="openssh-server is not installed"),
    pytest.mark.timeout(900),
]
SUBNET = "10.213.8.0/24"
# Host names of their own, so this lab never clashes with another module's (`data`, `ingest`, ...).
TOPOLOGY = {
    "topology": [
        {"name": "dr-data", "provider": "hetzner", "size": "cx33", "roles": {"postgres": 1, "redis": 1}},
        {
            "name": "dr-ingest",
            "provider": "hetzner",
            "size": "cx33",
            "roles": {"main": 1, "webhook": 2, "load_balancer": 1},
        },
        {"name": "dr-worker", "provider": "hetzner", "size": "cx33", "count": 2, "roles": {"workers": 1}},
    ],
    "subnet": SUBNET,
}
HOSTS = ["dr-data", "dr-ingest", "dr-worker-1", "dr-worker-2", "gen-1"]


@pytest.fixture(scope="module")
def lab():
    if find_installed() is None or not all(shutil.which(t) for t in ("redis-server", "caddy", "curl", "iptables")):
        pytest.skip("needs the shared n8n install (scripts/test.sh), redis-server, caddy, curl and iptables")
    clash = set(HOSTS) & _namespaces()
    # Generators are gen-1.. in every lab: another lab up with a generator blocks this one, so say which.
    assert not clash, f"namespaces {sorted(clash)} exist (another lab is up); lab down it first"
    workdir = Path(tempfile.mkdtemp(prefix="n8n-sizer-drills-lab-"))
    workdir.chmod(0o755)  # Debian's postgres user must pass through to the data host's folder
    out = workdir / "lab.json"
    state = lab_up(parse_topology(TOPOLOGY), 1, out, cpu_budget=False)  # drills on shared cores, as before budgets
    try:
        deploy_lab(out)
        yield workdir, out, state
    finally:
        down = subprocess.run(
            CLI + ["lab", "down", "--inventory", "lab.json"], capture_output=True, text=True, timeout=180, cwd=workdir
        )
        remove_lab(state)  # a no-op when down worked
        left = _processes_mentioning(str(workdir))
        shutil.rmtree(workdir, ignore_errors=True)
        assert down.returncode == 0, down.stderr
        assert not set(HOSTS) & _namespaces(), _namespaces()
        assert not left, left


def _whole(lab_json: Path) -> dict:
    """The cluster as a drill must leave it: every process running and ready, no snapshot, no drill rule."""
    with LabClusterHandle.open(lab_json) as handle:
        procs = handle.processes()
        for p in procs:
            assert handle.running(p), p
            if p.ready_url or p.role == "redis":
                assert handle.ready(p), p
        for host in handle.worker_hosts():
            rules = handle.run(host, "iptables -w 5 -S").stdout
            assert "n8n-sizer drill" not in rules, rules
        assert not list((handle.folder / "drills").glob("*.json")), "a snapshot was left behind"
        return {p.name: p.pid for p in procs}


def _drill(workdir: Path, name: str) -> dict:
    res = subprocess.run(
        CLI + ["drill", name, "--inventory", "lab.json", "--json", "--out", "results"],
        capture_output=True,
        text=True,
        timeout=800,
        cwd=workdir,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    [line] = res.stdout.strip().splitlines()
    record = json.loads(line)
    folder = workdir / record["folder"]  # relative to the command's folder, as --out was given
    print(json.dumps(record, indent=1))  # shown when an assertion below fails
    run = json.loads((folder / "run.json").read_text())
    assert run["kind"] == "drill" and run["extra"]["drill"] == name
    assert list(run["ledgers"]) == [record["target"]]
    requests = (folder / "requests.jsonl").read_text().splitlines()
    assert len(requests) == record["ledger"]["fired"] + record["ledger"]["not_sent"]
    return {**record, "run": run}


def _checks(record: dict) -> str:
    return "\n".join(f"{c['verdict']}: {c['observation']}" for c in record["checks"])


def test_cluster_json_lists_every_process_by_host_and_role(lab):
    workdir, out, state = lab
    cluster = LabCluster.model_validate_json(cluster_record(Path(state.folder)).read_text())
    with LabClusterHandle.open(out) as handle:
        procs = handle.processes()
        by_host = {}
        for p in procs:
            by_host.setdefault(p.host, []).append(p.role)
        assert sorted(by_host["dr-ingest"]) == ["load_balancer", "main", "webhook", "webhook"]
        assert sorted(by_host["dr-data"]) == ["postgres", "redis"]
        assert by_host["dr-worker-1"] == ["worker"] and by_host["dr-worker-2"] == ["worker"]
        assert {p.pid for p in procs if p.role in ("main", "webhook", "worker")} == {
            p.pid for ps in cluster.processes.values() for p in ps
        }
        assert all(handle.ready(p) for p in procs if p.role != "postgres")
        main = next(p for p in procs if p.role == "main")
        # A PID is only ever signalled on its own host: the data host refuses main's PID.
        with pytest.raises(HostError, match="another network namespace"):
            handle.agent("dr-data", "signal", "--pid", str(main.pid), "--signal", "CONT")
        assert handle.running(main)


def test_the_cluster_is_driven_as_a_stack_handle(lab):
    """Runs before the drills that restart processes (their new PIDs are the drills' own record). The deployed
    cluster through the protocol a single-host stack has (`StackHandle`), by process name: Redis
    answers, a worker stops, starts again from its snapshot and is ready, and its log shows the restart."""
    from contextlib import ExitStack

    _, lab_json, _ = lab
    with ExitStack() as exits:
        handle = LabClusterHandle(lab_json)
        assert handle.up(exits, attach=True) == handle.cluster.url and handle.setup.mode == "queue"
        assert handle.redis("PING") == "PONG"
        worker = handle.worker_names[0]
        assert handle.is_running(worker) and handle.is_ready(worker)
        mark = handle.log_mark(worker)
        handle.stop_process(worker, timeout_s=35)
        assert not handle.is_running(worker)
        handle.start_process(worker)
        assert handle.wait_ready(worker, 300) >= 0 and handle.is_running(worker)
        assert mark.lines(), "the worker's log shows nothing after the mark"
    _whole(lab_json)


def test_stop_worker_host(lab):
    workdir, out, _ = lab
    before = _whole(out)
    record = _drill(workdir, "stop-worker-host")
    assert record["verdict"] == "matches", _checks(record)
    observed = record["run"]["extra"]["observed"]
    assert observed["host"] == "dr-worker-1" and observed["during"]["answered"] > 0
    assert set(observed["ran_on"]) == {"dr-worker-2"}, observed["ran_on"]
    assert record["ledger"]["accepted_then_lost"] == 0 and record["ledger"]["lost_seqs"] == []
    after = _whole(out)
    assert after["dr-worker-1-worker-1"] != before["dr-worker-1-worker-1"]  # started again: a new process
    assert after["dr-worker-2-worker-1"] == before["dr-worker-2-worker-1"]


def test_kill_webhook(lab):
    workdir, out, _ = lab
    before = _whole(out)
    record = _drill(workdir, "kill-webhook")
    assert record["verdict"] == "matches", _checks(record)
    observed = record["run"]["extra"]["observed"]
    assert observed["after_interval"]["failed"] == 0 and observed["after_interval"]["sent"] > 0
    assert record["ledger"]["lost_seqs"] == []
    after = _whole(out)
    assert after["webhook-1"] != before["webhook-1"] and after["webhook-2"] == before["webhook-2"]


def test_restart_redis(lab):
    workdir, out, _ = lab
    before = _whole(out)
    record = _drill(workdir, "restart-redis")
    assert record["verdict"] == "matches", _checks(record)
    observed = record["run"]["extra"]["observed"]
    assert observed["exited"] == [] and observed["after"]["answered"] == observed["after"]["sent"] > 0
    assert record["ledger"]["lost_seqs"] == []
    after = _whole(out)
    assert after["redis"] != before["redis"]
    assert {k: v for k, v in after.items() if k != "redis"} == {k: v for k, v in before.items() if k != "redis"}


def _statuses_in_postgres(lab_json: Path, state, workflow_id: str) -> dict[str, int]:
    """Execution statuses of one workflow as Postgres on the data host stores them (execution_entity), read over
    the data host's own socket: not through n8n's API."""
    from n8n_sizer.lab.data import POSTGRES_PORT
    from n8n_sizer.native.services import postgres_bin_dir

    assert workflow_id.isalnum(), workflow_id  # it goes into the SQL text
    socket_dir = Path(state.folder) / "hosts" / "dr-data" / "postgres"
    sql = f"select status, count(*) from execution_entity where \"workflowId\" = '{workflow_id}' group by status"
    command = " ".join(
        shlex.quote(w)
        for w in [
            str(postgres_bin_dir() / "psql"),
            "-h",
            str(socket_dir),
            "-p",
            str(POSTGRES_PORT),
            "-U",
            "n8n",
            "-d",
            "n8n",
            "-AtF,",
            "-c",
            sql,
        ]
    )
    with LabClusterHandle.open(lab_json) as handle:
        res = handle.run("dr-data", command, timeout_s=30)
    return {status: int(n) for status, n in (line.split(",") for line in res.stdout.split())}


def test_rolling_restart(lab):
    """Issue 28's bar on the lab: both webhook processors, then both workers, SIGTERMed and started again one at a
    time under 2 req/s through Caddy. Nothing accepted is lost and no execution fails (read from Postgres)."""
    workdir, out, state = lab
    before = _whole(out)
    record = _drill(workdir, "rolling-restart")
    observed = record["run"]["extra"]["observed"]
    assert [s["process"] for s in observed["steps"]] == [
        "webhook-1",
        "webhook-2",
        "dr-worker-1-worker-1",
        "dr-worker-2-worker-1",
    ], observed["steps"]
    logs = record["run"]["extra"]["log_lines"]
    # shown with -s: each stop, each refusal, each failed execution with its error, the workers' stop lines
    print(json.dumps({k: observed[k] for k in ("steps", "refusals", "failed_executions")}, indent=1))
    print(json.dumps({k: v for k, v in logs.items() if "worker" in k}, indent=1))
    assert record["verdict"] == "matches", _checks(record)
    assert record["ledger"]["accepted_then_lost"] == 0 and record["ledger"]["lost_seqs"] == []
    assert record["ledger"]["accepted"] >= 40, record["ledger"]
    assert not any(s["forced"] for s in observed["steps"]), observed["steps"]  # each stopped within its grace
    for worker in ("dr-worker-1-worker-1", "dr-worker-2-worker-1"):  # the drain hook held n8n's stop back
        assert any("n8n-sizer drain: SIGTERM received" in line for line in logs[worker]), logs[worker]
        assert any("worker jobs settled" in line for line in logs[worker]), logs[worker]
    # Draining (docs/cluster.md#stopping-a-process-draining): nothing refused, not even while a processor stops.
    assert record["ledger"]["refused"] == 0 and observed["during"]["failed"] == 0, (record["ledger"], observed)
    assert observed["executions"] == {"success": record["ledger"]["executions_succeeded"]}, observed["executions"]
    in_postgres = _statuses_in_postgres(out, state, observed["workflow_id"])
    assert set(in_postgres) == {"success"}, in_postgres  # nothing failed, crashed or left running
    assert in_postgres["success"] == record["ledger"]["executions_succeeded"]
    after = _whole(out)
    for name in ("webhook-1", "webhook-2", "dr-worker-1-worker-1", "dr-worker-2-worker-1"):
        assert after[name] != before[name], name  # each was restarted: a new process
    assert after["main"] == before["main"] and after["redis"] == before["redis"]


def test_partition(lab):
    workdir, out, _ = lab
    record = _drill(workdir, "partition")
    observed = record["run"]["extra"]["observed"]
    assert observed["rules_left"] == [] and len(observed["rules"]) == 2
    assert all("DROP" in r and "10.213.8.10/32" in r for r in observed["rules"]), observed["rules"]
    assert record["verdict"] == "matches", _checks(record)
    assert record["ledger"]["lost_seqs"] == []
    _whole(out)
    report = subprocess.run(
        CLI + ["report", record["folder"], "--no-plots"], capture_output=True, text=True, timeout=120, cwd=workdir
    )
    assert report.returncode == 0, report.stderr
    text = (workdir / record["folder"] / "report" / "report.md").read_text()
    assert "| observation | what n8n promises | verdict |" in text
    assert "iptables DROP" in text and "| matches |" in text
