"""Every class name is defined once in the package, and every module name once: a newcomer finds one place."""

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "n8n_sizer"
# Module names that every package repeats by convention.
CONVENTIONAL = {"__init__.py", "__main__.py"}
# Module names repeated on purpose: one module per provider or per room's own concept of the same word.
# Each entry says why; a new repeat fails until it is renamed or explained here.
REPEATED_ON_PURPOSE = {
    "gcp.py": "fleet/ (a benchmark fleet) and fleet/cluster/ (a cluster): one module per provider in each",
    "hetzner.py": "as gcp.py",
    "spec.py": "fleet/spec.py (a fleet's stack config) and fleet/cluster/spec.py (a cluster's)",
    "build.py": "fleet/cluster/build.py (the Pulumi program) and report/build.py (the Markdown report)",
    "host.py": "hosts/host.py (a host to run commands on) and telemetry/probes/host.py (its probes)",
    "ingest.py": "lab/ and native/ each start the ingest roles on their kind of host",
    "lab.py": "lab/bench.py (bench over the lab), cli/lab.py (the lab's commands)",
    "plan.py": "bench/plan.py (a load plan) and lab/plan.py (a lab's namespaces)",
    "remote.py": "drills/remote.py and stack/remote.py: the remote side of each room",
    "render.py": "bundle/render.py (a bundle) and cli/render.py (its command)",
    "services.py": "native/services.py (native processes) and telemetry/probes/services.py (their probes)",
    "state.py": "lab/state.py and native/state.py: each room's own record on disk",
}


def _modules() -> list[Path]:
    return [p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts]


def test_every_class_name_is_defined_once():
    where = defaultdict(list)
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                where[node.name].append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    twice = {name: places for name, places in where.items() if len(places) > 1}
    assert not twice, f"class names defined more than once: {twice}"


def test_module_names_repeat_only_where_explained():
    where = defaultdict(list)
    for path in _modules():
        if path.name not in CONVENTIONAL:
            where[path.name].append(str(path.relative_to(PACKAGE)))

    def fronts_its_library(places: list[str]) -> bool:  # a command named after the one library module it calls
        return len(places) == 2 and sum(p.startswith("cli/") for p in places) == 1

    twice = {
        name: places
        for name, places in where.items()
        if len(places) > 1 and name not in REPEATED_ON_PURPOSE and not fronts_its_library(places)
    }
    assert not twice, f"module names used twice without a reason in REPEATED_ON_PURPOSE: {twice}"
