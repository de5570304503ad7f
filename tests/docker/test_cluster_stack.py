"""`render --topology` (the cluster bundles) under one real Docker Engine with stand-in images.

The topology has the shape `advise --rps 200 --json` prints, made small: a data host (Postgres, Redis), an
ingest host (main, two webhook processors, Caddy as the load balancer) and two worker hosts with one worker
each. Every host bundle is one Compose project on the one engine; the hosts' private addresses sit on the
bridge of one Docker network with the topology's subnet (standins.cluster_network, docs/docker.md), so the
bundles run as rendered: Postgres and Redis published on the data host's private address, every n8n process
dialling that address. The hosts come up together, the data host last, as VMs boot in no order. The subnet
is this test's own (10.213.30.0/24); nothing else on the machine uses it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from n8n_sizer.bundle.drain import HEALTH_INTERVAL_S
from n8n_sizer.n8n.client import N8nClient

from .conftest import (
    CLI,
    DockerEngine,
    N8nSetup,
    Stack,
    blocked_queue_pops,
    call_webhook,
    render,
    save_logs,
    serves_as_before,
    set_up_n8n,
    standins,
    survives_worker_kill,
    wait_healthy,
    wait_success_count,
)

pytestmark = pytest.mark.docker
SUBNET = "10.213.30.0/24"
# advise --rps 200's shape (data + ingest with webhook processors + worker hosts), one worker per host.
# Concurrency 10 is n8n's default and what `check` asks for; the test sends a handful of webhooks.
TOPOLOGY = {
    "topology": [
        {"name": "data", "provider": "hetzner", "size": "cx23", "count": 1, "roles": {"postgres": 1, "redis": 1}},
        {
            "name": "ingest",
            "provider": "hetzner",
            "size": "cx33",
            "count": 1,
            "roles": {"main": 1, "webhook": 2, "load_balancer": 1},
        },
        {"name": "worker", "provider": "hetzner", "size": "cx23", "count": 2, "roles": {"workers": 1}},
    ],
    "concurrency": 10,
    "subnet": SUBNET,
}
SERVICES = {
    "data": {"n8n-postgres", "n8n-redis"},
    "ingest": {"n8n-main", "runner-main", "n8n-webhook-1", "n8n-webhook-2", "n8n-lb"},
    "worker-1": {"n8n-worker-1", "runner-worker-1"},
    "worker-2": {"n8n-worker-1", "runner-worker-1"},
}
UP_ORDER = ("data", "ingest", "worker-1", "worker-2")
INGEST_IP = "10.213.30.11"  # the second host of the subnet: where the load balancer answers (the public URL)
# The VMs boot in no order. Each host's `up --wait` starts together, and the data host's only this long after
# the others: longer than the 10 s n8n waits for Redis by default before it exits (the bundles raise it).
DATA_HOST_LATE_S = 20


@dataclass(frozen=True)
class Cluster:
    folder: Path
    stacks: dict[str, Stack]
    addresses: dict[str, str]  # host -> private address, from topology.json

    def up(self) -> None:
        """Every host's `up -d --wait` at once, the data host's DATA_HOST_LATE_S later: each must come up
        healthy by itself, as on VMs that boot together (depends_on cannot cross hosts)."""

        def start(name: str) -> float:
            if name == "data":
                time.sleep(DATA_HOST_LATE_S)
            return self.stacks[name].up()

        with ThreadPoolExecutor(max_workers=len(UP_ORDER)) as pool:
            for future in [pool.submit(start, name) for name in UP_ORDER]:
                future.result()  # compose's own error (which service, why) if a host did not come up

    def down(self, volumes: bool = False) -> None:
        for name in reversed(UP_ORDER):
            self.stacks[name].down(volumes=volumes)

    def lb_client(self, api_key: str | None = None) -> N8nClient:
        return N8nClient(f"http://127.0.0.1:{self.stacks['ingest'].port('n8n-lb', 5678)}", api_key)

    def logs(self, host: str, *services: str) -> str:
        return self.stacks[host].compose("logs", "--no-color", *services).stdout


def project(name: str) -> str:
    return f"n8nsizer-cl-{name}"


def leftovers(docker: DockerEngine) -> list[str]:
    """Containers, volumes and networks of this module's projects still on the engine."""
    found = []
    for kind in ("container", "volume", "network"):
        listing = docker.engine.docker(
            kind,
            "ls",
            *(["-a"] if kind == "container" else []),
            "--format",
            "{{.Names}}" if kind == "container" else "{{.Name}}",
        ).stdout.split()
        found += [f"{kind} {n}" for n in listing if n.startswith("n8nsizer-cl-") or n == "n8n-sizer-cluster"]
    if Path("/sys/class/net", standins.CLUSTER_BRIDGE).exists():
        found.append(f"bridge {standins.CLUSTER_BRIDGE} (with the hosts' private addresses)")
    return found


@pytest.fixture(scope="module")
def cluster(engine: DockerEngine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("cluster")
    topology_file = base / "topology-input.json"
    topology_file.write_text(json.dumps(TOPOLOGY))
    folder = base / "bundles"
    render(folder, "--topology", str(topology_file), "--public-url", f"http://{INGEST_IP}:5678/")
    manifest = json.loads((folder / "topology.json").read_text())
    addresses = {h["name"]: h["private_ip"] for h in manifest["hosts"]}
    assert set(addresses) == set(UP_ORDER) and manifest["subnet"] == SUBNET
    stacks = {name: Stack(engine, folder / name, project(name)) for name in UP_ORDER}
    network = standins.cluster_network(engine.engine, SUBNET, list(addresses.values()))
    try:
        for name in UP_ORDER:
            standins.write_override(folder / name / "docker-compose.yml", engine.images, SUBNET)
        result = Cluster(folder, stacks, addresses)
        result.up()
        yield result
    finally:
        failed = []
        for name in reversed(UP_ORDER):  # every host, even when one's down fails
            try:
                save_logs(stacks[name])
                stacks[name].down(volumes=True)
            except (AssertionError, subprocess.SubprocessError) as exc:
                failed.append(f"{name}: {exc}")
        standins.remove_cluster_network(engine.engine, network)
    assert not failed, failed
    left = leftovers(engine)
    assert not left, f"left on the engine after the cluster's teardown: {left}"


@pytest.fixture(scope="module")
def n8n(cluster: Cluster) -> Iterator[tuple[N8nClient, N8nSetup]]:
    with cluster.lb_client() as client:  # every call, the editor's API included, goes through Caddy
        yield client, set_up_n8n(client)


def test_every_service_on_every_host_is_healthy_by_its_own_healthcheck(cluster: Cluster) -> None:
    # the hosts came up together, the data host last (Cluster.up): n8n on the others waited for it
    for host, stack in cluster.stacks.items():
        states = {s["Service"]: (s["State"], s["Health"]) for s in stack.services()}
        assert set(states) == SERVICES[host], host
        assert all(state == ("running", "healthy") for state in states.values()), (host, states)


def test_data_ports_are_published_on_the_data_hosts_private_address_only(cluster: Cluster) -> None:
    data = cluster.stacks["data"]
    for service, port in (("n8n-postgres", 5432), ("n8n-redis", 6379)):
        published = data.compose("port", service, str(port)).stdout.strip()
        assert published == f"{cluster.addresses['data']}:{port}", (service, published)
    # the load balancer is what clients reach (on loopback here, by the override); main is not published
    assert cluster.stacks["ingest"].port("n8n-lb", 5678) > 0
    unpublished = cluster.stacks["ingest"].compose("port", "n8n-main", "5678", check=False)
    assert unpublished.returncode != 0 or unpublished.stdout.strip() in ("", ":0")


def test_a_subnet_already_routed_here_is_refused(cluster: Cluster, engine: DockerEngine) -> None:
    with pytest.raises(RuntimeError, match="already routed on this machine"):
        standins.cluster_network(engine.engine, SUBNET, list(cluster.addresses.values()), name="n8n-sizer-clash")
    assert "n8n-sizer-clash" not in engine.engine.docker("network", "ls", "--format", "{{.Name}}").stdout.split()


def test_every_n8n_process_reaches_the_data_host_by_its_private_address(cluster: Cluster) -> None:
    data_ip = cluster.addresses["data"]
    for host in ("ingest", "worker-1", "worker-2"):
        rendered = (cluster.folder / host / "docker-compose.yml").read_text()
        assert f'DB_POSTGRESDB_HOST: "{data_ip}"' in rendered and f'QUEUE_BULL_REDIS_HOST: "{data_ip}"' in rendered
    # each worker is waiting on the queue in the data host's Redis: one blocked pop per worker
    assert blocked_queue_pops(cluster.stacks["data"]) == 2


def test_webhook_through_the_load_balancer_runs_on_a_worker_host_and_is_stored(
    cluster: Cluster, n8n: tuple[N8nClient, N8nSetup]
) -> None:
    client, setup = n8n
    assert call_webhook(client._http, setup.webhook, 6) == [200] * 6
    assert wait_success_count(client, setup.workflow_id, 6) == 6
    ingest = cluster.logs("ingest", "n8n-webhook-1", "n8n-webhook-2")
    assert len(re.findall(r"Enqueued execution \d+", ingest)) >= 6  # the webhook processors took them
    assert "Enqueued execution" not in cluster.logs("ingest", "n8n-main")  # main's production webhooks are off
    ran = sum(cluster.logs(h, "n8n-worker-1").count("Worker finished execution") for h in ("worker-1", "worker-2"))
    assert ran >= 6  # workers on the worker hosts ran them
    assert "launching runner" in cluster.logs("worker-1", "runner-worker-1") + cluster.logs(
        "worker-2", "runner-worker-1"
    )
    # behind Caddy main trusts one X-Forwarded-For hop (N8N_PROXY_HOPS); without it the login above made
    # express-rate-limit log a ValidationError and key every client as the load balancer's address
    assert "X-Forwarded-For" not in cluster.logs("ingest", "n8n-main")


def test_the_production_webhook_path_reaches_webhook_processors_not_main(
    cluster: Cluster, n8n: tuple[N8nClient, N8nSetup]
) -> None:
    client, setup = n8n
    # main itself, asked past the load balancer (from Caddy's container), refuses the production path:
    # N8N_DISABLE_PRODUCTION_MAIN_PROCESS is in effect, so only the routing keeps webhooks working
    direct = cluster.stacks["ingest"].exec(
        "n8n-lb",
        "wget",
        "-S",
        "-O",
        "/dev/null",
        "--post-data",
        "{}",
        "--header",
        "content-type: application/json",
        f"http://n8n-main:5678{setup.webhook}",
    )
    assert "HTTP/1.1 404 Not Found" in direct.stderr, direct.stderr
    assert call_webhook(client._http, setup.webhook) == [200]  # the same request through Caddy
    assert client._http.get("/metrics").status_code == 404  # closed at the load balancer


def test_wrong_passwords_are_refused_on_the_private_address(cluster: Cluster) -> None:
    data, ip = cluster.stacks["data"], cluster.addresses["data"]
    wrong = data.exec("n8n-redis", "redis-cli", "-h", ip, "--no-auth-warning", "-a", "not-the-password", "ping")
    assert "WRONGPASS" in wrong.stdout + wrong.stderr
    right = data.exec("n8n-redis", "redis-cli", "-h", ip, "ping")  # REDISCLI_AUTH from the data host's .env
    assert right.stdout.strip() == "PONG"
    refused = data.exec(
        "n8n-postgres",
        "env",
        "PGPASSWORD=not-the-password",
        "psql",
        "-h",
        ip,
        "-U",
        "n8n",
        "-d",
        "n8n",
        "-tAc",
        "select 1",
    )
    assert refused.returncode != 0 and "password authentication failed" in refused.stderr
    taken = data.exec(
        "n8n-postgres",
        "sh",
        "-c",
        f'PGPASSWORD="$POSTGRES_PASSWORD" psql -h {ip} -U n8n -d n8n '
        "-tAc 'select rolsuper from pg_roles where rolname = current_user'",
    )
    assert taken.stdout.strip() == "f", taken.stderr  # n8n's own role, not the superuser (least privilege)
    root = data.exec(
        "n8n-postgres",
        "sh",
        "-c",
        f"PGPASSWORD=\"$POSTGRES_PASSWORD\" psql -h {ip} -U postgres -d postgres -tAc 'select 1'",
    )
    assert root.returncode != 0 and "rejects connection" in root.stderr, root.stderr  # the superuser stays inside


def test_a_killed_worker_host_process_leaves_the_cluster_answering(
    cluster: Cluster, n8n: tuple[N8nClient, N8nSetup]
) -> None:
    client, setup = n8n
    survives_worker_kill(client, setup, cluster.stacks["worker-1"], cluster.stacks["data"])


ROLLING_RATE_PER_S = 4  # bounded load: at most ROLLING_MAX_S x this many requests, two senders
ROLLING_MAX_S = 150


# Caddy checks each webhook processor every 2 s (5 s to answer): the next processor is stopped only once the
# load balancer has had this long to see the restarted one healthy (docs/cluster.md, the restart procedure).
LB_NOTICE_S = 3 * HEALTH_INTERVAL_S


def _send_until(
    url: str, path: str, stop: threading.Event, statuses: list[int], sent_at: list[tuple[float, int, str]]
) -> None:
    """POST the webhook at about ROLLING_RATE_PER_S / 2 until `stop` (or ROLLING_MAX_S); every status kept
    (0 for a request that got no answer), with the time it was sent and, for no answer, the error."""
    started = time.monotonic()
    with httpx.Client(base_url=url, timeout=60) as http:
        while not stop.is_set() and time.monotonic() - started < ROLLING_MAX_S:
            t0, sent = time.monotonic(), time.time()
            error = ""
            try:
                status = http.post(path, json={"rolling": True}).status_code
            except httpx.HTTPError as exc:
                status, error = 0, f"{type(exc).__name__}: {exc}"
            statuses.append(status)
            sent_at.append((sent, status, error))
            time.sleep(max(0.0, 2 / ROLLING_RATE_PER_S - (time.monotonic() - t0)))


def _restart(stack: Stack, service: str) -> None:
    """`docker compose stop` (SIGTERM, then the rendered stop_grace_period) and start again, healthy; a webhook
    processor also seen healthy by the load balancer before the next one goes."""
    stack.compose("stop", service, timeout=300)
    stack.compose("start", service, timeout=120)
    wait_healthy(stack, service, timeout_s=240)
    if service.startswith("n8n-webhook-"):
        time.sleep(LB_NOTICE_S)


WORKERS = ("worker-1", "worker-2")  # the worker hosts whose n8n-worker-1 the rolling restart stops


def _not_successful(cluster: Cluster, workflow_id: str) -> str:
    """Every execution of the workflow that did not succeed, as Postgres stores it (status, times, the start of
    its execution_data, where n8n writes the error), read as the superuser over the container's socket."""
    assert workflow_id.isalnum(), workflow_id
    sql = (
        'select e.id, e.status, e.mode, e."startedAt", e."stoppedAt", left(d.data, 800) from execution_entity e '
        'left join execution_data d on d."executionId" = e.id '
        f"where e.\"workflowId\" = '{workflow_id}' and e.status <> 'success' order by e.id"
    )
    return cluster.stacks["data"].exec("n8n-postgres", "psql", "-U", "postgres", "-d", "n8n", "-Atc", sql).stdout


def test_a_rolling_restart_under_load_loses_nothing_accepted(cluster: Cluster, n8n: tuple[N8nClient, N8nSetup]) -> None:
    """Issue 28's bar: every webhook processor and a worker on each worker host are stopped and started one
    after another while webhooks arrive through the load balancer. Every 2xx became a stored successful
    execution, and no execution failed (the stopping processes finished what they held; Caddy sent new
    requests to the others)."""
    client, setup = n8n
    before = client.count_executions(setup.workflow_id)
    url = f"http://127.0.0.1:{cluster.stacks['ingest'].port('n8n-lb', 5678)}"
    stop, statuses, sent_at, steps = threading.Event(), [], [], []
    senders = [
        threading.Thread(target=_send_until, args=(url, setup.webhook, stop, statuses, sent_at)) for _ in range(2)
    ]
    for sender in senders:
        sender.start()
    try:
        time.sleep(3)
        for host, service in (
            ("ingest", "n8n-webhook-1"),
            ("ingest", "n8n-webhook-2"),
            *((h, "n8n-worker-1") for h in WORKERS),
        ):
            began = time.time()
            _restart(cluster.stacks[host], service)
            steps.append((f"{host}/{service}", began, time.time()))
        time.sleep(3)
    finally:
        stop.set()
        for sender in senders:
            sender.join(timeout=90)
    accepted = sum(200 <= s < 300 for s in statuses)
    # shown with -s: the statuses, and which restart each refused request fell into
    refused = {
        name: dict(Counter(st for t, st, _ in sent_at if b <= t < e and not 200 <= st < 300)) for name, b, e in steps
    }
    unanswered = [(round(t - steps[0][1], 1), error) for t, st, error in sent_at if st == 0]
    print(f"rolling restart: unanswered (s after the first stop, error): {unanswered}")
    print(f"rolling restart: {len(statuses)} sent, statuses {dict(Counter(statuses))}; refused per step {refused}")
    assert accepted >= 20, statuses
    # Draining (docs/cluster.md#stopping-a-process-draining): a stopping processor leaves rotation before n8n stops, so nothing is
    # refused, not even while a processor stops.
    assert accepted == len(statuses), (dict(Counter(statuses)), refused)
    for processor in ("n8n-webhook-1", "n8n-webhook-2"):  # the drain step ran (the hook logs it)
        assert "n8n-sizer drain: SIGTERM received" in cluster.logs("ingest", processor), processor
    drains = {
        h: [ln for ln in cluster.logs(h, "n8n-worker-1").splitlines() if "n8n-sizer drain" in ln] for h in WORKERS
    }
    print(f"rolling restart: the workers' drain lines {drains}")
    for host, lines in drains.items():  # each stopping worker finished what Bull had handed it, then n8n stopped
        assert any("worker jobs settled" in ln for ln in lines), (host, lines)
    want = before.by_status.get("success", 0) + accepted
    got = wait_success_count(client, setup.workflow_id, want, timeout_s=180)
    after = client.count_executions(setup.workflow_id)
    assert got >= want, (got, want, Counter(statuses))
    failed = {k: v - before.by_status.get(k, 0) for k, v in after.by_status.items() if k not in ("success",)}
    # Issue 28's second bar: no execution fails. What did not succeed is shown from Postgres with its error.
    assert not any(failed.values()), (failed, _not_successful(cluster, setup.workflow_id))


def test_down_then_up_keeps_the_data(cluster: Cluster, n8n: tuple[N8nClient, N8nSetup]) -> None:
    client, setup = n8n
    before = wait_success_count(client, setup.workflow_id, 1)
    cluster.down()
    cluster.up()
    with cluster.lb_client(setup.api_key) as again:
        serves_as_before(again, setup, before)


def test_check_topology_passes_the_same_files(cluster: Cluster) -> None:
    command = [str(CLI)] if CLI.exists() else [sys.executable, "-c", "from n8n_sizer.cli import main; main()"]
    proc = subprocess.run(
        [*command, "check", "--topology", str(cluster.folder)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert " 0 failed" in proc.stdout
