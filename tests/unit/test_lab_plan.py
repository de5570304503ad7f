"""The lab's pure plan (names, addresses, links, commands) and its inventory: no root, nothing created."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from n8n_sizer.bundle.topology import parse_topology
from n8n_sizer.errors import InputError
from n8n_sizer.fleet.inventory import load_inventory
from n8n_sizer.lab.plan import IFNAMSIZ, MAX_GENERATORS, link_commands, overlapping_routes, plan_lab, sshd_command
from n8n_sizer.lab.sshd import sshd_config_text
from n8n_sizer.lab.state import LabState, NamespaceRecord, lab_inventory, read_lab_state

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


def _plan(generators: int = 2, topology: dict = TOPOLOGY):
    return plan_lab(parse_topology(topology), generators, "a1b2c3")


def test_hosts_keep_the_topologys_names_and_addresses_and_generators_count_down_from_9():
    plan = _plan()
    assert [(n.name, n.kind, n.address) for n in plan.namespaces] == [
        ("data", "host", "10.213.7.10"),
        ("ingest", "host", "10.213.7.11"),
        ("worker-1", "host", "10.213.7.12"),
        ("worker-2", "host", "10.213.7.13"),
        ("gen-1", "generator", "10.213.7.9"),
        ("gen-2", "generator", "10.213.7.8"),
    ]
    assert (plan.bridge, plan.gateway, plan.prefix_len) == ("n8nsz-a1b2c3", "10.213.7.1", 24)
    assert plan.hosts()[1].roles == {
        "main": 1,
        "webhook": 2,
        "workers": 0,
        "postgres": 0,
        "redis": 0,
        "load_balancer": 1,
    }
    assert all(n.roles is None for n in plan.generators())
    links = [n.veth for n in plan.namespaces] + [plan.bridge]
    assert len(set(links)) == len(links) and all(len(name) <= IFNAMSIZ for name in links)


def test_the_default_subnet_is_the_one_the_bundles_are_rendered_with():
    topology = {k: v for k, v in TOPOLOGY.items() if k != "subnet"}
    assert _plan(topology=topology).hosts()[0].address == "10.89.0.10"


@pytest.mark.parametrize("n", [0, MAX_GENERATORS + 1])
def test_generators_out_of_range_are_refused(n):
    with pytest.raises(InputError, match="--generators"):
        _plan(n)


def test_a_topology_host_named_like_a_generator_is_refused():
    topology = json.loads(json.dumps(TOPOLOGY))
    topology["topology"][2]["name"] = "gen"
    with pytest.raises(InputError, match="'gen-1'"):
        _plan(topology=topology)


def test_link_commands_put_the_address_inside_and_the_veth_on_the_bridge():
    plan = _plan()
    cmds = link_commands(plan, plan.namespaces[1])
    ns = "n8nsz-a1b2c3-ingest"  # the lab's random id in the namespace's name (issue 24)
    assert cmds[0] == ["ip", "link", "add", "nza1b2c3-2", "type", "veth", "peer", "name", "eth0", "netns", ns]
    assert ["ip", "link", "set", "nza1b2c3-2", "master", "n8nsz-a1b2c3"] in cmds
    assert ["ip", "-n", ns, "addr", "add", "10.213.7.11/24", "dev", "eth0"] in cmds
    assert ["ip", "-n", ns, "link", "set", "lo", "up"] in cmds
    assert not any("route" in c for c in cmds)  # no default route: nothing can leave the subnet


def test_sshd_runs_in_its_namespace_under_its_hosts_name_and_keeps_its_pid():
    ns = next(n for n in _plan().namespaces if n.name == "worker-1")
    cmd = sshd_command(ns, "/usr/sbin/sshd", "/lab/worker-1.sshd_config")
    assert cmd[:5] == ["ip", "netns", "exec", "n8nsz-a1b2c3-worker-1", "unshare"] and "--fork" not in cmd
    assert 'exec "$2" -D -e -f "$3"' in cmd[cmd.index("-c") + 1]
    assert cmd[-3:] == ["worker-1", "/usr/sbin/sshd", "/lab/worker-1.sshd_config"]


def test_sshd_config_listens_on_the_namespace_address_and_takes_keys_only():
    ns = _plan().namespaces[0]
    text = sshd_config_text(ns, Path("/lab/data.host_key"), Path("/lab/authorized_keys"))
    lines = dict(line.split(" ", 1) for line in text.splitlines())
    assert lines["ListenAddress"] == "10.213.7.10" and lines["PasswordAuthentication"] == "no"
    assert lines["AuthorizedKeysFile"] == "/lab/authorized_keys" and lines["HostKey"] == "/lab/data.host_key"


ROUTES = """default via 192.0.2.1 dev eth0
192.0.2.0/24 dev eth0 proto kernel scope link src 192.0.2.2
local 127.0.0.0/8 dev lo table local proto kernel scope host src 127.0.0.1
2: eth0    inet 192.0.2.2/24 brd 192.0.2.255 scope global eth0
10.213.0.0/16 dev n8nsz-ffffff proto kernel scope link src 10.213.0.1
"""


def test_a_subnet_this_machine_already_routes_is_found():
    assert overlapping_routes(ROUTES, "10.213.7.0/24") == [
        "10.213.0.0/16 dev n8nsz-ffffff proto kernel scope link src 10.213.0.1"
    ]
    assert overlapping_routes(ROUTES, "10.89.0.0/24") == []  # the default route does not count as a clash
    # The machine's own network, its gateway included: a lab there would shadow the way out.
    assert [h.split()[0] for h in overlapping_routes(ROUTES, "192.0.2.0/25")] == ["default", "192.0.2.0/24", "2:"]


def _state() -> LabState:
    return LabState(
        lab_id="a1b2c3",
        bridge="n8nsz-a1b2c3",
        subnet="10.213.7.0/24",
        folder="/lab",
        client_key="/lab/client_key",
        namespaces=(
            NamespaceRecord(
                name="data",
                netns_inode=4026532300,
                veth="nza1b2c3-1",
                sshd_pid=1234,
                sshd_config="/lab/data.sshd_config",
            ),
        ),
    )


def test_the_lab_inventory_is_the_model_bench_reads_with_roles_per_host(tmp_path):
    plan, topology = _plan(), parse_topology(TOPOLOGY)
    text = lab_inventory(plan, topology, _state()).model_dump_json(exclude_none=True)
    inventory = load_inventory(text)
    assert [h.name for h in inventory.cluster_hosts()] == ["data", "ingest", "worker-1", "worker-2"]
    assert [h.private_ip for h in inventory.loadgens()] == ["10.213.7.9", "10.213.7.8"]
    assert inventory.hosts["data"].roles["postgres"] == 1 and inventory.targets() == []
    path = tmp_path / "lab.json"
    path.write_text(text)
    assert read_lab_state(path) == _state()


def test_a_fleet_inventory_still_needs_exactly_one_load_generator():
    data = json.loads(lab_inventory(_plan(), parse_topology(TOPOLOGY), _state()).model_dump_json())
    data["hosts"]["data"]["roles"] = None
    with pytest.raises(InputError, match="cluster host data needs roles"):
        load_inventory(json.dumps(data))
    for name in ("gen-1", "gen-2"):
        del data["hosts"][name]
    data["hosts"]["data"]["roles"] = {"postgres": 1}
    with pytest.raises(InputError, match="at least one load generator"):
        load_inventory(json.dumps(data))


def test_lab_down_refuses_an_inventory_without_a_lab_section(tmp_path):
    data = json.loads(lab_inventory(_plan(), parse_topology(TOPOLOGY), _state()).model_dump_json())
    del data["lab"]
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match="is not a lab's inventory"):
        read_lab_state(path)


@pytest.mark.skipif(os.geteuid() == 0 and shutil.which("setpriv") is None, reason="root without setpriv")
@pytest.mark.parametrize("verb", ["up", "down"])
def test_lab_needs_root_and_says_so_in_one_line(tmp_path, verb):
    (tmp_path / "t.json").write_text(json.dumps(TOPOLOGY))
    args = (
        ["--topology", str(tmp_path / "t.json"), "--out", str(tmp_path / "lab.json")]
        if verb == "up"
        else ["--inventory", str(tmp_path / "lab.json")]
    )
    cli = [sys.executable, "-c", "from n8n_sizer.cli import main; main()", "lab", verb, *args]
    drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
    res = subprocess.run(drop + cli, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1 and f"lab {verb} needs root" in res.stderr
    assert not (tmp_path / "lab.json").exists()


def test_the_lab_caddyfile_changes_addresses_only():
    import yaml

    from n8n_sizer.bundle.render_topology import render_topology
    from n8n_sizer.bundle.secrets import generate_secrets
    from n8n_sizer.lab.ingest import lab_caddyfile

    bundle = render_topology(parse_topology(TOPOLOGY), generate_secrets(), public_url="http://10.213.7.11:5678/").hosts[
        "ingest"
    ]
    rendered = yaml.safe_load(bundle.compose)["configs"]["caddyfile"]["content"]
    text = lab_caddyfile(rendered, "10.213.7.11")
    assert "http://10.213.7.11:5678 {\n  bind 10.213.7.11\n" in text and "admin 127.0.0.1:2019" in text
    assert "reverse_proxy 127.0.0.1:5681 127.0.0.1:5682 {" in text and "reverse_proxy 127.0.0.1:5678 {" in text
    assert "n8n-" not in text

    # Everything but the addresses is as rendered: the routes, health checks and the closed /metrics.
    def upstreams_masked(t: str) -> str:
        return re.sub(r"(n8n-[a-z0-9-]+|127\.0\.0\.1):\d+", "UPSTREAM", t)

    assert upstreams_masked(text.split("bind 10.213.7.11\n", 1)[1]) == upstreams_masked(rendered.split("\n", 1)[1])


def test_bench_takes_a_lab_inventory_and_refuses_a_cluster_stack_without_a_lab(tmp_path):
    from n8n_sizer.bench.session import read_inventory_file

    path = tmp_path / "lab.json"
    inventory = lab_inventory(_plan(), parse_topology(TOPOLOGY), _state())
    path.write_text(inventory.model_dump_json())
    assert read_inventory_file(path)["lab"]["lab_id"] == inventory.lab["lab_id"]
    path.write_text(inventory.model_copy(update={"lab": None}).model_dump_json())
    with pytest.raises(InputError, match="cluster stack.s inventory .*lab up"):
        read_inventory_file(path)


def test_a_record_naming_a_config_outside_the_lab_folder_singles_out_no_process(tmp_path):
    from n8n_sizer.lab.netns import _own_config
    from n8n_sizer.lab.state import MARKER

    lab = tmp_path / "lab"
    lab.mkdir()
    state = _state().model_copy(update={"folder": str(lab)})
    assert not _own_config(state, f"{lab}/data.sshd_config")  # no marker: a folder the record merely names
    (lab / MARKER).write_text(state.lab_id + "\n")
    (lab / MARKER).chmod(0o600)
    assert _own_config(state, f"{lab}/data.sshd_config")
    assert not _own_config(state, "/usr/sbin/sshd") and not _own_config(state, "/etc/ssh/sshd_config")
    assert not _own_config(state, f"{lab}/sub/data.sshd_config") and not _own_config(state, None)


def test_down_removes_only_links_that_carry_the_labs_id():
    """A hand-edited record naming someone else's link (or a look-alike) leaves it alone (issue 24)."""
    from n8n_sizer.lab.netns import Removal, _remove_links

    r = Removal()
    _remove_links(["nz-victim", "eth0", "docker0", "n8nsz-ffffff", "nza1b2c3-1x", "n8nsz-a1b2c3-x"], r, "a1b2c3")
    assert len(r.failed) == 6 and not r.removed and all("left alone" in f for f in r.failed)


def test_the_lab_data_host_admits_only_the_n8n_hosts_to_its_data_ports() -> None:
    """The same policy as the rendered data host's DOCKER-USER rules: n8n hosts first, then the subnet reset."""
    from n8n_sizer.bundle.render_topology import data_clients
    from n8n_sizer.lab.data import data_port_rules

    t = parse_topology(TOPOLOGY)
    clients = data_clients(t)
    assert clients == [h.private_ip for h in t.hosts() if h.roles.main or h.roles.webhook or h.roles.workers]
    rules = data_port_rules(t.subnet, clients)
    for port in ("5432", "6379"):
        mine = [r for r in rules if r[3] == port]
        assert [r[5] for r in mine[:-1]] == [f"{ip}/32" for ip in clients] and all(r[-1] == "ACCEPT" for r in mine[:-1])
        assert mine[-1][5] == t.subnet and mine[-1][-3:] == ["REJECT", "--reject-with", "tcp-reset"]
