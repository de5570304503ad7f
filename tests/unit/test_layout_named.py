"""Every module the layout names exists: the `n8n_sizer/<room>/<module>` paths and the `room/module.py` or
`module.py` names in each package docstring and in docs/development.md's layout table. A rename that forgets
the words describing it fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "n8n_sizer"
ROOMS = {p.name for p in PKG.iterdir() if (p / "__init__.py").exists()}
NAMED = re.compile(r"`([\w/]+\.py)(?:::\w+)?`|(n8n_sizer/[\w/]+(?:\.\w+)?)")
TOP = ("tests", "scripts", "benchmarks")  # named from the repository's top


def missing(text: str, home: Path) -> list[str]:
    """Names in `text` that are no module: a full `n8n_sizer/...` path, a `room/module.py` of a known room,
    or a bare `module.py` / `sub/module.py` found under `home` (the room the text describes)."""
    out = []
    for quoted, full in NAMED.findall(text):
        if full:
            if not (ROOT / full).exists():
                out.append(full)
            continue
        first = quoted.split("/")[0]
        if "/" in quoted and first in ROOMS:
            ok = (PKG / quoted).exists()
        elif "/" in quoted and first in TOP:
            ok = (ROOT / quoted).exists()
        else:
            ok = (home / quoted).exists() or any(home.rglob(quoted.rsplit("/", 1)[-1]))
        if not ok:
            out.append(quoted)
    return out


def test_the_check_finds_a_module_that_is_gone():
    assert missing("the stack (`stack.py`) and `cli.py`, see `deploy/render.py`", PKG / "native") == [
        "cli.py",
        "deploy/render.py",
    ]
    assert missing("see n8n_sizer/localstack/ and `bundle/render.py`", PKG) == ["n8n_sizer/localstack/"]


def test_package_docstrings_name_modules_that_exist():
    bad = {}
    for init in sorted(PKG.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        gone = missing(doc, init.parent)
        if gone:
            bad[str(init.relative_to(ROOT))] = gone
    assert not bad, bad


def test_the_development_layout_names_modules_that_exist():
    """The rows of the layout table for the package's rooms, and every full `n8n_sizer/...` path on the page."""
    bad = []
    for line in (ROOT / "docs" / "development.md").read_text().splitlines():
        row = re.match(r"\| `n8n_sizer/(\w+)/` \|", line)
        if row:
            home = PKG / row.group(1)
            bad += [f"n8n_sizer/{row.group(1)}/"] if not home.is_dir() else missing(line, home)
        else:
            bad += [full for _, full in NAMED.findall(line) if full and not (ROOT / full).exists()]
    assert not bad, bad
