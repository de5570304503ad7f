"""The one writer for user data: render outputs, secrets, results and reports.

`write_atomic` creates a temporary file in the target's own folder with O_CREAT|O_EXCL|O_NOFOLLOW and an
unpredictable name, so a symlink planted in a shared folder is never followed (the old writer opened a
predictable `.<name>.tmp-<pid>` with O_TRUNC, which let a planted link redirect root's write of the
secrets into another user's file). It writes every byte, fsyncs, and renames over the target (a rename
replaces a link at the target, never writes through it), then fsyncs the folder. On any failure, a full
disk included, the temporary file is removed and the user's previous file is left exactly as it was;
the `InputError` says so in one line.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

from n8n_sizer.errors import InputError

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def temp_name(path: Path) -> Path:
    """A fresh, unguessable sibling name for `path`'s temporary file."""
    return path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return  # some filesystems refuse to open a folder; the rename itself already happened
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _kept_mode(path: Path) -> int | None:
    """The permission bits of the user's own regular file at `path` (less group/other write), else None."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
        return None
    return stat.S_IMODE(info.st_mode) & 0o755


def write_atomic(
    path: Path | str, data: str | bytes, *, private: bool, what: str = "", mode: int | None = None
) -> None:
    """Replace `path` with `data` atomically: mode 0600 when `private`, else `mode` when given (a copy keeps
    its original's mode: a user's 0600 file stays 0600), else the mode of the file it replaces (a user who
    made their compose file 0600 keeps it so; never group- or other-writable), else 0644 (less the umask).

    Raises `InputError` naming `what` (default: the path) when the write fails; the previous file, if
    any, is then untouched and no temporary file is left behind.
    """
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    label = what or str(path)
    if not private and mode is None:
        mode = _kept_mode(path)
    existed = os.path.lexists(path)
    kept = f"the previous {path.name} is left as it was" if existed else "nothing was written"
    tmp = temp_name(path)
    try:
        fd = os.open(tmp, _FLAGS, 0o600 if private or mode is not None else 0o644)
    except OSError as exc:
        raise InputError(
            f"{label}: cannot create a file in {path.parent} ({exc.strerror or exc}); {kept}; "
            "pick a folder you can write to"
        ) from None
    try:
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view) :]
            if private:
                os.fchmod(fd, 0o600)  # whatever the umask did
            elif mode is not None:
                os.fchmod(fd, mode & 0o777)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        fix = (
            "free some space or pick another folder"
            if exc.errno in (errno.ENOSPC, errno.EDQUOT)
            else "pick a folder you can write to"
        )
        raise InputError(f"{label}: writing {path} failed ({exc.strerror or exc}); {kept}; {fix}") from None
    _fsync_folder(path.parent)


def probe_writable(folder: Path, what: str, fix: str) -> None:
    """Refuse early when `folder` cannot take a new file (exclusive create, never through a link)."""
    probe = temp_name(folder / ".n8n-sizer-write-test")
    try:
        fd = os.open(probe, _FLAGS, 0o600)
    except OSError as exc:
        raise InputError(f"{what} {folder} is not writable ({exc.strerror or exc}); {fix}") from None
    os.close(fd)
    os.unlink(probe)


def make_folder(path: Path | str, what: str, *, fix: str) -> Path:
    """Create `path` (one level, its parent must exist) or accept it when it is already a real folder of this
    user's: a symbolic link (dangling or not), a file, or a folder owned by someone else or open to them is
    refused, so no write lands where a planted link or another user's folder points."""
    path = Path(path)
    try:
        os.mkdir(path, 0o755)
    except FileExistsError:
        pass
    except OSError as exc:
        raise InputError(f"{what} {path} cannot be created ({exc.strerror or exc}); {fix}") from None
    check_folder(path, what, fix=fix)
    return path


def _private_group(info: os.stat_result) -> bool:
    """The folder's group is its owner's own (a user private group: named after the owner, no other member), so
    group write lets nobody else in (Debian's OpenSSH accepts the same, `user-group-modes`)."""
    import grp
    import pwd

    try:
        owner = pwd.getpwuid(info.st_uid)
        group = grp.getgrgid(info.st_gid)
    except KeyError:
        return False
    return owner.pw_gid == info.st_gid and group.gr_name == owner.pw_name and set(group.gr_mem) <= {owner.pw_name}


def _open_to_others(info: os.stat_result) -> str | None:
    """Why others may change what is in this folder (world- or group-writable), or None."""
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o002:
        return f"is writable by every user (mode {mode:04o})"
    if mode & 0o020 and not _private_group(info):
        return f"is writable by its group (mode {mode:04o})"
    return None


def check_folder(path: Path | str, what: str, *, fix: str, missing_ok: bool = False) -> None:
    """Refuse `path` as a folder to write into unless it is a real folder of this user's that nobody else may
    change: not a link, not a file, not someone else's, not writable by group or others; with `missing_ok`, a path
    that does not exist yet passes (make_folder makes it)."""
    path = Path(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        if missing_ok:
            return
        raise InputError(f"{what} {path} does not exist; {fix}") from None
    except OSError as exc:
        raise InputError(f"{what} {path} cannot be used ({exc.strerror or exc}); {fix}") from None
    if stat.S_ISLNK(info.st_mode):
        raise InputError(f"{what} {path} is a symbolic link; n8n-sizer never writes through one: remove it or {fix}")
    if not stat.S_ISDIR(info.st_mode):
        raise InputError(f"{what} {path} is a file, not a folder; remove it or {fix}")
    if info.st_uid != os.geteuid():
        raise InputError(
            f"{what} {path} belongs to user id {info.st_uid}, not to you ({os.geteuid()}); "
            f"n8n-sizer does not write into another user's folder: {fix}"
        )
    why = _open_to_others(info)
    if why is not None:
        raise InputError(
            f"{what} {path} {why}: others could swap or plant files beside the secrets written there; "
            f"run `chmod go-w {path}`, or {fix}"
        )


def _system_link(path: Path, info: os.stat_result) -> bool:
    """A link of the system's own layout (/bin -> usr/bin, /var/run -> /run, macOS /tmp -> private/tmp): the top
    two levels, owned by root, in a folder of root's that nobody else can write."""
    if info.st_uid != 0 or len(path.parts) > 3:
        return False
    try:
        parent = os.lstat(path.parent)
    except OSError:
        return False
    return parent.st_uid == 0 and not stat.S_IMODE(parent.st_mode) & 0o022


def output_folder(path: Path | str, what: str, *, fix: str, writable: bool = False) -> Path:
    """The one gate of every folder the tool writes into: `render --out`, `advise --compose`, `bench --out`,
    `report --out`, `lab up --out`'s folder, `calibrate --out`'s folder, a drill's `--out`, and (through
    `check_folder`) each host folder of a cluster. Refused, with one line and the fix:

    - '' or a path with a NUL byte;
    - a path reached through a symbolic link at any step (other than the system's own top-level links): the
      folder written into must be the folder named, not wherever a link points now;
    - a file where a folder should be, at any step;
    - a step on the way that others may write into without the sticky bit (they could swap the folder);
    - an existing folder that is another user's, or writable by group (other than the owner's own group) or
      by others (`check_folder`).

    With `writable`, this process must also be able to create files there (or create the folder in its nearest
    existing parent). Returns the path as given; a missing folder is left to the command to create."""
    text = str(path)
    if not text.strip() or "\0" in text:
        raise InputError(f"{what} {text or repr(text)} is empty or not a usable path; name a folder; {fix}")
    given = Path(path)
    current = Path(given.anchor or os.getcwd()) if given.is_absolute() else Path(os.getcwd())
    parts = given.parts[1:] if given.is_absolute() else given.parts
    nearest = current
    for i, part in enumerate(parts):
        current = current.parent if part == ".." else current / part if part != "." else current
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            break
        except OSError as exc:
            raise InputError(f"{what} {path} cannot be used ({current}: {exc.strerror or exc}); {fix}") from None
        if stat.S_ISLNK(info.st_mode):
            if _system_link(current, info):
                continue
            raise InputError(
                f"{what} {path} is reached through the symbolic link {current}; n8n-sizer writes only into the "
                f"folder named, never where a link points: give the real path ({os.path.realpath(current)}), or {fix}"
            )
        if not stat.S_ISDIR(info.st_mode):
            raise InputError(f"{what} {path} is not usable: {current} is a file, not a folder; {fix}")
        last = i == len(parts) - 1
        if last:
            check_folder(current, what, fix=fix)
        elif not info.st_mode & stat.S_ISVTX and _open_to_others(info) is not None:
            raise InputError(
                f"{what} {path} lies inside {current}, which {_open_to_others(info)} without the sticky bit: "
                f"others could swap the folder; run `chmod o-w,g-w {current}` or {fix}"
            )
        nearest = current
    if writable and not os.access(nearest, os.W_OK | os.X_OK):
        raise InputError(f"{what} {path} is not writable ({nearest}: permission denied); {fix}")
    return given
