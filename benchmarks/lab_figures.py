"""Prints how long the lab takes: `lab up`, `lab deploy` and `lab down` through the CLI, for the issue's
cluster (data; ingest with main, 2 webhook processors and Caddy; 2 worker hosts; 2 generators), and what
was left after `lab down` (0 expected). Needs root, the shared n8n install, postgresql, redis-server, caddy.

    .venv/bin/python benchmarks/lab_figures.py

Only the lab's own subnet (10.213.7.0/24) is contacted. A folder the postgres user can pass through is used.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TOPOLOGY = {
    "topology": [
        {"name": "data", "provider": "hetzner", "size": "cx33", "roles": {"postgres": 1, "redis": 1}},
        {
            "name": "ingest",
            "provider": "hetzner",
            "size": "cx33",
            "roles": {"main": 1, "webhook": 2, "load_balancer": 1},
        },
        {"name": "worker", "provider": "hetzner", "size": "cx33", "count": 2, "roles": {"workers": 1}},
    ],
    "subnet": "10.213.7.0/24",
}
CLI = [sys.executable, "-c", "from n8n_sizer.cli import main; main()", "lab"]


def timed(args: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess]:
    started = time.monotonic()
    res = subprocess.run(CLI + args, cwd=cwd, capture_output=True, text=True, timeout=900)
    return time.monotonic() - started, res


def main() -> int:
    folder = Path(tempfile.mkdtemp(prefix="n8n-sizer-lab-figures-"))
    folder.chmod(0o755)
    (folder / "topology.json").write_text(json.dumps(TOPOLOGY))
    try:
        up_s, up = timed(["up", "--topology", "topology.json", "--generators", "2", "--out", "lab.json"], folder)
        if up.returncode != 0:
            print(f"lab up failed: {up.stderr.strip()}")
            return 1
        deploy_s, deploy = timed(["deploy", "--inventory", "lab.json", "--json"], folder)
        down_s, down = timed(["down", "--inventory", "lab.json", "--json"], folder)
        print(f"lab up     {up_s:6.1f} s  (6 namespaces, bridge, 6 sshd)")
        print(
            f"lab deploy {deploy_s:6.1f} s  " + ("ok" if deploy.returncode == 0 else f"FAILED: {deploy.stderr.strip()}")
        )
        if deploy.returncode == 0:
            procs = json.loads(deploy.stdout)["processes"]
            print("           " + "; ".join(f"{h}: {', '.join(p['name'] for p in ps)}" for h, ps in procs.items()))
        removed = json.loads(down.stdout)["removed"] if down.returncode == 0 else []
        print(f"lab down   {down_s:6.1f} s  removed {len(removed)} things")
        left_ns = [
            n
            for n in ("data", "ingest", "worker-1", "worker-2", "gen-1", "gen-2")
            if os.path.lexists(f"/run/netns/{n}")
        ]
        links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
        left_links = [w for w in links.split() if w.startswith(("n8nsz-", "nz"))]
        print(f"left after down: {len(left_ns)} namespaces, {len(left_links)} links")
        return 0 if deploy.returncode == 0 and down.returncode == 0 else 1
    finally:
        if (folder / "lab.json").exists():
            subprocess.run(CLI + ["down", "--inventory", "lab.json"], cwd=folder, timeout=120)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
