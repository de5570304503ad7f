"""Capture real probe output on this machine into tests/data/probes/ (run by hand, output committed).

    .venv/bin/python tests/data/probes/capture.py

Runs each probe's own command (from n8n_sizer.telemetry.probes) against real programs: the kernel's /proc and
cgroup files, a redis-server and a fresh Debian PostgreSQL cluster started here on free ports and stopped
by PID afterwards. Files that cannot be captured on this machine (docker stats: no Docker engine) are
written from documented formats by hand and named `*_documented*`.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from n8n_sizer.telemetry.probes.host import process_probe, process_tree_probe
from n8n_sizer.telemetry.probes.services import BULL_ACTIVE_KEY, BULL_WAIT_KEY, postgres_probe, redis_probes

HERE = Path(__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sh(cmd: str, **kw) -> str:
    return subprocess.run(["sh", "-c", cmd], check=True, capture_output=True, text=True, timeout=30, **kw).stdout


def save(name: str, text: str) -> None:
    (HERE / name).write_text(text)
    print(f"wrote {name} ({len(text)} chars)")


def capture_host() -> None:
    save("proc_stat_1.txt", sh("cat /proc/stat"))
    sh("timeout 1 sh -c 'while :; do :; done' || true")  # burn one core for 1 s so the deltas show it
    save("proc_stat_2.txt", sh("cat /proc/stat"))
    save("proc_loadavg.txt", sh("cat /proc/loadavg"))
    save("proc_meminfo.txt", sh("cat /proc/meminfo"))
    save("proc_diskstats.txt", sh("cat /proc/diskstats"))
    # This machine mounts cgroups hybrid: v2 (unified) holds cpu.stat, v1 holds memory.
    save("cgroup_v2_cpu.stat.txt", sh("cat /sys/fs/cgroup/unified/cpu.stat"))
    mem_v1 = sorted(Path("/sys/fs/cgroup/memory").rglob("memory.usage_in_bytes"))
    save("cgroup_v1_memory.usage_in_bytes.txt", mem_v1[-1].read_text())


def capture_process(tmp: Path) -> None:
    # A command name with a space and a ')' in it: /proc/PID/stat's second field is then ambiguous
    # unless the parser counts from the last ')'.
    odd = tmp / "odd) name x"
    shutil.copy("/bin/sleep", odd)
    child = subprocess.Popen([str(odd), "30"])
    tree = subprocess.Popen(["sh", "-c", "sleep 30 & sleep 30 & wait"], start_new_session=True)
    try:
        time.sleep(0.3)
        save("proc_pid_odd_comm.txt", sh(process_probe("odd", child.pid).command))
        save("proc_pid_children.txt", sh(f"cat /proc/{tree.pid}/task/*/children"))
    finally:
        child.kill()
        child.wait()
        os.killpg(tree.pid, 9)  # the group holds sh and its two sleeps, all started here
        tree.wait()


def capture_redis(tmp: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(tmp)], stdout=subprocess.DEVNULL)
    try:
        for _ in range(50):
            if subprocess.run(["redis-cli", "-p", str(port), "PING"], capture_output=True, text=True).stdout.strip() == "PONG":
                break
            time.sleep(0.1)
        # Seven jobs waiting and two active, pushed the way Bull 4 does (job ids into lists).
        sh(f"redis-cli -p {port} LPUSH {BULL_WAIT_KEY} 11 12 13 14 15 16 17 && redis-cli -p {port} LPUSH {BULL_ACTIVE_KEY} 9 10")
        info, queue = redis_probes(port, password_file=str(tmp / "no-such-password-file"))
        save("redis_info.txt", sh(info.command))
        save("redis_llen.txt", sh(queue.command))
        save("proc_pid_redis.txt", sh(process_probe("redis", proc.pid).command))
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def capture_postgres(tmp: Path) -> None:
    # PostgreSQL refuses to run as root: run initdb and the server as Debian's `postgres` user then.
    user = "postgres" if os.geteuid() == 0 else None
    pgdir = tmp / "pgroot"
    pgdir.mkdir()
    if user:
        os.chmod(tmp, 0o755)
        shutil.chown(pgdir, user)
    data, port = pgdir / "data", free_port()
    env = {**os.environ, "LC_ALL": "C", "PATH": "/usr/lib/postgresql/15/bin:" + os.environ["PATH"]}
    subprocess.run(["initdb", "-D", str(data), "-U", "n8n", "--auth=trust"], check=True, capture_output=True,
                   env=env, user=user, cwd=pgdir)
    proc = subprocess.Popen(["postgres", "-D", str(data), "-p", str(port), "-k", str(pgdir), "-c", "listen_addresses=127.0.0.1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, user=user, cwd=pgdir)
    clients: list[subprocess.Popen] = []
    try:
        for _ in range(100):
            if subprocess.run(["pg_isready", "-h", "127.0.0.1", "-p", str(port)], capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        sh(f"psql -h 127.0.0.1 -p {port} -U n8n -d postgres -c 'CREATE DATABASE n8n' >/dev/null")
        # Connections the way n8n holds them: three idle pool connections and one busy (active).
        psql = f"psql -h 127.0.0.1 -p {port} -U n8n -d n8n"
        for cmd in (f"{psql} -c 'SELECT pg_sleep(20)'", *[f"(echo 'SELECT 1;'; sleep 20) | {psql}"] * 3):
            clients.append(subprocess.Popen(["sh", "-c", cmd], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                            start_new_session=True))
        time.sleep(1.0)
        save("pg_activity.txt", sh(postgres_probe(port).command))
        save("proc_tree_postgres.txt", sh(process_tree_probe("postgres", proc.pid).command))
    finally:
        for c in clients:
            os.killpg(c.pid, 9)  # each client's own session group, started here
            c.wait()
        proc.terminate()
        proc.wait(timeout=20)


def main() -> None:
    capture_host()
    with tempfile.TemporaryDirectory() as tmp:
        capture_process(Path(tmp))
        capture_redis(Path(tmp))
        capture_postgres(Path(tmp))


if __name__ == "__main__":
    main()
