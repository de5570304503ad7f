"""The programs that run on another host have one home (`n8n_sizer/remote/`) and one protocol
(`remote/protocol.py`): a launch string `python -m n8n_sizer.X` and a reader of a program's JSON result appear
nowhere else in the package; and the launcher, run on this machine, reads results and maps exit codes."""

from __future__ import annotations

import ast
import importlib
from itertools import pairwise
from pathlib import Path

import pytest

from n8n_sizer.errors import RemoteError
from n8n_sizer.hosts.host import HostError, LocalHost
from n8n_sizer.remote.protocol import Program, command_line, last_json, run

PKG = Path(__file__).resolve().parents[2] / "n8n_sizer"
HOME = PKG / "remote" / "protocol.py"


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def second_sources(source: str) -> list[str]:
    """What in `source` launches a package module or reads a program's result by itself."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple)) or isinstance(node, ast.Call):
            items = node.elts if not isinstance(node, ast.Call) else node.args
            words = [e.value if isinstance(e, ast.Constant) and isinstance(e.value, str) else None for e in items]
            found += [f"launch: -m {b}" for a, b in pairwise(words) if a == "-m" and (b or "").startswith("n8n_sizer")]
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in skip
            and "-m n8n_sizer." in node.value
        ):
            found.append(f"launch: {node.value.strip()[:60]}")
        # a program's result read by hand: a model from stdout, or JSON from a line or slice of it (a command's
        # whole stdout as JSON, e.g. `redis-cli --json`, is not a program of ours)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            arg = ast.unparse(node.args[0])
            if "stdout" in arg and (
                node.func.attr == "model_validate_json"
                or node.func.attr == "loads"
                and ("splitlines" in arg or "[" in arg)
            ):
                found.append(f"parser: {ast.unparse(node)[:60]}")
        if (
            isinstance(node, ast.Subscript)
            and "splitlines()" in ast.unparse(node.value)
            and ast.unparse(node.slice) == "-1"
            and "stdout" in ast.unparse(node.value)
        ):
            found.append(f"parser: {ast.unparse(node)[:60]}")
    return found


def test_the_scan_finds_a_second_launcher_and_parser():
    planted = """
def f(host, python):
    res = host.run(" ".join([python, "-m", "n8n_sizer.lab.data", "up"]), timeout_s=9)
    host.run(f"{python} -m n8n_sizer.remote.lab_agent ps", timeout_s=9)
    return json.loads(res.stdout.strip().splitlines()[-1]), Model.model_validate_json(res.stdout)
"""
    kinds = sorted(hit.split(":")[0] for hit in second_sources(planted))
    assert kinds.count("launch") == 2 and kinds.count("parser") >= 2, kinds


# Modules that start themselves as a local process on this machine (subprocess, stopped by PID), not a program run on
# a host: the remote protocol's launcher is for the latter.
LOCAL_PROCESSES = {"standins/http.py": "the delayed HTTP stand-in, a child process of the bench or the test"}


def test_no_second_launcher_or_parser_outside_the_protocol():
    hits = {
        str(p.relative_to(PKG)): second_sources(p.read_text())
        for p in PKG.rglob("*.py")
        if p != HOME and str(p.relative_to(PKG)) not in LOCAL_PROCESSES
    }
    assert not {k: v for k, v in hits.items() if v}


def test_every_program_is_a_typer_app_with_a_main():
    import typer

    for program in Program:
        module = importlib.import_module(program.module)
        assert isinstance(module.app, typer.Typer) and callable(module.main), program
        assert module.__doc__ and f"python -m {program.module}" in module.__doc__, program


def test_the_last_json_line_is_the_result():
    assert last_json('progress\n{"a": 1}\n\n') == {"a": 1}
    with pytest.raises(ValueError):
        last_json("no json here\n")
    assert (
        command_line(Program.LAB_AGENT, ["ps", "a b"], "/usr/bin/python3")
        == "/usr/bin/python3 -m n8n_sizer.remote.lab_agent ps 'a b'"
    )
    here = command_line(Program.LAB_AGENT, ["ps"])  # this interpreter imports this very checkout over there
    assert here.startswith(f"PYTHONPATH={PKG.parent} ") and here.endswith(" -m n8n_sizer.remote.lab_agent ps")


def test_the_launcher_runs_a_program_and_reads_its_result():
    listed = run(LocalHost(), Program.LAB_AGENT, ["ps"], timeout_s=60)
    assert isinstance(listed, list) and all({"pid", "exe", "cmd"} <= set(p) for p in listed)


def test_a_refused_input_is_exit_2_named_once(capsys, tmp_path):
    from n8n_sizer.remote.lab_agent import main

    assert main(["signal"]) == 2
    err = capsys.readouterr().err
    assert "--pid" in err and err.count("\n") == 1 and "Traceback" not in err
    with pytest.raises(HostError, match="exit code 2 \\(the program refused its input\\).*--pid"):
        run(LocalHost(), Program.LAB_AGENT, ["signal"], timeout_s=60)


def test_an_unchecked_failure_returns_what_it_printed(tmp_path):
    missing = str(tmp_path / "no-stack")
    assert run(LocalHost(), Program.NATIVE_STACK, ["status", "--state", missing], timeout_s=60, check=False) is None
    with pytest.raises(RemoteError, match="no state.json"):
        run(LocalHost(), Program.NATIVE_STACK, ["status", "--state", missing], timeout_s=60)
