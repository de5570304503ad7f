"""lab/speed.py's probe on the shared Node.js 24: the figure benchmarks/lab_shape.py puts each sitting's prediction at."""

from __future__ import annotations

from pathlib import Path

import pytest

from n8n_sizer.errors import InputError
from n8n_sizer.lab.speed import probe


def test_probe_reads_cpu_ms_per_round_after_the_warm_up_round(n8n_install):
    got = probe(n8n_install.node_bin, rounds=4)
    assert len(got["rounds"]) == 3  # the first round, the JIT's warm-up, is left out
    assert min(got["rounds"]) <= got["ms"] <= max(got["rounds"])
    assert got["ms"] > 1.0  # 25,000 items through JSON: milliseconds of CPU on any core, never none


def test_probe_names_the_input_and_the_fix(n8n_install, tmp_path: Path):
    with pytest.raises(InputError, match="rounds 2: give at least 3"):
        probe(n8n_install.node_bin, rounds=2)
    with pytest.raises(InputError, match="scripts/test.sh"):
        probe(tmp_path / "no-node")
