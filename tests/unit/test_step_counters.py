"""Step counters: Redis commands and Postgres transactions parsed from captured output, and two readings' difference."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from n8n_sizer.bench.accounting import Reading, step_counters
from n8n_sizer.telemetry.probes import ProbeParseError
from n8n_sizer.telemetry.probes.ops import (parse_commandstats, parse_transactions, pg_xacts_command, pg_xacts_sql,
                                            redis_commandstats_command, redis_commands)

PROBES = Path(__file__).parent.parent / "data" / "probes"


def test_commandstats_of_a_real_redis():
    calls = parse_commandstats((PROBES / "redis_commandstats.txt").read_text())
    assert calls == {"lpush": 1, "set": 3, "llen": 1}
    assert redis_commands({**calls, "info": 40}) == 5  # the readings' own INFO is not the workload's
    with pytest.raises(ProbeParseError):
        parse_commandstats("NOAUTH Authentication required.\n")


def test_transactions_are_one_number():
    assert parse_transactions("1234\n") == 1234
    with pytest.raises(ProbeParseError):
        parse_transactions("psql: error: connection refused\n")


def test_commands_keep_passwords_off_the_command_line_and_read_from_postgres_not_n8n():
    cmd = redis_commandstats_command(6379, "10.213.7.10", password_file="/x/redis-probe.secret")
    assert "INFO commandstats" in cmd and "$(cat /x/redis-probe.secret" in cmd
    pg = pg_xacts_command(5432, "/tmp/pg sock", user="n8n", database="n8n")
    assert "-d postgres" in pg and "'/tmp/pg sock'" in pg and "datname = 'n8n'" in shlex.split(pg)[-1]
    with pytest.raises(ValueError):
        pg_xacts_sql("n8n'; drop table x; --")


def test_a_steps_counters_are_the_differences_summed_per_role_over_hosts():
    before = Reading(100.0, {("worker-1", "worker"): 1_000_000, ("worker-2", "worker"): 0,
                             ("ingest", "main"): 5_000_000, ("data", "redis"): 9}, 1000, 50)
    after = Reading(120.0, {("worker-1", "worker"): 61_000_000, ("worker-2", "worker"): 40_000_000,
                            ("ingest", "main"): 17_000_000, ("data", "redis"): 8, ("data", "postgres"): 7}, 1600, 110)
    c = step_counters(before, after)
    assert c.role_cpu_ms == {"worker": 100.0, "main": 12.0}  # redis went backwards (restarted): left out
    assert c.host_role_cpu_ms == {"worker-1": {"worker": 60.0}, "worker-2": {"worker": 40.0}, "ingest": {"main": 12.0}}
    assert (c.redis_commands, c.postgres_transactions, c.counted_s) == (600, 60, 20.0)
    unread = step_counters(Reading(0.0, {}, None, 5), Reading(1.0, {}, 9, 4))
    assert unread.role_cpu_ms is None and unread.redis_commands is None and unread.postgres_transactions is None
