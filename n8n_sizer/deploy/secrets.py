"""The stack's secrets: generated with `secrets`, kept across re-renders, written 0600, never printed.

Rotating `N8N_ENCRYPTION_KEY` makes every stored credential unreadable (seed 000, drill 2 and the
SQLite-to-Postgres notes), so nothing here replaces a secret that already exists in a `.env`.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

# Names in the .env file, as seed 000's compose file spells them.
ENV_NAMES = {
    "encryption_key": "N8N_ENCRYPTION_KEY",
    "postgres_password": "POSTGRES_PASSWORD",
    "redis_password": "REDIS_PASSWORD",
    "runners_auth_token": "RUNNERS_AUTH_TOKEN",
}
# A secret is written unquoted into .env and interpolated by Compose: no whitespace, quotes, `$` or `#`.
_SAFE = r"^[A-Za-z0-9+/=._:@%^*!,~-]{16,256}$"


class StackSecrets(BaseModel):
    """Secrets of one stack. Generated ones are hex: the key is 64 hex characters (32 random bytes).

    A kept key may be any safe string of 16+ characters: n8n accepts keys it generated itself, and a
    user's existing key must survive a re-render unchanged.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    encryption_key: str = Field(pattern=_SAFE)
    postgres_password: str = Field(pattern=_SAFE)
    redis_password: str = Field(pattern=_SAFE)
    runners_auth_token: str = Field(pattern=_SAFE)

    def __repr__(self) -> str:  # never let a secret reach a log line or a traceback
        return "StackSecrets(<hidden>)"

    __str__ = __repr__


def generate_secrets() -> StackSecrets:
    """Fresh secrets: a 64-hex encryption key (as `openssl rand -hex 32`), 48-hex passwords and token."""
    return StackSecrets(
        encryption_key=secrets.token_hex(32),
        postgres_password=secrets.token_hex(24),
        redis_password=secrets.token_hex(24),
        runners_auth_token=secrets.token_hex(24),
    )


_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")


def parse_env_text(text: str) -> dict[str, str]:
    """Parse a Compose-style .env: KEY=VALUE lines, `#` comments, optional single or double quotes."""
    values: dict[str, str] = {}
    for raw in text.splitlines():
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        match = _LINE.match(raw)
        if not match:
            continue
        key, value = match.groups()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        elif " #" in value:  # inline comment after an unquoted value
            value = value.split(" #", 1)[0].rstrip()
        values[key] = value
    return values


def merge_secrets(existing: dict[str, str], fresh: StackSecrets) -> tuple[StackSecrets, list[str]]:
    """Keep every secret `existing` already has; take the rest from `fresh`. Returns the kept names."""
    kept: list[str] = []
    chosen: dict[str, str] = {}
    for field, env_name in ENV_NAMES.items():
        old = existing.get(env_name, "")
        if old:
            kept.append(env_name)
            chosen[field] = old
        else:
            chosen[field] = getattr(fresh, field)
    try:
        return StackSecrets(**chosen), kept
    except ValueError:
        bad = [n for f, n in ENV_NAMES.items() if n in kept and not re.match(_SAFE, chosen[f])]
        from n8n_sizer.errors import InputError

        raise InputError(
            f"the existing .env has {', '.join(bad)} with whitespace, quotes, '$' or '#', or under 16 "
            "characters; it is kept, never replaced: fix it by hand or render into another --out folder"
        ) from None


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path` with mode 0600 from the first byte (no window where others can read it)."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
