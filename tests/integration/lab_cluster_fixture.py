"""One deployed lab cluster for a test module: the issue's topology (data: Postgres and Redis; ingest: main, two
webhook processors and Caddy; two worker hosts with one worker each) plus two generators, on 10.213.7.0/24.

`lab up` and `lab deploy` run once per module (about a minute of cold n8n starts); `lab down` runs in the
teardown whatever happened, which then checks that no namespace, link or process of the lab is left. Host names
carry a `bl-` prefix and the generators `bl-gen-`, so this lab never takes a namespace name another lab on the
machine uses (namespace names are the machine's, not the lab's).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from n8n_sizer.bundle.topology import parse_topology
from n8n_sizer.lab.deploy import LabCluster, deploy_lab
from n8n_sizer.lab.netns import lab_up, remove_lab
from n8n_sizer.lab.state import LabState
from n8n_sizer.native.install import find_installed
from tests.integration.test_lab import _lab_links, _namespaces, _processes_mentioning

SUBNET = "10.213.7.0/24"
TOPOLOGY = {
    "topology": [
        {"name": "bl-data", "provider": "hetzner", "size": "cx33", "roles": {"postgres": 1, "redis": 1}},
        {
            "name": "bl-ingest",
            "provider": "hetzner",
            "size": "cx33",
            "roles": {"main": 1, "webhook": 2, "load_balancer": 1},
        },
        {"name": "bl-worker", "provider": "hetzner", "size": "cx33", "count": 2, "roles": {"workers": 1}},
    ],
    "subnet": SUBNET,
}
GENERATOR_PREFIX = "bl-gen-"
HOSTS = ["bl-data", "bl-ingest", "bl-worker-1", "bl-worker-2"]
GENERATORS = ["bl-gen-1", "bl-gen-2"]


@dataclass
class DeployedLab:
    inventory: Path  # lab.json
    workdir: Path
    state: LabState
    cluster: LabCluster


@pytest.fixture(scope="module")
def deployed_lab():
    if find_installed() is None or not all(shutil.which(t) for t in ("redis-server", "caddy", "curl")):
        pytest.skip("needs the shared n8n install (scripts/test.sh), Debian's redis-server, caddy and curl")
    before = _namespaces()
    if set(HOSTS + GENERATORS) & before:
        pytest.fail(f"a previous lab is still up ({sorted(set(HOSTS + GENERATORS) & before)}): lab down it first")
    # a folder Debian's `postgres` user can pass through (pytest's tmp_path is root-only when run as root)
    workdir = Path(tempfile.mkdtemp(prefix="n8n-sizer-benchlab-"))
    workdir.chmod(0o755)
    out = workdir / "lab.json"
    state = lab_up(
        parse_topology(TOPOLOGY), len(GENERATORS), out, generator_prefix=GENERATOR_PREFIX, cpu_budget=False
    )  # every host on every core: the bench path, not the shape (lab_shape.py)
    try:
        yield DeployedLab(inventory=out, workdir=workdir, state=state, cluster=deploy_lab(out))
    finally:
        remove_lab(state)
        left = {
            "namespaces": sorted((_namespaces() - before) & set(HOSTS + GENERATORS)),
            # only this lab's links: another lab (another engineer's, its own subnet) may be up meanwhile
            "links": sorted(link for link in _lab_links() if state.lab_id in link),
            "processes": _processes_mentioning(str(workdir)),
        }
        shutil.rmtree(workdir, ignore_errors=True)
        assert not any(left.values()), left
