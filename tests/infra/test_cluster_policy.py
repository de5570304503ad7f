"""Policy of the cluster stacks (stacks/Pulumi.cluster-*.yaml) under Pulumi mocks (preview=False).

Each stack is built through the real program with the real renderer wrapped to remember what it rendered,
then every registered resource is inspected: a private network every server joins at its rendered address,
no 5432/6379/5678 open to the world, firewalls per role, labels with expires-at, user_data equal to the
host's rendered cloud-init and under the provider's limit, and an inventory with roles and private addresses.
"""

from __future__ import annotations

import ipaddress
import json
from datetime import UTC, datetime
from pathlib import Path

import pulumi
import pytest
import yaml

from n8n_sizer.fleet.cluster.build import ClusterInventory, build_cluster, render_cluster_cloud_init
from n8n_sizer.fleet.cluster.spec import USER_DATA_LIMIT_BYTES
from n8n_sizer.fleet.labels import decode_expires_at
from n8n_sizer.fleet.program import LOADGEN_CLOUD_INIT, fleet_spec_from_pulumi
from n8n_sizer.fleet.spec import read_stack_config
from n8n_sizer.fleet.stackfile import load_stack_file
from tests.infra.mocks import OPERATOR, SECRET_SIG, FleetMocks, run_main, run_program, unsecret

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

ROOT = Path(__file__).resolve().parents[2]
STACKS = sorted((ROOT / "stacks").glob("Pulumi.cluster-*.yaml"))
NOW = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
WORLD = {ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0")}
SERVER_TYPES = ("hcloud:index/server:Server", "gcp:compute/instance:Instance")
DATA_PORTS = {"5432", "6379", "5678"}


def stack_name(path: Path) -> str:
    return path.name[len("Pulumi.") : -len(".yaml")]


def test_there_is_a_hetzner_and_a_gcp_cluster_stack() -> None:
    providers = {load_stack_file(p).provider for p in STACKS}
    assert providers == {"hetzner", "gcp"}


@pytest.fixture(scope="module", params=STACKS, ids=stack_name)
def built(request):
    rendered: dict[str, str] = {}
    out: dict = {}

    def remember(topology, public_url):
        rendered.update(render_cluster_cloud_init(topology, public_url))
        return dict(rendered)

    def body():
        spec = fleet_spec_from_pulumi()
        cluster = build_cluster(spec, now=NOW, render=remember)
        return cluster.inventory.apply(out.update)

    mocks = run_program(stack_name(request.param), read_stack_config(request.param), body)
    return mocks, rendered, ClusterInventory.model_validate(out)


def servers(mocks: FleetMocks):
    return [r for r in mocks.resources if r.typ in SERVER_TYPES]


def host_of(res, inventory: ClusterInventory) -> str:
    return next(n for n in inventory.hosts if res.inputs["name"].endswith(f"-{n}"))


def test_a_private_network_every_server_joins_at_its_rendered_address(built):
    mocks, _, inventory = built
    subnet = ipaddress.ip_network(inventory.subnet)
    if inventory.provider == "hetzner":
        [net] = mocks.of_type("hcloud:index/network:Network")
        [sub] = mocks.of_type("hcloud:index/networkSubnet:NetworkSubnet")
        assert sub.inputs["ipRange"] == inventory.subnet and sub.inputs["type"] == "cloud"
        assert subnet.subnet_of(ipaddress.ip_network(net.inputs["ipRange"]))
        for res in servers(mocks):
            [attachment] = res.inputs["networks"]
            assert str(int(attachment["networkId"])) == net.id
            assert attachment["ip"] == inventory.hosts[host_of(res, inventory)].private_ip
    else:
        [net] = mocks.of_type("gcp:compute/network:Network")
        [sub] = mocks.of_type("gcp:compute/subnetwork:Subnetwork")
        assert net.inputs["autoCreateSubnetworks"] is False and sub.inputs["ipCidrRange"] == inventory.subnet
        for res in servers(mocks):
            [nic] = res.inputs["networkInterfaces"]
            assert nic["networkIp"] == inventory.hosts[host_of(res, inventory)].private_ip
    assert len(servers(mocks)) == len(inventory.hosts) >= 4
    assert all(ipaddress.ip_address(h.private_ip) in subnet for h in inventory.hosts.values())


def _rules(mocks: FleetMocks) -> list[tuple[str, set, list[str]]]:
    """(port, source networks, what the rule applies to) for every inbound rule."""
    out = []
    for res in mocks.of_type("hcloud:index/firewall:Firewall"):
        for rule in res.inputs["rules"]:
            assert rule["direction"] == "in"
            out.append((rule["port"], {ipaddress.ip_network(s, strict=False) for s in rule["sourceIps"]}, [res.id]))
    for res in mocks.of_type("gcp:compute/firewall:Firewall"):
        assert res.inputs["direction"] == "INGRESS"
        for allow in res.inputs["allows"]:
            for port in allow["ports"]:
                nets = {ipaddress.ip_network(s, strict=False) for s in res.inputs["sourceRanges"]}
                out.append((port, nets, res.inputs["targetTags"]))
    return out


def test_no_data_or_n8n_port_is_open_to_the_world_and_each_comes_from_its_own_place(built):
    mocks, _, inventory = built
    loadgen = inventory.hosts["loadgen"]
    loadgen_nets = {ipaddress.ip_network(f"{ip}/32") for ip in (loadgen.public_ip, loadgen.private_ip)}
    rules = _rules(mocks)
    assert {p for p, _, _ in rules} >= {"22", "5432", "6379", "5678"}
    for port, nets, _ in rules:
        assert not nets & WORLD, (port, nets)
        if port == "22":
            assert nets == {ipaddress.ip_network(OPERATOR)}
        elif port in ("5432", "6379"):  # the hosts that run n8n, never the load generator
            n8n_hosts = {
                ipaddress.ip_network(f"{h.private_ip}/32")
                for h in inventory.hosts.values()
                if h.roles.get("main") or h.roles.get("webhook") or h.roles.get("workers")
            }
            assert nets == n8n_hosts and not nets & loadgen_nets, (port, nets)
        else:  # 5678 (and webhook ports): the load generator, or the load balancer's host only
            lb = next(h for h in inventory.hosts.values() if h.roles.get("load_balancer"))
            assert nets <= loadgen_nets or nets == {ipaddress.ip_network(f"{lb.private_ip}/32")}, (port, nets)


def test_firewalls_follow_the_roles(built):
    mocks, _, inventory = built
    if inventory.provider == "hetzner":
        ports = {
            r.id: {rule["port"] for rule in r.inputs["rules"]} for r in mocks.of_type("hcloud:index/firewall:Firewall")
        }
        for res in servers(mocks):
            host = inventory.hosts[host_of(res, inventory)]
            opened = set().union(*(ports[str(int(i))] for i in res.inputs["firewallIds"]))
            want = {"22"}
            if host.roles.get("postgres") or host.roles.get("redis"):
                want |= {"5432", "6379"}
            if host.roles.get("load_balancer"):
                want |= {"5678"}
            assert opened == want, (host.name, opened)
    else:
        rules = mocks.of_type("gcp:compute/firewall:Firewall")
        for res in servers(mocks):
            host = inventory.hosts[host_of(res, inventory)]
            tags = set(res.inputs["tags"])
            opened = {
                p for r in rules if tags & set(r.inputs["targetTags"]) for a in r.inputs["allows"] for p in a["ports"]
            }
            assert ("5432" in opened) == bool(host.roles.get("postgres")), host.name
            assert ("22" in opened) and (host.role != "loadgen" or opened == {"22"}), host.name


def test_every_server_and_hetzner_resource_is_labelled_with_expires_at(built):
    mocks, _, inventory = built
    labelled = servers(mocks) + [
        r
        for r in mocks.resources
        if r.typ.startswith("hcloud:") and r.typ not in ("hcloud:index/networkSubnet:NetworkSubnet",)
    ]
    for res in labelled:
        labels = res.inputs["labels"]
        assert set(labels) == {"project", "stack", "owner", "role", "expires-at"}, res.name
        assert labels["stack"] == inventory.stack
        expiry = decode_expires_at(labels["expires-at"])
        assert expiry is not None and expiry > NOW
    for res in mocks.of_type("gcp:compute/firewall:Firewall") + mocks.of_type("gcp:compute/network:Network"):
        assert "expires-at=" in res.inputs["description"]


def test_user_data_is_each_hosts_rendered_cloud_init_secret_and_under_the_limit(built):
    mocks, rendered, inventory = built
    assert set(rendered) == {n for n, h in inventory.hosts.items() if h.role == "cluster"}
    limit = USER_DATA_LIMIT_BYTES[inventory.provider]
    keys, urls = set(), set()
    for res in servers(mocks):
        wire = res.inputs["userData"] if res.typ.startswith("hcloud") else res.inputs["metadata"]
        assert isinstance(wire, dict) and wire.get("4dabf18193072939515e22adb298388d") == SECRET_SIG
        text = unsecret(wire) if res.typ.startswith("hcloud") else unsecret(wire)["user-data"]
        name = host_of(res, inventory)
        assert text == (LOADGEN_CLOUD_INIT if name == "loadgen" else rendered[name])
        assert text.startswith("#cloud-config") and len(text.encode()) <= min(limit, 32 * 1024)
        if name != "loadgen":
            keys |= {
                line.split("=", 1)[1] for line in _env_of(text).splitlines() if line.startswith("N8N_ENCRYPTION_KEY=")
            }
            urls |= {line.split("=", 1)[1] for line in _env_of(text).splitlines() if line.startswith("N8N_PUBLIC_URL=")}
    assert len(keys) == 1  # one secret set for the whole cluster
    # the stack's public URL reaches every n8n host (never localhost: webhooks are called from outside)
    stack = next(p for p in STACKS if stack_name(p) == inventory.stack)
    assert urls == {yaml.safe_load(stack.read_text())["config"]["n8n-sizer:public_url"]}


def _env_of(cloud_init: str) -> str:
    import base64
    import gzip

    for entry in yaml.safe_load(cloud_init)["write_files"]:
        if entry["path"].endswith("/.env"):
            content = entry["content"]
            return gzip.decompress(base64.b64decode(content)).decode() if entry.get("encoding") else content
    raise AssertionError("no .env in cloud-init")


def test_hosts_are_components_per_role_and_the_inventory_lists_roles(built):
    mocks, _, inventory = built
    types = [r.typ for r in mocks.resources]
    assert types.count("n8n-sizer:fleet:LoadGenerator") == 1
    assert types.count("n8n-sizer:cluster:DataHost") == 1
    assert types.count("n8n-sizer:cluster:IngestHost") == 1
    assert types.count("n8n-sizer:cluster:WorkerHost") == sum(
        1 for h in inventory.hosts.values() if h.roles.get("workers")
    )
    roles = {n: h.roles for n, h in inventory.hosts.items() if h.role == "cluster"}
    assert sum(r["main"] for r in roles.values()) == 1 and sum(r["postgres"] for r in roles.values()) == 1


@pytest.mark.parametrize("path", STACKS, ids=stack_name)
def test_each_cluster_stack_builds_through_main(path: Path) -> None:
    mocks, program = run_main(stack_name(path), read_stack_config(path))
    outputs: dict = {}

    @pulumi.runtime.test
    def read():
        return program["fleet"].inventory.apply(outputs.update)

    read()
    inventory = ClusterInventory.model_validate(json.loads(json.dumps(outputs)))
    groups = yaml.safe_load(path.read_text())["config"]["n8n-sizer:cluster"]["topology"]
    assert len(inventory.hosts) == 1 + sum(g.get("count", 1) for g in groups)
    assert mocks.of_type("tls:index/privateKey:PrivateKey")


def test_a_cluster_stack_with_a_bad_topology_stops_with_one_line(tmp_path: Path) -> None:
    config = read_stack_config(STACKS[0])
    config["n8n-sizer:cluster"] = {
        "topology": [
            {"name": "solo", "provider": load_stack_file(STACKS[0]).provider, "size": "cx33", "roles": {"workers": 2}}
        ]
    }
    with pytest.raises(pulumi.RunError) as err:
        run_main("bad-cluster", config)
    assert "n8n-sizer:cluster" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("url", [None, "http://localhost:5678/", "http://127.0.0.1:5678/"])
def test_a_cluster_stack_without_a_public_url_stops_with_one_line(url) -> None:
    config = read_stack_config(STACKS[0])
    config.pop("n8n-sizer:public_url")
    if url is not None:
        config["n8n-sizer:public_url"] = url
    with pytest.raises(pulumi.RunError) as err:
        run_main("no-url-cluster", config)
    assert "n8n-sizer:public_url" in str(err.value) and "\n" not in str(err.value)


def test_the_data_host_admits_only_the_n8n_hosts_to_its_data_ports(built):
    """Hetzner's firewall leaves the private network open and the load generator shares the subnet: the data
    host's own DOCKER-USER rules (in its cloud-init) admit the n8n hosts to 5432/6379 and reset everyone else."""
    from n8n_sizer.bundle.cloudinit import METADATA_BLOCK_SCRIPT

    _, rendered, inventory = built
    data = next(n for n, h in inventory.hosts.items() if h.roles.get("postgres"))
    [script] = [
        f["content"] for f in yaml.safe_load(rendered[data])["write_files"] if f["path"] == METADATA_BLOCK_SCRIPT
    ]
    n8n_hosts = [
        h.private_ip
        for h in inventory.hosts.values()
        if h.roles.get("main") or h.roles.get("webhook") or h.roles.get("workers")
    ]
    inserts = [line.split("|| iptables -I ", 1)[1] for line in script.splitlines() if "|| iptables -I " in line]
    # -I puts each rule at the top: the last inserted is evaluated first
    order = list(reversed(inserts))
    for port in ("5432", "6379"):
        admits = [r for r in order if f"--dport {port} -j RETURN" in r]
        assert sorted(r.split()[2] for r in admits) == sorted(f"{ip}/32" for ip in n8n_hosts)
        reject = order.index(
            f"DOCKER-USER -s {inventory.subnet} -p tcp --dport {port} -j REJECT --reject-with tcp-reset"
        )
        assert all(order.index(r) < reject for r in admits)
    assert inventory.hosts["loadgen"].private_ip not in script
