"""The rooms' rules, enforced: no import cycle between modules, each room imports only what its docstring allows.

Every import counts, also the ones inside functions (a lazy import is still a dependency). The graph is built
from the source with `ast`, so the test needs none of the optional extras installed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "n8n_sizer"

# Which rooms each room may import (besides itself, errors and versions). The CLI may import every room;
# no room may import the CLI.
ALLOWED: dict[str, set[str]] = {
    "safety": set(),
    "advisor": set(),
    "bundle": {"advisor"},
    "hosts": set(),
    "n8n": {"hosts"},
    # Stand-ins for the services workflows call (a model API, delayed HTTP): standard library servers.
    "standins": set(),
    # An instance's history: read through n8n's public API, summarised as advisor profiles at their own rates.
    "history": {"advisor", "n8n"},
    "runs": {"advisor"},
    "native": {"advisor", "bundle", "hosts", "n8n"},
    "telemetry": {"hosts", "n8n", "runs"},
    "fleet": {"advisor", "bundle"},
    "stack": {"advisor", "bundle", "hosts", "native", "remote", "telemetry"},
    "bench": {
        "advisor",
        "bundle",
        "fleet",
        "history",
        "hosts",
        "lab",
        "native",
        "n8n",
        "remote",
        "runs",
        "stack",
        "standins",
        "telemetry",
    },
    "report": {"advisor", "bench", "runs", "telemetry"},
    # The lab is one room: its namespaces and deploy, its cluster as a StackHandle, and bench and the drills over it
    # (lab/bench.py, lab/drills/), which use bench's load driver and the drills' outcome types.
    "lab": {
        "advisor",
        "bench",
        "bundle",
        "drills",
        "fleet",
        "hosts",
        "n8n",
        "native",
        "remote",
        "runs",
        "stack",
        "telemetry",
    },
    "drills": {"advisor", "bench", "bundle", "fleet", "hosts", "native", "n8n", "remote", "runs", "stack"},
    # The programs that run on another host: each imports the room whose function it runs. The rooms above
    # import only its launcher, `remote.protocol` (test_rooms_import_only_the_launcher), so no module cycle.
    "remote": {"advisor", "bench", "drills", "hosts", "lab", "native"},
    "cli": {
        "advisor",
        "bench",
        "bundle",
        "drills",
        "fleet",
        "history",
        "hosts",
        "native",
        "lab",
        "n8n",
        "remote",
        "report",
        "runs",
        "stack",
        "standins",
        "telemetry",
    },
}
SHARED = {
    "errors",
    "versions",
    "safety",
    "",
}  # safety: the shared guards (numbers, files, YAML, writes)  # "" is `import n8n_sizer` / `from n8n_sizer import versions`
# What the pure core may not import at all (I/O and heavy optional packages).
ADVISOR_FORBIDDEN = {
    "pulumi",
    "fabric",
    "paramiko",
    "httpx",
    "jinja2",
    "yaml",
    "matplotlib",
    "subprocess",
    "socket",
    "shutil",
}


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[str]:
    """Every module `path` imports, resolved to dotted names (relative imports included)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            found.append(base)
            # `from n8n_sizer.runs import store` imports the module n8n_sizer.runs.store
            found.extend(f"{base}.{alias.name}" for alias in node.names)
    return found


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PKG.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        graph[name] = {dep for dep in _imports(path) if dep in modules and dep != name}
    return graph


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules, or None (iterative DFS with colours)."""
    colour = dict.fromkeys(graph, 0)
    for start in sorted(graph):
        if colour[start]:
            continue
        stack: list[tuple[str, list[str]]] = [(start, sorted(graph[start]))]
        path = [start]
        colour[start] = 1
        while stack:
            node, todo = stack[-1]
            if not todo:
                stack.pop()
                path.pop()
                colour[node] = 2
                continue
            nxt = todo.pop()
            if colour[nxt] == 1:
                return path[path.index(nxt) :] + [nxt]
            if colour[nxt] == 0:
                colour[nxt] = 1
                path.append(nxt)
                stack.append((nxt, sorted(graph[nxt])))
    return None


def test_the_graph_sees_the_package():
    graph = _graph()
    assert "n8n_sizer.advisor.recommend" in graph and "n8n_sizer.cli" in graph
    assert "n8n_sizer.runs.records" in graph["n8n_sizer.runs.store"]


def test_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle():
    cycle = _cycle(_graph())
    assert cycle is None, " -> ".join(cycle or [])


def test_every_room_is_listed_and_has_a_docstring_naming_its_imports():
    rooms = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert rooms == set(ALLOWED), rooms ^ set(ALLOWED)
    for room in rooms:
        doc = ast.get_docstring(ast.parse((PKG / room / "__init__.py").read_text())) or ""
        assert doc, f"{room}/__init__.py has no docstring"
        assert room in ("advisor", "cli") or "May import" in doc or "may import" in doc, room


@pytest.mark.parametrize("room", sorted(ALLOWED))
def test_room_imports_only_what_it_may(room):
    graph = _graph()
    bad = sorted(
        f"{mod} -> {dep}"
        for mod, deps in graph.items()
        if _room(mod) == room
        for dep in deps
        if _room(dep) != room and _room(dep) not in SHARED and _room(dep) not in ALLOWED[room]
    )
    assert not bad, bad


def test_rooms_import_only_the_launcher_of_remote():
    """A room may start a program over there (`remote.protocol`) but never import one: the programs import the
    rooms, so that would be a cycle through the room."""
    graph = _graph()
    bad = sorted(
        f"{mod} -> {dep}"
        for mod, deps in graph.items()
        if _room(mod) != "remote"
        for dep in deps
        if _room(dep) == "remote" and dep != "n8n_sizer.remote.protocol"
    )
    assert not bad, bad


def test_advisor_imports_no_io_package():
    for path in (PKG / "advisor").rglob("*.py"):
        top = {name.split(".")[0] for name in _imports(path)}
        assert not top & ADVISOR_FORBIDDEN, (path.name, top & ADVISOR_FORBIDDEN)
