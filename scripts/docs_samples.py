"""Regenerate (or check) the sample outputs in docs/, in the manner of cog.

A sample is a fenced block between two markers, the command in the first:

    <!-- sample: advise --rps 20 --vcpu 4 --workload code-heavy -->
    ```
    ...what that command prints, written by this script...
    ```
    <!-- /sample -->

`python scripts/docs_samples.py` rewrites every block from the command's real output; `--check` exits 1 naming
each block that drifted (tests/unit/test_docs_samples.py runs it), so the docs cannot describe an answer the tool
stopped giving. Only `advise` commands are allowed: they are pure and fast.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
BLOCK = re.compile(r"(<!-- sample: (?P<cmd>[^>]+?) -->\n)(?P<body>.*?)(<!-- /sample -->)", re.S)
COMMANDS = {"advise": [sys.executable, "-c", "from n8n_sizer.cli import advise_main; advise_main()"]}


def output_of(command: str) -> str:
    words = shlex.split(command)
    if words[0] not in COMMANDS:
        raise SystemExit(f"docs sample {command!r}: only {', '.join(COMMANDS)} commands can be samples")
    p = subprocess.run(COMMANDS[words[0]] + words[1:], capture_output=True, text=True, timeout=120, cwd=ROOT)
    if p.returncode != 0:
        raise SystemExit(f"docs sample {command!r} failed ({p.returncode}): {p.stderr.strip()}")
    return "```\n$ " + command + "\n" + p.stdout.rstrip("\n") + "\n```\n"


def regenerate(text: str) -> tuple[str, list[str]]:
    """The text with every sample block rewritten, and the commands whose block changed."""
    changed: list[str] = []

    def one(m: re.Match) -> str:
        fresh = output_of(m.group("cmd"))
        if fresh != m.group("body"):
            changed.append(m.group("cmd"))
        return m.group(1) + fresh + m.group(4)

    return BLOCK.sub(one, text), changed


def main(argv: list[str]) -> int:
    check = "--check" in argv
    drift = []
    for path in sorted(DOCS.rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        if "<!-- sample:" not in text:
            continue
        fresh, changed = regenerate(text)
        drift += [f"{path.relative_to(ROOT)}: {c}" for c in changed]
        if changed and not check:
            path.write_text(fresh, encoding="utf-8")
    for d in drift:
        print(("drifted: " if check else "rewrote: ") + d)
    if check and drift:
        print("regenerate them with: python scripts/docs_samples.py")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
