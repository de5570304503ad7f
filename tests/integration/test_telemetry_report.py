"""The report's PNG plots, drawn with matplotlib from synthetic run folders (a few seconds: kept out of the
unit tests), and later from real local runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from n8n_sizer.bench.report import build_report
from tests.unit.test_report import runs  # noqa: F401  (the synthetic run folders fixture)

pytestmark = pytest.mark.integration


def test_report_with_plots_writes_readable_pngs(runs, tmp_path):
    result = build_report(runs, tmp_path / "report")
    names = sorted(p.name for p in result.images)
    assert names == sorted(["answered_vs_offered.png", "latency_20261130t150000z-aaaaaa_cx33.png",
                            "latency_20261130t160000z-bbbbbb_cx33-q.png", "timeseries_20261130t150000z-aaaaaa_cx33.png",
                            "timeseries_20261130t160000z-bbbbbb_cx33-q.png"])
    for p in result.images:
        head = p.read_bytes()[:24]
        assert head[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
        assert width >= 600 and height >= 450
        assert f"]({p.name})" in result.markdown.read_text()


