"""The stack's secrets: generated with `secrets`, kept across re-renders, written 0600, never printed.

Rotating `N8N_ENCRYPTION_KEY` makes every stored credential unreadable (seed 000, drill 2 and the
SQLite-to-Postgres notes), so nothing here replaces a secret that already exists in a `.env`.
"""

from __future__ import annotations

import re
import secrets
from pathlib import Path

from pydantic import Field
from n8n_sizer.safety.frozen import Frozen

# Names in the .env file, as seed 000's compose file spells them.
ENV_NAMES = {
    "encryption_key": "N8N_ENCRYPTION_KEY",
    "postgres_password": "POSTGRES_PASSWORD",
    "redis_password": "REDIS_PASSWORD",
    "runners_auth_token": "RUNNERS_AUTH_TOKEN",
}
# A secret is written unquoted into .env and interpolated by Compose: no whitespace, quotes, `$` or `#`.
_SAFE = r"^[A-Za-z0-9+/=._:@%^*!,~-]{16,256}$"


class StackSecrets(Frozen):
    """Secrets of one stack. Generated ones are hex: the key is 64 hex characters (32 random bytes).

    A kept key may be any safe string of 16+ characters: n8n accepts keys it generated itself, and a
    user's existing key must survive a re-render unchanged.
    """

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


# Only the name is matched by a regex; the value is the rest of the line, stripped. (A single regex with a
# lazy value and trailing `\s*$` backtracks quadratically: one 1 MB line of spaces took an hour.)
_KEY = re.compile(r"\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=")


def _split_line(raw: str) -> tuple[str, str] | None:
    match = _KEY.match(raw)
    return (match.group(1), raw[match.end():].strip()) if match else None


def _value(raw: str) -> str:
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        return raw[1:-1]
    if " #" in raw:  # inline comment after an unquoted value
        return raw.split(" #", 1)[0].rstrip()
    return raw


def parse_env_text(text: str) -> dict[str, str]:
    """Parse a Compose-style .env: KEY=VALUE lines, `#` comments, optional single or double quotes.

    Lenient, as Compose is when it reads one for `check`: a line that is not KEY=VALUE is skipped and the
    last of two equal keys wins. `read_env_strict` is the reader for a .env that will be rewritten."""
    values: dict[str, str] = {}
    for raw in text.splitlines():
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        pair = _split_line(raw)
        if pair:
            values[pair[0]] = _value(pair[1])
    return values


class EnvEntry(Frozen):
    """One KEY=VALUE line of a .env: the value as Compose reads it, and as it was written."""

    key: str
    value: str
    written: str  # the text after `=`, quotes and inline comment included, so a rewrite keeps it exactly
    line: int

    def __repr__(self) -> str:  # the value may be a secret
        return f"EnvEntry({self.key}, line {self.line})"

    __str__ = __repr__


def read_env_strict(text: str, path: Path) -> dict[str, EnvEntry]:
    """Every KEY=VALUE line of a .env that is about to be rewritten; `InputError` for anything a rewrite
    would drop: a line that is not KEY=VALUE (a mangled name) or a key given twice (which value is meant?)."""
    from n8n_sizer.errors import InputError

    entries: dict[str, EnvEntry] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        pair = _split_line(raw)
        if not pair:
            raise InputError(f"{path} line {number} is not KEY=VALUE (a name of letters, digits and '_'); a "
                             "re-render would drop it: fix or remove that line, then render again")
        key, written = pair
        if key in entries:
            raise InputError(f"{path} sets {key} twice (lines {entries[key].line} and {number}); keep the one "
                             "that is right and delete the other, then render again")
        entries[key] = EnvEntry(key=key, value=_value(written), written=written, line=number)
    return entries


def check_existing_secrets(entries: dict[str, EnvEntry], path: Path, *, generate_missing: bool) -> None:
    """Refuse to render over an existing .env that lacks a secret (or has it empty) unless the user said
    `--generate-missing-secrets`: a new N8N_ENCRYPTION_KEY makes every stored credential unreadable, a
    new POSTGRES_PASSWORD locks n8n out of an existing database volume."""
    from n8n_sizer.errors import InputError

    for env_name in ENV_NAMES.values():
        entry = entries.get(env_name)
        if entry is not None and entry.value.strip():
            continue
        if generate_missing:
            continue
        lookalike = next((k for k in entries if k != env_name and _squash(k) == _squash(env_name)), None)
        if entry is not None:
            why = f"has an empty {env_name} (line {entry.line})"
        elif lookalike:
            why = f"has {lookalike} (line {entries[lookalike].line}) but no {env_name}"
        else:
            why = f"has no {env_name} line"
        raise InputError(f"{path} {why}; n8n-sizer never makes up a secret over an existing .env: restore "
                         f"the value from your backup (or the running stack), or pass --generate-missing-secrets "
                         f"to generate the missing ones")


def _squash(name: str) -> str:
    return re.sub(r"[^A-Z0-9]", "", name.upper())


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
        bad = [n for f, n in ENV_NAMES.items() if n in kept and not re.fullmatch(_SAFE, chosen[f])]
        from n8n_sizer.errors import InputError

        raise InputError(
            f"the existing .env has {', '.join(bad)} with whitespace, quotes, '$' or '#', or under 16 "
            "characters; it is kept, never replaced: fix it by hand or render into another --out folder"
        ) from None


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path` with mode 0600 from the first byte, atomically, never through a link."""
    from n8n_sizer.safety.write import write_atomic

    write_atomic(path, text, private=True)


def secret_messages(kept: list[str], source: str, written: object) -> tuple[list[str], list[str]]:
    """What a render says about its secrets, one host or a cluster alike: (message lines, names generated now).
    `source` says where the kept ones came from ("in stack/.env"); `written` is the file that holds them."""
    lines = []
    if kept:
        lines.append(f"kept {len(kept)} existing secret(s) {source}: {', '.join(kept)} "
                     "(rotating N8N_ENCRYPTION_KEY would break every stored credential)")
    new = [n for n in ENV_NAMES.values() if n not in kept]
    if new:
        lines.append(f"wrote {written} (mode 0600) with new secret(s): {', '.join(new)}")
    return lines, new
