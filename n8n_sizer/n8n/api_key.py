"""Where the public API key comes from: `--api-key-file FILE` or the environment's `N8N_API_KEY`, never a value on
the command line (it would sit in the shell's history and in `ps` for every user of the machine).

The file is read through the one reader with `private=True`: the user's own regular file, not a symbolic link, not
readable or writable by group or others (`chmod 600`), one line. The key is kept as a `SecretStr` and never
printed: every refusal names the source, not the value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from pydantic import SecretStr

from n8n_sizer.errors import InputError

ENV = "N8N_API_KEY"
MAX_KEY_CHARS = 4096  # n8n's keys are JWTs of a few hundred characters
_KEY = re.compile(r"[\x21-\x7e]+")  # printable ASCII, no space
HOW = "make one in n8n under Settings > n8n API"


def _checked(raw: str, source: str) -> SecretStr:
    lines = raw.splitlines()
    if len(lines) > 1 and any(line.strip() for line in lines[1:]):
        raise InputError(f"{source} holds {len(lines)} lines; put the API key alone on one line")
    key = (lines[0] if lines else "").strip()
    if not key:
        raise InputError(f"{source} is empty; put the instance's API key there ({HOW})")
    if len(key) > MAX_KEY_CHARS or not _KEY.fullmatch(key):
        raise InputError(
            f"{source} does not look like an API key (printable characters without spaces, at most "
            f"{MAX_KEY_CHARS:,}); put the key alone on one line ({HOW})"
        )
    return SecretStr(key)


def read_api_key(key_file: Path | None, env: Mapping[str, str] | None = None) -> SecretStr:
    """The API key from `key_file` (when given) or from N8N_API_KEY; `InputError` (exit 2) when neither holds one."""
    if key_file is not None:
        from n8n_sizer.safety.files import read_user_text

        text = read_user_text(
            key_file,
            "--api-key-file",
            fix=f"write the key alone on one line into a file only you can read (chmod 600 {key_file})",
            max_bytes=16 * 1024,
            private=True,
        )
        return _checked(text, f"--api-key-file {key_file}")
    value = (os.environ if env is None else env).get(ENV)
    if value is None:
        raise InputError(
            f"no API key: set {ENV} in the environment or pass --api-key-file FILE (one line, chmod 600); {HOW}; "
            "a key is never taken on the command line"
        )
    return _checked(value, ENV)
