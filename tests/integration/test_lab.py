"""A real lab: network namespaces on a private bridge, each with Debian's sshd, made and removed.

Only addresses of the lab's own subnet (10.213.7.0/24, on a bridge the lab creates) are ever contacted. Each
test makes its own lab (about a second) and the fixture removes it by its record whatever happens; every test
ends by checking that nothing of any lab is left: no namespace, link, process or key.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from n8n_sizer.bundle.topology import parse_topology
from n8n_sizer.errors import RemoteError
from n8n_sizer.fleet.inventory import load_inventory
from n8n_sizer.hosts.cgroups import CpuGroup, available_mounts, parse_proc_cgroup
from n8n_sizer.hosts.host import SshHost
from n8n_sizer.lab.netns import bridged_frames_filtered, lab_up, remove_lab
from n8n_sizer.lab.plan import forward_rule
from n8n_sizer.lab.state import read_lab_state

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the lab needs root (network namespaces)"),
    pytest.mark.skipif(not Path("/usr/sbin/sshd").exists(), reason="openssh-server is not installed"),
    pytest.mark.timeout(120),
]

SUBNET = "10.213.7.0/24"
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
    "subnet": SUBNET,
}
NAMES = ["data", "ingest", "worker-1", "worker-2", "gen-1", "gen-2"]
LAB_LINK = re.compile(r"^(n8nsz-[0-9a-f]{6}|nz[0-9a-f]{6}-\d+)$")
LAB_NETNS = re.compile(r"^n8nsz-[0-9a-f]{6}-")  # every lab namespace carries its lab's random id (issue 24)
CLI = [sys.executable, "-c", "from n8n_sizer.cli import main; main()"]


def _namespaces() -> set[str]:
    return set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()


def _lab_namespaces() -> set[str]:
    return {n for n in _namespaces() if LAB_NETNS.match(n)}


def _netns(state, host: str) -> str:
    return f"n8nsz-{state.lab_id}-{host}"


def _lab_links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    names = {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()}
    return {n for n in names if LAB_LINK.match(n)}


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and entry.name != str(os.getpid()):
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if text in cmd and state != "Z":
                found.append(f"{entry.name}: {cmd}")
    return found


def assert_nothing_left(workdir: Path, before: set[str], links_before: set[str] = frozenset()) -> None:
    # Not `== before`: other work on this machine (another engineer's lab) may make its own meanwhile.
    assert not _lab_namespaces() - before, _lab_namespaces() - before
    assert not _lab_links() - links_before, _lab_links() - links_before
    assert not _processes_mentioning(str(workdir)), _processes_mentioning(str(workdir))
    assert not list(workdir.glob(".n8nsz-lab-*")), list(workdir.glob(".n8nsz-lab-*"))
    if shutil.which("iptables"):
        others = {link.removeprefix("n8nsz-") for link in links_before if link.startswith("n8nsz-")}
        rules = subprocess.run(["iptables", "-w", "5", "-S", "FORWARD"], capture_output=True, text=True).stdout
        ours = [r for r in rules.splitlines() if "n8n-sizer lab" in r and not any(o in r for o in others)]
        assert not ours, ours


@pytest.fixture
def workdir():
    """The test's folder, one Debian's `postgres` user can pass through (pytest's tmp_path is root-only when
    run as root), for the data role's Postgres inside the lab's folder."""
    folder = Path(tempfile.mkdtemp(prefix="n8n-sizer-lab-test-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def clean(workdir):
    """Refuse to start over a previous lab's leftovers; after the test, nothing of a lab may be left."""
    before, links_before = _namespaces(), _lab_links()
    yield before
    assert_nothing_left(workdir, before, links_before)


@pytest.fixture
def lab(workdir, clean):
    out = workdir / "lab.json"
    state = lab_up(parse_topology(TOPOLOGY), 2, out)
    try:
        yield out, state
    finally:
        remove_lab(state)


def _ssh(inventory, name: str, key: str) -> SshHost:
    host = inventory.hosts[name]
    return SshHost(name, host.public_ip, host.ssh_user, key_file=Path(key), connect_timeout_s=10)


def test_every_host_is_its_own_machine_on_its_own_address(lab):
    out, state = lab
    inventory = load_inventory(out.read_text())
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and stat.S_IMODE(Path(state.client_key).stat().st_mode) == 0o600
    assert sorted(h.name for h in inventory.cluster_hosts()) == ["data", "ingest", "worker-1", "worker-2"]
    assert inventory.hosts["ingest"].roles["webhook"] == 2
    seen = {}
    for name in NAMES:
        host = _ssh(inventory, name, state.client_key)
        try:
            res = host.run("hostname; hostname -I; ip -o -4 addr show", timeout_s=20)
        finally:
            host.close()
        lines = res.stdout.splitlines()
        assert lines[0] == name  # its own UTS namespace
        assert lines[1].split() == [inventory.hosts[name].private_ip]  # one address: its own
        assert sorted(re.findall(r"^\d+: (\S+)", res.stdout, re.M)) == ["eth0", "lo"]
        seen[name] = lines[1].strip()
    assert len(set(seen.values())) == len(NAMES)


def test_every_host_runs_in_its_own_cpu_budget_and_a_busy_one_is_held_to_it(lab):
    out, state = lab
    cpu = state.cpu
    assert cpu is not None and cpu.total_vcpu == 16 and cpu.scale == pytest.approx(cpu.usable_cores / 16)
    assert load_inventory(out.read_text()).lab["cpu"]["scale"] == cpu.scale  # recorded in the inventory
    mounts = available_mounts()
    inventory = load_inventory(out.read_text())
    for name in NAMES:
        host = _ssh(inventory, name, state.client_key)
        try:
            groups = parse_proc_cgroup(host.run("cat /proc/self/cgroup", timeout_s=20).stdout)
        finally:
            host.close()
        own = cpu.host(name)
        assert groups["cpu"] == groups["cpuacct"] == "/" + (own.cgroup if own else cpu.generators_group)
        if own is not None:
            quota = int((mounts["cpu"] / own.cgroup / "cpu.cfs_quota_us").read_text())
            assert quota == own.quota_us == round(4 * cpu.scale * 100_000)  # cx33: 4 vCPU
    # A busy loop over SSH on worker-1 (2 s of wall time at most) uses no more than its budget allows.
    worker = CpuGroup(cpu.host("worker-1").cgroup, mounts)
    before, started = worker.usage_ns(), time.monotonic()
    host = _ssh(inventory, "worker-1", state.client_key)
    try:
        host.run("timeout 2 sh -c 'while :; do :; done' || true", timeout_s=30)
    finally:
        host.close()
    used_s, wall = (worker.usage_ns() - before) / 1e9, time.monotonic() - started
    assert 0.5 * cpu.host("worker-1").cores * 2 <= used_s <= 1.3 * cpu.host("worker-1").cores * wall, (used_s, wall)


def test_a_generator_reaches_the_ingest_hosts_sshd_over_the_bridge_and_nothing_beyond(lab):
    out, state = lab
    inventory = load_inventory(out.read_text())
    ingest = inventory.hosts["ingest"].private_ip
    gen = _ssh(inventory, "gen-1", state.client_key)
    try:
        res = gen.run(
            f"ssh -i {state.client_key} -o BatchMode=yes -o StrictHostKeyChecking=no "
            f"-o UserKnownHostsFile=/dev/null -o ConnectTimeout=10 root@{ingest} 'hostname; hostname -I'",
            timeout_s=30,
        )
        assert res.stdout.split() == ["ingest", ingest]
        # No default route: the kernel has no way out of the subnet (a route lookup, no packet sent).
        lookup = gen.run("ip route get 192.0.2.1", timeout_s=10, check=False)
        assert lookup.exit_code != 0 and "unreachable" in lookup.stderr.lower()
    finally:
        gen.close()


def test_lab_down_removes_every_namespace_link_process_and_key(workdir, clean):
    (workdir / "topology.json").write_text(json.dumps(TOPOLOGY))
    up = subprocess.run(
        CLI + ["lab", "up", "--topology", "topology.json", "--generators", "2", "--out", "lab.json", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=workdir,
    )
    assert up.returncode == 0, up.stderr
    shown = json.loads(up.stdout)
    state = read_lab_state(workdir / "lab.json")
    try:
        assert shown["hosts"]["gen-2"] == {"address": "10.213.7.8", "role": "loadgen"}
        mine = {link for link in _lab_links() if state.lab_id in link}
        assert {_netns(state, n) for n in NAMES} <= _namespaces() and len(mine) == len(NAMES) + 1
        # Where br_netfilter hands bridged frames to iptables (Docker's FORWARD policy is DROP), the lab adds
        # one rule for its own bridge, and down takes it out again.
        rule = ["iptables", "-w", "5", "-C", *forward_rule(state.bridge, state.lab_id)]
        assert state.forward_rule == bridged_frames_filtered()
        if state.forward_rule:
            assert subprocess.run(rule, capture_output=True).returncode == 0
        pids = [ns.sshd_pid for ns in state.namespaces]
        assert all(Path(f"/proc/{p}").exists() for p in pids)
        # An open session is a process in the namespace too; down must take it with the rest.
        session = _ssh(load_inventory((workdir / "lab.json").read_text()), "worker-1", state.client_key)
        session.run("true", timeout_s=20)
        down = subprocess.run(
            CLI + ["lab", "down", "--inventory", "lab.json", "--json"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=workdir,
        )
        assert down.returncode == 0, down.stderr
        removed = json.loads(down.stdout)["removed"]
        assert {f"namespace {_netns(state, n)}" for n in NAMES} <= set(removed) and f"link {state.bridge}" in removed
        assert not (workdir / "lab.json").exists() and not Path(state.folder).exists()
        assert f"cgroup /sys/fs/cgroup/cpu/{state.cpu.group}" in removed  # by its recorded name, with the lab's id
        assert not any((m / state.cpu.group).exists() for m in available_mounts().values())
        if state.forward_rule:
            assert subprocess.run(rule, capture_output=True).returncode != 0
        assert not [p for p in pids if _processes_mentioning(f"{state.folder}/")], pids
        session.close()
    finally:
        remove_lab(state)  # a no-op when down worked


def test_a_failed_up_leaves_nothing(workdir, clean):
    broken = workdir / "sshd-broken"
    broken.write_text("#!/bin/sh\necho 'this sshd is broken on purpose' >&2\nexit 1\n")
    broken.chmod(0o755)
    with pytest.raises(RemoteError, match="exited at once: this sshd is broken on purpose"):
        lab_up(parse_topology(TOPOLOGY), 2, workdir / "lab.json", sshd_path=str(broken))
    assert not (workdir / "lab.json").exists()


def test_down_never_touches_a_namespace_that_does_not_carry_its_lab_id(workdir, clean):
    """Issue 24: the kernel reused a recorded namespace inode for someone's new `worker-2` seconds later, and
    lab down killed its process and deleted it. A generic name no longer clashes with a lab, and a record that
    names a namespace without the lab's id (even with the right inode) is left alone, process and all."""
    subprocess.run(["ip", "netns", "add", "worker-2"], check=True)
    sleeper = subprocess.Popen(["ip", "netns", "exec", "worker-2", "sleep", "60"])
    try:
        state = lab_up(parse_topology(TOPOLOGY), 2, workdir / "lab.json")  # no clash with a generic name
        try:
            assert _netns(state, "worker-2") in _namespaces() and "worker-2" in _namespaces()
        finally:
            assert not remove_lab(state).failed
        inode = os.stat("/run/netns/worker-2").st_ino
        forged = state.model_copy(
            update={
                "namespaces": tuple(
                    ns.model_copy(update={"netns": "worker-2", "netns_inode": inode}) if ns.name == "worker-2" else ns
                    for ns in state.namespaces
                )
            }
        )
        removal = remove_lab(forged)
        assert any("worker-2" in f and "lab id" in f for f in removal.failed), removal
        assert os.stat("/run/netns/worker-2").st_ino == inode and sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()
        subprocess.run(["ip", "netns", "del", "worker-2"], check=True)


def test_ctrl_c_during_up_removes_what_was_made(workdir, clean):
    # An "sshd" that never listens: `lab up` is certainly waiting on it when the interrupt arrives.
    hanging = workdir / "sshd-hanging"
    hanging.write_text(f"#!/bin/sh\nexec {sys.executable} -c 'import time; time.sleep(60)' \"$@\"\n")
    hanging.chmod(0o755)
    (workdir / "topology.json").write_text(json.dumps(TOPOLOGY))
    proc = subprocess.Popen(
        CLI
        + [
            "lab",
            "up",
            "--topology",
            "topology.json",
            "--generators",
            "2",
            "--out",
            "lab.json",
            "--sshd",
            str(hanging),
        ],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while len(list(workdir.glob(".n8nsz-lab-*/*.sshd.log"))) < len(NAMES) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(_processes_mentioning(str(workdir / ".n8nsz-lab-"))) >= 1, "the fake sshds did not start"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130 and "interrupted; everything it had made is removed" in err, err
    assert not (workdir / "lab.json").exists()


def test_the_data_role_serves_postgres_and_redis_to_another_host_over_the_bridge(lab):
    from n8n_sizer.lab.data import deploy_data_host

    if not list(Path("/usr/lib/postgresql").glob("*/bin/postgres")) or not shutil.which("redis-server"):
        pytest.skip("needs Debian's postgresql and redis-server")
    out, state = lab
    inventory = load_inventory(out.read_text())
    data_ip = inventory.hosts["data"].private_ip
    data, worker = _ssh(inventory, "data", state.client_key), _ssh(inventory, "worker-1", state.client_key)
    try:
        ends = deploy_data_host(data, sys.executable, f"{state.folder}/hosts/data", data_ip, SUBNET)
        assert (ends.address, ends.postgres_port, ends.redis_port) == (data_ip, 5432, 6379)
        local = tmp = Path(state.folder) / "secrets-copy.json"
        data.get(ends.secrets_file, local)
        pw = json.loads(tmp.read_text())
        pg_bin = sorted(Path("/usr/lib/postgresql").glob("*/bin/psql"))[-1]
        # From worker-1: a scram login to Postgres and an AUTH'd PING to Redis, both over the bridge.
        res = worker.run(
            f"PGPASSWORD={pw['postgres_password']} {pg_bin} -h {data_ip} -U n8n -d n8n -tAc "
            "'select inet_server_addr()'",
            timeout_s=30,
        )
        assert res.stdout.strip() == data_ip
        res = worker.run(
            f"redis-cli -h {data_ip} -p 6379 -a {pw['redis_password']} --no-auth-warning PING", timeout_s=30
        )
        assert res.stdout.strip() == "PONG"
        wrong = worker.run(f"redis-cli -h {data_ip} -p 6379 -a wrong --no-auth-warning PING", timeout_s=30, check=False)
        assert "PONG" not in wrong.stdout
        # worker-1's own loopback has no Postgres: the data host is another machine.
        alone = worker.run(f"{pg_bin.parent / 'pg_isready'} -h 127.0.0.1 -p 5432", timeout_s=30, check=False)
        assert alone.exit_code != 0
    finally:
        data.close()
        worker.close()
    removal = remove_lab(state)
    assert f"process {ends.postgres_pid}" in removal.removed and f"process {ends.redis_pid}" in removal.removed
    assert not removal.failed, removal.failed
