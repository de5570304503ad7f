"""Paramiko's own log lines never reach the CLI's stderr beside its one-line HostError."""

from __future__ import annotations

import subprocess
import sys

LOG_A_DROP = (
    "import logging{imp}; logging.getLogger('paramiko.transport')"
    ".error('Socket exception: Connection reset by peer (104)')"
)


def _stderr(imp: str) -> str:
    code = LOG_A_DROP.format(imp=imp)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stderr


def test_paramiko_error_is_not_printed_once_an_ssh_host_connects():
    # Without n8n-sizer, Python's last-resort handler prints it (what a CI run showed after a cut SSH session).
    assert "Socket exception" in _stderr("")
    # importing sets up no logging; opening an SSH connection does (quiet_paramiko, called by SshHost)
    assert "Socket exception" in _stderr("; import n8n_sizer.hosts.host")
    assert _stderr("; from n8n_sizer.hosts.host import quiet_paramiko; quiet_paramiko(); quiet_paramiko()") == ""
    import logging

    from n8n_sizer.hosts.host import quiet_paramiko

    quiet_paramiko()
    quiet_paramiko()
    assert sum(isinstance(h, logging.NullHandler) for h in logging.getLogger("paramiko").handlers) == 1
