"""From a fresh clone to `pulumi up`, as the README tells it (issue 17): everything but the pulumi CLI and the cloud.

One module-scoped copy of the repository (its git-tracked and new files, no .venv) and one virtualenv made by
the README's own first command. The tests run in file order, because they walk the README's steps:
1. with the core install alone (`pip install .`), commands that need an extra say so in one line, exit 2;
2. the README's remaining install lines, in README order, then the Pulumi program (`__main__.py`) builds every
   `stacks/Pulumi.*.yaml` under Pulumi's mocks inside that virtualenv, and `report` draws its plots.
A missing or wrong README step fails step 2. pip's cache is shared with the machine's, so it runs in seconds
to a minute when the cache is warm.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.readme_examples import ROOT, install_steps
from tests.unit.test_report import runs  # noqa: F401  (synthetic run folders, written with the records models)

pytestmark = pytest.mark.timeout(900)

PROJECT_VENV = Path(sys.executable).parent.parent
STACKS = sorted((ROOT / "stacks").glob("Pulumi.*.yaml"))
BENCH_EXTRA = ".venv/bin/pip install '.[bench]'"
SSH_MODULES = ("fabric", "paramiko", "invoke")  # the bench extra's SSH stack


@dataclass
class Clone:
    root: Path
    env: dict[str, str]

    def run(self, command: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run(
            command, shell=True, cwd=self.root, env=self.env, capture_output=True, text=True, timeout=timeout
        )

    def bin(self, name: str) -> str:
        return str(self.root / ".venv" / "bin" / name)


def _clean_env() -> dict[str, str]:
    """This machine's environment without the test suite's own virtualenv, as a new user's shell has it."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join(
        p
        for p in env.get("PATH", "").split(os.pathsep)
        if p and not Path(p).resolve().is_relative_to(PROJECT_VENV.resolve())
    )
    return env


def _copy_repository(dest: Path) -> None:
    """What a clone holds: tracked files and new ones not ignored (so uncommitted work is tested too)."""
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Clone:
    root = tmp_path_factory.mktemp("clone")
    _copy_repository(root)
    assert not (root / ".venv").exists()
    made = Clone(root, _clean_env())
    first = install_steps()[0]
    assert first.command.startswith("python3 -m venv .venv && .venv/bin/pip install -q . && "), first
    proc = made.run(first.command)
    assert proc.returncode == 0, f"README.md:{first.line_no}: {first.command}: {proc.stderr[-2000:]}"
    assert "n8n-sizer advise: 40 req/s, 4 vCPU" in proc.stdout  # the main job answered
    return made


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _loopback_inventory(path: Path) -> Path:
    """A queue target with 2 workers on 127.0.0.1: whatever would connect only reaches this machine."""
    base = {
        "provider": "hetzner",
        "size": "cx33",
        "vcpu": 4,
        "arch": "x86",
        "public_ip": "127.0.0.1",
        "private_ip": None,
        "ssh_user": "root",
    }
    hosts = {
        "loadgen": {**base, "name": "loadgen", "role": "loadgen", "setup": None},
        "t-queue": {**base, "name": "t-queue", "role": "target", "setup": {"mode": "queue", "workers": 2}},
    }
    path.write_text(
        json.dumps(
            {"stack": "t", "provider": "hetzner", "location": "hel1", "expires_at": "2099-01-01t00-00z", "hosts": hosts}
        )
    )
    return path


def _one_line_exit_2(proc: subprocess.CompletedProcess, command: str, modules: tuple[str, ...]) -> None:
    """Exit 2 and exactly one line naming the install; which bench module is reached first may vary."""
    err = proc.stderr.strip()
    expected = {f"n8n-sizer: {command} needs the bench extra ({m} is not installed): {BENCH_EXTRA}" for m in modules}
    assert proc.returncode == 2 and err in expected, (proc.returncode, proc.stderr)


def test_1_without_extras_each_command_that_needs_one_says_so_in_one_line(clone, runs, tmp_path):  # noqa: F811
    for module in ("fabric", "matplotlib", "pulumi"):
        assert clone.run(f".venv/bin/python -c 'import {module}'").returncode != 0, f"{module} is installed"
    n8n_sizer = clone.bin("n8n-sizer")
    inventory = _loopback_inventory(tmp_path / "inventory.json")
    key = tmp_path / "key"
    key.write_text("not a key\n")
    key.chmod(0o600)
    port = _free_port()

    _one_line_exit_2(
        clone.run(
            f"{n8n_sizer} bench --inventory {inventory} --ssh-key {key} --ssh-port {port} "
            f"--rates 1 --step-seconds 1 --warmup 0 --out {tmp_path / 'results'}"
        ),
        "bench",
        SSH_MODULES,
    )
    _one_line_exit_2(
        clone.run(
            f"{n8n_sizer} drill kill-worker --inventory {inventory} --target t-queue "
            f"--ssh-key {key} --ssh-port {port} --out {tmp_path / 'drills'}"
        ),
        "drill",
        SSH_MODULES,
    )
    _one_line_exit_2(clone.run(f"{n8n_sizer} report {runs[0]} --out {tmp_path / 'report'}"), "report", ("matplotlib",))
    # The Markdown alone needs no extra.
    proc = clone.run(f"{n8n_sizer} report {runs[0]} --out {tmp_path / 'md'} --no-plots")
    assert proc.returncode == 0 and (tmp_path / "md" / "report.md").is_file(), proc.stderr


def test_2_the_readme_install_steps_build_every_stack_under_mocks(clone, runs, tmp_path):  # noqa: F811
    steps = install_steps()[1:]
    commands = [s.command for s in steps]
    assert ".venv/bin/pip install -q '.[fleet]'" in commands and any("'.[bench]'" in c for c in commands)
    for step in steps:
        proc = clone.run(step.command)
        assert proc.returncode == 0, f"README.md:{step.line_no}: {step.command}: {proc.stderr[-2000:]}"
    # requirements.txt, for `pulumi install`, names the same extra the README installs.
    requirements = [
        ln.strip()
        for ln in (clone.root / "requirements.txt").read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    assert requirements == [".[fleet]"]

    stack_files = [str(clone.root / "stacks" / p.name) for p in STACKS]
    proc = clone.run(f".venv/bin/python tests/infra/run_program.py {' '.join(stack_files)}", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    built = {line.split()[1].rstrip(":") for line in proc.stdout.splitlines() if line.startswith("ok ")}
    assert built == {p.name[len("Pulumi.") : -len(".yaml")] for p in STACKS}, proc.stdout
    for line in proc.stdout.splitlines():
        assert int(line.split(", ")[1].split()[0]) >= 2, line  # at least one target and the load generator

    # With the bench extra, `report` draws its plots in the same virtualenv.
    proc = clone.run(f"{clone.bin('n8n-sizer')} report {runs[0]} --out {tmp_path / 'report'}")
    assert proc.returncode == 0, proc.stderr
    assert list((tmp_path / "report").glob("*.png")), proc.stdout


def test_the_program_names_the_missing_install_in_one_line():
    """Run in this suite's venv with n8n_sizer (or a provider) made unimportable: one RunError line each."""
    script = ROOT / "tests" / "infra" / "run_program.py"
    single = ROOT / "stacks" / "Pulumi.single.yaml"
    for block, expected in [
        (
            "n8n_sizer",
            "error single: RunError: the Pulumi program needs n8n_sizer in .venv: run the README's first "
            "command (python3 -m venv .venv && .venv/bin/pip install -q .), then "
            ".venv/bin/pip install -q '.[fleet]'",
        ),
        (
            "pulumi_hcloud",
            "error single: RunError: the Pulumi program needs the fleet extra (pulumi_hcloud is not "
            "installed): .venv/bin/pip install '.[fleet]'",
        ),
    ]:
        proc = subprocess.run(
            [sys.executable, str(script), "--block", block, str(single)], capture_output=True, text=True, timeout=120
        )
        assert (proc.returncode, proc.stdout.strip()) == (1, expected), proc.stdout + proc.stderr
