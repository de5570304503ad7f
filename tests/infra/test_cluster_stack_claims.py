"""Every committed cluster stack carries what its header says: the header names `advise --rps N`, and
`advise --rps N --topology` (through the CLI, as a user runs it) on the stack's own topology says it carries it.
Also: each stack carries a public URL that is not this machine's (webhooks are called from outside)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
STACKS = sorted((ROOT / "stacks").glob("Pulumi.cluster-*.yaml"))
CLI = Path(sys.executable).parent / "n8n-sizer"
CLAIM = re.compile(r"carries `advise --rps (\d+)`")


@pytest.mark.parametrize("path", STACKS, ids=lambda p: p.stem)
def test_the_stack_carries_the_rate_its_header_claims(path: Path, tmp_path: Path) -> None:
    text = path.read_text()
    header = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    claims = CLAIM.findall(header)
    assert len(claims) == 1, f"{path.name}: the header must name the rate it carries as `advise --rps N`"
    rps = int(claims[0])
    topology = tmp_path / "topology.json"
    topology.write_text(json.dumps(yaml.safe_load(text)["config"]["n8n-sizer:cluster"]))
    proc = subprocess.run(
        [str(CLI), "advise", "--rps", str(rps), "--topology", str(topology), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    assert answer["feasible"], (path.name, answer["capacity_per_s"], answer["warnings"][:1])
    assert answer["capacity_per_s"]["mid"] >= rps
    # The claim is the stack's, not a floor far below it: at twice the rate the verdict turns.
    twice = subprocess.run(
        [str(CLI), "advise", "--rps", str(2 * rps), "--topology", str(topology), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert twice.returncode == 0 and not json.loads(twice.stdout)["feasible"], path.name


@pytest.mark.parametrize("path", STACKS, ids=lambda p: p.stem)
def test_the_stack_carries_a_public_url_the_outside_reaches(path: Path) -> None:
    config = yaml.safe_load(path.read_text())["config"]
    url = config.get("n8n-sizer:public_url", "")
    assert url.startswith(("http://", "https://")) and "localhost" not in url and "127.0.0.1" not in url, path.name
