"""The sample outputs in docs/ are the tool's real output: regenerated and compared, as cog does."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_docs_sample_matches_what_the_tool_prints_now():
    p = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "docs_samples.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert p.returncode == 0, p.stdout + p.stderr


def test_the_docs_have_samples_to_check():
    samples = [p for p in (ROOT / "docs").rglob("*.md") if "<!-- sample: advise" in p.read_text(encoding="utf-8")]
    assert samples, "no generated sample in docs/: the check above would pass on nothing"


def test_a_drifted_sample_is_named(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import docs_samples
    finally:
        sys.path.pop(0)
    text = "<!-- sample: advise --rps 3 --vcpu 2 -->\n```\nan answer the tool stopped giving\n```\n<!-- /sample -->\n"
    fresh, changed = docs_samples.regenerate(text)
    assert changed == ["advise --rps 3 --vcpu 2"] and "verdict" in fresh
    assert docs_samples.regenerate(fresh)[1] == []  # regenerated text is stable
