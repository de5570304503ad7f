"""The drain hook itself (templates/n8n-drain-hook.js), run by the real Node.js of the n8n install with a
harness that stands in for n8n's express app and its own SIGTERM handler (tests/data/drain/harness.js)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from n8n_sizer.bundle.drain import HOOK_TEMPLATE
from n8n_sizer.native.install import find_installed

HARNESS = Path(__file__).resolve().parents[1] / "data" / "drain" / "harness.js"


@pytest.fixture(scope="module")
def events() -> list[dict]:
    install = find_installed()
    if install is None:
        pytest.skip("n8n (and its Node.js) is installed by scripts/test.sh")
    proc = subprocess.run(
        [str(install.node_bin), str(HARNESS), str(HOOK_TEMPLATE)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"SIZER_DRAIN_S": "1", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def test_the_drain_path_answers_like_readiness_while_serving_and_503_once_sigterm_arrives(events) -> None:
    probes = {e["label"]: e["code"] for e in events if e["event"] == "probe"}
    assert probes == {"serving": 200, "draining": 503}


def test_n8n_gets_sigterm_only_after_the_check_failed_and_only_once(events) -> None:
    order = [e["event"] if e["event"] != "probe" else e["label"] for e in events]
    assert order == ["serving", "draining", "n8n-sigterm", "done"], events
    assert events[-1]["n8nStops"] == 1  # the second SIGTERM during the drain was not passed on again
    assert [e["drainAnswer"] for e in events if e["event"] == "n8n-sigterm"] == [503]
