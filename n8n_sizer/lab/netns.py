"""`lab up` and `lab down`: namespaces, bridge, veths and sshds created, recorded, and removed by name and PID.

`lab_up` records each thing right after it exists (`state.Recorder`); if anything fails, or Ctrl-C / SIGTERM /
SIGHUP arrives, it removes exactly what the record lists and re-raises, so a failed `up` leaves nothing.
`remove_lab` is the one removal path, for that rollback and for `lab down`: every process inside each of the
lab's namespaces (`ip netns pids`), the namespaces (only if their inode is still the one recorded), the veths,
the bridge, and the key folder (only if it carries the lab's marker).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from n8n_sizer.bundle.topology import Topology
from n8n_sizer.errors import InputError, RemoteError
from n8n_sizer.lab import cpu as lab_cpu
from n8n_sizer.lab import sshd
from n8n_sizer.lab.plan import (
    BRIDGE_PREFIX,
    LAB_ID_RE,
    VETH_PREFIX,
    LabPlan,
    bridge_commands,
    forward_rule,
    is_lab_netns,
    link_commands,
    overlapping_routes,
    plan_lab,
)
from n8n_sizer.lab.state import MARKER, LabState, Recorder, lab_inventory, read_lab_state
from n8n_sizer.safety.files import read_user_text
from n8n_sizer.safety.write import output_folder, probe_writable, write_atomic

NETNS_DIR = Path("/run/netns")
IP_TIMEOUT_S = 20
STOP_GRACE_S = 5.0


@dataclass
class Removal:
    """What `remove_lab` did: removed, already gone (fine), and what it could not remove (not fine)."""

    removed: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise InputError(
            f"{what} needs root (only root can make or remove network namespaces, veth links "
            f"and bridges); run it as root, e.g. sudo .venv/bin/n8n-sizer {what} ..."
        )


def _ip(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=IP_TIMEOUT_S, stdin=subprocess.DEVNULL)


def _run(args: list[str]) -> None:
    res = _ip(args)
    if res.returncode != 0:
        raise RemoteError(
            f"lab: `{' '.join(args)}` failed (exit code {res.returncode}): "
            f"{' '.join(res.stderr.split())[-300:] or 'no stderr'}"
        )


def _link_exists(name: str) -> bool:
    return _ip(["ip", "link", "show", "dev", name]).returncode == 0


def bridged_frames_filtered() -> bool:
    """True when br_netfilter passes bridged frames through iptables (and iptables is there to answer)."""
    try:
        on = Path("/proc/sys/net/bridge/bridge-nf-call-iptables").read_text().strip() == "1"
    except OSError:
        return False
    return on and shutil.which("iptables") is not None


def _remove_forward_rule(state: LabState, r: Removal) -> None:
    if not (state.forward_rule and state.bridge == BRIDGE_PREFIX + state.lab_id and LAB_ID_RE.fullmatch(state.lab_id)):
        return
    rule = forward_rule(state.bridge, state.lab_id)
    if _ip(["iptables", "-w", "5", "-C", *rule]).returncode != 0:
        r.gone.append("iptables FORWARD rule")
        return
    res = _ip(["iptables", "-w", "5", "-D", *rule])
    (r.removed if res.returncode == 0 else r.failed).append("iptables FORWARD rule")


def netns_inode(name: str) -> int | None:
    try:
        return os.stat(NETNS_DIR / name).st_ino
    except OSError:
        return None


def preflight(plan: LabPlan, out: Path, sshd_path: str) -> None:
    """Refuse, before anything exists, what would clash or leave this machine."""
    if shutil.which("ip") is None:
        raise InputError("lab up needs iproute2's `ip`; install it: apt-get install iproute2")
    if not (os.path.isfile(sshd_path) and os.access(sshd_path, os.X_OK)):
        raise InputError(
            f"--sshd {sshd_path} is not an executable file; install openssh-server "
            "(apt-get install openssh-server) or pass --sshd /usr/sbin/sshd"
        )
    if os.path.lexists(out):
        raise InputError(
            f"--out {out} exists; a lab never overwrites an inventory: `n8n-sizer lab down "
            f"--inventory {out}` first, or pick another --out"
        )
    folder = out.parent if str(out.parent) else Path(".")
    output_folder(folder, "--out folder", fix="pick a folder of your own")  # the one gate of every written folder
    probe_writable(folder, "--out folder", "pick a folder you can write to")
    taken = [ns.netns for ns in plan.namespaces if os.path.lexists(NETNS_DIR / ns.netns)]
    if taken:
        raise InputError(
            f"network namespace(s) {', '.join(taken)} already exist on this machine, with this "
            "lab's random id in their names; run lab up again (it draws a new id)"
        )
    routes = _ip(["ip", "-o", "route", "show", "table", "all"]).stdout + _ip(["ip", "-o", "addr", "show"]).stdout
    hits = overlapping_routes(routes, plan.subnet)
    if hits:
        raise InputError(
            f"subnet {plan.subnet} is already in use on this machine ({hits[0][:120]}); a lab takes "
            "a subnet nothing else routes: `lab down` the other lab, or set `subnet` in the topology "
            '(e.g. "subnet": "10.213.7.0/24")'
        )


@contextlib.contextmanager
def _signals_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP interrupt `lab up` like Ctrl-C does, so its rollback runs for them too."""

    def interrupt(signum, frame):  # noqa: ARG001
        raise KeyboardInterrupt(signal.Signals(signum).name)

    old = {s: signal.signal(s, interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def _signals_ignored() -> Iterator[None]:
    """A second Ctrl-C must not cut a rollback short: that would leave half a lab."""
    old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def lab_up(
    topology: Topology,
    generators: int,
    out: Path,
    sshd_path: str = "/usr/sbin/sshd",
    lab_id: str | None = None,
    generator_prefix: str = "gen-",
    cpu_budget: bool = True,
    cpu_cores: float | None = None,
) -> LabState:
    """Create the lab and write its inventory to `out`; on any failure or interrupt remove all of it.
    With `cpu_budget`, each topology host gets its own CPU (lab.cpu), `cpu_cores` of this machine's in all."""
    require_root("lab up")
    plan = plan_lab(topology, generators, lab_id or secrets.token_hex(3), generator_prefix)
    preflight(plan, out, sshd_path)
    budget = lab_cpu.plan_for_topology(topology, plan.lab_id, cpu_cores) if cpu_budget else None
    mounts = lab_cpu.lab_cpu_mounts() if budget else {}
    rec = Recorder(plan, topology)
    with _signals_interrupt():
        try:
            _build(plan, rec, out, sshd_path, budget, mounts)
            state = rec.state()
            inventory = lab_inventory(plan, topology, state)
            write_atomic(out, inventory.model_dump_json(indent=2, exclude_none=True) + "\n", private=True, what="--out")
            return state
        except BaseException as exc:
            with _signals_ignored():
                removal = remove_lab(rec.state())
            if removal.failed:
                raise RemoteError(
                    f"lab up failed ({exc or type(exc).__name__}) and its clean-up could not "
                    f"remove: {'; '.join(removal.failed)}"
                ) from None
            raise


def _build(plan: LabPlan, rec: Recorder, out: Path, sshd_path: str, budget=None, mounts=None) -> None:
    folder = out.absolute().parent / f".n8nsz-lab-{plan.lab_id}"
    # 0711: its keys and configs are 0600, nothing in it can be listed; the data role's Postgres, run as Debian's postgres
    # user, must pass through to its own folder inside, without being able to list anything.
    folder.mkdir(mode=0o711)
    folder.chmod(0o711)  # whatever the umask did
    rec.folder = folder
    write_atomic(folder / MARKER, plan.lab_id + "\n", private=True)
    rec.client_key = folder / "client_key"
    sshd.generate_key(rec.client_key, f"n8n-sizer-lab-{plan.lab_id}")
    write_atomic(
        folder / "authorized_keys",
        read_user_text(folder / "client_key.pub", "the lab's public key", fix="run lab up again"),
        private=True,
    )
    first, *rest = bridge_commands(plan)
    _run(first)
    rec.bridge = plan.bridge
    for cmd in rest:
        _run(cmd)
    if bridged_frames_filtered():
        _run(["iptables", "-w", "5", "-I", *forward_rule(plan.bridge, plan.lab_id)])
        rec.forward_rule = True
    for ns in plan.namespaces:
        _run(["ip", "netns", "add", ns.netns])
        inode = netns_inode(ns.netns)
        if inode is None:
            raise RemoteError(f"lab: `ip netns add {ns.netns}` left no {NETNS_DIR / ns.netns}")
        rec.namespace(ns.name, ns.netns, inode)
        first, *rest = link_commands(plan, ns)
        _run(first)
        rec.update(ns.name, veth=ns.veth)
        for cmd in rest:
            _run(cmd)
    if budget is not None:
        rec.cpu = budget  # recorded first: its name carries the lab's id, and removal tolerates what is not there
        lab_cpu.create_lab_groups(budget, mounts)
    started = []
    for ns in plan.namespaces:
        host_key = folder / f"{ns.name}.host_key"
        sshd.generate_key(host_key, f"n8n-sizer-lab-{plan.lab_id}-{ns.name}")
        config = folder / f"{ns.name}.sshd_config"
        write_atomic(config, sshd.sshd_config_text(ns, host_key, folder / "authorized_keys"), private=True)
        log = folder / f"{ns.name}.sshd.log"
        pid = sshd.start_sshd(ns, sshd_path, config, log)
        rec.update(ns.name, sshd_pid=pid, sshd_config=str(config))
        if budget is not None:  # before any session: everything started over SSH in this host runs in its budget
            lab_cpu.place_in_host(budget, ns.name, pid, mounts)
        started.append((ns, pid, log))
    for ns, pid, log in started:
        sshd.wait_listening(ns, pid, log)


def _pids_in(ns_name: str) -> list[int]:
    res = _ip(["ip", "netns", "pids", ns_name])
    return [int(w) for w in res.stdout.split() if w.isdigit()] if res.returncode == 0 else []


def _runs_config(pid: int, config: str) -> bool:
    """True when `pid` is still the sshd the lab started with `config` (not a reused PID)."""
    try:
        return config in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return False


def _folder_is_the_labs(state: LabState) -> bool:
    """The record's folder carries the lab's marker with its id (a record naming another folder does not)."""
    if not state.folder:
        return False
    try:
        marker = read_user_text(Path(state.folder) / MARKER, "lab marker", fix="-", private=True, max_bytes=64)
    except (OSError, InputError):
        return False
    return marker.strip() == state.lab_id


def _own_config(state: LabState, config: str | None) -> bool:
    """Only a config file inside the lab's own folder (the one carrying its marker) identifies one of its sshds
    (a record naming, say, /usr/sbin/sshd or another folder must not single out this machine's own sshd)."""
    if not config or not _folder_is_the_labs(state):
        return False
    path = Path(config)
    return path.parent == Path(state.folder) and path.name.endswith(".sshd_config")


def stop_pids(pids: list[int]) -> list[int]:
    """SIGTERM, a grace period, then SIGKILL; the PIDs that still run after all that."""
    for sig, wait_s in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, 2.0)):
        alive = [p for p in pids if sshd.pid_alive(p)]
        for pid in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait_s
        while alive and time.monotonic() < deadline:
            time.sleep(0.05)
            alive = [p for p in alive if sshd.pid_alive(p)]
        if not alive:
            return []
    return [p for p in pids if sshd.pid_alive(p)]


def _remove_links(links: list[str], r: Removal, lab_id: str) -> None:
    for link in links:
        # only this lab's own names: its bridge n8nsz-<id> or a veth nz<id>-<n>, never another link
        ours = LAB_ID_RE.fullmatch(lab_id) and re.fullmatch(
            rf"(?:{BRIDGE_PREFIX}{lab_id}|{VETH_PREFIX}{lab_id}-\d+)", link
        )
        if not ours:
            r.failed.append(f"link {link} (not a link of lab {lab_id}: left alone)")
            continue
        res = _ip(["ip", "link", "del", "dev", link])
        if res.returncode == 0:
            r.removed.append(f"link {link}")
        elif not _link_exists(link):
            r.gone.append(f"link {link}")
        else:
            r.failed.append(f"link {link} ({' '.join(res.stderr.split())[-160:]})")


def remove_lab(state: LabState) -> Removal:
    """Remove what `state` records, tolerating what is already gone; never what is not the lab's."""
    r = Removal()
    ours = []
    for rec in state.namespaces:
        # Three checks, all needed: the name carries this lab's random id (a generic `data` or `worker-1` made
        # by someone else never does), the record says it is the lab's, and the inode is still the one `ip netns
        # add` gave it. An inode alone is not an identity: the kernel reuses it for the next namespace.
        if rec.netns is None or not is_lab_netns(rec.netns, state.lab_id):
            r.failed.append(
                f"namespace {rec.netns or rec.name} (its name does not carry lab id {state.lab_id}: "
                "left alone; remove it by hand if it is yours)"
            )
            continue
        inode = netns_inode(rec.netns)
        if inode is None:
            r.gone.append(f"namespace {rec.netns}")
        elif inode != rec.netns_inode:
            r.gone.append(f"namespace {rec.netns} (the name now belongs to another namespace: left alone)")
        else:
            ours.append(rec)
    pids = [p for rec in ours for p in _pids_in(rec.netns)]
    # A recorded sshd outside its namespace's list (its namespace already deleted) still holds that namespace.
    pids += [
        rec.sshd_pid
        for rec in state.namespaces
        if rec.sshd_pid
        and rec.sshd_pid not in pids
        and _own_config(state, rec.sshd_config)
        and _runs_config(rec.sshd_pid, rec.sshd_config)
    ]
    left = stop_pids(pids)
    r.removed += [f"process {p}" for p in pids if p not in left]
    r.failed += [f"process {p} (still running after SIGKILL)" for p in left]
    if state.cpu is not None:  # once its processes are gone: the groups are empty and removed by recorded name
        removed, failed = lab_cpu.remove_cpu_groups(state.cpu)
        r.removed += [f"cgroup {g}" for g in removed]
        r.failed += failed
    # Veths first, from this side: deleting one deletes its peer in the namespace at once, whereas a deleted
    # namespace frees its end later, in the kernel's own time.
    veths = [rec.veth for rec in state.namespaces if rec.veth]
    _remove_links(veths, r, state.lab_id)
    for rec in ours:
        res = _ip(["ip", "netns", "del", rec.netns])
        if res.returncode == 0:
            r.removed.append(f"namespace {rec.netns}")
        else:
            r.failed.append(f"namespace {rec.netns} ({' '.join(res.stderr.split())[-160:]})")
    _remove_links([state.bridge] if state.bridge else [], r, state.lab_id)
    _remove_forward_rule(state, r)
    if state.folder:
        folder = Path(state.folder)
        mine = _folder_is_the_labs(state)
        if not folder.exists():
            r.gone.append(f"folder {folder}")
        elif not mine:
            r.failed.append(f"folder {folder} (no {MARKER} naming lab {state.lab_id}: left alone)")
        else:
            shutil.rmtree(folder, ignore_errors=True)
            (r.failed if folder.exists() else r.removed).append(f"folder {folder}")
    return r


def lab_down(path: Path) -> Removal:
    """Remove the lab that `path` (an inventory `lab up` wrote) records, then the inventory itself."""
    require_root("lab down")
    state = read_lab_state(path)
    with _signals_ignored():
        removal = remove_lab(state)
    if removal.failed:
        raise RemoteError(
            f"lab down could not remove: {'; '.join(removal.failed)}; {path} is kept, fix that and run lab down again"
        )
    path.unlink(missing_ok=True)  # it describes a lab that no longer exists
    return removal
