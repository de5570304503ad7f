"""README, docs/, --help and the code tell the same story (tested the way sqlite-utils tests its docs).

- every subcommand and every option of every subcommand appears in README.md or docs/;
- every README shell example is run by a test or marked `# needs ...` (tests/readme_examples.py);
- the cheap README examples run for real here;
- the README stays an entry point (<= 12 KB) and every relative link resolves.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from n8n_sizer.cli import app
from tests.readme_examples import MARKER, README_PATH, ROOT, TEST_COMMAND, readme_examples, sh_examples

README = README_PATH.read_text(encoding="utf-8")
DOC_FILES = sorted((ROOT / "docs").rglob("*.md"))
DOCS = README + "\n".join(p.read_text(encoding="utf-8") for p in DOC_FILES)
COMMANDS = typer.main.get_command(app).commands
BIN = Path(sys.executable).parent
README_MAX_BYTES = 12 * 1024
FRESH_MACHINE = "python3 -m venv .venv && .venv/bin/pip install -q . && .venv/bin/advise --rps 40 --vcpu 4"


def _mentions(text: str, word: str) -> bool:
    """`word` as a whole command-line word (so --rate does not count as --rates)."""
    return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text) is not None


def test_there_are_at_least_six_docs_pages():
    assert len([p for p in DOC_FILES if p.parent.name == "docs"]) >= 6, DOC_FILES


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_subcommand_appears_in_the_docs_with_an_example(name):
    assert re.search(rf"^(\$ )?(\.venv/bin/)?n8n-sizer {re.escape(name)}\b", DOCS, re.M) or (
        name == "advise" and re.search(r"^(\.venv/bin/)?advise --", DOCS, re.M)
    ), f"`n8n-sizer {name}` has no example line in README.md or docs/"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_option_of_every_subcommand_appears_in_the_docs(name):
    missing = [
        opt
        for param in COMMANDS[name].params
        for opt in param.opts
        if opt.startswith("--") and opt != "--help" and not _mentions(DOCS, opt)
    ]
    assert not missing, f"n8n-sizer {name}: options not documented in README.md or docs/: {', '.join(missing)}"


def test_the_option_check_can_fail():
    assert not _mentions(DOCS, "--no-such-option-anywhere")
    assert not _mentions("advise --rates 5", "--rate") and _mentions("advise --rate 5", "--rate")


def test_every_command_has_help_with_an_example():
    for name, command in COMMANDS.items():
        assert command.help and "xample" in command.help, name


def test_the_readme_is_an_entry_point_of_at_most_12_kb():
    assert len(README.encode("utf-8")) <= README_MAX_BYTES


def test_the_readme_keeps_the_two_fresh_machine_commands():
    examples = [e.command for e in readme_examples()]
    assert examples[:2] == [FRESH_MACHINE, TEST_COMMAND]


def test_the_readme_test_command_is_what_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(rf"^exec {re.escape(TEST_COMMAND)}$", ci, re.M)
    assert f"\n{TEST_COMMAND}\n" in README


def test_every_readme_example_is_run_by_a_test_or_marked():
    unrun = [
        f"README.md:{e.line_no}: {e.command}"
        for e in readme_examples()
        if not (e.marked or e.cheap or e.install or e.command == TEST_COMMAND)
    ]
    assert not unrun, (
        f"shell examples that no test runs; run them in a test or add a `{MARKER} ...` "
        f"comment saying what they need: " + "; ".join(unrun)
    )


def test_the_example_parser_sees_comments_continuations_and_markers():
    text = (
        "```sh\nadvise --rps 1 \\\n  --vcpu 2   # a comment\nn8n-sizer bench --local  # needs n8n\n```\n"
        "```\nn8n-sizer report x\n```\n"
    )
    first, second = sh_examples(text)
    assert (first.command, first.cheap, first.marked) == ("advise --rps 1 --vcpu 2", True, False)
    assert (second.command, second.cheap, second.marked) == ("n8n-sizer bench --local", False, True)


def test_the_cheap_readme_examples_run_for_real(tmp_path):
    """advise, render, check and cost lines, in README order, in one folder with the shipped stacks."""
    cheap = [e for e in readme_examples() if e.cheap and not e.marked]
    assert {e.command.split()[0 if e.command.startswith("advise") else 1] for e in cheap} >= {
        "advise",
        "render",
        "check",
        "cost",
    }
    (tmp_path / "stacks").symlink_to(ROOT / "stacks")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    for example in cheap:
        command = example.command.removeprefix(".venv/bin/")
        proc = subprocess.run(command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"README.md:{example.line_no}: {command}: exit {proc.returncode}: {proc.stderr}"
        target = command.split(">", 1)[1].split()[0] if ">" in command else None
        # what it printed, or (for a redirect) the file it wrote
        assert (tmp_path / target).stat().st_size if target else proc.stdout.strip(), command
    assert (tmp_path / "stack" / "docker-compose.yml").is_file()  # the tour's --compose wrote what check read
    assert (tmp_path / "cluster" / "data" / "docker-compose.yml").is_file()  # advise's topology, rendered


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lowercase, punctuation dropped, spaces to hyphens."""
    anchors, fence = set(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and (m := re.match(r"^#{1,6}\s+(.*)$", line)):
            anchors.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return anchors


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", [README_PATH, *DOC_FILES], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    broken = []
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target):
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        if not dest.exists():
            broken.append(f"{target} (no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest})")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target} (no heading #{anchor} in {dest.name})")
    assert not broken, f"{page.relative_to(ROOT)}: broken links: " + "; ".join(broken)


def test_the_link_check_can_fail(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# Here\n")
    assert _anchors(page) == {"here"}
    assert "there" not in _anchors(page)
