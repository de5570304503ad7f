"""`bench --inventory lab.json` without root: the rate split, the generators' sequence blocks, merging their
records, recognising a lab inventory, the record that lets a second bench reuse a deployed cluster, role labels,
and the generator agent itself, run as a process against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from n8n_sizer.bundle.topology import parse_topology
from n8n_sizer.errors import InputError, RemoteError
from n8n_sizer.hosts.host import LocalHost
from n8n_sizer.lab.bench import is_lab_inventory, role_labelled
from n8n_sizer.lab.cluster_record import recorded_pids
from n8n_sizer.lab.deploy import CLUSTER_RECORD, LabCluster, deployed_cluster
from n8n_sizer.lab.generators import (
    LabTarget,
    merge_records,
    merge_tallies,
    run_lab_step,
    seq_starts,
    share_counts,
    split_rate,
)
from n8n_sizer.lab.plan import plan_lab
from n8n_sizer.lab.state import LabState, lab_inventory
from n8n_sizer.runs.records import RequestRecord, Sample

TOPOLOGY = {
    "topology": [
        {"name": "data", "provider": "hetzner", "size": "cx33", "roles": {"postgres": 1, "redis": 1}},
        {
            "name": "ingest",
            "provider": "hetzner",
            "size": "cx33",
            "roles": {"main": 1, "webhook": 2, "load_balancer": 1},
        },
        {"name": "worker", "provider": "hetzner", "size": "cx33", "count": 2, "roles": {"workers": 1}},
    ],
    "subnet": "10.213.7.0/24",
}


def _record(seq: int, generator: str | None) -> RequestRecord:
    return RequestRecord(
        seq=seq,
        step="rate-4",
        target="cluster",
        scheduled_s=1000.0 + seq,
        sent_s=1000.0 + seq,
        status=200,
        latency_ms=50.0,
        generator=generator,
    )


def test_the_rate_is_split_evenly_and_each_share_is_the_drivers_own_schedule():
    assert split_rate(8, 2) == [4.0, 4.0]
    assert split_rate(5, 3) == pytest.approx([5 / 3] * 3) and sum(split_rate(5, 3)) == pytest.approx(5)
    assert share_counts(split_rate(8, 2), 15) == [60, 60]  # 8 req/s for 15 s = 120 requests in all
    assert sum(share_counts(split_rate(5, 3), 12)) == 60
    with pytest.raises(ValueError):
        split_rate(4, 0)


def test_each_generator_numbers_its_requests_in_its_own_block():
    starts = seq_starts(100, [60, 60, 7])
    assert starts == [100, 160, 220]
    blocks = [set(range(s, s + n)) for s, n in zip(starts, [60, 60, 7], strict=True)]
    assert not (blocks[0] & blocks[1]) and not (blocks[1] & blocks[2]) and min(blocks[0]) == 100


def test_merging_orders_by_seq_keeps_each_generator_and_refuses_a_collision():
    merged = merge_records([[_record(0, "gen-1"), _record(2, "gen-1")], [_record(1, "gen-2")]])
    assert [(r.seq, r.generator) for r in merged] == [(0, "gen-1"), (1, "gen-2"), (2, "gen-1")]
    with pytest.raises(RemoteError, match="gen-1 and gen-2 both recorded request 2"):
        merge_records([[_record(2, "gen-1")], [_record(2, "gen-2")]])
    tally = merge_tallies(
        "rate-4",
        [
            dict(started_s=10.0, finished_s=25.0, scheduled=30, sent=30, last_sent_s=24.9),
            dict(started_s=10.2, finished_s=26.0, scheduled=30, sent=29, last_sent_s=None),
        ],
    )
    assert (tally.started_s, tally.finished_s, tally.scheduled, tally.sent, tally.last_sent_s) == (
        10.0,
        26.0,
        60,
        59,
        24.9,
    )


def test_an_older_record_without_a_generator_still_reads():
    old = (
        '{"seq": 3, "step": "rate-5", "target": "local", "scheduled_s": 1.0, "sent_s": 1.0, "status": 200, '
        '"latency_ms": 12.0}'
    )
    assert RequestRecord.model_validate_json(old).generator is None


def _lab_inventory(generators: int = 2):
    plan = plan_lab(parse_topology(TOPOLOGY), generators, "a1b2c3", generator_prefix="bl-gen-")
    state = LabState(lab_id="a1b2c3", subnet="10.213.7.0/24", folder="/lab", client_key="/lab/client_key")
    return lab_inventory(plan, parse_topology(TOPOLOGY), state)


def test_a_lab_inventory_is_recognised_and_its_generators_take_the_prefix():
    inventory = _lab_inventory()
    assert is_lab_inventory(inventory)
    assert sorted(h.name for h in inventory.loadgens()) == ["bl-gen-1", "bl-gen-2"]
    assert not is_lab_inventory(inventory.model_copy(update={"lab": None}))  # a cluster stack: not a lab


def _cluster(folder: Path) -> LabCluster:
    from n8n_sizer.lab.data import DataEndpoints
    from n8n_sizer.lab.n8n_role import N8nProcess

    proc = lambda name, role, pid: N8nProcess(
        name=name, role=role, pid=pid, ready_url="http://127.0.0.1:5678/healthz", log="/x.log"
    )
    data = DataEndpoints(
        address="10.213.7.10",
        postgres_port=5432,
        postgres_pid=11,
        redis_port=6379,
        redis_pid=12,
        database="n8n",
        user="n8n",
        secrets_file="/s",
    )
    return LabCluster(
        url="http://10.213.7.11:5678",
        data_host="data",
        load_balancer_pid=21,
        processes={
            "ingest": [proc("main", "main", 20), proc("webhook-1", "webhook", 22)],
            "worker-1": [proc("worker-1-worker-1", "worker", 30)],
        },
        secrets_file=str(folder / "hosts" / "cluster-secrets.json"),
        data=data,
    )


def test_the_deploy_record_decides_between_deploy_reuse_and_refusal(tmp_path):
    path = tmp_path / "lab.json"
    inventory = _lab_inventory()
    lab = dict(inventory.lab, folder=str(tmp_path / "labdir"))
    path.write_text(inventory.model_copy(update={"lab": lab}).model_dump_json())
    assert deployed_cluster(path) is None  # nothing deployed yet: bench deploys
    hosts = tmp_path / "labdir" / "hosts"
    hosts.mkdir(parents=True)
    with pytest.raises(InputError, match="a deploy that did not finish"):
        deployed_cluster(path)  # a half-done deploy is never reused
    cluster = _cluster(tmp_path / "labdir")
    (hosts / CLUSTER_RECORD).write_text(cluster.model_dump_json())
    assert deployed_cluster(path) == cluster
    assert recorded_pids(cluster) == {
        "ingest": {"main": 20, "webhook-1": 22, "caddy": 21},
        "worker-1": {"worker-1-worker-1": 30},
        "data": {"postgres": 11, "redis": 12},
    }


def test_process_samples_get_their_role_and_others_pass_unchanged():
    out: list[Sample] = []
    sink = role_labelled(out.extend)
    mk = lambda labels: Sample(metric="process_cpu_cores", value=0.5, unit="cores", labels=labels, time_s=1.0)
    sink(
        [
            mk({"host": "worker-1", "process": "worker-1-worker-1-runner"}),
            mk({"host": "ingest", "process": "caddy"}),
            mk({"host": "ingest", "process": "webhook-2"}),
            mk({"host": "data", "process": "postgres"}),
            mk({"host": "ingest", "process": "node-exporter"}),
            mk({"host": "data"}),
        ]
    )
    assert [s.labels.get("role") for s in out] == ["runner", "load_balancer", "webhook", "postgres", "other", None]


class _Answer(BaseHTTPRequestHandler):
    count = 0
    lock = threading.Lock()

    def do_POST(self):  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers["Content-Length"]))
        with _Answer.lock:
            _Answer.count += 1
            n = _Answer.count
        body = json.dumps({"executionId": str(n)}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/webhook/x"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_the_agent_process_records_its_share_with_its_generator(server, tmp_path):
    body = tmp_path / "body"
    body.write_bytes(b'{"a": 1}')
    out = tmp_path / "share.jsonl"
    args = [
        sys.executable,
        "-m",
        "n8n_sizer.remote.load_agent",
        "--url",
        server,
        "--body-file",
        str(body),
        "--rate",
        "20",
        "--duration",
        "0.5",
        "--seq-start",
        "500",
        "--step",
        "rate-40",
        "--target",
        "cluster",
        "--generator",
        "gen-2",
        "--out",
        str(out),
        "--deadline-s",
        "20",
    ]
    res = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    tally = json.loads(res.stdout.strip().splitlines()[-1])
    records = [RequestRecord.model_validate_json(line) for line in out.read_text().splitlines()]
    assert tally["scheduled"] == 10 and sorted(r.seq for r in records) == list(range(500, 510))
    assert {(r.generator, r.step, r.target, r.status) for r in records} == {("gen-2", "rate-40", "cluster", 200)}
    assert all(r.execution_id is not None for r in records) and stat.S_IMODE(out.stat().st_mode) == 0o600
    again = subprocess.run(args, capture_output=True, text=True, timeout=60)  # never overwrites a share's records
    assert again.returncode == 2 and "File exists" in again.stderr and len(out.read_text().splitlines()) == 10


def test_a_step_from_two_generators_merges_unique_seqs_from_both(server, tmp_path):
    lab = LabTarget(
        inventory_path=tmp_path / "lab.json",
        hosts={},
        generators={"gen-1": LocalHost("gen-1"), "gen-2": LocalHost("gen-2")},
    )
    scratch = tmp_path / "generators"
    scratch.mkdir()
    records, tally = run_lab_step(
        lab,
        url=server,
        body=b"{}",
        rate_per_s=20,
        duration_s=1.0,
        step="rate-20",
        seq_start=7,
        timeout_s=10,
        max_in_flight=50,
        run_id="t1",
        scratch=scratch,
    )
    assert [r.seq for r in records] == list(range(7, 27)) and tally.scheduled == 20
    assert {g: sum(1 for r in records if r.generator == g) for g in ("gen-1", "gen-2")} == {"gen-1": 10, "gen-2": 10}
    assert all(r.status == 200 for r in records)
    assert sorted(p.name for p in scratch.iterdir()) == ["body"]  # the shares' files were merged and removed
    assert not list(Path("/tmp").glob("n8nsz-t1-rate-20-*"))  # nor left on the generators


def test_peak_stack_ram_of_a_cluster_sums_its_hosts_sampled_on_their_own_clocks():
    from n8n_sizer.runs.stats import peak_stack_ram_mib

    rss = lambda host, proc, v, t: Sample(
        metric="process_rss_mib", value=v, unit="MiB", time_s=t, labels={"host": host, "process": proc}
    )
    samples = [
        rss("ingest", "main", 400, 0.0),
        rss("ingest", "webhook-1", 300, 0.0),
        rss("worker-1", "worker-1-worker-1", 250, 0.7),
        rss("data", "redis", 10, 1.3),
        rss("ingest", "main", 420, 2.0),
        rss("ingest", "webhook-1", 300, 2.0),
    ]
    assert peak_stack_ram_mib(samples) == 420 + 300 + 250 + 10  # not the largest host's 720
    assert peak_stack_ram_mib(samples[:2]) == 700 and peak_stack_ram_mib([]) is None


@pytest.mark.parametrize(
    "flags, says",
    [
        (["--concurrency-sweep", "1,2"], "constant-rate steps"),
        (["--rates", "4", "--shape", "ramp:1:4"], "constant-rate steps"),
        (["--rates", "4", "--malformed", "0.1"], "not split over a lab's generators"),
    ],
)
def test_what_a_lab_bench_cannot_run_is_refused_in_one_line_before_anything(tmp_path, flags, says):
    path = tmp_path / "lab.json"
    path.write_text(_lab_inventory().model_dump_json())
    cli = [sys.executable, "-c", "from n8n_sizer.cli import main; main()"]
    res = subprocess.run(
        [*cli, "bench", "--inventory", str(path), "--step-seconds", "5", *flags, "--out", str(tmp_path / "results")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and says in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and not (tmp_path / "results").exists()
