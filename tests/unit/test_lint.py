"""The linter's bug-finding rules (pyflakes: undefined names, unused imports; syntax errors) pass on the tree, and the
formatter finds nothing to change (the size limits in test_rooms measure formatted code)."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _ruff() -> list[str]:
    exe = Path(sys.executable).with_name("ruff")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("ruff")
    assert found, "ruff is not installed: `pip install -e '.[test]'` brings it (scripts/test.sh does)"
    return [found]


def test_ruff_finds_nothing():
    p = subprocess.run(_ruff() + ["check", "--no-cache", "."], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stdout + p.stderr


def test_ruff_would_catch_an_undefined_name(tmp_path):
    (tmp_path / "bad.py").write_text("def f():\n    return rps\n")
    p = subprocess.run(
        _ruff() + ["check", "--no-cache", "--select", "F", str(tmp_path / "bad.py")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert p.returncode == 1 and "F821" in p.stdout


def test_the_tree_is_formatted():
    p = subprocess.run(
        _ruff() + ["format", "--check", "--no-cache", "."], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert p.returncode == 0, "run `ruff format .`:\n" + p.stdout + p.stderr


def test_the_format_check_would_catch_an_unformatted_file(tmp_path):
    (tmp_path / "ugly.py").write_text("x = [1,2,\n  3]\n")
    p = subprocess.run(
        _ruff() + ["format", "--check", "--no-cache", str(tmp_path / "ugly.py")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert p.returncode == 1 and "ugly.py" in p.stdout
