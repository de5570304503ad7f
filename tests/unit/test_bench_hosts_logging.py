"""Paramiko's own log lines never reach the CLI's stderr beside its one-line HostError."""

from __future__ import annotations

import subprocess
import sys

LOG_A_DROP = ("import logging{imp}; logging.getLogger('paramiko.transport')"
              ".error('Socket exception: Connection reset by peer (104)')")


def _stderr(imp: str) -> str:
    code = LOG_A_DROP.format(imp=imp)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stderr


def test_paramiko_error_is_not_printed_once_hosts_is_imported():
    # Without n8n-sizer, Python's last-resort handler prints it (what a CI run showed after a cut SSH session).
    assert "Socket exception" in _stderr("")
    assert _stderr("; import n8n_sizer.hosts.host") == ""
