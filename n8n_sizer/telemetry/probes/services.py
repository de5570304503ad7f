"""Service probes: Redis memory and Bull queue depth, Postgres connections, n8n's /metrics queue gauges.

Seed 000 watched exactly these: Redis used memory (2.1 to 3.4 MB), `LLEN bull:jobs:wait` (n8n 2.40.7
queues through Bull 4, keys `bull:<queue>:wait` / `:active`), connections in pg_stat_activity (3 for
regular mode, 7 for 2 workers) and `n8n_scaling_mode_queue_jobs_*` on main's /metrics.
Passwords never appear in a command: a probe names the environment variable that holds one.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping

from n8n_sizer.runs.records import Sample
from n8n_sizer.telemetry.probes import Probe, ProbeParseError, sample

# Bull 4 key names n8n 2.x uses with its default QUEUE_BULL_PREFIX=bull and queue name "jobs" (seed 000).
BULL_WAIT_KEY = "bull:jobs:wait"
BULL_ACTIVE_KEY = "bull:jobs:active"


def parse_redis_info(text: str, time_s: float, labels: Mapping[str, str]) -> list[Sample]:
    """`redis-cli INFO` -> `redis_used_memory_mib`, `redis_connected_clients`."""
    info = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition(":")
        if sep:
            info[key] = value
    if "used_memory" not in info:
        raise ProbeParseError(f"used_memory missing from redis INFO output: {text.strip()[:80]!r}")
    out = [sample("redis_used_memory_mib", int(info["used_memory"]) / 2**20, "MiB", time_s, labels)]
    if "connected_clients" in info:
        out.append(sample("redis_connected_clients", int(info["connected_clients"]), "count", time_s, labels))
    return out


def parse_bull_queue(text: str, time_s: float, labels: Mapping[str, str]) -> list[Sample]:
    """Two `redis-cli LLEN` replies (wait, then active) -> `bull_jobs{state}`.

    redis-cli prints `(integer) 5` on a terminal and `5` into a pipe; both are read.
    """
    counts = [int(m.group(1)) for m in re.finditer(r"^(?:\(integer\)\s*)?(\d+)\s*$", text, re.M)]
    if len(counts) != 2:
        raise ProbeParseError(f"expected two LLEN replies, got: {text.strip()[:80]!r}")
    return [
        sample("bull_jobs", counts[0], "jobs", time_s, labels, state="waiting"),
        sample("bull_jobs", counts[1], "jobs", time_s, labels, state="active"),
    ]


def _redis_cli(port: int, host: str, password_env: str | None, password_file: str | None, prefix: str) -> str:
    auth = ""
    if password_env:
        auth = f'REDISCLI_AUTH="${password_env}" '
    elif password_file:  # read at run time on the host: the password never sits in the command line
        auth = f'REDISCLI_AUTH="$(cat {shlex.quote(password_file)} 2>/dev/null)" '
    return f"{prefix}{auth}redis-cli -h {shlex.quote(host)} -p {int(port)}"


def redis_probes(
    port: int = 6379,
    host: str = "127.0.0.1",
    *,
    password_env: str | None = None,
    password_file: str | None = None,
    prefix: str = "",
) -> list[Probe]:
    """Redis INFO and Bull queue depth. `prefix` runs redis-cli elsewhere, e.g. `docker exec n8n-redis `.
    The password comes from an environment variable on the host or a file holding only the password."""
    cli = _redis_cli(port, host, password_env, password_file, prefix)
    return [
        Probe("redis_info", f"{cli} INFO", parse_redis_info),
        Probe("bull_queue", f"{cli} LLEN {BULL_WAIT_KEY} && {cli} LLEN {BULL_ACTIVE_KEY}", parse_bull_queue),
    ]


# Client backends of the n8n database, by state, without the probe's own connection.
PG_ACTIVITY_SQL = (
    "SELECT coalesce(state, 'unknown'), count(*) FROM pg_stat_activity "
    "WHERE backend_type = 'client backend' AND datname = current_database() AND pid <> pg_backend_pid() "
    "GROUP BY 1 ORDER BY 1"
)


def parse_pg_activity(text: str, time_s: float, labels: Mapping[str, str]) -> list[Sample]:
    """`psql -At -F '|'` rows `state|count` -> `postgres_connections{state}` and the total."""
    total = 0
    out: list[Sample] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        state, sep, count = line.rpartition("|")
        if not sep or not count.strip().isdigit():
            raise ProbeParseError(f"unexpected pg_stat_activity row: {line[:80]!r}")
        total += int(count)
        out.append(sample("postgres_connections", int(count), "connections", time_s, labels, state=state.strip()))
    out.append(sample("postgres_connections", total, "connections", time_s, labels, state="all"))
    return out


def postgres_probe(
    port: int = 5432,
    host: str = "127.0.0.1",
    *,
    user: str = "n8n",
    database: str = "n8n",
    password_env: str | None = None,
    prefix: str = "",
) -> Probe:
    auth = f'PGPASSWORD="${password_env}" ' if password_env else ""
    sql = shlex.quote(PG_ACTIVITY_SQL)
    cmd = (
        f"{prefix}{auth}psql -X -At -F '|' -h {shlex.quote(host)} -p {int(port)} "
        f"-U {shlex.quote(user)} -d {shlex.quote(database)} -c {sql}"
    )
    return Probe("pg_activity", cmd, parse_pg_activity)


_PROM_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
N8N_QUEUE_METRICS = (
    "n8n_scaling_mode_queue_jobs_waiting",
    "n8n_scaling_mode_queue_jobs_active",
    "n8n_scaling_mode_queue_jobs_completed",
    "n8n_scaling_mode_queue_jobs_failed",
)


def parse_prometheus(text: str) -> dict[str, float]:
    """Prometheus text exposition -> {name (with its label set, if any): value}; comments skipped."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _PROM_LINE.match(line)
        if m:
            values[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return values


def parse_n8n_metrics(text: str, time_s: float, labels: Mapping[str, str]) -> list[Sample]:
    """n8n's /metrics -> the four queue gauges (n8n refreshes them every 20 s by default, seed 000)."""
    values = parse_prometheus(text)
    found = [name for name in N8N_QUEUE_METRICS if name in values]
    if not found:
        raise ProbeParseError(
            "no n8n_scaling_mode_queue_jobs_* in /metrics (N8N_METRICS_INCLUDE_QUEUE_METRICS=true on main?)"
        )
    return [sample(name, values[name], "jobs", time_s, labels) for name in found]


def n8n_metrics_probe(base_url: str) -> Probe:
    """GET main's /metrics from the host itself (curl, 2 s cap)."""
    url = base_url.rstrip("/") + "/metrics"
    return Probe("n8n_metrics", f"curl -fsS --max-time 2 {shlex.quote(url)}", parse_n8n_metrics)
