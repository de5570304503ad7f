"""The whole loop on real n8n: a local bench run, its report with plots, and `advise --results` refitting on it.

Issue 6's closing check: the run's closed-load step saturates this machine, so the refit makes this host the
reference and moves the light workflow's fitted demand per execution to what this machine measured.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

SIZER = [sys.executable, "-c", "from n8n_sizer.cli import main; main()"]


def sizer(*args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(SIZER + list(args), capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("results")
    p = sizer(
        "bench",
        "--local",
        "--mode",
        "regular",
        "--workflow",
        "light",
        "--rates",
        "2",
        "--concurrency-sweep",
        "10",
        "--step-seconds",
        "15",
        "--warmup",
        "20",
        "--drain-seconds",
        "10",
        "--out",
        str(out),
        "--json",
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    summary = json.loads(p.stdout)
    ledger = summary["ledgers"]["local"]
    assert ledger["accepted"] > 0 and ledger["accepted_then_lost"] == 0
    assert ledger["executions_stored"] == ledger["fired"]
    # the light workflow answers with its execution id: every accepted request matched one by one
    assert ledger["lost_seqs"] == []
    records = [json.loads(line) for line in (Path(summary["folder"]) / "requests.jsonl").read_text().splitlines()]
    assert all(r["execution_id"] for r in records if r["status"] == 200)
    return Path(summary["folder"])


def test_report_has_tables_and_plots(run_dir, tmp_path):
    p = sizer("report", str(run_dir), "--out", str(tmp_path), timeout=120)
    assert p.returncode == 0, p.stderr
    text = (tmp_path / "report.md").read_text()
    assert "answered/min" in text and "Ledger" in text
    assert text.rstrip().splitlines()[-1].startswith("| light |")  # ends with the refitted advice per rate
    pngs = sorted(tmp_path.glob("*.png"))
    assert pngs and all(png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for png in pngs)


def test_advise_results_moves_the_light_demand_to_this_machine(run_dir):
    p = subprocess.run(
        [
            sys.executable,
            "-c",
            "from n8n_sizer.cli import advise_main; advise_main()",
            "--rps",
            "10",
            "--vcpu",
            "2",
            "--results",
            str(run_dir.parent),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    changes = json.loads(p.stdout)["changes"]
    assert changes["user_points"], changes["user_excluded"]
    assert changes["reference_host"]["after"].startswith("user:")
    light = changes["params"]["overhead:light"]
    assert light["after"] != pytest.approx(light["before"], rel=0.02)
