"""Policy of the fleet program under Pulumi mocks (preview=False): what `pulumi up` would ask for.

Every stack in stacks/ is built through the real `__main__.py`; the policy tests build each stack with
the real deploy renderer wrapped to remember what it rendered, and inspect every registered resource.
"""

from __future__ import annotations

import ipaddress
from datetime import UTC, datetime
from pathlib import Path

import pulumi
import pytest
import yaml

from n8n_sizer.fleet.inventory import load_inventory
from n8n_sizer.fleet.labels import decode_expires_at
from n8n_sizer.fleet.program import LOADGEN_CLOUD_INIT, build_fleet, fleet_spec_from_pulumi, render_target_cloud_init
from n8n_sizer.fleet.spec import read_stack_config
from tests.infra.mocks import IMAGE_IDS, OPERATOR, ROOT, SECRET_SIG, FleetMocks, run_main, run_program, unsecret

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # pulumi_gcp warns on import

# Cluster stacks (a topology, a private network, data ports) have their own policy: test_cluster_policy.py.
STACKS = sorted(p for p in (ROOT / "stacks").glob("Pulumi.*.yaml") if not p.name.startswith("Pulumi.cluster-"))
BAD_STACKS = sorted((ROOT / "tests" / "data" / "stacks").glob("Pulumi.*.yaml"))
NOW = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
WORLD = {ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0")}
SERVER_TYPES = ("hcloud:index/server:Server", "gcp:compute/instance:Instance")


def stack_name(path: Path) -> str:
    return path.name[len("Pulumi.") : -len(".yaml")]


def build(path: Path) -> tuple[FleetMocks, dict[str, str], dict]:
    """Build a stack with the real renderer; return mocks, cloud-init per target, and the inventory."""
    rendered: dict[str, str] = {}
    out: dict = {}

    def remember(target):
        rendered[target.name] = render_target_cloud_init(target)
        return rendered[target.name]

    def body():
        fleet = build_fleet(fleet_spec_from_pulumi(), now=NOW, render=remember)
        return fleet.inventory.apply(out.update)

    mocks = run_program(stack_name(path), read_stack_config(path), body)
    return mocks, rendered, out


@pytest.fixture(scope="module", params=STACKS, ids=stack_name)
def built(request):
    return build(request.param)


def servers(mocks: FleetMocks):
    return [r for r in mocks.resources if r.typ in SERVER_TYPES]


def test_every_server_and_hetzner_resource_carries_the_fleet_labels(built):
    mocks, _, inventory = built
    labelled = servers(mocks) + [
        r for r in mocks.resources if r.typ.startswith("hcloud:") and r.typ != "hcloud:index/server:Server"
    ]
    assert len(servers(mocks)) == len(inventory["hosts"]) >= 2
    for res in labelled:
        labels = res.inputs["labels"]
        assert set(labels) == {"project", "stack", "owner", "role", "expires-at"}, res.name
        assert labels["project"] == "n8n-sizer" and labels["stack"] == inventory["stack"]
        expiry = decode_expires_at(labels["expires-at"])
        assert expiry is not None and expiry > NOW, (res.name, labels["expires-at"])


def _rules(mocks: FleetMocks) -> list[tuple[str, list[str]]]:
    """(port, sources) for every inbound rule of every firewall, Hetzner and GCP alike."""
    out = []
    for res in mocks.of_type("hcloud:index/firewall:Firewall"):
        for rule in res.inputs["rules"]:
            assert rule["direction"] == "in"
            out.append((rule["port"], rule["sourceIps"]))
    for res in mocks.of_type("gcp:compute/firewall:Firewall"):
        assert res.inputs["direction"] == "INGRESS"
        for allow in res.inputs["allows"]:
            for port in allow["ports"]:
                out.append((port, res.inputs["sourceRanges"]))
    return out


def test_no_port_is_open_to_the_world_and_only_22_and_5678_are_open(built):
    mocks, _, inventory = built
    rules = _rules(mocks)
    assert {port for port, _ in rules} == {"22", "5678"}
    loadgen = inventory["hosts"]["loadgen"]
    for port, sources in rules:
        nets = {ipaddress.ip_network(s, strict=False) for s in sources}
        assert not nets & WORLD, (port, sources)
        if port == "22":
            assert nets == {ipaddress.ip_network(OPERATOR)}
        else:  # 5678: the load generator's own addresses, nothing else
            ips = {loadgen["public_ip"], loadgen["private_ip"]} - {None}
            assert nets == {ipaddress.ip_network(f"{ip}/32") for ip in ips}


def test_the_load_generator_exposes_ssh_only_and_targets_get_the_n8n_rule(built):
    mocks, _, _ = built
    hetzner_fw = {
        r.id: {rule["port"] for rule in r.inputs["rules"]} for r in mocks.of_type("hcloud:index/firewall:Firewall")
    }
    for res in mocks.of_type("hcloud:index/server:Server"):
        [fw_id] = [str(int(i)) for i in res.inputs["firewallIds"]]  # attached at creation
        expected = {"22"} if res.inputs["labels"]["role"] == "loadgen" else {"22", "5678"}
        assert hetzner_fw[fw_id] == expected, res.name
    gcp_rules = mocks.of_type("gcp:compute/firewall:Firewall")
    for res in mocks.of_type("gcp:compute/instance:Instance"):
        tags = set(res.inputs["tags"])
        ports = {
            p
            for rule in gcp_rules
            if tags & set(rule.inputs["targetTags"])
            for allow in rule.inputs["allows"]
            for p in allow["ports"]
        }
        assert ports == ({"22"} if res.inputs["labels"]["role"] == "loadgen" else {"22", "5678"}), res.name


def test_user_data_is_the_rendered_cloud_init_kept_secret_and_under_32_kib(built):
    mocks, rendered, inventory = built
    assert set(rendered) == {n for n, h in inventory["hosts"].items() if h["role"] == "target"}
    for res in servers(mocks):
        role = res.inputs["labels"]["role"]
        if res.typ == "hcloud:index/server:Server":
            wire = res.inputs["userData"]
        else:
            wire = res.inputs["metadata"]
        assert isinstance(wire, dict) and wire.get("4dabf18193072939515e22adb298388d") == SECRET_SIG, res.name
        user_data = unsecret(wire) if res.typ.startswith("hcloud") else unsecret(wire)["user-data"]
        host = next(n for n in inventory["hosts"] if res.name.endswith(f"-{n}"))
        expected = rendered[host] if role == "target" else LOADGEN_CLOUD_INIT
        assert user_data == expected
        assert user_data.startswith("#cloud-config") and len(user_data.encode()) < 32 * 1024


def test_cax_sizes_get_an_arm64_image_and_cx_an_x86_one(built):
    mocks, _, inventory = built
    for res in mocks.of_type("hcloud:index/server:Server"):
        arch = "arm" if res.inputs["serverType"].startswith("cax") else "x86"
        assert res.inputs["image"] == str(IMAGE_IDS[arch]), res.name
    for res in mocks.of_type("gcp:compute/instance:Instance"):
        assert res.inputs["bootDisk"]["initializeParams"]["image"] == "ubuntu-os-cloud/ubuntu-2404-lts-amd64"
    arches = {h["size"]: h["arch"] for h in inventory["hosts"].values()}
    assert all(arch == ("arm" if size.startswith("cax") else "x86") for size, arch in arches.items())


def test_hosts_are_component_resources_with_children(built):
    mocks, _, inventory = built
    types = [r.typ for r in mocks.resources]
    assert types.count("n8n-sizer:fleet:LoadGenerator") == 1
    assert types.count("n8n-sizer:fleet:Target") == len(inventory["hosts"]) - 1


@pytest.mark.parametrize("path", STACKS, ids=stack_name)
def test_each_stack_file_builds_through_main_and_exports_an_inventory(path):
    mocks, program = run_main(stack_name(path), read_stack_config(path))
    fleet = program["fleet"]
    outputs = {}

    @pulumi.runtime.test
    def read():
        return fleet.inventory.apply(outputs.update)

    read()
    inventory = load_inventory(__import__("json").dumps(outputs))
    spec = yaml.safe_load(path.read_text())["config"]
    assert {t["name"] for t in spec["n8n-sizer:targets"]} == {t.name for t in inventory.targets()}
    assert inventory.loadgen().size == spec["n8n-sizer:loadgen"]["size"]
    assert fleet.ssh_private_key is not None  # no key in the stack files: one is generated
    assert mocks.of_type("tls:index/privateKey:PrivateKey")


@pytest.mark.parametrize("path", BAD_STACKS, ids=stack_name)
def test_each_bad_stack_file_stops_the_program_with_its_message(path):
    expected = path.read_text().splitlines()[0].split("expect: ", 1)[1]
    with pytest.raises(pulumi.RunError) as err:
        run_main(stack_name(path), read_stack_config(path))
    assert expected in str(err.value)
    assert "\n" not in str(err.value)


def test_the_load_generator_cloud_init_passes_debians_schema(tmp_path):
    import shutil
    import subprocess

    tool = shutil.which("cloud-init")
    if tool is None:
        pytest.fail("Debian's cloud-init is not installed (scripts/test.sh installs it)")
    path = tmp_path / "user-data.yaml"
    path.write_text(LOADGEN_CLOUD_INIT)
    proc = subprocess.run([tool, "schema", "--config-file", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "/var/lib/n8n-sizer-loadgen-ready" in LOADGEN_CLOUD_INIT  # bench/k6.py waits for it


def test_pulumi_up_refuses_the_placeholder_and_wide_ranges() -> None:
    """The stack files' RFC 5737 placeholder, and a range wider than a /16 without allow_wide_ssh, never become
    an SSH firewall rule; allow_wide_ssh: true is the explicit way to open a wide one."""
    from n8n_sizer.errors import InputError

    path = STACKS[0]
    config = read_stack_config(path)
    with pytest.raises(InputError, match="documentation example range"):
        run_program(stack_name(path), config, lambda: fleet_spec_from_pulumi(), keep_placeholder=True)
    for wide in ("0.0.0.0/1", "10.0.0.0/8"):
        with pytest.raises(InputError, match="wider than a /16"):
            run_program(stack_name(path), {**config, "n8n-sizer:operator_cidr": wide}, lambda: fleet_spec_from_pulumi())
    seen = {}
    run_program(
        stack_name(path),
        {**config, "n8n-sizer:operator_cidr": "100.64.0.0/10", "n8n-sizer:allow_wide_ssh": True},
        lambda: seen.update(spec=fleet_spec_from_pulumi()),
    )
    assert seen["spec"].operator_cidr == "100.64.0.0/10" and seen["spec"].allow_wide_ssh
