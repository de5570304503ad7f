"""Issue 23's third path on real n8n: bench a workflow that is not packaged, at rates it keeps up with (no step
saturates, the usual first run), then `advise --results` and `report` answer for that workflow: its per-role CPU
rows pin its own overhead, no traceback."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

SIZER = [sys.executable, "-c", "from n8n_sizer.cli import main; main()"]
ADVISE = [sys.executable, "-c", "from n8n_sizer.cli import advise_main; advise_main()"]
LIGHT = Path(__file__).resolve().parents[2] / "n8n_sizer" / "templates" / "workflows" / "light.json"


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("own")
    flow = json.loads(LIGHT.read_text())
    flow["name"] = "my flow"
    for node in flow["nodes"]:
        if node["type"] == "n8n-nodes-base.webhook":
            node["parameters"]["path"] = "my-flow"
    (work / "my-flow.json").write_text(json.dumps(flow))
    (work / "body.json").write_text(json.dumps({"number": 21}))
    out = work / "results"
    p = subprocess.run(
        SIZER
        + [
            "bench",
            "--local",
            "--mode",
            "regular",
            "--workflow",
            str(work / "my-flow.json"),
            "--body",
            str(work / "body.json"),
            "--rates",
            "2,4",
            "--step-seconds",
            "15",
            "--warmup",
            "10",
            "--drain-seconds",
            "10",
            "--out",
            str(out),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    ledger = json.loads(p.stdout)["ledgers"]["local"]
    assert ledger["accepted"] > 0 and ledger["accepted_then_lost"] == 0
    return out


def test_advise_results_answers_for_the_workflow_the_runs_measured(results):
    p = subprocess.run(
        ADVISE + ["--rps", "8", "--results", str(results), "--json"], capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-2000:]
    data = json.loads(p.stdout)
    assert data["request"]["workload"] == "my-flow"  # the runs measured one workflow of the user's: about it
    assert "overhead:my-flow" in data["changes"]["params"]
    assert data["capacity_per_s"]["mid"] > 0
    named = subprocess.run(
        ADVISE + ["--rps", "8", "--workload", "my-flow", "--results", str(results)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert named.returncode == 0 and "workload my-flow" in named.stdout, named.stderr[-2000:]


def test_report_of_the_run_ends_with_advice_for_it(results, tmp_path):
    run = next(p.parent for p in results.rglob("run.json"))
    p = subprocess.run(
        SIZER + ["report", str(run), "--out", str(tmp_path), "--no-plots"], capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-2000:]
    last = (tmp_path / "report.md").read_text().rstrip().splitlines()[-1]
    assert last.startswith("| my-flow |") and "not known yet" not in last, last
