"""One way to run commands on a machine: `LocalHost` (this machine) and `SshHost` (Fabric over SSH).

Every command has a timeout. A failed command raises `HostError` naming the host, the command, the exit
code and the tail of stderr, so a broken benchmark says where it broke. `HostError` is an `InputError`:
an unreachable host or a wrong key is the user's input, and the CLI prints it as one line, exit 2.

`SshHost` never reconnects silently once its connection dropped (Fabric would): a dropped connection
means the run lost sight of the target, and the caller decides (stop, keep results, offer `--resume`).
"""

from __future__ import annotations

import logging
import shlex
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from n8n_sizer.errors import RemoteError
from n8n_sizer.safety.frozen import Frozen

STDERR_TAIL_CHARS = 400


def quiet_paramiko() -> None:
    """Paramiko logs a dropped connection ("Socket exception: Connection reset by peer") from its transport
    thread. With no handler anywhere, Python's last-resort handler printed it to stderr beside the CLI's own
    one-line HostError. A NullHandler ends that fallback; records still propagate to handlers an application
    installs. Called when an SSH connection opens (not at import: importing a module sets up no logging)."""
    logger = logging.getLogger("paramiko")
    if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
        logger.addHandler(logging.NullHandler())


class CommandResult(Frozen):
    """What a finished command returned."""

    host: str
    command: str
    exit_code: int
    stdout: str
    stderr: str
    duration_s: float


class HostError(RemoteError):
    """A command failed, timed out, or the host could not be reached. The message is one line."""


class ConnectionLost(HostError):
    """The SSH connection to a host dropped after it had been open."""


def _one_line(text: str, limit: int = STDERR_TAIL_CHARS) -> str:
    tail = " ".join(text.strip().split())
    return tail[-limit:] if len(tail) > limit else tail


def command_error(host: str, command: str, exit_code: int | None, stderr: str, why: str = "") -> HostError:
    """The one error shape for a failed command: host, command, exit code, tail of stderr."""
    code = "timed out" if exit_code is None else f"exit code {exit_code}"
    what = f" ({why})" if why else ""
    tail = _one_line(stderr) or "no stderr"
    return HostError(f"{host}: `{_one_line(command, 200)}` failed, {code}{what}: {tail}")


class Host(Protocol):
    """What the bench needs from a machine."""

    name: str

    def run(self, command: str, timeout_s: float, check: bool = True) -> CommandResult: ...

    def put(self, local: Path, remote: str) -> None: ...

    def get(self, remote: str, local: Path) -> None: ...

    def ping(self, timeout_s: float = 10.0) -> None: ...

    def close(self) -> None: ...


class LocalHost:
    """This machine. Commands run under `bash -c` in their own process group, killed on timeout."""

    def __init__(self, name: str = "local") -> None:
        self.name = name

    def run(self, command: str, timeout_s: float, check: bool = True) -> CommandResult:
        started = time.monotonic()
        proc = subprocess.Popen(
            ["bash", "-c", command],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            raise command_error(self.name, command, None, err, f"after {timeout_s:g} s") from None
        result = CommandResult(
            host=self.name,
            command=command,
            exit_code=proc.returncode,
            stdout=out,
            stderr=err,
            duration_s=time.monotonic() - started,
        )
        if check and proc.returncode != 0:
            raise command_error(self.name, command, proc.returncode, err)
        return result

    def put(self, local: Path, remote: str) -> None:
        Path(remote).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(local, remote)

    def get(self, remote: str, local: Path) -> None:
        if not Path(remote).is_file():
            raise HostError(f"{self.name}: cannot get {remote}: no such file")
        local.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(remote, local)

    def ping(self, timeout_s: float = 10.0) -> None:
        return None  # this machine is always there

    def close(self) -> None:
        return None


def _kill_group(proc: subprocess.Popen) -> None:
    import os
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class SshHost:
    """A machine over SSH via Fabric (paramiko). Keys only (no passwords), no ~/.ssh/config."""

    def __init__(
        self,
        name: str,
        address: str,
        user: str,
        key_file: Path | None = None,
        port: int = 22,
        connect_timeout_s: float = 15.0,
    ) -> None:
        self.name = name
        self.address = address
        self.user = user
        self.port = port
        self.key_file = key_file
        self.connect_timeout_s = connect_timeout_s
        self._conn = None  # fabric.Connection, opened on first use
        self._opened = False

    def _where(self) -> str:
        return f"{self.user}@{self.address}:{self.port}"

    def _connection(self):
        if self._opened:
            if not self._conn.is_connected:
                raise ConnectionLost(
                    f"{self.name}: the SSH connection to {self._where()} dropped; "
                    f"results so far are kept; try `n8n-sizer bench --resume RUN`"
                )
            return self._conn
        from fabric import Config, Connection
        from paramiko.ssh_exception import AuthenticationException, SSHException

        if self.key_file is not None and not self.key_file.is_file():
            raise HostError(f"{self.name}: SSH key {self.key_file} does not exist; try --ssh-key FILE")
        # With --ssh-key only that key is offered; without it, the usual ~/.ssh keys and the agent.
        connect_kwargs = {
            "look_for_keys": self.key_file is None,
            "allow_agent": self.key_file is None,
            "banner_timeout": self.connect_timeout_s,
            "auth_timeout": self.connect_timeout_s,
        }
        if self.key_file is not None:
            connect_kwargs["key_filename"] = [str(self.key_file)]
        config = Config(overrides={"load_ssh_configs": False, "run": {"hide": True, "warn": True, "in_stream": False}})
        quiet_paramiko()
        conn = Connection(
            self.address,
            user=self.user,
            port=self.port,
            config=config,
            connect_timeout=self.connect_timeout_s,
            connect_kwargs=connect_kwargs,
        )
        try:
            conn.open()
        except AuthenticationException as exc:
            raise HostError(
                f"{self.name}: SSH login as {self._where()} refused ({exc}); try --ssh-key with the fleet's private key"
            ) from None
        except TimeoutError as exc:
            raise HostError(
                f"{self.name}: cannot reach {self._where()} over SSH (timed out after "
                f"{self.connect_timeout_s:g} s: {exc}); check the address and the firewall"
            ) from None
        except (OSError, SSHException) as exc:
            raise HostError(
                f"{self.name}: cannot connect to {self._where()} over SSH "
                f"({type(exc).__name__}: {_one_line(str(exc), 200)}); check the address, "
                f"port and that sshd runs"
            ) from None
        self._conn, self._opened = conn, True
        return conn

    def run(self, command: str, timeout_s: float, check: bool = True) -> CommandResult:
        from invoke.exceptions import CommandTimedOut

        conn = self._connection()
        started = time.monotonic()
        try:
            res = conn.run(command, timeout=timeout_s)
        except CommandTimedOut as exc:
            raise command_error(self.name, command, None, exc.result.stderr, f"after {timeout_s:g} s") from None
        except (OSError, EOFError) as exc:
            raise ConnectionLost(
                f"{self.name}: the SSH connection to {self._where()} dropped while running "
                f"`{_one_line(command, 120)}` ({type(exc).__name__}: {exc}); results so far "
                f"are kept; try `n8n-sizer bench --resume RUN`"
            ) from None
        except Exception as exc:  # paramiko raises SSHException for a channel on a dead transport
            from paramiko.ssh_exception import SSHException

            if isinstance(exc, SSHException):
                raise ConnectionLost(
                    f"{self.name}: the SSH connection to {self._where()} dropped "
                    f"({exc}); results so far are kept; try `n8n-sizer bench --resume RUN`"
                ) from None
            raise
        if res.exited == -1 or (res.exited is None):
            if time.monotonic() - started >= timeout_s:  # invoke's timer fired while the channel closed: a timeout
                raise command_error(self.name, command, None, res.stderr, f"after {timeout_s:g} s")
            raise ConnectionLost(
                f"{self.name}: the SSH connection to {self._where()} dropped while running "
                f"`{_one_line(command, 120)}`; try `n8n-sizer bench --resume RUN`"
            )
        result = CommandResult(
            host=self.name,
            command=command,
            exit_code=res.exited,
            stdout=res.stdout,
            stderr=res.stderr,
            duration_s=time.monotonic() - started,
        )
        if check and res.exited != 0:
            raise command_error(self.name, command, res.exited, res.stderr)
        return result

    def put(self, local: Path, remote: str) -> None:
        conn = self._connection()
        self.run(f"mkdir -p {shlex.quote(str(Path(remote).parent))}", timeout_s=30)
        try:
            conn.put(str(local), remote=remote)
        except (OSError, EOFError) as exc:
            raise HostError(f"{self.name}: copying {local} to {remote} failed: {exc}") from None

    def get(self, remote: str, local: Path) -> None:
        conn = self._connection()
        local.parent.mkdir(parents=True, exist_ok=True)
        try:
            conn.get(remote, local=str(local))
        except (OSError, EOFError) as exc:
            raise HostError(f"{self.name}: copying {remote} from the host failed: {exc}") from None

    @contextmanager
    def tunnel(self, remote_port: int) -> Iterator[int]:
        """Forward a free local port to 127.0.0.1:`remote_port` on the host (n8n's API is not public)."""
        conn = self._connection()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            local_port = s.getsockname()[1]
        with conn.forward_local(
            local_port=local_port, remote_port=remote_port, remote_host="127.0.0.1", local_host="127.0.0.1"
        ):
            deadline = time.monotonic() + 10  # Fabric binds the listener in its own thread, a moment later
            while True:
                try:
                    socket.create_connection(("127.0.0.1", local_port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise HostError(
                            f"{self.name}: the SSH tunnel to port {remote_port} did not open "
                            f"on 127.0.0.1:{local_port} within 10 s"
                        ) from None
                    time.sleep(0.05)
            yield local_port

    def ping(self, timeout_s: float = 10.0) -> None:
        """Raises `ConnectionLost` when the connection dropped (a cheap `true` over the open transport)."""
        self.run("true", timeout_s=timeout_s)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn, self._opened = None, False
