"""Issue 12, defect 2: the writer of user data never follows a planted link, and a full disk leaves the
user's previous files exactly as they were (a real, tiny tmpfs is filled to the last byte)."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.bundle.render import write_bundle
from n8n_sizer.bundle.secrets import write_private
from n8n_sizer.errors import InputError


def test_a_link_planted_at_the_old_predictable_temp_name_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("someone else's file\n")
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / f"..env.tmp-{os.getpid()}").symlink_to(victim)  # the name the old writer used
    (shared / f".env.tmp-{os.getpid()}").symlink_to(victim)
    write_private(shared / ".env", "SECRET=1\n")
    assert victim.read_text() == "someone else's file\n"
    assert (shared / ".env").read_text() == "SECRET=1\n"
    assert stat.S_IMODE((shared / ".env").stat().st_mode) == 0o600


def test_a_link_at_the_target_is_replaced_never_written_through(tmp_path: Path) -> None:
    from n8n_sizer.safety.write import write_atomic

    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    (tmp_path / "report.md").symlink_to(victim)
    write_atomic(tmp_path / "report.md", "# report\n", private=False)
    assert victim.read_text() == "keep me\n"
    assert not (tmp_path / "report.md").is_symlink() and (tmp_path / "report.md").read_text() == "# report\n"


def test_no_temp_file_is_left_after_a_failed_write(tmp_path: Path) -> None:
    from n8n_sizer.safety.write import write_atomic

    (tmp_path / "target").mkdir()  # a folder where the file should go: the rename fails
    with pytest.raises(InputError, match="nothing was written|left as it was"):
        write_atomic(tmp_path / "target", "x", private=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["target"]


@pytest.fixture
def tiny_disk(tmp_path: Path):
    """A 256 KiB tmpfs, mounted for this test and unmounted after (needs root and mount(8))."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k,mode=0755", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def _fill(folder: Path) -> None:
    """Write until the filesystem says ENOSPC."""
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 512)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)


def test_a_full_disk_leaves_every_previous_file_intact_and_says_so(tiny_disk: Path) -> None:
    out = tiny_disk / "stack"
    write_bundle(Setup(mode="queue", workers=2), out)
    (out / "docker-compose.yml").write_text((out / "docker-compose.yml").read_text() + "# my edit\n")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    _fill(tiny_disk)
    with pytest.raises(InputError) as err:
        write_bundle(Setup(mode="queue", workers=4), out)
    message = str(err.value)
    assert "No space left on device" in message and "left as it was" in message and "\n" not in message
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no temp file, no 0-byte file


def test_a_full_disk_is_one_line_and_exit_2_from_the_cli(tiny_disk: Path, capsys, monkeypatch) -> None:
    from n8n_sizer.cli import main

    _fill(tiny_disk)
    monkeypatch.setattr(sys, "argv", ["n8n-sizer", "render", "--mode", "regular", "--out", str(tiny_disk)])
    with pytest.raises(SystemExit) as exit_:
        main()
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert sorted(p.name for p in tiny_disk.iterdir()) == ["filler"]


def test_a_read_only_output_folder_is_refused_before_anything_runs(
    tiny_disk: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    from n8n_sizer.cli import main

    subprocess.run(["mount", "-o", "remount,ro", str(tiny_disk)], check=True)
    run = tmp_path / "run"
    run.mkdir()
    for argv in (
        ["report", str(run), "--out", str(tiny_disk / "report")],
        ["render", "--mode", "regular", "--out", str(tiny_disk / "stack")],
        ["bench", "--local", "--out", str(tiny_disk / "results")],
    ):
        monkeypatch.setattr(sys, "argv", ["n8n-sizer", *argv])
        with pytest.raises(SystemExit) as exit_:
            main()
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and len(err.strip().splitlines()) == 1, err
        assert "not writable" in err or "cannot be created" in err, err
    assert list(tiny_disk.iterdir()) == []
