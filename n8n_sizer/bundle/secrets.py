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
    "redis_n8n_password": "REDIS_N8N_PASSWORD",  # n8n's Redis ACL user; REDIS_PASSWORD stays the operator's
}
# Secrets that nothing stored depends on (Redis reads its ACL users from its command line at every start), so a
# folder rendered before they existed gets one generated; every other missing secret needs the flag.
ADDED_LATER = frozenset({"REDIS_N8N_PASSWORD"})
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
    redis_n8n_password: str = Field(pattern=_SAFE)

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
        redis_n8n_password=secrets.token_hex(24),
    )


# Only the name is matched by a regex; the value is the rest of the line, stripped. (A single regex with a
# lazy value and trailing `\s*$` backtracks quadratically: one 1 MB line of spaces took an hour.)
_KEY = re.compile(r"\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=")


def _split_line(raw: str) -> tuple[str, str] | None:
    match = _KEY.match(raw)
    return (match.group(1), raw[match.end() :].strip()) if match else None


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
            raise InputError(
                f"{path} line {number} is not KEY=VALUE (a name of letters, digits and '_'); a "
                "re-render would drop it: fix or remove that line, then render again"
            )
        key, written = pair
        if key in entries:
            raise InputError(
                f"{path} sets {key} twice (lines {entries[key].line} and {number}); keep the one "
                "that is right and delete the other, then render again"
            )
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
        if generate_missing or (entry is None and env_name in ADDED_LATER):
            continue
        lookalike = next((k for k in entries if k != env_name and _squash(k) == _squash(env_name)), None)
        if entry is not None:
            why = f"has an empty {env_name} (line {entry.line})"
        elif lookalike:
            why = f"has {lookalike} (line {entries[lookalike].line}) but no {env_name}"
        else:
            why = f"has no {env_name} line"
        raise InputError(
            f"{path} {why}; n8n-sizer never makes up a secret over an existing .env: restore "
            f"the value from your backup (or the running stack), or pass --generate-missing-secrets "
            f"to generate the missing ones"
        )


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
        lines.append(
            f"kept {len(kept)} existing secret(s) {source}: {', '.join(kept)} "
            "(rotating N8N_ENCRYPTION_KEY would break every stored credential)"
        )
    new = [n for n in ENV_NAMES.values() if n not in kept]
    if new:
        lines.append(f"wrote {written} (mode 0600) with new secret(s): {', '.join(new)}")
    return lines, new


# ---- every copy of the secrets, one rule -----------------------------------------------------------------
# A rendered stack holds its secrets in several files: the primary (`.env` of one host, `.secrets.env` of a
# cluster), each cluster host's `.env` (what Compose on that host actually uses) and each `cloud-init.yaml`
# (what a VM was or will be booted with). `settle_secrets` is the one function every render path calls: a
# secret that any copy holds is kept (never regenerated), two copies with different values are refused,
# and only a secret no copy holds is generated.

MAX_ENV_IN_CLOUD_INIT = 1 << 20


def env_of_cloud_init(text: str, path: Path) -> str:
    """The `.env` a rendered cloud-init.yaml embeds ('' when it embeds none)."""
    import base64
    import binascii
    import gzip
    import zlib

    from n8n_sizer.errors import InputError
    from n8n_sizer.safety.yamldoc import load_yaml

    doc = load_yaml(text, str(path), fix="it is never overwritten unread: fix it or render into another folder")
    files = doc.get("write_files") if isinstance(doc, dict) else None
    for entry in files if isinstance(files, list) else []:
        if not isinstance(entry, dict) or not str(entry.get("path", "")).endswith("/.env"):
            continue
        content = entry.get("content", "")
        if not isinstance(content, str):
            break
        if "gz" in str(entry.get("encoding", "")):
            try:
                with gzip.GzipFile(fileobj=__import__("io").BytesIO(base64.b64decode(content))) as gz:
                    raw = gz.read(MAX_ENV_IN_CLOUD_INIT + 1)
                content = raw[:MAX_ENV_IN_CLOUD_INIT].decode("utf-8")
            except (OSError, EOFError, binascii.Error, zlib.error, UnicodeDecodeError):
                raise InputError(
                    f"{path}: its embedded .env cannot be decoded; it holds the stack's secrets, so "
                    "it is never overwritten unread: fix it or render into another folder"
                ) from None
        return content
    return ""


class SecretCopy(Frozen):
    """One file that holds the stack's secrets: its path and its KEY=VALUE lines."""

    path: Path
    entries: dict[str, EnvEntry]


def read_secret_copy(path: Path, *, strict: bool = True) -> SecretCopy | None:
    """The secrets `path` holds (None when it does not exist): only a regular file of the user's own, not a
    link, not readable by others (`read_user_text(private=True)`); a cloud-init.yaml's embedded .env."""
    import os

    from n8n_sizer.safety.files import read_user_text

    if not os.path.lexists(path):
        return None
    text = read_user_text(
        path,
        "the existing secrets file",
        private=True,
        max_bytes=1 << 20,
        fix="it holds the stack's secrets and is never overwritten unread: fix it or render into another --out folder",
    )
    if path.name == "cloud-init.yaml":
        text, strict = env_of_cloud_init(text, path), False
    if strict:
        return SecretCopy(path=path, entries=read_env_strict(text, path))
    values = parse_env_text(text)
    return SecretCopy(path=path, entries={k: EnvEntry(key=k, value=v, written=v, line=0) for k, v in values.items()})


def settle_secrets(
    primary: Path, copies: list[SecretCopy], *, generate_missing: bool
) -> tuple[StackSecrets, list[str], list[str]]:
    """The stack's secrets from every copy: (secrets, kept names, messages).

    `copies` starts with the primary's copy when it exists. A secret is kept from whichever copy holds it;
    two copies holding different values are refused (which one does the running stack use?); a secret held
    by no copy is generated only when no primary exists yet or `generate_missing` says so."""
    from n8n_sizer.errors import InputError

    head = copies[0] if copies and copies[0].path == primary else None
    chosen: dict[str, str] = {}
    said: list[str] = []
    for env_name in ENV_NAMES.values():
        held = [
            (c.path, c.entries[env_name].value.strip())
            for c in copies
            if env_name in c.entries and c.entries[env_name].value.strip()
        ]
        values = {v for _, v in held}
        if len(values) > 1:
            (a, _), (b, _) = held[0], next(h for h in held if h[1] != held[0][1])
            raise InputError(
                f"{env_name} differs between {a} and {b}; n8n-sizer never picks one: put the value "
                f"the running stack uses into both (and every other copy), then render again"
            )
        if values:
            chosen[env_name] = values.pop()
            if head is not None and env_name not in {k for k, e in head.entries.items() if e.value.strip()}:
                said.append(f"{primary} lacked {env_name}: kept the one in {held[0][0]}")
    if head is not None:  # the primary's own rules: a secret no copy holds is not made up without the flag
        placeholders = {k: _held(k) for k in chosen if k not in head.entries or not head.entries[k].value.strip()}
        check_existing_secrets(head.entries | placeholders, primary, generate_missing=generate_missing)
    fresh = generate_secrets()
    kept = [n for n in ENV_NAMES.values() if n in chosen]
    secrets_, _ = merge_secrets(chosen, fresh)
    return secrets_, kept, said


def _held(name: str) -> EnvEntry:
    return EnvEntry(key=name, value="(held by another copy)", written="", line=0)
