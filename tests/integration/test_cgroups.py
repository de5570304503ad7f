"""A real cgroup v1 CPU group: a bounded busy loop under a quota, seen by the kernel's accounting, then removed.

Ratios, not timings: the loop's CPU over its wall time must stay within the quota (with 30% slack for the
period's rounding), and the accounting must see most of what a quota of that size allows while the loop runs.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time

import pytest

from n8n_sizer.hosts.cgroups import PREFIX, CpuGroup, available_mounts, remove_tree

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0 or not available_mounts(), reason="needs root and cgroup v1 cpu and cpuacct"),
    pytest.mark.timeout(60),
]

# A busy loop that stops itself after 2 s of wall time (bounded in time whatever happens to the test).
BURNER = "import time\nend = time.monotonic() + 2.0\nwhile time.monotonic() < end:\n    pass\n"


def test_a_burner_under_a_quarter_core_quota_is_accounted_and_held_to_it():
    mounts = available_mounts()
    top = f"{PREFIX}test-{secrets.token_hex(3)}"
    try:
        group = CpuGroup(f"{top}/burner", mounts).create()
        assert group.set_quota(0.25) == 25_000
        idle = CpuGroup(f"{top}/idle", mounts).create()
        # Started stopped (SIGSTOP by itself) so it is in the group before it burns anything.
        proc = subprocess.Popen(
            [sys.executable, "-c", f"import os, signal; os.kill(os.getpid(), signal.SIGSTOP)\n{BURNER}"]
        )
        try:
            deadline = time.monotonic() + 10
            while open(f"/proc/{proc.pid}/stat").read().rsplit(")", 1)[1].split()[0] != "T":
                assert time.monotonic() < deadline, "the burner never stopped itself"
                time.sleep(0.01)
            assert group.add(proc.pid) == [proc.pid]
            assert proc.pid in group.pids()
            before = group.usage_ns()
            started = time.monotonic()
            proc.send_signal(subprocess.signal.SIGCONT)
            proc.wait(timeout=20)
            wall = time.monotonic() - started
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        used_s = (group.usage_ns() - before) / 1e9
        allowed_s = 0.25 * wall
        assert used_s <= 1.3 * allowed_s, (used_s, wall)
        assert used_s >= 0.5 * allowed_s, (used_s, wall)  # the accounting saw the loop (a sibling saw nothing)
        assert idle.usage_ns() == 0
        assert group.throttling().nr_throttled > 0
    finally:
        removed, failed = remove_tree(top, mounts)
    assert not failed
    assert len(removed) == 6  # burner, idle and the top group, under cpu and under cpuacct
    assert not any((m / top).exists() for m in mounts.values())
