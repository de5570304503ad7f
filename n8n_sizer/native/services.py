"""Native processes for the local stack: start one in its own session, wait for it, stop it by PID.

Every process starts in a new session (`start_new_session`), so it is the leader of its own process
group: a terminal's Ctrl-C or an SSH hang-up does not reach it (we stop it ourselves, in order), it
survives the `up` command that started it, and killing the group also takes its children (n8n's internal
task runner, Postgres' backends). A PID recorded in a state file is only signalled while its start time
(/proc/PID/stat, field 22) still matches, so a reused PID is never hit.
"""

from __future__ import annotations

import glob
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from n8n_sizer.errors import InputError, RemoteError
from n8n_sizer.safety.frozen import Frozen
from n8n_sizer.safety.write import write_atomic


class ServiceError(RemoteError):
    """A local service did not start or stop; the message names it and quotes its log."""


class RunningProcess(Frozen):
    """One process the stack started: enough to find, signal and check it later, also from a state file."""

    name: str  # "main", "worker-1", "redis", "postgres"
    pid: int
    start_ticks: int  # /proc/PID/stat starttime: tells this process from a later one with the same PID
    port: int
    log_path: Path
    stop_signal: int = signal.SIGTERM  # Postgres: SIGINT (fast shutdown; SIGTERM would wait for n8n's clients)
    health_port: int | None = None  # a worker's QUEUE_HEALTH_CHECK_PORT
    broker_port: int | None = None  # N8N_RUNNERS_BROKER_PORT of an n8n process


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (bind to port 0 and let the kernel choose)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def process_start_ticks(pid: int) -> int | None:
    """The process' start time in clock ticks since boot, or None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its closing parenthesis.
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] == "Z":  # a zombie has exited; only its exit status is left
        return None
    return int(fields[19])


def is_running(proc: RunningProcess) -> bool:
    """True while the very process we started (same PID and start time) is alive."""
    return process_start_ticks(proc.pid) == proc.start_ticks


def _live_processes() -> Iterator[tuple[int, int, int]]:
    """(pid, parent pid, process group) of every live, non-zombie process."""
    for stat_path in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = Path(stat_path).read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if fields[0] != "Z":
            yield int(stat_path.split("/")[2]), int(fields[1]), int(fields[2])


def group_pids(pgid: int) -> list[int]:
    """Live processes in process group `pgid` (the leader and its children such as task runners)."""
    return [pid for pid, _, group in _live_processes() if group == pgid]


def family_pids(pid: int) -> list[int]:
    """`pid` first, then its process group and its direct children outside it (Postgres' backends run in
    sessions of their own)."""
    return [pid] + [
        other for other, parent, group in _live_processes() if other != pid and (group == pid or parent == pid)
    ]


def spawn(
    name: str,
    argv: list[str],
    env: dict[str, str],
    log_path: Path,
    port: int,
    *,
    cwd: Path | None = None,
    user: str | None = None,
    cpus: str | None = None,
    stop_signal: int = signal.SIGTERM,
    health_port: int | None = None,
    broker_port: int | None = None,
) -> RunningProcess:
    """Start `argv` detached in its own session, stdout and stderr appended to `log_path`."""
    if cpus is not None:
        argv = ["taskset", "-c", cpus, *argv]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        log.write(f"\n--- {time.strftime('%Y-%m-%dT%H:%M:%S%z')} starting {name}\n".encode())
        log.flush()
        popen = subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            user=user,
        )
    # Popen's child is never waited for here: it may outlive this Python process (detached `up`).
    # Keep it out of the zombie list by letting `reap` collect it when it ends.
    _CHILDREN[popen.pid] = popen
    ticks = process_start_ticks(popen.pid)
    if ticks is None:
        popen.poll()
        raise ServiceError(f"{name} exited at once (exit {popen.returncode}); log {log_path}:\n{log_tail(log_path)}")
    return RunningProcess(
        name=name,
        pid=popen.pid,
        start_ticks=ticks,
        port=port,
        log_path=log_path,
        stop_signal=stop_signal,
        health_port=health_port,
        broker_port=broker_port,
    )


_CHILDREN: dict[int, subprocess.Popen] = {}


def reap() -> None:
    """Collect exit statuses of our children that ended, so /proc shows no zombies for them."""
    for pid, popen in list(_CHILDREN.items()):
        if popen.poll() is not None:
            del _CHILDREN[pid]


def _alive(proc: RunningProcess) -> bool:
    reap()
    return is_running(proc)


def signal_process(proc: RunningProcess, sig: int, whole_group: bool = False) -> bool:
    """Send `sig` to the process (or its whole group); False when it was no longer running."""
    if not _alive(proc):
        return False
    try:
        if whole_group:
            os.killpg(proc.pid, sig)
        else:
            os.kill(proc.pid, sig)
    except ProcessLookupError:
        return False
    return True


def stop_process(proc: RunningProcess, timeout_s: float) -> bool:
    """Stop signal to the leader (as `docker stop` does), wait, then SIGKILL whatever is left of its group.
    True when the leader outlived `timeout_s` and was SIGKILLed (forced)."""
    if signal_process(proc, proc.stop_signal):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and _alive(proc):
            time.sleep(0.05)
    forced = _alive(proc)
    if forced:
        signal_process(proc, signal.SIGKILL, whole_group=True)
    # Children (a task runner whose parent was killed) may outlive the leader: take the group down too.
    for pid in group_pids(proc.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (_alive(proc) or group_pids(proc.pid)):
        time.sleep(0.05)
    if _alive(proc):
        raise ServiceError(f"{proc.name} (PID {proc.pid}) is still running after SIGKILL")
    popen = _CHILDREN.pop(proc.pid, None)
    if popen is not None:  # our own child: collect its exit status so no zombie is left behind
        popen.wait(timeout=5)
    return forced


def http_ok(url: str) -> bool:
    """True when `url` answers 200; False while it refuses or is slow (it is asked again)."""
    import httpx  # only the n8n checks need it

    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def log_tail(log_path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(log_path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def wait_until(proc: RunningProcess, check: Callable[[], bool], timeout_s: float, what: str) -> float:
    """Poll `check` until it holds; fail fast with the log tail if the process dies. Returns seconds waited."""
    started = time.monotonic()
    while True:
        if not _alive(proc):
            raise ServiceError(f"{proc.name} exited before {what}; log {proc.log_path}:\n{log_tail(proc.log_path)}")
        try:
            if check():
                return time.monotonic() - started
        except OSError:
            pass
        if time.monotonic() - started > timeout_s:
            raise ServiceError(
                f"{proc.name} not {what} after {timeout_s:.0f} s; log {proc.log_path}:\n{log_tail(proc.log_path)}"
            )
        time.sleep(0.1)


# --- Postgres ----------------------------------------------------------------------------------------


def postgres_bin_dir() -> Path:
    """The newest Debian PostgreSQL server binaries (/usr/lib/postgresql/<ver>/bin)."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(re.search(r"/(\d+)/bin/", p).group(1))
    )
    if not found:
        raise InputError("no PostgreSQL server in /usr/lib/postgresql/*/bin; try `apt-get install postgresql`")
    return Path(found[-1]).parent


def _service_user() -> str | None:
    """Postgres refuses to run as root: run it as Debian's `postgres` user then."""
    return "postgres" if os.geteuid() == 0 else None


def init_postgres(data_dir: Path, superuser: str, password: str) -> None:
    """A fresh cluster in `data_dir`, password (scram) authentication on TCP, trust on its private socket."""
    user = _service_user()
    data_dir.mkdir(mode=0o700)
    pwfile = data_dir.parent / "pg-pwfile"
    write_atomic(pwfile, password + "\n", private=True, what="Postgres password file")  # 0600 from the first byte
    try:
        if user is not None:
            import pwd

            entry = pwd.getpwnam(user)
            for path in (data_dir, pwfile):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        proc = subprocess.run(
            [
                str(postgres_bin_dir() / "initdb"),
                "-D",
                str(data_dir),
                "-U",
                superuser,
                "--pwfile",
                str(pwfile),
                "--auth-host=scram-sha-256",
                "--auth-local=trust",
                "--encoding=UTF8",
                "--no-instructions",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            user=user,
            cwd=data_dir,
        )
    finally:
        pwfile.unlink(missing_ok=True)
    if proc.returncode != 0:
        raise ServiceError(f"initdb failed (exit {proc.returncode}): {(proc.stderr or proc.stdout)[-800:]}")


def start_postgres(
    data_dir: Path,
    port: int,
    max_connections: int,
    log_path: Path,
    cpus: str | None = None,
    listen: tuple[str, ...] = ("127.0.0.1",),
) -> RunningProcess:
    argv = [
        str(postgres_bin_dir() / "postgres"),
        "-D",
        str(data_dir),
        "-p",
        str(port),
        "-c",
        f"listen_addresses={','.join(listen)}",
        "-c",
        f"unix_socket_directories={data_dir}",
        "-c",
        f"max_connections={max_connections}",
    ]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    return spawn(
        "postgres", argv, env, log_path, port, cwd=data_dir, user=_service_user(), cpus=cpus, stop_signal=signal.SIGINT
    )


def wait_postgres(proc: RunningProcess, data_dir: Path, timeout_s: float) -> float:
    pg_isready = str(postgres_bin_dir() / "pg_isready")

    def ready() -> bool:
        return (
            subprocess.run(
                [pg_isready, "-q", "-h", str(data_dir), "-p", str(proc.port)], timeout=10, check=False
            ).returncode
            == 0
        )

    return wait_until(proc, ready, timeout_s, "accepting connections")


def create_database(data_dir: Path, port: int, superuser: str, database: str) -> None:
    proc = subprocess.run(
        [str(postgres_bin_dir() / "createdb"), "-h", str(data_dir), "-p", str(port), "-U", superuser, database],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if proc.returncode != 0:
        raise ServiceError(f"createdb {database} failed: {proc.stderr.strip()[-500:]}")


# --- Redis -------------------------------------------------------------------------------------------

REDIS_PERSISTENCE = ("aof", "none")


def write_redis_config(
    path: Path,
    data_dir: Path,
    port: int,
    password: str,
    persistence: str,
    listen: tuple[str, ...] = ("127.0.0.1",),
    n8n_password: str | None = None,
) -> None:
    """Seed 000's settings: AOF everysec (or no persistence at all, for the drill), noeviction; with
    `n8n_password`, n8n's own ACL user as the rendered bundles have it (`bundle.n8n_env.redis_acl_user`)."""
    from n8n_sizer.bundle.n8n_env import redis_acl_user

    if persistence not in REDIS_PERSISTENCE:
        raise InputError(f"redis persistence {persistence!r} is unknown; try one of {', '.join(REDIS_PERSISTENCE)}")
    lines = [
        f"port {port}",
        f"bind {' '.join(listen)}",
        f"dir {data_dir}",
        "daemonize no",
        "protected-mode yes",
        f"requirepass {password}",
        "maxmemory-policy noeviction",
        'save ""',
    ]
    if n8n_password:
        lines.append("user " + " ".join(redis_acl_user(n8n_password)))
    lines += ["appendonly yes", "appendfsync everysec"] if persistence == "aof" else ["appendonly no"]
    # It holds the password: 0600 from the first byte (the one writer), never world-readable until a chmod.
    write_atomic(path, "\n".join(lines) + "\n", private=True, what="redis config")


def start_redis(config_path: Path, port: int, log_path: Path, cpus: str | None = None) -> RunningProcess:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    return spawn("redis", ["redis-server", str(config_path)], env, log_path, port, cpus=cpus)


def wait_redis(proc: RunningProcess, password: str, timeout_s: float) -> float:
    from n8n_sizer.native.redis import redis_ping

    return wait_until(proc, lambda: redis_ping(proc.port, password), timeout_s, "answering PING")
