"""Every folder the tool writes into passes one gate, `safety.write.output_folder` (issue 40).

Before: `render --out` into a folder owned by another user was written into, secrets included (host folders of a
cluster were already refused). Now `render --out`, `advise --compose`, `bench --out`, `report --out`, `calibrate
--out`, `drill --out` and `lab up --out` refuse, in one line with the fix, a folder that is a link or is reached
through one, another user's folder, one writable by group or others, and one inside a folder others may write
into without the sticky bit; nothing is written into it.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from n8n_sizer.errors import InputError
from n8n_sizer.safety.write import output_folder
from tests.unit.hostile_cases import BASE_RUN, clean, folder_cases, run_cli

ROOT = Path(__file__).resolve().parents[2]
CASES = list(folder_cases())


def _files(folder: Path) -> list[str]:
    return sorted(str(p) for p in folder.rglob("*")) if folder.exists() else []


def _writers(tmp: Path) -> dict:
    """Each writer's command line for a given --out (a folder, or for calibrate and lab up a file in it)."""
    run = tmp / "run"
    shutil.copytree(BASE_RUN, run)
    workflow = tmp / "wf.json"
    workflow.write_text(json.dumps({"nodes": [{"type": "n8n-nodes-base.webhook", "parameters": {"path": "x"}}]}))
    topology = ROOT / "tests" / "data" / "topologies" / "lb-apart.json"
    return {
        "render": lambda out: ("render", "--mode", "regular", "--out", out),
        "render --topology": lambda out: (
            "render",
            "--topology",
            topology,
            "--out",
            out,
            "--public-url",
            "http://n8n.example.com:5678/",
        ),
        "advise --compose": lambda out: ("advise", "--rps", "5", "--vcpu", "2", "--compose", out),
        "report": lambda out: ("report", run, "--no-plots", "--out", out),
        "bench": lambda out: ("bench", "--local", "--rates", "1", "--step-seconds", "1", "--out", out),
        "calibrate": lambda out: ("calibrate", workflow, "--out", out / "calibration.json"),
        "drill": lambda out: ("drill", "kill-worker", "--local", "--out", out),
        "lab up": lambda out: ("lab", "up", "--topology", topology, "--out", out / "lab.json"),
    }


WRITERS = ["render", "render --topology", "advise --compose", "report", "bench", "calibrate", "drill", "lab up"]


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize(("case", "make"), CASES, ids=[c for c, _ in CASES])
def test_every_writer_refuses_a_folder_others_could_change(tmp_path, writer, case, make) -> None:
    base = tmp_path / "case"
    base.mkdir()
    out, watched = make(base)
    before = _files(watched)
    args = _writers(tmp_path)[writer](out)
    code, said, err = run_cli(*args)
    assert clean(code, said, err) is None, err
    assert code == 2, (writer, case, said, err)
    assert _files(watched) == before, f"{writer} wrote into {watched}"
    assert any(word in err for word in ("link", "belongs to user", "writable by", "chmod")), err


def test_a_folder_of_ones_own_is_taken(tmp_path) -> None:
    (tmp_path / "mine").mkdir(mode=0o755)
    assert output_folder(tmp_path / "mine", "--out", fix="-", writable=True) == tmp_path / "mine"
    assert output_folder(tmp_path / "new" / "deeper", "--out", fix="-", writable=True)  # created by the command
    code, out, err = run_cli("render", "--mode", "regular", "--out", tmp_path / "mine")
    assert code == 0 and (tmp_path / "mine" / ".env").stat().st_mode & 0o777 == 0o600, err


def test_a_relative_path_and_dot_dot_are_walked_as_written(tmp_path, monkeypatch) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "target").mkdir()
    (tmp_path / "a" / "link").symlink_to(tmp_path / "target")
    monkeypatch.chdir(tmp_path / "a")
    with pytest.raises(InputError, match="symbolic link"):
        output_folder("link/../out", "--out", fix="-")  # the kernel would go to target/.., the parent of target
    assert output_folder("../out", "--out", fix="-") == Path("../out")


@pytest.mark.skipif(os.geteuid() != 0, reason="making another user's folder needs root (chown)")
def test_another_users_folder_is_refused_with_its_owner(tmp_path) -> None:
    (tmp_path / "theirs").mkdir()
    os.chown(tmp_path / "theirs", 65534, 65534)
    with pytest.raises(InputError) as caught:
        output_folder(tmp_path / "theirs", "--out", fix="try --out ./n8n-stack")
    assert "belongs to user id 65534" in str(caught.value) and "--out ./n8n-stack" in str(caught.value)


def test_the_owners_own_group_may_write(tmp_path) -> None:
    """A user private group (named after its owner, no other member) lets nobody else in: accepted, as Debian's
    OpenSSH accepts it."""
    import grp
    import pwd

    me = pwd.getpwuid(os.geteuid())
    group = grp.getgrgid(me.pw_gid)
    if group.gr_name != me.pw_name or set(group.gr_mem) - {me.pw_name}:
        pytest.skip("this user has no private group")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine").chmod(0o775)
    os.chown(tmp_path / "mine", -1, me.pw_gid)
    assert output_folder(tmp_path / "mine", "--out", fix="-") == tmp_path / "mine"
