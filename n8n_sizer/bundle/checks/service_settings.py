"""Settings read off one compose service, shared by the host rules and the rules across hosts: a Redis flag, n8n's
Postgres pool size, Postgres' max_connections, and which of them are not numbers the arithmetic can trust."""

from __future__ import annotations

import re

from n8n_sizer.advisor.pools import POSTGRES_DEFAULT_MAX_CONNECTIONS
from n8n_sizer.advisor.setup import DEFAULT_DB_POOL_SIZE
from n8n_sizer.bundle.checks.rule import as_int
from n8n_sizer.bundle.composefile import Service

POSTGRES_MAX_CONNECTIONS_LIMIT = 262143  # Postgres' upper bound for max_connections (MAX_BACKENDS)


def redis_arg(service: Service, flag: str) -> str | None:
    tokens = service.command
    for i, token in enumerate(tokens):
        if token == flag and i + 1 < len(tokens):
            return tokens[i + 1]
        if token.startswith(flag + "="):
            return token.split("=", 1)[1]
    return None


MAX_POOL = 500  # render --pool's bound (safety/numbers.py POOL)


def pool_size(service: Service) -> int:
    return as_int(service.env.get("DB_POSTGRESDB_POOL_SIZE")) or DEFAULT_DB_POOL_SIZE


def max_connections_of(service: Service) -> int:
    for i, token in enumerate(service.command):
        match = re.fullmatch(r"(?:--)?max_connections=(\d{1,18})", token)
        if match and (token.startswith("--") or (i > 0 and service.command[i - 1] == "-c")):
            return int(match.group(1))
    return POSTGRES_DEFAULT_MAX_CONNECTIONS


def unreadable_pool_settings(users: list[Service], postgres: list[Service]) -> list[str]:
    """Pool sizes and max_connections that are set but are not whole numbers in range (`-5`, `abc`, `0`,
    `2.5`): n8n and Postgres would refuse them or read something else, so the arithmetic cannot use them."""
    bad = []
    for s in users:
        raw = s.env.get("DB_POSTGRESDB_POOL_SIZE")
        if raw is not None and raw.strip() and not 1 <= (as_int(raw) or 0) <= MAX_POOL:
            bad.append(f"{s.name} DB_POSTGRESDB_POOL_SIZE={raw[:20]!r}")
    for p in postgres:
        for i, token in enumerate(p.command):
            match = re.fullmatch(r"(?:--)?max_connections=(.*)", token, flags=re.S)
            if (
                match
                and (token.startswith("--") or (i > 0 and p.command[i - 1] == "-c"))
                and not re.fullmatch(r"\d{1,18}", match.group(1))
            ):
                bad.append(f"{p.name} max_connections={match.group(1)[:20]!r}")
    return bad
