"""`StackHandle.stop_process` says whether the stop had to be forced: here the native stack's own stop
(`services.stop_process`, which the local stack, the host agent's CLI and the lab's handle report through) on
two real processes, one that ends on SIGTERM and one that ignores it until SIGKILL."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from n8n_sizer.native import services

IGNORES_TERM = (
    "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('ready', flush=True)\ntime.sleep(60)\n"
)
ENDS_ON_TERM = "import time\nprint('ready', flush=True)\ntime.sleep(60)\n"


def _started(tmp_path: Path, name: str, code: str) -> services.RunningProcess:
    log = tmp_path / f"{name}.log"
    proc = services.spawn(name, [sys.executable, "-c", code], {}, log, services.free_port())
    deadline = time.monotonic() + 20
    while "ready" not in log.read_text() and time.monotonic() < deadline:  # its handler is in place
        time.sleep(0.05)
    assert "ready" in log.read_text(), log.read_text()
    return proc


def test_a_process_that_ends_on_sigterm_was_not_forced(tmp_path: Path) -> None:
    proc = _started(tmp_path, "polite", ENDS_ON_TERM)
    assert services.stop_process(proc, 10) is False
    assert not services.group_pids(proc.pid)


def test_a_process_that_outlives_its_grace_was_forced(tmp_path: Path) -> None:
    proc = _started(tmp_path, "stubborn", IGNORES_TERM)
    assert services.stop_process(proc, 0.5) is True
    assert not services.group_pids(proc.pid)
