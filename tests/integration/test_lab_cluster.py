"""Queue-mode clusters across lab hosts, deployed over SSH by `lab deploy`: Postgres and Redis on `data`, n8n
main (and webhook processors behind Caddy) on `ingest`, workers on their own hosts, each in its own namespace
with its own address, talking over the lab's bridge; load from a generator namespace.

Real n8n (the shared install), real Postgres, Redis and Caddy; only the lab's own subnet is ever contacted.
Slow (several cold n8n starts on a shared machine), so two tests.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import subprocess
from pathlib import Path

import pytest

from n8n_sizer.bundle.topology import parse_topology
from n8n_sizer.fleet.inventory import load_inventory
from n8n_sizer.lab.deploy import deploy_lab
from n8n_sizer.lab.netns import lab_up, remove_lab
from n8n_sizer.lab.state import read_lab_state
from n8n_sizer.n8n.client import set_up_instance
from n8n_sizer.n8n.workflows import deploy_workflow, read_workflow, webhook_method, with_webhook_path
from n8n_sizer.native.install import find_installed
from tests.integration.test_lab import CLI, TOPOLOGY, _processes_mentioning, _ssh, clean, pytestmark, workdir  # noqa: F401

pytestmark = [*pytestmark, pytest.mark.timeout(900)]
REQUESTS = 4  # a handful: this proves the path, the bench measures
NO_LB = {
    "topology": [
        {"name": "data", "provider": "hetzner", "size": "cx33", "roles": {"postgres": 1, "redis": 1}},
        {"name": "ingest", "provider": "hetzner", "size": "cx33", "roles": {"main": 1}},
        {"name": "worker", "provider": "hetzner", "size": "cx33", "count": 2, "roles": {"workers": 1}},
    ],
    "subnet": "10.213.7.0/24",
}


@pytest.fixture(autouse=True)
def _needs_services():
    if find_installed() is None or not all(shutil.which(t) for t in ("redis-server", "caddy", "curl")):
        pytest.skip("needs the shared n8n install (scripts/test.sh), Debian's redis-server, caddy and curl")


def _status(gen, url: str, method: str = "GET") -> str:
    res = gen.run(
        f"curl -sS --max-time 60 -o /dev/null -w '%{{http_code}}' -X {method} "
        f"-H 'content-type: application/json' -d '{{}}' {url}",
        timeout_s=90,
    )
    return res.stdout.strip()


def _load_and_count(base: str, gen, requests: int, state):
    """The owner `lab deploy` gave main through its environment (nobody can claim it over the network: the
    generator's own `/rest/owner/setup` is refused), an API key, a fresh webhook workflow; `requests` POSTs
    from the generator; the stored executions."""
    from pydantic import SecretStr

    from n8n_sizer.lab.deploy import lab_owner
    from n8n_sizer.n8n.client import OwnerLogin

    claim = gen.run(
        f"curl -sS --max-time 60 -o /dev/null -w '%{{http_code}}' -X POST -H 'content-type: "
        'application/json\' -d \'{"email": "x@y.invalid", "firstName": "x", "lastName": '
        f'"x", "password": "Claim-it-1234"}}\' {base}/rest/owner/setup',
        timeout_s=90,
    )
    assert claim.stdout.strip() != "200", claim.stdout
    email, password = lab_owner(Path(state.folder) / "hosts")
    session = set_up_instance(base, OwnerLogin(email=email, password=SecretStr(password)), owner_exists=True)
    flow = with_webhook_path(read_workflow("light"), f"lab-{secrets.token_hex(4)}")
    with session.client() as client:
        workflow_id, path = deploy_workflow(client, flow)
        codes = [_status(gen, f"{base}{path}", webhook_method(flow)) for _ in range(requests)]
        counts = client.count_executions(workflow_id)
    return codes, counts, path, webhook_method(flow)


def _peers(data_host, port: int) -> set[str]:
    res = data_host.run(f"ss -Htn state established '( sport = :{port} )'", timeout_s=30)
    return {line.split()[-1].rsplit(":", 1)[0] for line in res.stdout.splitlines()}


def test_main_and_a_worker_per_host_use_the_data_host_over_the_bridge(workdir, clean):
    out = workdir / "lab.json"
    state = lab_up(parse_topology(NO_LB), 1, out, cpu_budget=False)  # the deploy path on shared cores
    hosts = {}
    try:
        cluster = deploy_lab(out)
        inventory = load_inventory(out.read_text())
        ip = {name: h.private_ip for name, h in inventory.hosts.items()}
        hosts = {n: _ssh(inventory, n, state.client_key) for n in ("data", "gen-1")}
        assert cluster.url == f"http://{ip['ingest']}:5678" and cluster.load_balancer_pid is None
        assert sorted(cluster.processes) == ["ingest", "worker-1", "worker-2"]
        # Every process is ready as seen from the generator, over the bridge (a worker's readiness needs
        # its Postgres and Redis connections, both to the data host).
        for procs in cluster.processes.values():
            for p in procs:
                assert _status(hosts["gen-1"], p.ready_url) == "200", p
        for port in (5432, 6379):
            assert {ip["ingest"], ip["worker-1"], ip["worker-2"]} <= _peers(hosts["data"], port), port
            # the data ports answer the n8n hosts only: the generator, in the same subnet, gets a reset
            probe = hosts["gen-1"].run(
                f"curl -sS --max-time 5 telnet://{ip['data']}:{port} </dev/null; echo exit=$?", timeout_s=30
            )
            assert "exit=7" in probe.stdout, (port, probe.stdout, probe.stderr)
        codes, counts, _, _ = _load_and_count(cluster.url, hosts["gen-1"], REQUESTS, state)
        assert codes == ["200"] * REQUESTS, codes
        assert counts.by_status == {"success": REQUESTS}, counts
        logs = "".join(Path(p.log).read_text() for h in ("worker-1", "worker-2") for p in cluster.processes[h])
        assert all(re.search(rf"Worker started execution {i}\b", logs) for i in counts.success_ids)
        assert not re.search(r"Worker started execution", Path(cluster.processes["ingest"][0].log).read_text())
    finally:
        for h in hosts.values():
            h.close()
        removal = remove_lab(state)
    assert not removal.failed, removal.failed
    assert not _processes_mentioning(str(workdir)), _processes_mentioning(str(workdir))


def test_lab_up_deploy_down_with_caddy_and_two_webhook_processors(workdir, clean):
    """The rendered ingest host: Caddy on the private address routes /webhook/* to two `n8n webhook`
    processors and the rest to main (production webhooks off); workers on worker-1 and worker-2."""
    (workdir / "topology.json").write_text(json.dumps(TOPOLOGY))
    up = subprocess.run(
        CLI + ["lab", "up", "--topology", "topology.json", "--generators", "2", "--out", "lab.json", "--no-cpu-budget"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=workdir,
    )
    assert up.returncode == 0, up.stderr
    state = read_lab_state(workdir / "lab.json")
    hosts = {}
    try:
        deployed = subprocess.run(
            CLI + ["lab", "deploy", "--inventory", "lab.json", "--json"],
            capture_output=True,
            text=True,
            timeout=800,
            cwd=workdir,
        )
        assert deployed.returncode == 0, deployed.stderr
        cluster = json.loads(deployed.stdout)
        inventory = load_inventory((workdir / "lab.json").read_text())
        hosts = {n: _ssh(inventory, n, state.client_key) for n in ("ingest", "gen-2")}
        assert [p["name"] for p in cluster["processes"]["ingest"]] == ["main", "webhook-1", "webhook-2"]
        assert cluster["load_balancer_pid"] is not None
        assert _status(hosts["gen-2"], f"{cluster['url']}/metrics") == "404"  # closed at the load balancer
        codes, counts, path, method = _load_and_count(cluster["url"], hosts["gen-2"], REQUESTS, state)
        assert codes == ["200"] * REQUESTS, codes
        assert counts.by_status == {"success": REQUESTS}, counts
        # Main's own production webhooks are off: the same path straight to main is not served there, so the
        # requests above went through Caddy to the processors.
        direct = hosts["ingest"].run(
            f"curl -sS -o /dev/null -w '%{{http_code}}' -X {method} -d '{{}}' http://127.0.0.1:5678{path}", timeout_s=60
        )
        assert direct.stdout.strip() != "200", direct.stdout
    finally:
        for h in hosts.values():
            h.close()
        down = subprocess.run(
            CLI + ["lab", "down", "--inventory", "lab.json"], capture_output=True, text=True, timeout=120, cwd=workdir
        )
        remove_lab(state)  # a no-op when down worked
    assert down.returncode == 0, down.stderr
    assert not (workdir / "lab.json").exists()
    assert not _processes_mentioning(str(workdir)), _processes_mentioning(str(workdir))
