"""The pure parts of hosts.cgroups, on text captured from this machine's cgroup v1 files (tests/data/cgroups)."""

from __future__ import annotations

from pathlib import Path

import pytest

from n8n_sizer.hosts.cgroups import (
    CgroupError,
    CpuGroup,
    check_name,
    controller_mounts,
    parse_cpu_stat,
    parse_proc_cgroup,
    parse_usage_ns,
    quota_us,
    remove_tree,
)

DATA = Path(__file__).parent.parent / "data" / "cgroups"


def test_controllers_mounted_apart_are_found_each_at_its_own_mount():
    mounts = controller_mounts((DATA / "proc_mounts_v1_split.txt").read_text())
    assert mounts == {"cpu": Path("/sys/fs/cgroup/cpu"), "cpuacct": Path("/sys/fs/cgroup/cpuacct")}


def test_controllers_mounted_together_share_one_mount_and_cgroup2_is_not_v1():
    mounts = controller_mounts((DATA / "proc_mounts_v1_combined_handwritten.txt").read_text())
    assert mounts == {"cpu": Path("/sys/fs/cgroup/cpu,cpuacct"), "cpuacct": Path("/sys/fs/cgroup/cpu,cpuacct")}
    assert controller_mounts("cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0\n") == {}


def test_usage_is_nanoseconds_and_garbage_is_refused():
    assert parse_usage_ns((DATA / "cpuacct.usage.txt").read_text()) > 0
    assert parse_usage_ns("1500000000\n") == 1_500_000_000
    with pytest.raises(CgroupError, match="not a number"):
        parse_usage_ns("max\n")


def test_cpu_stat_of_a_throttled_group():
    fresh = parse_cpu_stat((DATA / "cpu.stat.txt").read_text())
    assert (fresh.nr_periods, fresh.nr_throttled, fresh.throttled_ns) == (0, 0, 0)
    busy = parse_cpu_stat((DATA / "cpu.stat.throttled.txt").read_text())
    assert busy.nr_periods == 18 and busy.nr_throttled == 15 and busy.throttled_ns == 1_014_637_662
    with pytest.raises(CgroupError, match="throttled_time"):
        parse_cpu_stat("nr_periods 3\nnr_throttled 1\n")


def test_proc_cgroup_lines_map_every_controller_to_its_path():
    groups = parse_proc_cgroup((DATA / "proc_self_cgroup.txt").read_text())
    assert groups["cpu"] == "/" and groups["cpuacct"] == "/"
    assert parse_proc_cgroup("4:cpu,cpuacct:/n8n-sizer-ab12cd/data\n0::/\n") == {
        "cpu": "/n8n-sizer-ab12cd/data",
        "cpuacct": "/n8n-sizer-ab12cd/data",
    }


@pytest.mark.parametrize(
    "cores,period,expected",
    [
        (1, 100_000, 100_000),
        (0.25, 100_000, 25_000),
        (1.5, 50_000, 75_000),
        (0.001, 100_000, 1_000),
        (0.0001, 100_000, 1_000),
    ],
)
def test_quota_is_cores_times_period_never_below_the_kernels_minimum(cores, period, expected):
    assert quota_us(cores, period) == expected


def test_a_budget_of_nothing_is_refused():
    with pytest.raises(ValueError):
        quota_us(0)


def test_names_and_paths_outside_the_projects_own_are_refused(tmp_path):
    assert check_name("worker-1") == "worker-1"
    for bad in ("", "../x", "a/b", "x" * 64):
        with pytest.raises(ValueError):
            check_name(bad)
    mounts = {"cpu": tmp_path / "cpu", "cpuacct": tmp_path / "cpuacct"}
    with pytest.raises(CgroupError, match="only groups under"):
        CpuGroup("system.slice/x", mounts).create()
    with pytest.raises(CgroupError, match="only a top-level"):
        remove_tree("user.slice", mounts)
    with pytest.raises(CgroupError, match="only a top-level"):
        remove_tree("n8n-sizer-ab12cd/data", mounts)
