"""The drills' hands on a lab host: runs ON the host (over SSH, inside its network namespace).

    python -m n8n_sizer.remote.lab_agent ps
    python -m n8n_sizer.remote.lab_agent stop --pid 4711 --snapshot DIR/worker-1.json --signal TERM --grace 35
    python -m n8n_sizer.remote.lab_agent start --snapshot DIR/worker-1.json --ready-http URL
    python -m n8n_sizer.remote.lab_agent signal --pid 4711 --signal KILL

A host's processes are the ones in its network namespace (the inode of /proc/PID/ns/net equals this
command's own), so a PID of another host, or a reused PID now elsewhere, is refused. `stop` first saves the
process as it was started (argv, environment, working folder, log: from /proc) into a 0600 snapshot, so
`start` brings back exactly that process, secrets included, without them ever passing a command line;
`start` deletes the snapshot once the process runs. Every command prints one JSON object.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from n8n_sizer.errors import InputError, RemoteError

SIGNALS = {
    "TERM": signal.SIGTERM,
    "KILL": signal.SIGKILL,
    "INT": signal.SIGINT,
    "STOP": signal.SIGSTOP,
    "CONT": signal.SIGCONT,
}
SKIP = ("sshd", "sshd-session", "unshare")  # the host's own access, not a role's process


def _netns(pid: int | str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def _stat(pid: int) -> list[str] | None:
    """Fields after the command name of /proc/PID/stat (state first), None for a gone or zombie process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else fields


def host_processes() -> list[dict]:
    """Every live process of this host (its network namespace) but its sshd and this command's own chain."""
    mine, me = _netns("self"), os.getpid()
    ancestors, pid = set(), me
    while pid > 1:  # this command, its shell and sshd session: not the host's processes
        ancestors.add(pid)
        fields = _stat(pid)
        pid = int(fields[1]) if fields else 0
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in ancestors or _netns(entry.name) != mine:
            continue
        fields = _stat(int(entry.name))
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if fields is None or not argv[0]:
            continue  # a kernel thread has no command line
        exe = os.path.basename(argv[0].decode(errors="replace")).split()[0]
        if exe in SKIP:
            continue
        out.append(
            {
                "pid": int(entry.name),
                "ppid": int(fields[1]),
                "pgid": int(fields[2]),
                "exe": exe,
                "cmd": b" ".join(argv).decode(errors="replace").strip()[:300],
            }
        )
    return sorted(out, key=lambda p: p["pid"])


def _own(pid: int) -> None:
    if _stat(pid) is None:
        raise InputError(f"--pid {pid}: no such process")
    if _netns(pid) != _netns("self"):
        raise InputError(f"--pid {pid} is not a process of this host (another network namespace)")


def snapshot(pid: int) -> dict:
    """What it takes to start the process again as it was: argv, environment, working folder, log file."""
    proc = Path(f"/proc/{pid}")
    argv = [a.decode() for a in proc.joinpath("cmdline").read_bytes().split(b"\0") if a]
    env = dict(
        item.decode().split("=", 1) for item in proc.joinpath("environ").read_bytes().split(b"\0") if b"=" in item
    )
    log = os.readlink(proc / "fd" / "1")
    cwd = os.readlink(proc / "cwd")
    if len(argv) == 1 and " " in argv[0]:
        argv = _retitled(cwd, argv[0])
    return {
        "pid": pid,
        "argv": argv,
        "env": env,
        "cwd": cwd,
        "log": log if log.startswith("/") and not log.startswith("/dev/") else None,
    }


def _retitled(cwd: str, title: str) -> list[str]:
    """The argv of a process that rewrote its title. Redis does ("redis-server 127.0.0.1:6379") and runs in its
    `dir`, which the lab's data role makes the folder of its redis.conf; nothing else here retitles itself."""
    conf = Path(cwd) / "redis.conf"
    # Debian's redis-server is a link to redis-check-rdb, which picks its part by argv[0]: start it by name.
    if title.split()[0] == "redis-server" and conf.is_file():
        return ["redis-server", str(conf)]
    raise InputError(f"the process title {title!r} hides how it was started; cannot snapshot it")


def _group_alive(pgid: int) -> list[int]:
    from n8n_sizer.native.services import group_pids

    return group_pids(pgid)


def stop(pid: int, snapshot_file: Path, sig: str, grace_s: float) -> dict:
    """Save the process, send `sig` (KILL: to its whole group, as a crash takes its children), wait up to
    `grace_s` for the group to end, then SIGKILL what is left."""
    _own(pid)
    from n8n_sizer.safety.write import write_atomic

    pgid = int(_stat(pid)[2])
    write_atomic(snapshot_file, json.dumps(snapshot(pid)), private=True)
    started = time.monotonic()
    if sig == "KILL" and pgid == pid:
        os.killpg(pgid, signal.SIGKILL)
    else:
        os.kill(pid, SIGNALS[sig])
    deadline = started + grace_s
    while time.monotonic() < deadline and (_stat(pid) is not None or (pgid == pid and _group_alive(pgid))):
        time.sleep(0.05)
    forced = False
    if _stat(pid) is not None or (pgid == pid and _group_alive(pgid)):
        forced = True
        for other in [pid] + (_group_alive(pgid) if pgid == pid else []):
            try:
                os.kill(other, signal.SIGKILL)
            except ProcessLookupError:
                pass
        end = time.monotonic() + 10
        while time.monotonic() < end and _stat(pid) is not None:
            time.sleep(0.05)
    if _stat(pid) is not None:
        raise RemoteError(f"PID {pid} still runs after SIGKILL")
    return {"pid": pid, "signal": sig, "stopped_s": round(time.monotonic() - started, 3), "forced": forced}


def start(snapshot_file: Path, ready_http: str | None, ready_redis: str | None, timeout_s: float) -> dict:
    """Start the saved process again (own session, log appended), wait until it is ready, drop the snapshot."""
    from n8n_sizer.native import services

    saved = json.loads(snapshot_file.read_text())
    log = Path(saved["log"]) if saved["log"] else snapshot_file.with_suffix(".log")
    proc = services.spawn(Path(saved["argv"][0]).name, saved["argv"], saved["env"], log, 0, cwd=Path(saved["cwd"]))
    started = time.monotonic()
    if ready_http:
        services.wait_until(proc, lambda: services.http_ok(ready_http), timeout_s, f"ready at {ready_http}")
    elif ready_redis:
        from n8n_sizer.native.redis import redis_ping

        secrets = json.loads(Path(ready_redis).read_text())
        port = int(next((a.split()[1] for a in _config_lines(saved["argv"]) if a.startswith("port ")), 6379))
        services.wait_until(proc, lambda: redis_ping(port, secrets["redis_password"]), timeout_s, "answering PING")
    snapshot_file.unlink()
    return {"pid": proc.pid, "ready_s": round(time.monotonic() - started, 3)}


def _config_lines(argv: list[str]) -> list[str]:
    conf = next((a for a in argv[1:] if a.endswith(".conf")), None)
    return Path(conf).read_text().splitlines() if conf else []


def ready(http: str | None, redis_secrets: str | None) -> bool:
    """One readiness check, no waiting: an n8n or Caddy URL answers 200, or Redis on 6379 answers PING."""
    from n8n_sizer.native import services

    if http:
        return services.http_ok(http)
    if redis_secrets:
        from n8n_sizer.native.redis import redis_ping

        return redis_ping(6379, json.loads(Path(redis_secrets).read_text())["redis_password"])
    raise InputError("ready needs --ready-http URL or --ready-redis SECRETS")


def send(pid: int, sig: str) -> dict:
    _own(pid)
    os.kill(pid, SIGNALS[sig])
    return {"pid": pid, "signal": sig}


def save(pid: int, snapshot_file: Path) -> dict:
    """Before a drill that may make the process exit by itself: its snapshot, for `start`."""
    from n8n_sizer.safety.write import write_atomic

    _own(pid)
    write_atomic(snapshot_file, json.dumps(snapshot(pid)), private=True)
    return {"pid": pid, "saved": str(snapshot_file)}
