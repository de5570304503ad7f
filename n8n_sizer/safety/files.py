"""One reader for every file argument: a regular, readable file under a size cap, as UTF-8 text.

Each failure is one `InputError` line that names the flag, the path, what is wrong and the fix. A FIFO or
device (`/dev/zero`, a named pipe) is refused before it is read, so a hostile path cannot hang a command
or fill memory; a directory, a missing file, a permission problem, a symlink loop, binary bytes and
non-UTF-8 text each get their own reason.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from n8n_sizer.errors import InputError

# Far above any compose file, .env, stack file, inventory or workflow export (they are kilobytes), far
# below what would hurt: a parser never sees more than this.
MAX_TEXT_BYTES = 8 * 1024 * 1024


def _reason(exc: OSError) -> str:
    reasons = {
        errno.ENOENT: "no such file",
        errno.EACCES: "is not readable (permission denied)",
        errno.EPERM: "is not readable (permission denied)",
        errno.EISDIR: "is a folder, not a file",
        errno.ENOTDIR: "has a file where a folder should be in its path",
        errno.ELOOP: "is a symbolic link loop",
        errno.ENAMETOOLONG: "is too long a path",
    }
    return reasons.get(exc.errno, exc.strerror or type(exc).__name__)


def _fail(what: str, path: Path | str, reason: str, fix: str) -> InputError:
    shown = str(path) if str(path) else "''"
    return InputError(f"{what} {shown}: {reason}; {fix}".replace("\n", " "))


def read_user_bytes(
    path: Path | str, what: str, *, fix: str, max_bytes: int = MAX_TEXT_BYTES, private: bool = False
) -> bytes:
    """The bytes of a regular file the user named; `InputError` (one line) for anything else.

    `private` is for a file whose contents become the stack's secrets (an existing `.env`, `.secrets.env`,
    `cloud-init.yaml`): it must not be a symbolic link, must belong to the user running the tool and must
    not be readable or writable by group or others, checked on the open file itself (no race)."""
    if not str(path) or "\0" in str(path):
        raise _fail(what, path, "is not a usable path", fix)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    if private:
        flags |= os.O_NOFOLLOW
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; fstat below refuses it anyway.
        fd = os.open(path, flags)
    except OSError as exc:
        if private and exc.errno == errno.ELOOP:
            raise _fail(
                what,
                path,
                "is a symbolic link; secrets are never read through a link",
                "copy the real file there (chmod 600) or use another folder",
            ) from None
        raise _fail(what, path, _reason(exc), fix) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise _fail(what, path, "is a folder, not a file", fix)
        if not stat.S_ISREG(info.st_mode):
            raise _fail(what, path, "is not a regular file (a device, pipe or socket)", fix)
        if private:
            _check_private(info, what, path)
        if info.st_size > max_bytes:
            raise _fail(what, path, f"is {info.st_size:,} bytes, above the {max_bytes:,}-byte limit", fix)
        chunks, total = [], 0
        while True:
            try:
                chunk = os.read(fd, 1 << 20)
            except OSError as exc:
                raise _fail(what, path, f"cannot be read ({_reason(exc)})", fix) from None
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:  # it grew while we read it
                raise _fail(what, path, f"is above the {max_bytes:,}-byte limit", fix)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _check_private(info: os.stat_result, what: str, path: Path | str) -> None:
    """A secrets file is adopted only when it is the user's own and nobody else can read or change it."""
    if info.st_uid != os.geteuid():
        raise _fail(
            what,
            path,
            f"belongs to user id {info.st_uid}, not to you ({os.geteuid()}); its secrets are not adopted",
            "check where it came from, then take it over (chown) or use another folder",
        )
    if info.st_mode & 0o077:
        raise _fail(
            what,
            path,
            f"is open to group or others (mode {stat.S_IMODE(info.st_mode):04o}); its secrets may have leaked",
            f"check them, then run `chmod 600 {path}` and try again",
        )


def read_user_text(
    path: Path | str, what: str, *, fix: str, max_bytes: int = MAX_TEXT_BYTES, private: bool = False
) -> str:
    """UTF-8 text of a file the user named (a leading BOM dropped); binary or non-UTF-8 is refused."""
    data = read_user_bytes(path, what, fix=fix, max_bytes=max_bytes, private=private)
    if b"\0" in data:
        raise _fail(what, path, "holds binary data (NUL bytes), not text", fix)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _fail(what, path, f"is not UTF-8 text (byte {exc.start})", fix) from None
    return text.removeprefix("\ufeff")


def require_folder(path: Path | str, what: str, *, fix: str) -> Path:
    """`path` when it is an existing, readable folder; `InputError` otherwise."""
    if not str(path) or "\0" in str(path):
        raise _fail(what, path, "is not a usable path", fix)
    try:
        info = os.stat(path)
    except OSError as exc:
        raise _fail(what, path, _reason(exc), fix) from None
    if not stat.S_ISDIR(info.st_mode):
        raise _fail(what, path, "is not a folder", fix)
    if not os.access(path, os.R_OK | os.X_OK):
        raise _fail(what, path, "is not readable (permission denied)", fix)
    return Path(path)


def require_output_folder(path: Path | str, what: str, *, fix: str, writable: bool = False) -> Path:
    """`path` when it is a usable output folder or can become one: the one gate every writer's folder passes
    (`safety.write.output_folder`: no link on the way, not a file, nobody else's, not open to others); with
    `writable`, this process can also create files in it (or create it in its nearest parent)."""
    from n8n_sizer.safety.write import output_folder

    return output_folder(path, what, fix=fix, writable=writable)
