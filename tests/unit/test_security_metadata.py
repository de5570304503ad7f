"""Issue 12, defect 5: containers cannot reach the cloud metadata endpoint, which serves the user_data
with every secret of the stack. The rendered cloud-init carries a script and a systemd unit; the script
itself is run here in network namespaces this test creates: a "container" namespace routed through a
"host" namespace (with Docker's FORWARD -> DOCKER-USER jump) to a "metadata" namespace that owns
169.254.169.254. The container is refused there and still reaches another address; the host itself still
reaches the endpoint (cloud-init needs it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import yaml

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.bundle.render import render_bundle
from n8n_sizer.bundle.secrets import generate_secrets

METADATA_IP = "169.254.169.254"  # Hetzner's and GCP's metadata endpoint
METADATA_BLOCK_SCRIPT = "/usr/local/sbin/n8n-sizer-metadata-block"


def _cloud_init() -> dict:
    return yaml.safe_load(render_bundle(Setup(mode="queue", workers=2), generate_secrets()).cloud_init)


def _files(doc: dict) -> dict[str, dict]:
    return {f["path"]: f for f in doc["write_files"]}


def test_cloud_init_installs_the_block_before_the_stack_starts() -> None:
    doc = _cloud_init()
    files = _files(doc)
    unit = files["/etc/systemd/system/n8n-sizer-metadata-block.service"]["content"]
    assert f"ExecStart={METADATA_BLOCK_SCRIPT}" in unit
    assert "Before=docker.service" in unit and "PartOf=docker.service" in unit and "WantedBy=docker.service" in unit
    assert files[METADATA_BLOCK_SCRIPT]["permissions"] == "0755"
    runcmd = [" ".join(map(str, c)) for c in doc["runcmd"]]
    enable = runcmd.index("systemctl enable --now n8n-sizer-metadata-block.service")
    assert enable < next(i for i, c in enumerate(runcmd) if c.endswith("up.sh"))
    up = files["/opt/n8n/up.sh"]["content"]
    assert up.index(f"iptables -C DOCKER-USER -d {METADATA_IP}/32") < up.index("docker compose pull")


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def _in(ns: str, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", ns, *cmd], check=check, capture_output=True, text=True, timeout=30)


CONNECT = textwrap.dedent("""
    import socket, sys
    try:
        socket.create_connection((sys.argv[1], 8080), timeout=5).close()
        print("connected")
    except OSError as exc:
        print(type(exc).__name__)
""")
LISTEN = textwrap.dedent("""
    import socket, sys
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", 8080)); s.listen(16); print("ready", flush=True)
    while True:
        s.accept()[0].close()
""")


@pytest.fixture
def namespaces():
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("iptables"):
        pytest.skip("network namespaces and iptables need root, ip(8) and iptables(8)")
    tag = f"md{os.getpid() % 100000}"
    names = {role: f"{tag}-{role}" for role in ("ctr", "hst", "md")}
    server = None
    try:
        for ns in names.values():
            _ip("netns", "add", ns)
        _ip(
            "link",
            "add",
            f"{tag}a",
            "netns",
            names["ctr"],
            "type",
            "veth",
            "peer",
            "name",
            f"{tag}b",
            "netns",
            names["hst"],
        )
        _ip(
            "link",
            "add",
            f"{tag}c",
            "netns",
            names["hst"],
            "type",
            "veth",
            "peer",
            "name",
            f"{tag}d",
            "netns",
            names["md"],
        )
        for ns, dev, addr in (
            (names["ctr"], f"{tag}a", "10.213.1.2/24"),
            (names["hst"], f"{tag}b", "10.213.1.1/24"),
            (names["hst"], f"{tag}c", "10.213.2.1/24"),
            (names["md"], f"{tag}d", "10.213.2.2/24"),
        ):
            _in(ns, "ip", "addr", "add", addr, "dev", dev)
            _in(ns, "ip", "link", "set", dev, "up")
            _in(ns, "ip", "link", "set", "lo", "up")
        _in(names["md"], "ip", "addr", "add", f"{METADATA_IP}/32", "dev", f"{tag}d")
        _in(names["md"], "ip", "route", "add", "10.213.1.0/24", "via", "10.213.2.1")
        _in(names["ctr"], "ip", "route", "add", "default", "via", "10.213.1.1")
        _in(names["hst"], "ip", "route", "add", f"{METADATA_IP}/32", "via", "10.213.2.2")
        _in(names["hst"], "sysctl", "-qw", "net.ipv4.ip_forward=1")
        server = subprocess.Popen(
            ["ip", "netns", "exec", names["md"], sys.executable, "-c", LISTEN], stdout=subprocess.PIPE, text=True
        )
        assert server.stdout.readline().strip() == "ready"
        yield names
    finally:
        if server is not None:
            server.kill()
            server.wait(timeout=10)
        for ns in names.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def test_the_rendered_rule_rejects_containers_and_spares_the_host(namespaces, tmp_path) -> None:
    script = tmp_path / "block.sh"
    script.write_text(_files(_cloud_init())[METADATA_BLOCK_SCRIPT]["content"])
    script.chmod(0o755)
    ctr, hst = namespaces["ctr"], namespaces["hst"]

    def connect(ns: str, ip: str) -> str:
        return _in(ns, sys.executable, "-c", CONNECT, ip).stdout.strip()

    assert connect(ctr, METADATA_IP) == "connected"  # the hole: without the rule a container gets through
    _in(hst, str(script))  # at boot, before Docker
    _in(hst, "iptables", "-I", "FORWARD", "-j", "DOCKER-USER")  # what Docker adds when it starts
    _in(hst, str(script))  # again, as after a Docker restart: idempotent
    rules = _in(hst, "iptables", "-S", "DOCKER-USER").stdout
    assert rules.count(f"-d {METADATA_IP}/32") == 1, rules
    assert connect(ctr, METADATA_IP) == "ConnectionRefusedError"
    assert connect(ctr, "10.213.2.2") == "connected"  # other traffic still flows
    assert connect(hst, METADATA_IP) == "connected"  # the host's cloud-init still reads its user_data
