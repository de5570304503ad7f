"""Operations the data stores did, as counters: Redis commands (`INFO commandstats`) and Postgres transactions
(`pg_stat_database`). Read at both ends of a step, their difference over the step's executions is what one
execution costs Redis and Postgres in operations, which carry across hardware better than milliseconds do.

- Redis: the sum of `calls` over every command except `info` (the readings' own and the sampler's), so the
  sampler's two `LLEN`s per tick are counted (a few per second against hundreds of Bull commands per second).
- Postgres: `xact_commit + xact_rollback` of the n8n database, read while connected to the `postgres` database
  so the reading is not one of them. Backends publish their counts when they go idle (Postgres 15: within about a
  second when busy, at most 10 s later when idle), so a step's delta is exact only in a steady state; steps of
  20 s and more keep that edge small.
"""

from __future__ import annotations

import re
import shlex

from n8n_sizer.telemetry.probes import ProbeParseError
from n8n_sizer.telemetry.probes.services import _redis_cli

IGNORED_REDIS_COMMANDS = frozenset({"info"})
_CMDSTAT = re.compile(r"^cmdstat_([^:]+):calls=(\d+)")


def parse_commandstats(text: str) -> dict[str, int]:
    """`redis-cli INFO commandstats` -> {command: calls since Redis started (or CONFIG RESETSTAT)}."""
    if "# Commandstats" not in text:
        raise ProbeParseError(f"not an INFO commandstats reply: {text.strip()[:80]!r}")
    calls = {}
    for line in text.splitlines():
        m = _CMDSTAT.match(line.strip())
        if m:
            calls[m.group(1)] = int(m.group(2))
    return calls


def redis_commands(calls: dict[str, int]) -> int:
    """Commands that count as the workload's: every command but the readings' own."""
    return sum(n for cmd, n in calls.items() if cmd.lower() not in IGNORED_REDIS_COMMANDS)


def parse_transactions(text: str) -> int:
    """The one number `psql -At` prints for PG_XACTS_SQL (committed plus rolled back transactions)."""
    value = text.strip()
    if not value.isdigit():
        raise ProbeParseError(f"expected a transaction count from pg_stat_database, got: {value[:80]!r}")
    return int(value)


def pg_xacts_sql(database: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_]+", database):
        raise ValueError(f"database name {database!r} must be a plain identifier")
    return f"SELECT coalesce(sum(xact_commit + xact_rollback), 0) FROM pg_stat_database WHERE datname = '{database}'"


def redis_commandstats_command(
    port: int, host: str = "127.0.0.1", *, password_file: str | None = None, netns_pid: int | None = None
) -> str:
    """`netns_pid`: run redis-cli in that process's network namespace (`nsenter --net`), e.g. the lab's data host,
    whose firewall answers Redis only to the hosts that run n8n: from this machine's own namespace (the lab
    bridge's address) the connection is reset and the count would be lost."""
    cli = _redis_cli(port, host, None, password_file, "")
    if netns_pid is not None:
        auth, _, rest = cli.rpartition("redis-cli ")
        cli = f"{auth}nsenter --target {int(netns_pid)} --net redis-cli {rest}"
    return f"{cli} INFO commandstats"


def pg_xacts_command(port: int, host: str, *, user: str, database: str) -> str:
    """psql over `host` (a socket folder with trust, or an address), connected to `postgres`, not `database`."""
    return (
        f"psql -X -At -h {shlex.quote(host)} -p {int(port)} -U {shlex.quote(user)} -d postgres "
        f"-c {shlex.quote(pg_xacts_sql(database))}"
    )
