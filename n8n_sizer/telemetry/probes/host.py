"""Host and process probes from /proc: CPU by state (iowait included), load, memory, disks, processes.

Seed 004 is why iowait, dirty pages and load average are here: its 56 s request happened while %user sat
at 4% and free memory *rose*; only iowait (34%) and a load of 2.72 showed the disk stall.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from n8n_sizer.runs.records import Sample
from n8n_sizer.telemetry.probes import Probe, ProbeParseError, sample

# USER_HZ: /proc reports CPU time in ticks of 1/100 s on every Linux architecture we deploy to
# (x86-64 and arm64, `getconf CLK_TCK` = 100); the parsers take it as a parameter all the same.
TICKS_PER_S = 100

# Column order of the `cpu` line in /proc/stat (proc(5)).
_CPU_STATES = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def parse_proc_stat(
    text: str, time_s: float, labels: Mapping[str, str], *, ticks_per_s: int = TICKS_PER_S
) -> list[Sample]:
    """/proc/stat -> `host_cpu_seconds_total{state}` (all CPUs summed) and `host_cpus` (online CPUs)."""
    out: list[Sample] = []
    cpus = 0
    for line in text.splitlines():
        fields = line.split()
        if not fields:
            continue
        if fields[0] == "cpu":
            values = [int(v) for v in fields[1 : 1 + len(_CPU_STATES)]]
            for state, ticks in zip(_CPU_STATES, values, strict=False):
                out.append(sample("host_cpu_seconds_total", ticks / ticks_per_s, "s", time_s, labels, state=state))
        elif re.fullmatch(r"cpu\d+", fields[0]):
            cpus += 1
    if not out:
        raise ProbeParseError("no aggregate 'cpu' line in /proc/stat output")
    out.append(sample("host_cpus", cpus, "count", time_s, labels))
    return out


def parse_loadavg(text: str, time_s: float, labels: Mapping[str, str]) -> list[Sample]:
    """/proc/loadavg -> `host_load_avg{window}`; Linux counts tasks in disk wait too (seed 004's 2.72)."""
    fields = text.split()
    if len(fields) < 4 or "/" not in fields[3]:
        raise ProbeParseError(f"unexpected /proc/loadavg output: {text.strip()[:80]!r}")
    running, total = fields[3].split("/")
    return [
        sample("host_load_avg", float(fields[0]), "tasks", time_s, labels, window="1m"),
        sample("host_load_avg", float(fields[1]), "tasks", time_s, labels, window="5m"),
        sample("host_load_avg", float(fields[2]), "tasks", time_s, labels, window="15m"),
        sample("host_tasks_runnable", int(running), "tasks", time_s, labels),
        sample("host_tasks", int(total), "tasks", time_s, labels),
    ]


# /proc/meminfo keys kept, and the metric each becomes (values are in kB = KiB).
_MEMINFO = {
    "MemTotal": "host_mem_total_mib",
    "MemFree": "host_mem_free_mib",
    "MemAvailable": "host_mem_available_mib",
    "Cached": "host_mem_cached_mib",
    "Dirty": "host_mem_dirty_mib",
    "SwapTotal": "host_swap_total_mib",
    "SwapFree": "host_swap_free_mib",
}


def parse_meminfo(text: str, time_s: float, labels: Mapping[str, str]) -> list[Sample]:
    """/proc/meminfo -> total, free, available, cached, dirty, swap (MiB) and `host_mem_used_mib`."""
    kib: dict[str, int] = {}
    for line in text.splitlines():
        m = re.match(r"(\w+):\s+(\d+)(?:\s+kB)?$", line.strip())
        if m and m.group(1) in _MEMINFO:
            kib[m.group(1)] = int(m.group(2))
    if "MemTotal" not in kib or "MemAvailable" not in kib:
        raise ProbeParseError("MemTotal/MemAvailable missing from /proc/meminfo output")
    out = [sample(_MEMINFO[k], v / 1024, "MiB", time_s, labels) for k, v in kib.items()]
    out.append(sample("host_mem_used_mib", (kib["MemTotal"] - kib["MemAvailable"]) / 1024, "MiB", time_s, labels))
    return out


def _is_partition(name: str, names: set[str]) -> bool:
    """sda1 of sda, nvme0n1p1 of nvme0n1: counted in the whole disk's line already (dm-10 is not dm-1's)."""
    for disk in names:
        rest = name[len(disk) :]
        if name != disk and name.startswith(disk):
            if (not disk[-1].isdigit() and rest.isdigit()) or re.fullmatch(r"p\d+", rest):
                return True
    return False


def parse_diskstats(text: str, time_s: float, labels: Mapping[str, str]) -> list[Sample]:
    """/proc/diskstats -> per whole disk: bytes read/written and time busy, cumulative.

    Loop, ram and zram devices and partitions are skipped (a partition's I/O is in its disk's line).
    Sectors are 512 bytes in this file whatever the device's sector size (Documentation/admin-guide/iostats).
    """
    rows = []
    for line in text.splitlines():
        f = line.split()
        if len(f) < 14:
            continue
        rows.append(f)
    names = {f[2] for f in rows}
    out: list[Sample] = []
    for f in rows:
        name = f[2]
        if re.match(r"(loop|ram|zram)\d", name) or _is_partition(name, names):
            continue
        out.append(sample("disk_read_bytes_total", int(f[5]) * 512, "B", time_s, labels, device=name))
        out.append(sample("disk_write_bytes_total", int(f[9]) * 512, "B", time_s, labels, device=name))
        out.append(sample("disk_io_seconds_total", int(f[12]) / 1000, "s", time_s, labels, device=name))
    if not rows:
        raise ProbeParseError("no device lines in /proc/diskstats output")
    return out


def parse_process(
    text: str, time_s: float, labels: Mapping[str, str], *, ticks_per_s: int = TICKS_PER_S
) -> list[Sample]:
    """`cat /proc/PID/stat /proc/PID/status` -> `process_cpu_seconds_total` and `process_rss_mib`.

    The command name in /proc/PID/stat may hold spaces and parentheses, so fields are counted from the
    LAST ')' (proc(5)): utime and stime are fields 14 and 15.
    """
    stat_line, _, status = text.partition("\n")
    close = stat_line.rfind(")")
    if close < 0:
        raise ProbeParseError(f"no /proc/PID/stat line in output: {stat_line[:80]!r}")
    rest = stat_line[close + 1 :].split()
    utime, stime = int(rest[11]), int(rest[12])
    rss = re.search(r"^VmRSS:\s+(\d+)\s+kB", status, re.M)
    out = [sample("process_cpu_seconds_total", (utime + stime) / ticks_per_s, "s", time_s, labels)]
    if rss is None:  # a zombie or kernel thread has no VmRSS line; the process is gone, say so
        raise ProbeParseError("VmRSS missing from /proc/PID/status (process exited?)")
    out.append(sample("process_rss_mib", int(rss.group(1)) / 1024, "MiB", time_s, labels))
    return out


def parse_children(text: str) -> list[int]:
    """`cat /proc/PID/task/*/children` -> child PIDs (how the sampler finds each n8n's task runner)."""
    return [int(tok) for tok in text.split() if tok.isdigit()]


def parse_process_tree(
    text: str, time_s: float, labels: Mapping[str, str], *, ticks_per_s: int = TICKS_PER_S
) -> list[Sample]:
    """`process_tree_probe` output -> CPU seconds and PSS of a process and its children, summed.

    For Postgres: one backend per connection, short-lived ones included through the parent's cutime and
    cstime (time of children it has waited for). Memory is PSS (proportional set size, smaps_rollup),
    so shared buffers are not counted once per backend as RSS would.
    """
    sections = [sec for sec in text.split("== ")[1:]]
    if not sections or ")" not in sections[0]:
        raise ProbeParseError(f"no /proc/PID/stat for the tree's root: {text.strip()[:80]!r}")
    cpu_ticks, pss_kib, count = 0, 0, 0
    for index, sec in enumerate(sections):
        stat_line = next((line for line in sec.splitlines() if ")" in line), None)
        if stat_line is None:
            continue  # a child that exited between listing and reading
        rest = stat_line[stat_line.rfind(")") + 1 :].split()
        cpu_ticks += int(rest[11]) + int(rest[12]) + (int(rest[13]) + int(rest[14]) if index == 0 else 0)
        pss = re.search(r"^Pss:\s+(\d+)\s+kB", sec, re.M)
        pss_kib += int(pss.group(1)) if pss else 0
        count += 1
    return [
        sample("process_cpu_seconds_total", cpu_ticks / ticks_per_s, "s", time_s, labels),
        sample("process_rss_mib", pss_kib / 1024, "MiB", time_s, labels, memory="pss"),
        sample("process_tree_size", count, "processes", time_s, labels),
    ]


def process_tree_probe(process: str, pid: int) -> Probe:
    """CPU and PSS of a process with all its children (Postgres and its backends)."""
    pid = int(pid)
    cmd = (
        f'for p in {pid} $(cat /proc/{pid}/task/*/children 2>/dev/null); do echo "== $p"; '
        f"cat /proc/$p/stat 2>/dev/null; grep '^Pss:' /proc/$p/smaps_rollup 2>/dev/null; done; "
        f"test -e /proc/{pid}/stat"
    )
    return Probe(f"tree-{process}", cmd, parse_process_tree, labels={"process": process, "pid": str(pid)})


def host_probes() -> list[Probe]:
    """The host-wide probes every target gets."""
    return [
        Probe("proc_stat", "cat /proc/stat", parse_proc_stat),
        Probe("loadavg", "cat /proc/loadavg", parse_loadavg),
        Probe("meminfo", "cat /proc/meminfo", parse_meminfo),
        Probe("diskstats", "cat /proc/diskstats", parse_diskstats),
    ]


def process_probe(process: str, pid: int) -> Probe:
    """CPU and RSS of one process, labelled with its role (`main`, `worker-1`, `main-runner`...)."""
    return Probe(
        f"process-{process}",
        f"cat /proc/{int(pid)}/stat /proc/{int(pid)}/status",
        parse_process,
        labels={"process": process, "pid": str(int(pid))},
    )
