"""Step counters: Redis commands and Postgres transactions parsed from captured output, and two readings' difference."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from n8n_sizer.bench.accounting import Reading, step_counters
from n8n_sizer.telemetry.probes import ProbeParseError
from n8n_sizer.telemetry.probes.ops import (
    parse_commandstats,
    parse_transactions,
    pg_xacts_command,
    pg_xacts_sql,
    redis_commands,
    redis_commandstats_command,
)

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
    # the lab's data host answers Redis only to n8n's hosts: the count is read inside its namespace, on loopback
    lab = redis_commandstats_command(6379, "127.0.0.1", password_file="/x/redis-probe.secret", netns_pid=4242)
    words = shlex.split(lab)
    assert words[0].startswith("REDISCLI_AUTH=") and words[1:5] == ["nsenter", "--target", "4242", "--net"]
    assert words[5:9] == ["redis-cli", "-h", "127.0.0.1", "-p"] and words[-2:] == ["INFO", "commandstats"]
    pg = pg_xacts_command(5432, "/tmp/pg sock", user="n8n", database="n8n")
    assert "-d postgres" in pg and "'/tmp/pg sock'" in pg and "datname = 'n8n'" in shlex.split(pg)[-1]
    with pytest.raises(ValueError):
        pg_xacts_sql("n8n'; drop table x; --")


def test_a_steps_counters_are_the_differences_summed_per_role_over_hosts():
    before = Reading(
        100.0,
        {
            ("worker-1", "worker"): 1_000_000,
            ("worker-2", "worker"): 0,
            ("worker-1", ""): 2_000_000,
            ("ingest", "main"): 5_000_000,
            ("data", "redis"): 9,
        },
        1000,
        50,
    )
    after = Reading(
        120.0,
        {
            ("worker-1", "worker"): 61_000_000,
            ("worker-2", "worker"): 40_000_000,
            ("worker-1", ""): 72_000_000,
            ("ingest", "main"): 17_000_000,
            ("data", "redis"): 8,
            ("data", "postgres"): 7,
        },
        1600,
        110,
    )
    c = step_counters(before, after)
    assert c.role_cpu_ms == {"worker": 100.0, "main": 12.0}  # redis went backwards (restarted): left out
    assert c.host_role_cpu_ms == {"worker-1": {"worker": 60.0}, "worker-2": {"worker": 40.0}, "ingest": {"main": 12.0}}
    assert (c.redis_commands, c.postgres_transactions, c.counted_s) == (600, 60, 20.0)
    assert c.host_cpu_ms == {"worker-1": 70.0}  # the host's whole budget: its worker and 10 ms of everything else
    unread = step_counters(Reading(0.0, {}, None, 5), Reading(1.0, {}, 9, 4))
    assert unread.role_cpu_ms is None and unread.redis_commands is None and unread.postgres_transactions is None


def test_the_steps_cpuacct_figures_reach_the_fit_input_over_the_sampled_ones(tmp_path):
    """A step that carries `role_cpu_ms` (the kernel's accounting) gives the advisor those, per execution."""
    from n8n_sizer.runs.fit_input import measurements_from_run
    from n8n_sizer.runs.records import Sample
    from n8n_sizer.runs.store import RunStore
    from tests.unit.test_evidence import STEP_S, _bench_run

    run = _bench_run(tmp_path, "20261130T000000Z-abc123", "light", 20, [4.0], 0)
    store = RunStore.open(run)
    start = min(r.scheduled_s for r in store.read_requests())
    store.append_samples(
        [
            Sample(
                metric="process_cpu_cores",
                value=0.3,
                unit="cores",
                labels={"target": "local", "process": "main"},
                time_s=start + t,
            )
            for t in range(STEP_S)
        ]
    )
    store.mark_step(
        "local",
        "rate-4",
        "done",
        started_s=start,
        finished_s=start + STEP_S,
        **step_counters(
            Reading(0.0, {("local", "main"): 0, ("local", "postgres"): 0}, 10, 10),
            Reading(20.0, {("local", "main"): 800_000_000, ("local", "postgres"): 160_000_000}, 4010, 3210),
        ).model_dump(mode="json", exclude_none=True),
    )
    store.close()
    (row,) = measurements_from_run(run)
    assert row.results.main_cpu_ms == pytest.approx(800 / 80)  # 800 ms over 80 executions, not the sampled 75 ms
    assert row.results.postgres_cpu_ms == pytest.approx(160 / 80)
    assert row.results.worker_cpu_ms is None
    steps = RunStore.open(run).manifest.extra["steps"]["local"]["rate-4"]
    assert (
        steps["redis_commands"] == 4000 and steps["postgres_transactions"] == 3200 and steps["cpu_source"] == "cpuacct"
    )
