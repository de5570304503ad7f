"""Fleet hosts that cannot be used: one line on stderr, exit 2, no run folder (checked before anything starts)."""

from __future__ import annotations

import json

import pytest

from tests.integration.ssh_fixtures import free_port, sshd  # noqa: F401
from tests.integration.test_bench_ssh import CLI, inventory

pytestmark = pytest.mark.integration


def _bench(inv_path, key, port, out):
    import subprocess

    return subprocess.run(
        [
            CLI,
            "bench",
            "--inventory",
            str(inv_path),
            "--ssh-key",
            str(key),
            "--ssh-port",
            str(port),
            "--rates",
            "1",
            "--step-seconds",
            "1",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("case", ["wrong-key", "unreachable"])
def test_unusable_host_is_one_line_exit_1(sshd, tmp_path, case):  # noqa: F811
    inv = tmp_path / "inventory.json"
    inv.write_text(json.dumps(inventory(sshd, {"t1": {"mode": "regular", "workers": 0}})))
    key = sshd.wrong_key if case == "wrong-key" else sshd.client_key
    port = sshd.port if case == "wrong-key" else free_port()
    res = _bench(inv, key, port, tmp_path / "results")
    err = res.stderr.strip()
    assert res.returncode == 1 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "t1:" in err and ("refused" in err if case == "wrong-key" else "cannot connect" in err), err
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())
