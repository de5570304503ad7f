"""A private OpenSSH server per namespace: generated keys (0600), a config of its own, tracked by PID.

It uses no file of /etc/ssh: its config, host key and the lab's authorized key live in the lab's own folder.
`UsePAM no` and `StrictModes no` let sshd run from that folder; only the lab's key is accepted (no passwords).
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

from n8n_sizer.errors import RemoteError
from n8n_sizer.lab.plan import LabNamespace, sshd_command

SSH_PORT = 22
LISTEN_TIMEOUT_S = 10.0
SFTP_SERVERS = ("/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server")


def generate_key(path: Path, comment: str) -> None:
    """An ed25519 key pair at `path` (private 0600) and `path`.pub; refuses to overwrite one."""
    if path.exists():
        raise RemoteError(f"key {path} already exists; the lab never overwrites a key")
    res = subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    if res.returncode != 0:
        raise RemoteError(f"ssh-keygen for {path} failed: {res.stderr.strip()[-200:]}")
    os.chmod(path, 0o600)


def sshd_config_text(ns: LabNamespace, host_key: Path, authorized_keys: Path) -> str:
    sftp = next((p for p in SFTP_SERVERS if Path(p).exists()), "internal-sftp")
    options = {
        "ListenAddress": ns.address,
        "Port": str(SSH_PORT),
        "HostKey": str(host_key),
        "PidFile": "none",
        "AuthorizedKeysFile": str(authorized_keys),
        "PasswordAuthentication": "no",
        "KbdInteractiveAuthentication": "no",
        "PubkeyAuthentication": "yes",
        "UsePAM": "no",
        "StrictModes": "no",
        "PermitRootLogin": "prohibit-password",
        "Subsystem": f"sftp {sftp}",
        # The bench opens several sessions per host at once (deploy, telemetry, tunnels).
        "MaxStartups": "50",
        "MaxSessions": "50",
        "LogLevel": "ERROR",
    }
    return "".join(f"{key} {value}\n" for key, value in options.items())


def start_sshd(ns: LabNamespace, sshd_path: str, config: Path, log: Path) -> int:
    """Start sshd in namespace `ns`; its PID. The caller records the PID before `wait_listening`, so a
    failure while waiting still stops it."""
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # privilege separation folder sshd insists on as root
    with open(log, "ab") as out:
        # start_new_session: the lab outlives `lab up`, and a Ctrl-C in its terminal does not reach sshd.
        proc = subprocess.Popen(
            sshd_command(ns, sshd_path, str(config)),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return proc.pid


def wait_listening(ns: LabNamespace, pid: int, log: Path, timeout_s: float = LISTEN_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            tail = log.read_text(errors="replace").strip()[-300:] if log.exists() else ""
            raise RemoteError(
                f"sshd in namespace {ns.name} exited at once: {tail or 'no output'}; check --sshd and {log}"
            )
        try:
            with socket.create_connection((ns.address, SSH_PORT), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RemoteError(
        f"sshd in namespace {ns.name} did not listen on {ns.address}:{SSH_PORT} within {timeout_s:g} s; see {log}"
    )


def pid_alive(pid: int) -> bool:
    """True while `pid` runs (a zombie, reaped or not, counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    if state == "Z":
        try:
            os.waitpid(pid, os.WNOHANG)  # our own child: reap it
        except ChildProcessError:
            pass
        return False
    return True
