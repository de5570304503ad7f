"""The lab is one room: its deployed cluster is one more `StackHandle`, and a topology becomes a `Setup` in one
place (the contract's `Topology.setup`, for one host and for a deployed cluster alike)."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

from n8n_sizer.advisor.answer.contract import Topology
from n8n_sizer.bundle.topology import parse_topology
from n8n_sizer.lab.cluster_handle import LabClusterHandle
from n8n_sizer.stack.handle import StackHandle

PKG = Path(__file__).resolve().parents[2] / "n8n_sizer"
CONVERSIONS = {("advisor/answer/contract.py", "setup")}
CLUSTER = {
    "topology": [
        {"name": "data", "provider": "hetzner", "size": "cx33", "roles": {"postgres": 1, "redis": 1}},
        {"name": "ingest", "provider": "hetzner", "size": "cx33", "roles": {"main": 1}},
        {"name": "worker", "provider": "hetzner", "size": "cx33", "count": 2, "roles": {"workers": 3}},
    ],
    "subnet": "10.213.9.0/24",
}


def topology_to_setup(source: str) -> list[str]:
    """Functions that build a `Setup` from a topology's hosts or roles."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        calls = [c for c in ast.walk(node) if isinstance(c, ast.Call) and ast.unparse(c.func) == "Setup"]
        text = ast.unparse(node)
        if calls and re.search(r"\btopology\.|\.roles\.|\.hosts\(\)|self\.groups", text):
            found.append(node.name)
    return found


def test_the_scan_finds_a_second_conversion():
    planted = "def lab_setup(topology):\n    return Setup(mode='queue', workers=sum(h.roles.workers for h in topology.hosts()))\n"
    assert topology_to_setup(planted) == ["lab_setup"]


def test_a_topology_becomes_a_setup_in_one_place():
    found = {(str(p.relative_to(PKG)), name) for p in PKG.rglob("*.py") for name in topology_to_setup(p.read_text())}
    assert found == CONVERSIONS, found ^ CONVERSIONS


def test_a_cluster_is_queue_mode_with_every_hosts_workers_and_one_host_is_its_own_setup():
    cluster = parse_topology(CLUSTER, "test").setup()
    assert (cluster.mode, cluster.workers) == ("queue", 6)
    one = parse_topology(
        {
            "topology": [
                {"name": "solo", "provider": "hetzner", "size": "cx33", "roles": {"main": 1, "postgres": 1, "redis": 1}}
            ]
        },
        "test",
    )
    assert isinstance(one, Topology) and one.setup() == one.setup() and one.setup().mode == "regular"


def test_the_deployed_cluster_is_a_stack_handle_like_a_single_host():
    assert issubclass(LabClusterHandle, StackHandle) and not inspect.isabstract(LabClusterHandle)
    for name in (
        "up",
        "is_running",
        "is_ready",
        "wait_ready",
        "stop_process",
        "start_process",
        "signal",
        "restart_redis",
        "log_mark",
        "redis",
    ):
        assert getattr(LabClusterHandle, name) is not getattr(StackHandle, name), name
