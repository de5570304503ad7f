"""The issue's end-to-end promise: what `advise --json` prints renders into host bundles that pass `check --topology`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


@pytest.mark.parametrize("rps", [200, 400])
def test_advise_json_renders_and_checks_as_a_cluster(tmp_path: Path, rps: int) -> None:
    advice = subprocess.run(
        [str(BIN / "advise"), "--rps", str(rps), "--json"], capture_output=True, text=True, check=True
    ).stdout
    data = json.loads(advice)
    assert data["feasible"] and data["webhook_processors"] >= 1 and data["workers"] >= 2
    assert data["postgres_connections"] <= data["max_connections"] and data["monthly_eur"] > 0
    (tmp_path / "a.json").write_text(advice)
    render = subprocess.run(
        [
            str(BIN / "n8n-sizer"),
            "render",
            "--topology",
            "a.json",
            "--out",
            "c",
            "--public-url",
            "http://n8n.example.com:5678/",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert render.returncode == 0, render.stderr
    hosts = sorted(p.name for p in (tmp_path / "c").iterdir() if (p / "docker-compose.yml").is_file())
    roles = [g["roles"] for g in data["topology"]]
    assert len(hosts) >= 3 and any(r["load_balancer"] and r["webhook"] for r in roles), (hosts, roles)
    assert sum(r["postgres"] for r in roles) == 1 and any(r["workers"] for r in roles), roles
    check = subprocess.run(
        [str(BIN / "n8n-sizer"), "check", "--topology", "c", "--json"], cwd=tmp_path, capture_output=True, text=True
    )
    results = json.loads(check.stdout)
    failed = [r for r in results if r["status"] == "fail"]
    assert check.returncode == 0 and not failed, failed
    assert any(r["rule"].endswith("one-encryption-key") or "encryption" in r["rule"] for r in results)
