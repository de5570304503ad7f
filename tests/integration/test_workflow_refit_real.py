"""Issue 26's table refit on real n8n: bench light and a workflow of the user's (light with two more Code nodes and
a Set) at a rate both keep up with, then `advise --workflow FILE --results DIR` prices it from the table refined by
those runs: the runs are named, the price moves toward what they measured and its interval narrows."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

SIZER = [sys.executable, "-c", "from n8n_sizer.cli import main; main()"]
ADVISE = [sys.executable, "-c", "from n8n_sizer.cli import advise_main; advise_main()"]
LIGHT = Path(__file__).resolve().parents[2] / "n8n_sizer" / "templates" / "workflows" / "light.json"


def _bench(workflow: str, body: Path, out: Path) -> None:
    p = subprocess.run(
        SIZER
        + [
            "bench",
            "--local",
            "--mode",
            "regular",
            "--workflow",
            workflow,
            "--body",
            str(body),
            "--rates",
            "4",
            "--step-seconds",
            "20",
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
        timeout=400,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert json.loads(p.stdout)["ledgers"]["local"]["accepted"] > 0


def test_the_users_runs_refine_the_price_of_their_workflow(tmp_path):
    flow = json.loads(LIGHT.read_text())
    flow["name"] = "my flow"
    hook = next(n for n in flow["nodes"] if n["type"] == "n8n-nodes-base.webhook")
    hook["parameters"]["path"] = "my-flow"
    last = flow["nodes"][-1]["name"]
    extra = [
        {
            "name": f"More {i}",
            "type": "n8n-nodes-base.code",
            "typeVersion": 2,
            "position": [600 + 200 * i, 0],
            "parameters": {"jsCode": "return $input.all();"},
        }
        for i in (1, 2)
    ]
    extra.append(
        {
            "name": "Tag",
            "type": "n8n-nodes-base.set",
            "typeVersion": 3.4,
            "position": [1200, 0],
            "parameters": {
                "assignments": {"assignments": [{"id": "t", "name": "tag", "value": "x", "type": "string"}]},
                "includeOtherFields": True,
                "options": {},
            },
        }
    )
    for prev, node in zip([last, *[n["name"] for n in extra]][:-1], extra, strict=True):
        flow["connections"][prev] = {"main": [[{"node": node["name"], "type": "main", "index": 0}]]}
    flow["nodes"] += extra
    path = tmp_path / "my-flow.json"
    path.write_text(json.dumps(flow))
    body = tmp_path / "body.json"
    body.write_text(json.dumps({"number": 21}))
    results = tmp_path / "results"
    _bench("light", body, results)
    _bench(str(path), body, results)

    from n8n_sizer.runs.price_points import observations_from_results

    observations, skipped = observations_from_results(results, "my-flow")
    (mine,) = [ob for ob in observations if ob.workflow == "my-flow"]
    assert mine.ratio_to_light is not None and 0.8 < mine.ratio_to_light < 2.0, (mine, skipped)

    def priced(*args) -> dict:
        p = subprocess.run(
            ADVISE + ["--rps", "2", "--vcpu", "2", "--json", "--workflow", str(path), *args],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-2000:]
        return json.loads(p.stdout)["workflow_price"]

    plain, refined = priced(), priced("--results", str(results))
    assert refined["refined_from"] and any("my-flow" in r for r in refined["refined_from"])
    (m0, lo0, hi0), (m1, lo1, hi1) = plain["overhead_ratio_to_light"], refined["overhead_ratio_to_light"]
    assert abs(m1 - mine.ratio_to_light) <= abs(m0 - mine.ratio_to_light) + 0.01
    assert hi1 - lo1 < hi0 - lo0
