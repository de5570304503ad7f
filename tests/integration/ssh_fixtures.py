"""A private OpenSSH server on 127.0.0.1 for the bench tests: a free port, generated host and client keys in a
temp dir, started and stopped by PID. Import the fixtures explicitly into a test module:

    from tests.integration.ssh_fixtures import sshd  # noqa: F401

It runs as whichever user runs the tests (root in CI): `UsePAM no` and `StrictModes no` let it run from a
temp dir without touching /etc/ssh; only keys are accepted.
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class SshServer:
    port: int
    user: str
    client_key: Path
    wrong_key: Path  # a valid key the server does not accept
    pid: int
    folder: Path

    def session_pids(self) -> list[int]:
        """PIDs of the per-connection sshd processes (children of the listener)."""
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == self.pid:
                pids.append(int(entry.name))
        return pids

    def cut_connections(self) -> int:
        """Kill every open SSH session (as a dropped network would); the listener stays up. Returns how many."""
        pids = self.session_pids()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return len(pids)


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True, stdout=subprocess.DEVNULL
    )


def start_sshd(folder: Path) -> tuple[SshServer, subprocess.Popen]:
    _keygen(folder / "host_key")
    _keygen(folder / "client_key")
    _keygen(folder / "wrong_key")
    shutil.copyfile(folder / "client_key.pub", folder / "authorized_keys")
    os.chmod(folder / "authorized_keys", 0o600)
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # privilege separation dir sshd insists on as root
    port = free_port()
    sftp = next(
        (p for p in ("/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server") if Path(p).exists()),
        "internal-sftp",
    )
    options = {
        "ListenAddress": "127.0.0.1",
        "Port": str(port),
        "HostKey": str(folder / "host_key"),
        "PidFile": str(folder / "sshd.pid"),
        "AuthorizedKeysFile": str(folder / "authorized_keys"),
        "PasswordAuthentication": "no",
        "KbdInteractiveAuthentication": "no",
        "PubkeyAuthentication": "yes",
        "UsePAM": "no",
        "StrictModes": "no",
        "PermitRootLogin": "prohibit-password",
        "Subsystem": f"sftp {sftp}",
        "MaxStartups": "50",
        "LogLevel": "ERROR",
    }
    args = [SSHD, "-D", "-e", "-f", "/dev/null"]
    for key, value in options.items():
        args += ["-o", f"{key}={value}"]
    log = open(folder / "sshd.log", "wb")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited {proc.returncode}: {(folder / 'sshd.log').read_text()[-500:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            time.sleep(0.05)
    else:
        proc.kill()
        raise RuntimeError("sshd did not listen within 10 s")
    server = SshServer(
        port=port,
        user=getpass.getuser(),
        client_key=folder / "client_key",
        wrong_key=folder / "wrong_key",
        pid=proc.pid,
        folder=folder,
    )
    return server, proc


def stop_sshd(server: SshServer, proc: subprocess.Popen) -> None:
    server.cut_connections()
    try:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=5)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.fixture(scope="session")
def sshd():
    folder = Path(tempfile.mkdtemp(prefix="n8n-sizer-sshd-"))
    server, proc = start_sshd(folder)
    try:
        yield server
    finally:
        stop_sshd(server, proc)
        shutil.rmtree(folder, ignore_errors=True)
