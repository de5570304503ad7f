"""Probe parsers on output captured from real programs (tests/data/probes/, see its README)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from n8n_sizer.telemetry.probes import Probe, ProbeParseError, batch_command, split_batch
from n8n_sizer.telemetry.probes.containers import (
    parse_cgroup_sections,
    parse_cpu_stat,
    parse_memory_current,
)
from n8n_sizer.telemetry.probes.host import (
    parse_children,
    parse_diskstats,
    parse_loadavg,
    parse_meminfo,
    parse_proc_stat,
    parse_process,
    process_probe,
)
from n8n_sizer.telemetry.probes.rates import busy_cores, counters_to_rates
from n8n_sizer.telemetry.probes.services import (
    parse_bull_queue,
    parse_n8n_metrics,
    parse_pg_activity,
    parse_prometheus,
    parse_redis_info,
)

DATA = Path(__file__).parent.parent / "data" / "probes"
L = {"host": "local"}


def read(name: str) -> str:
    return (DATA / name).read_text()


def by(samples, metric, **labels):
    hits = [s for s in samples if s.metric == metric and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(hits) == 1, (metric, labels, hits)
    return hits[0]


def test_proc_stat_states_and_cpu_count():
    text = read("proc_stat_1.txt")
    samples = parse_proc_stat(text, 10.0, L)
    fields = next(line for line in text.splitlines() if line.startswith("cpu ")).split()
    assert by(samples, "host_cpu_seconds_total", state="iowait").value == int(fields[5]) / 100
    assert by(samples, "host_cpu_seconds_total", state="user").value == int(fields[1]) / 100
    assert by(samples, "host_cpus").value == sum(
        1 for line in text.splitlines() if line[:3] == "cpu" and line[3].isdigit()
    )
    assert all(s.labels["host"] == "local" and s.time_s == 10.0 for s in samples)


def test_proc_stat_rates_give_cores_and_shares():
    # capture.py burned one core for ~1 s between the two readings
    a = parse_proc_stat(read("proc_stat_1.txt"), 100.0, L)
    b = parse_proc_stat(read("proc_stat_2.txt"), 101.2, L)
    rates = counters_to_rates(a, b)
    pct = [s for s in rates if s.metric == "host_cpu_pct"]
    assert sum(s.value for s in pct) == pytest.approx(100.0)
    cores = [s for s in rates if s.metric == "host_cpu_cores"]
    cpus = by(b, "host_cpus").value
    # with host_cpus in the reading, the kernel's clock is the time base: the states add up to the CPUs
    assert sum(s.value for s in cores) == pytest.approx(cpus)
    assert busy_cores(rates) >= 0.5  # the busy loop shows up
    # without it, the readings' own timestamps (1.2 s apart here) are used
    no_cpus = [s for s in b if s.metric != "host_cpus"]
    elapsed = sum(s.value for s in b if s.metric == "host_cpu_seconds_total") - sum(
        s.value for s in a if s.metric == "host_cpu_seconds_total"
    )
    assert sum(s.value for s in counters_to_rates(a, no_cpus) if s.metric == "host_cpu_cores") == pytest.approx(
        elapsed / 1.2
    )


def test_rates_skip_counter_resets_and_unmatched():
    from n8n_sizer.runs.records import Sample

    def s(v, t, pid="1"):
        return Sample(metric="process_cpu_seconds_total", value=v, unit="s", labels={"pid": pid}, time_s=t)

    assert counters_to_rates([s(5.0, 0)], [s(5.5, 1)])[0].value == pytest.approx(0.5)
    assert counters_to_rates([s(5.0, 0)], [s(1.0, 1)]) == []  # went backwards: restarted
    assert counters_to_rates([s(5.0, 0)], [s(6.0, 1, pid="2")]) == []  # another process
    assert counters_to_rates([s(5.0, 1)], [s(6.0, 1)]) == []  # no time passed


def test_loadavg():
    samples = parse_loadavg(read("proc_loadavg.txt"), 1.0, L)
    fields = read("proc_loadavg.txt").split()
    assert by(samples, "host_load_avg", window="1m").value == float(fields[0])
    assert by(samples, "host_tasks").value == int(fields[3].split("/")[1])
    with pytest.raises(ProbeParseError):
        parse_loadavg("garbage", 1.0, L)


def test_meminfo_used_is_total_minus_available():
    samples = parse_meminfo(read("proc_meminfo.txt"), 1.0, L)
    total = by(samples, "host_mem_total_mib").value
    avail = by(samples, "host_mem_available_mib").value
    assert by(samples, "host_mem_used_mib").value == pytest.approx(total - avail)
    assert 0 < avail < total
    assert by(samples, "host_mem_dirty_mib").unit == "MiB"


def test_diskstats_whole_disks_only():
    text = read("proc_diskstats.txt")
    samples = parse_diskstats(text, 1.0, L)
    devices = {s.labels["device"] for s in samples}
    assert devices and not any(d.startswith("loop") for d in devices)
    first = next(line.split() for line in text.splitlines() if line.split()[2] in devices)
    assert by(samples, "disk_read_bytes_total", device=first[2]).value == int(first[5]) * 512
    # a partition and its disk: only the disk is kept; dm-10 is not a partition of dm-1
    synthetic = "\n".join(
        f"   8 {i} {n} 1 0 8 0 1 0 8 0 0 5 5 0 0 0 0 0 0"
        for i, n in enumerate(["sda", "sda1", "dm-1", "dm-10", "nvme0n1", "nvme0n1p2"])
    )
    assert {s.labels["device"] for s in parse_diskstats(synthetic, 1.0, L)} == {"sda", "dm-1", "dm-10", "nvme0n1"}


def test_process_with_odd_command_name():
    text = read("proc_pid_odd_comm.txt")
    samples = parse_process(text, 1.0, {**L, "process": "odd"})
    rss_kb = int(next(line for line in text.splitlines() if line.startswith("VmRSS:")).split()[1])
    assert by(samples, "process_rss_mib").value == pytest.approx(rss_kb / 1024)
    assert by(samples, "process_cpu_seconds_total").value >= 0


def test_process_redis_counts_cpu_ticks():
    text = read("proc_pid_redis.txt")
    stat = text.splitlines()[0]
    rest = stat[stat.rfind(")") + 1 :].split()
    samples = parse_process(text, 1.0, L)
    assert by(samples, "process_cpu_seconds_total").value == (int(rest[11]) + int(rest[12])) / 100
    assert by(samples, "process_rss_mib").value > 1  # a running redis-server holds a few MiB


def test_process_gone_is_an_error():
    with pytest.raises(ProbeParseError):
        parse_process("cat: /proc/99999/stat: No such file or directory\n", 1.0, L)


def test_children():
    assert parse_children(read("proc_pid_children.txt")) == [int(t) for t in read("proc_pid_children.txt").split()]
    assert len(parse_children(read("proc_pid_children.txt"))) == 2


def test_cgroup_files():
    cpu = parse_cpu_stat(read("cgroup_v2_cpu.stat.txt"), 1.0, L)
    usec = int(read("cgroup_v2_cpu.stat.txt").split()[1])
    assert by(cpu, "container_cpu_seconds_total").value == usec / 1e6
    mem = parse_memory_current(read("cgroup_v1_memory.usage_in_bytes.txt"), 1.0, L)
    assert by(mem, "container_mem_mib").value == int(read("cgroup_v1_memory.usage_in_bytes.txt")) / 2**20
    with pytest.raises(ProbeParseError):
        parse_memory_current("cat: memory.current: No such file", 1.0, L)


def test_cgroup_sections_per_container():
    text = (
        "== container n8n-main\n"
        + read("cgroup_v2_cpu.stat.txt")
        + "-- memory.current\n"
        + read("cgroup_v1_memory.usage_in_bytes.txt")
        + "== container n8n-worker-1\nusage_usec 2000000\nuser_usec 1\n-- memory.current\n1048576\n"
    )
    samples = parse_cgroup_sections(text, 1.0, L)
    assert by(samples, "container_mem_mib", container="n8n-worker-1").value == 1.0
    assert by(samples, "container_cpu_seconds_total", container="n8n-worker-1").value == 2.0
    assert {s.labels["container"] for s in samples} == {"n8n-main", "n8n-worker-1"}


def test_redis_info_used_memory():
    text = read("redis_info.txt")
    used = int(next(line for line in text.splitlines() if line.startswith("used_memory:")).split(":")[1])
    samples = parse_redis_info(text, 1.0, L)
    assert by(samples, "redis_used_memory_mib").value == used / 2**20
    assert by(samples, "redis_connected_clients").value >= 1
    with pytest.raises(ProbeParseError):
        parse_redis_info("Could not connect to Redis at 127.0.0.1:1: Connection refused", 1.0, L)


def test_bull_queue_depth_piped_and_tty():
    samples = parse_bull_queue(read("redis_llen.txt"), 1.0, L)
    assert by(samples, "bull_jobs", state="waiting").value == 7  # capture.py pushed 7 waiting, 2 active
    assert by(samples, "bull_jobs", state="active").value == 2
    tty = parse_bull_queue("(integer) 3\n(integer) 0\n", 1.0, L)
    assert [s.value for s in tty] == [3, 0]


def test_pg_activity_by_state_and_total():
    samples = parse_pg_activity(read("pg_activity.txt"), 1.0, L)
    assert by(samples, "postgres_connections", state="idle").value == 3  # capture.py opened 3 idle + 1 busy
    assert by(samples, "postgres_connections", state="active").value == 1
    assert by(samples, "postgres_connections", state="all").value == 4
    with pytest.raises(ProbeParseError):
        parse_pg_activity("psql: error: connection refused", 1.0, L)


def test_n8n_metrics_queue_gauges():
    samples = parse_n8n_metrics(read("n8n_metrics_seed000_sample.txt"), 1.0, L)
    assert by(samples, "n8n_scaling_mode_queue_jobs_waiting").value == 520
    assert by(samples, "n8n_scaling_mode_queue_jobs_active").value == 20
    prom = parse_prometheus(
        '# HELP x y\n# TYPE x gauge\nx{a="1"} 2.5 1700000000\nn8n_version_info{version="2.41.1"} 1\n'
    )
    assert prom == {'x{a="1"}': 2.5, 'n8n_version_info{version="2.41.1"}': 1.0}
    with pytest.raises(ProbeParseError):
        parse_n8n_metrics("process_cpu_seconds_total 1\n", 1.0, L)


def test_batch_round_trip_with_real_shell():
    probes = [
        Probe("loadavg", "cat /proc/loadavg", parse_loadavg),
        Probe("missing", "cat /proc/does-not-exist", parse_loadavg),
        process_probe("self", 1),
    ]
    out = subprocess.run(["sh", "-c", batch_command(probes)], capture_output=True, text=True, timeout=10).stdout
    parts = split_batch(out)
    assert parts["loadavg"].exit_code == 0 and parse_loadavg(parts["loadavg"].text, 1.0, L)
    assert parts["missing"].exit_code != 0 and "No such file" in parts["missing"].text
    assert parts["process-self"].exit_code == 0


def test_split_batch_cut_short():
    parts = split_batch(
        "@@n8n-sizer-probe begin a\n1 2 3\n@@n8n-sizer-probe end a 0\n@@n8n-sizer-probe begin b\npartial"
    )
    assert parts["a"].exit_code == 0 and parts["a"].text == "1 2 3\n"
    assert parts["b"].exit_code is None and parts["b"].text == "partial"
    # /proc/PID/task/*/children ends without a newline: the end marker lands on the same line
    parts = split_batch("@@n8n-sizer-probe begin c\n10053 @@n8n-sizer-probe end c 0\n")
    assert parts["c"].exit_code == 0 and parse_children(parts["c"].text) == [10053]


def test_process_tree_sums_postgres_and_backends():
    from n8n_sizer.telemetry.probes.host import parse_process_tree

    text = read("proc_tree_postgres.txt")
    samples = parse_process_tree(text, 1.0, L)
    sections = text.split("== ")[1:]
    pss = sum(int(line.split()[1]) for line in text.splitlines() if line.startswith("Pss:"))
    assert by(samples, "process_rss_mib").value == pytest.approx(pss / 1024)
    assert by(samples, "process_tree_size").value == len(sections) >= 5  # postmaster, its helpers, 4 clients
    root = sections[0].splitlines()[1]
    rest = root[root.rfind(")") + 1 :].split()
    assert by(samples, "process_cpu_seconds_total").value >= sum(int(v) for v in rest[11:15]) / 100
    # a child gone between listing and reading leaves an empty section, not an error
    assert by(parse_process_tree(text + "== 99999\n", 1.0, L), "process_tree_size").value == len(sections)
    with pytest.raises(ProbeParseError):
        parse_process_tree("== 99999\n", 1.0, L)


def test_n8n_metrics_real_capture_from_queue_mode():
    # captured by capture_n8n.py from n8n 2.41.1 main, queue mode, after 20 webhooks ran on the worker
    text = read("n8n_metrics_real_queue.txt")
    samples = parse_n8n_metrics(text, 1.0, L)
    assert {s.metric for s in samples} == {
        "n8n_scaling_mode_queue_jobs_waiting",
        "n8n_scaling_mode_queue_jobs_active",
        "n8n_scaling_mode_queue_jobs_completed",
        "n8n_scaling_mode_queue_jobs_failed",
    }
    assert by(samples, "n8n_scaling_mode_queue_jobs_completed").value == 20
    assert by(samples, "n8n_scaling_mode_queue_jobs_waiting").value == 0
    assert parse_prometheus(text)['n8n_version_info{version="v2.41.1",major="2",minor="41",patch="1"}'] == 1


def test_compose_stack_probes_shape():
    from n8n_sizer.telemetry.probes.containers import compose_stack_probes

    queue = {p.name: p for p in compose_stack_probes(queue=True, postgres=True)}
    assert set(queue) == {
        "proc_stat",
        "loadavg",
        "meminfo",
        "diskstats",
        "cgroup",
        "redis_info",
        "bull_queue",
        "pg_activity",
        "n8n_metrics",
    }
    assert queue["redis_info"].every == 2 and queue["cgroup"].every == 1
    assert "com.docker.compose.service=n8n-redis" in queue["bull_queue"].command
    assert "REDIS_PASSWORD" not in queue["redis_info"].command  # the container's REDISCLI_AUTH is used
    regular = {p.name for p in compose_stack_probes(queue=False, postgres=False, metrics=False)}
    assert regular == {"proc_stat", "loadavg", "meminfo", "diskstats", "cgroup"}
