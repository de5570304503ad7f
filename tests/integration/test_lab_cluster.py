"""A queue-mode cluster across lab hosts, deployed over SSH: Postgres and Redis on `data`, n8n main on `ingest`,
a worker on `worker-1`, each in its own namespace with its own address, talking over the lab's bridge.

Real n8n (the shared install), real Postgres and Redis; only the lab's own subnet is ever contacted. Slow (two
cold n8n starts), so it is one test.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import sys
from pathlib import Path

import pytest

from n8n_sizer.deploy.topology import parse_topology
from n8n_sizer.fleet.inventory import load_inventory
from n8n_sizer.lab.data import deploy_data_host
from n8n_sizer.lab.n8n_role import MAIN_PORT, deploy_n8n_role
from n8n_sizer.lab.netns import lab_up, remove_lab
from n8n_sizer.localstack.install import find_installed
from n8n_sizer.n8n.client import set_up_instance
from n8n_sizer.n8n.workflows import deploy_workflow, read_workflow, webhook_method, with_webhook_path
from n8n_sizer.safety.write import write_atomic
from tests.integration.test_lab import TOPOLOGY, _processes_mentioning, _ssh, clean, pytestmark, workdir  # noqa: F401

pytestmark = [*pytestmark, pytest.mark.timeout(900)]
REQUESTS = 3  # a handful: this proves the path, the bench measures


def test_main_on_ingest_and_a_worker_on_worker_1_use_the_data_host_over_the_bridge(workdir, clean):
    if find_installed() is None or not shutil.which("redis-server"):
        pytest.skip("needs the shared n8n install (bash scripts/test.sh) and Debian's redis-server")
    out = workdir / "lab.json"
    state = lab_up(parse_topology(TOPOLOGY), 1, out)
    hosts = {}
    try:
        inventory = load_inventory(out.read_text())
        ip = {name: h.private_ip for name, h in inventory.hosts.items()}
        hosts = {n: _ssh(inventory, n, state.client_key) for n in ("data", "ingest", "worker-1", "gen-1")}
        state_dir = f"{state.folder}/hosts"
        ends = deploy_data_host(hosts["data"], sys.executable, f"{state_dir}/data", ip["data"], state.subnet)
        data_secrets = Path(state.folder) / "data-secrets.json"
        hosts["data"].get(ends.secrets_file, data_secrets)
        cluster_secrets = Path(state.folder) / "cluster-secrets.json"
        write_atomic(cluster_secrets, json.dumps({"encryption_key": secrets.token_hex(32),
                                                  **json.loads(data_secrets.read_text())}), private=True)
        common = {"data": ip["data"], "main": ip["ingest"], "secrets_file": str(cluster_secrets)}
        main = deploy_n8n_role(hosts["ingest"], sys.executable, role="main", name="main",
                               state=f"{state_dir}/ingest", listen=ip["ingest"], **common)
        worker = deploy_n8n_role(hosts["worker-1"], sys.executable, role="worker", name="worker-1",
                                 state=f"{state_dir}/worker-1", listen=ip["worker-1"], **common)
        # From the load generator, over the bridge: main serves, the worker reports itself ready (its
        # readiness needs its Postgres and Redis connections, both to the data host).
        for url in (main.ready_url, worker.ready_url):
            res = hosts["gen-1"].run(f"curl -sS --max-time 10 -o /dev/null -w '%{{http_code}}' {url}", timeout_s=30)
            assert res.stdout.strip() == "200", url
        # Both n8n processes hold connections to the data host's Postgres, from their own addresses.
        res = hosts["data"].run("ss -Htn state established '( sport = :5432 )'", timeout_s=30)
        peers = {line.split()[-1].rsplit(":", 1)[0] for line in res.stdout.splitlines()}
        assert {ip["ingest"], ip["worker-1"]} <= peers, peers
        res = hosts["data"].run("ss -Htn state established '( sport = :6379 )'", timeout_s=30)
        peers = {line.split()[-1].rsplit(":", 1)[0] for line in res.stdout.splitlines()}
        assert {ip["ingest"], ip["worker-1"]} <= peers, peers
        # A request from the generator becomes an execution that the worker on another host ran.
        base = f"http://{ip['ingest']}:{MAIN_PORT}"
        session = set_up_instance(base)
        flow = with_webhook_path(read_workflow("light"), f"lab-{secrets.token_hex(4)}")
        with session.client() as client:
            workflow_id, path = deploy_workflow(client, flow)
            for _ in range(REQUESTS):
                res = hosts["gen-1"].run(f"curl -sS --max-time 60 -o /dev/null -w '%{{http_code}}' -X "
                                         f"{webhook_method(flow)} -H 'content-type: application/json' "
                                         f"-d '{{}}' {base}{path}", timeout_s=90)
                assert res.stdout.strip() == "200", res.stdout
            counts = client.count_executions(workflow_id)
        assert counts.by_status == {"success": REQUESTS}, counts
        worker_log = Path(worker.log).read_text()
        assert all(re.search(rf"Worker started execution {i}\b", worker_log) for i in counts.success_ids), \
            counts.success_ids
    finally:
        for h in hosts.values():
            h.close()
        removal = remove_lab(state)
    assert not removal.failed, removal.failed
    assert not _processes_mentioning(str(workdir)), _processes_mentioning(str(workdir))


def test_ingest_behind_caddy_with_two_webhook_processors_and_main_production_off(workdir, clean):
    """The rendered ingest host: Caddy on the private address routes /webhook/* to two `n8n webhook`
    processors and the rest to main (production webhooks off); a worker on worker-1 runs the executions."""
    import yaml

    from n8n_sizer.deploy.render_topology import render_topology
    from n8n_sizer.deploy.secrets import generate_secrets
    from n8n_sizer.lab.ingest import deploy_caddy, lab_caddyfile

    if find_installed() is None or not shutil.which("redis-server") or not shutil.which("caddy"):
        pytest.skip("needs the shared n8n install, Debian's redis-server and caddy")
    topology = parse_topology(TOPOLOGY)
    out = workdir / "lab.json"
    state = lab_up(topology, 1, out)
    hosts = {}
    try:
        inventory = load_inventory(out.read_text())
        ip = {name: h.private_ip for name, h in inventory.hosts.items()}
        hosts = {n: _ssh(inventory, n, state.client_key) for n in ("data", "ingest", "worker-1", "gen-1")}
        state_dir = f"{state.folder}/hosts"
        ends = deploy_data_host(hosts["data"], sys.executable, f"{state_dir}/data", ip["data"], state.subnet)
        data_secrets = Path(state.folder) / "data-secrets.json"
        hosts["data"].get(ends.secrets_file, data_secrets)
        cluster_secrets = Path(state.folder) / "cluster-secrets.json"
        write_atomic(cluster_secrets, json.dumps({"encryption_key": secrets.token_hex(32),
                                                  **json.loads(data_secrets.read_text())}), private=True)
        common = {"data": ip["data"], "main": ip["ingest"], "secrets_file": str(cluster_secrets)}
        deploy_n8n_role(hosts["ingest"], sys.executable, role="main", name="main", state=f"{state_dir}/ingest",
                        listen="127.0.0.1", production_off=True, **common)
        hooks = [deploy_n8n_role(hosts["ingest"], sys.executable, role="webhook", name=f"webhook-{i}", index=i,
                                 state=f"{state_dir}/ingest", listen="127.0.0.1", **common) for i in (1, 2)]
        worker = deploy_n8n_role(hosts["worker-1"], sys.executable, role="worker", name="worker-1",
                                 state=f"{state_dir}/worker-1", listen=ip["worker-1"], **common)
        rendered = yaml.safe_load(render_topology(topology, generate_secrets()).hosts["ingest"].compose)
        caddyfile = Path(state_dir) / "ingest" / "Caddyfile"
        caddyfile.write_text(lab_caddyfile(rendered["configs"]["caddyfile"]["content"], ip["ingest"]))
        deploy_caddy(hosts["ingest"], sys.executable, state=f"{state_dir}/ingest", config=str(caddyfile),
                     listen=ip["ingest"])
        base = f"http://{ip['ingest']}:{MAIN_PORT}"

        def status(url: str, method: str = "GET") -> str:
            res = hosts["gen-1"].run(f"curl -sS --max-time 60 -o /dev/null -w '%{{http_code}}' -X {method} "
                                     f"-H 'content-type: application/json' -d '{{}}' {url}", timeout_s=90)
            return res.stdout.strip()

        assert status(f"{base}/metrics") == "404"  # closed at the load balancer, as rendered
        session = set_up_instance(base)  # through Caddy to main
        flow = with_webhook_path(read_workflow("light"), f"lab-{secrets.token_hex(4)}")
        with session.client() as client:
            workflow_id, path = deploy_workflow(client, flow)
            codes = [status(f"{base}{path}", webhook_method(flow)) for _ in range(REQUESTS * 2)]
            counts = client.count_executions(workflow_id)
        assert codes == ["200"] * (REQUESTS * 2), codes
        assert counts.by_status == {"success": REQUESTS * 2}, counts
        worker_log = Path(worker.log).read_text()
        assert all(re.search(rf"Worker started execution {i}\b", worker_log) for i in counts.success_ids)
        # Main's own production webhook is off: the same path straight to main (on the ingest host's loopback)
        # is not served there; the processors serve it.
        direct = hosts["ingest"].run(f"curl -sS -o /dev/null -w '%{{http_code}}' -X {webhook_method(flow)} "
                                     f"-d '{{}}' http://127.0.0.1:{MAIN_PORT}{path}", timeout_s=60)
        assert direct.stdout.strip() != "200", direct.stdout
        assert all(Path(h.log).exists() for h in hooks)
    finally:
        for h in hosts.values():
            h.close()
        removal = remove_lab(state)
    assert not removal.failed, removal.failed
    assert not _processes_mentioning(str(workdir)), _processes_mentioning(str(workdir))
