"""Every file a docstring or a doc names exists: a rename that leaves a pointer behind fails here, naming both.

A path counts when it starts at the repository's top (`n8n_sizer/`, `docs/`, `benchmarks/`, `scripts/`, `tests/`,
`stacks/`) or at a room of the package (`advisor/answer/lab_points.py`), and a bare module name (`search.py`) counts
when no file of that name exists anywhere in the repository. A path inside another project is written with its
owner (`docs/lifecycle.md of n8n-io/task-runner-launcher`), a path inside a folder the tool writes with that folder
(`<lab folder>/hosts/cluster.json`), and neither is checked.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "n8n_sizer"
TOPS = {"n8n_sizer", "docs", "benchmarks", "scripts", "tests", "stacks"}
ROOMS = {p.name for p in PKG.iterdir() if p.is_dir() and p.name != "__pycache__"}
SUFFIXES = "py|md|json|sh|yaml|j2|txt"
PATH = re.compile(rf"(?<![\w/.<>-])((?:[a-z_][a-z0-9_-]*/)+[a-z_][a-z0-9_.-]*\.(?:{SUFFIXES}))\b(?! of \S+/)")
BARE = re.compile(r"(?<![\w/.<>-])([a-z_][a-z0-9_]*\.(?:py|md))\b")


def _texts() -> list[tuple[Path, str]]:
    out = []
    for f in sorted(PKG.rglob("*.py")):
        tree = ast.parse(f.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                doc = ast.get_docstring(node)
                if doc:
                    out.append((f, doc))
    for f in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        out.append((f, f.read_text(encoding="utf-8")))
    return out


def dangling(texts: list[tuple[Path, str]]) -> list[str]:
    names = set()
    for _folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in {".git", ".venv", "node_modules", "__pycache__"}]
        names.update(files)
    bad = []
    for where, text in texts:
        for m in PATH.finditer(text):
            ref = m.group(1)
            top = ref.split("/", 1)[0]
            if top not in TOPS | ROOMS:
                continue
            if not any(p.exists() for p in (ROOT / ref, PKG / ref, where.parent / ref)):
                bad.append(f"{where.relative_to(ROOT)} names {ref}")
        for m in BARE.finditer(text):
            if m.group(1) not in names:
                bad.append(f"{where.relative_to(ROOT)} names {m.group(1)}")
    return sorted(set(bad))


def test_every_named_path_exists():
    assert dangling(_texts()) == []


@pytest.mark.parametrize(
    "text",
    [
        "see advisor/lab_points.py for the points",  # a room path that moved
        "the search lives in search.py",  # a bare module that no longer exists
        "docs/nowhere.md says so",
    ],
)
def test_a_dangling_pointer_is_found(text):
    assert dangling([(PKG / "advisor" / "fit.py", text)])


def test_external_and_written_paths_are_not_checked():
    texts = [
        (ROOT / "docs" / "docker.md", "(docs/lifecycle.md of n8n-io/task-runner-launcher)"),
        (ROOT / "docs" / "lab.md", "`<lab folder>/hosts/cluster.json`"),
        (ROOT / "docs" / "lab.md", "advisor/answer/lab_points.py and fit.py"),
    ]
    assert dangling(texts) == []
