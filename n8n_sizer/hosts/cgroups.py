"""CPU groups from the kernel's accounting: cgroup v1 `cpu` (a quota) and `cpuacct` (CPU used), on this machine.

A group's CPU is read from `cpuacct.usage` (nanoseconds, every process of the group and its descendants that
ran while in it), not sampled from `ps`: what a role used between two readings is exactly the difference. A
process moves in by writing its PID to `cgroup.procs` (all its threads follow; a child forked afterwards starts
in its parent's group, so a daemon's later sessions and workers follow; children that already exist are moved
one by one, `descendants`). The quota is CFS bandwidth: at most `cpu.cfs_quota_us` of CPU time per
`cpu.cfs_period_us` for the whole group, hierarchically.

The controllers may be mounted together (`cpu,cpuacct`, most distributions) or apart (`/sys/fs/cgroup/cpu` and
`/sys/fs/cgroup/cpuacct`, as on this machine): `controller_mounts` reads /proc/mounts and a group lives at the
same relative path under each. Only names this project made are created or removed: every top-level group
starts with `PREFIX` and carries a random id. Pure parts (the parsers, `quota_us`) are tested on captured text.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "n8n-sizer-"  # every group this project makes sits under a top-level group of this prefix
PERIOD_US = 100_000  # the kernel's default CFS period (100 ms)
MIN_QUOTA_US = 1_000  # the kernel refuses a quota below 1 ms per period
CONTROLLERS = ("cpu", "cpuacct")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


class CgroupError(Exception):
    """A cgroup operation failed (not root, no cgroup v1 cpu/cpuacct, a write the kernel refused)."""


# --- pure parts -------------------------------------------------------------------------------------------------


def controller_mounts(proc_mounts: str) -> dict[str, Path]:
    """/proc/mounts -> {controller: mount point} for the cgroup v1 `cpu` and `cpuacct` controllers found."""
    out: dict[str, Path] = {}
    for line in proc_mounts.splitlines():
        parts = line.split()
        if len(parts) < 4 or parts[2] != "cgroup":
            continue
        for option in parts[3].split(","):
            if option in CONTROLLERS and option not in out:
                out[option] = Path(parts[1])
    return out


def parse_usage_ns(text: str) -> int:
    """`cpuacct.usage` -> nanoseconds of CPU the group used since it was made."""
    value = text.strip()
    if not value.isdigit():
        raise CgroupError(f"cpuacct.usage is not a number: {value[:40]!r}")
    return int(value)


@dataclass(frozen=True)
class Throttling:
    """`cpu.stat`: CFS periods elapsed, how many of them throttled the group, and for how long in total."""

    nr_periods: int
    nr_throttled: int
    throttled_ns: int


def parse_cpu_stat(text: str) -> Throttling:
    values = {}
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        if value.strip().isdigit():
            values[key] = int(value)
    missing = [k for k in ("nr_periods", "nr_throttled", "throttled_time") if k not in values]
    if missing:
        raise CgroupError(f"cpu.stat lacks {', '.join(missing)}: {text.strip()[:80]!r}")
    return Throttling(values["nr_periods"], values["nr_throttled"], values["throttled_time"])


def parse_proc_cgroup(text: str) -> dict[str, str]:
    """/proc/<pid>/cgroup -> {controller: the group's path} (cgroup v1 lines `id:controllers:path`)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for c in parts[1].split(","):
                if c:
                    out[c] = parts[2]
    return out


def quota_us(cores: float, period_us: int = PERIOD_US) -> int:
    """The CFS quota that allows `cores` cores: cores x period, at least the kernel's 1 ms minimum."""
    if cores <= 0:
        raise ValueError(f"a CPU budget must be positive, not {cores}")
    return max(MIN_QUOTA_US, round(cores * period_us))


def check_name(name: str) -> str:
    if not _NAME_RE.match(name):
        raise ValueError(f"cgroup name {name!r} must be letters, digits, '_', '.', '-' (at most 63)")
    return name


# --- this machine's cgroups ---------------------------------------------------------------------------------------


def available_mounts() -> dict[str, Path]:
    """{controller: mount} when this process can make cpu and cpuacct groups (root, both mounted); else {}."""
    if os.geteuid() != 0:
        return {}
    try:
        mounts = controller_mounts(Path("/proc/mounts").read_text())
    except OSError:
        return {}
    return mounts if all(c in mounts for c in CONTROLLERS) else {}


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it, parents first (from /proc/<pid>/task/*/children)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop(0)
        out.append(p)
        try:
            tasks = list(Path(f"/proc/{p}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            with contextlib.suppress(OSError):
                todo += [int(c) for c in (task / "children").read_text().split() if int(c) not in out]
    return out


@dataclass
class CpuGroup:
    """One group at `path` (relative, e.g. `n8n-sizer-ab12cd/worker-1`) under each controller in `mounts`."""

    path: str
    mounts: dict[str, Path]
    controllers: tuple[str, ...] = CONTROLLERS
    created: list[Path] = field(default_factory=list)

    def dir(self, controller: str) -> Path:
        return self.mounts[controller] / self.path

    def create(self) -> CpuGroup:
        """Make the group (and its parents) under each controller; an existing one is reused."""
        if not self.path.split("/")[0].startswith(PREFIX):
            raise CgroupError(f"cgroup {self.path}: only groups under {PREFIX}<id> are made here")
        for c in self.controllers:
            for d in reversed([self.dir(c), *list(self.dir(c).parents)]):
                if self.mounts[c] in d.parents and not d.exists():
                    try:
                        d.mkdir()
                    except OSError as exc:
                        raise CgroupError(f"cannot make cgroup {d}: {exc.strerror}") from None
                    self.created.append(d)
        return self

    def _write(self, controller: str, name: str, value: str) -> None:
        try:
            (self.dir(controller) / name).write_text(value)
        except OSError as exc:
            raise CgroupError(f"cannot write {value!r} to {self.dir(controller) / name}: {exc.strerror}") from None

    def set_quota(self, cores: float, period_us: int = PERIOD_US) -> int:
        """At most `cores` cores for the whole group (CFS bandwidth); returns the quota in microseconds."""
        quota = quota_us(cores, period_us)
        self._write("cpu", "cpu.cfs_period_us", str(period_us))
        self._write("cpu", "cpu.cfs_quota_us", str(quota))
        return quota

    def set_shares(self, shares: int) -> None:
        """The group's weight against its siblings when the CPU is oversubscribed (1024: one plain process)."""
        self._write("cpu", "cpu.shares", str(int(shares)))

    def add(self, pid: int, with_children: bool = True) -> list[int]:
        """Move `pid` (and, by default, every process already below it) into the group; the PIDs moved.
        A process that exited meanwhile is skipped."""
        moved = []
        for p in descendants(pid) if with_children else [pid]:
            try:
                for c in self.controllers:
                    (self.dir(c) / "cgroup.procs").write_text(str(p))
                moved.append(p)
            except ProcessLookupError:
                continue
            except OSError as exc:
                if exc.errno == 3:  # ESRCH: gone
                    continue
                raise CgroupError(f"cannot move PID {p} into {self.path}: {exc.strerror}") from None
        return moved

    def usage_ns(self) -> int:
        return parse_usage_ns((self.dir("cpuacct") / "cpuacct.usage").read_text())

    def throttling(self) -> Throttling:
        return parse_cpu_stat((self.dir("cpu") / "cpu.stat").read_text())

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in (self.dir(self.controllers[0]) / "cgroup.procs").read_text().split()]
        except OSError:
            return []


def remove_tree(top: str, mounts: dict[str, Path], timeout_s: float = 5.0) -> tuple[list[str], list[str]]:
    """Remove the group `top` (a `PREFIX` name) and everything below it under each controller, deepest first.
    A process still inside is moved to the root group first (it keeps running; only the group goes).
    Returns (removed, failed) paths; a group already gone is neither."""
    if not top.startswith(PREFIX) or "/" in top:
        raise CgroupError(f"cgroup {top}: only a top-level {PREFIX}<id> group is removed here")
    removed, failed = [], []
    for mount in mounts.values():
        root = mount / top
        if not root.is_dir():
            continue
        for d in sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)) + [root]:
            deadline = time.monotonic() + timeout_s
            while True:
                for pid in (d / "cgroup.procs").read_text().split() if (d / "cgroup.procs").exists() else []:
                    with contextlib.suppress(OSError):
                        (mount / "cgroup.procs").write_text(pid)
                try:
                    d.rmdir()
                    removed.append(str(d))
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:  # EBUSY while the kernel finishes moving tasks out
                    if time.monotonic() >= deadline:
                        failed.append(f"{d} ({exc.strerror})")
                        break
                    time.sleep(0.05)
    return removed, failed
