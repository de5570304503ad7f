"""The README's shell examples, parsed once for the tests that run them (docs and fresh-clone tests).

An example is one command line of a ```sh block (a trailing backslash joins the next line). A line whose
comment starts with `# needs` is marked as not runnable here; every other line must be run by a test:
`CHEAP` lines by tests/unit/test_docs.py, `INSTALL` lines by tests/infra/test_fresh_clone.py, and the README's
test command by .ci/run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README_PATH = ROOT / "README.md"
MARKER = "# needs"
TEST_COMMAND = "bash scripts/test.sh"

# Cheap enough to run for real in a unit test: the advisor, the renderer, the linter, the cost estimate.
CHEAP = re.compile(r"^(\.venv/bin/)?(advise\s|n8n-sizer\s+(advise|render|check|cost)\s)")
# Installs: a fresh venv and pip into it, as a new user types them.
INSTALL = re.compile(r"^(python3 -m venv \.venv|\.venv/bin/pip install )")


@dataclass(frozen=True)
class Example:
    command: str  # the command without its comment
    comment: str  # the comment after it, "" if none
    line_no: int  # 1-based line of the README where it starts

    @property
    def marked(self) -> bool:
        return self.comment.startswith(MARKER)

    @property
    def cheap(self) -> bool:
        return bool(CHEAP.match(self.command))

    @property
    def install(self) -> bool:
        return bool(INSTALL.match(self.command))


def _split_comment(line: str) -> tuple[str, str]:
    """Command and comment: a `#` that starts a word outside quotes starts the comment."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].strip(), line[i:].strip()
    return line.strip(), ""


def sh_examples(text: str) -> list[Example]:
    """Every command line of every ```sh block, in order."""
    out: list[Example] = []
    in_sh = False
    pending, start = "", 0
    for no, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            in_sh = line.strip() == "```sh"
            continue
        if not in_sh:
            continue
        if pending:
            line = pending + " " + line.strip()
        else:
            start = no
        if line.rstrip().endswith("\\"):
            pending = line.rstrip()[:-1].rstrip()
            continue
        pending = ""
        command, comment = _split_comment(line)
        if command:
            out.append(Example(command, comment, start))
    return out


def readme_examples() -> list[Example]:
    return sh_examples(README_PATH.read_text(encoding="utf-8"))


def install_steps() -> list[Example]:
    """The README's install lines, in README order (the fresh-clone test runs them)."""
    return [e for e in readme_examples() if e.install and not e.marked]
