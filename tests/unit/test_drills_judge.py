"""The drills' verdicts as pure functions of what was observed (no n8n): both outcomes of each check."""

from __future__ import annotations

from n8n_sizer.drills.stores import judge_postgres_restart, redis_outcome_matches
from n8n_sizer.runs.records import RequestRecord

NAMES = ["main", "worker-1", "worker-2"]
TIMINGS = {"postgres_back_s": 0.5, "main_ready_s": 2.0}
RESTART = 1000.0  # unix seconds the restart began


def _load(
    failures: dict[float, tuple[int | None, str | None, str | None]], rate: float = 4.0, seconds: float = 30.0
) -> list[RequestRecord]:
    """`rate` req/s from RESTART-8 s; the ones scheduled at a key of `failures` failed as given there."""
    out = []
    for seq in range(int(rate * seconds)):
        at = RESTART - 8 + seq / rate
        status, error_class, body = failures.get(at, (200, None, None))
        out.append(
            RequestRecord(
                seq=seq,
                step="rate-4",
                target="local",
                scheduled_s=at,
                sent_s=at,
                status=status,
                latency_ms=None if status is None else 30.0,
                error_class=error_class,
                error=None if status == 200 else "failed",
                body_snippet=body,
            )
        )
    return out


NOT_READY = (503, "non-2xx", '{"code":503,"message":"Database is not ready!","stacktrace":"ResponseError: ...')
SHUTTING_DOWN = (500, "non-2xx", '{"code":0,"message":"the database system is shutting down"')


def test_seed_000s_pattern_matches() -> None:
    failures = {RESTART + i / 4: NOT_READY for i in range(7)} | {RESTART + 7 / 4: SHUTTING_DOWN}
    checks, observed = judge_postgres_restart(
        _load(failures), RESTART, TIMINGS, {n: 2.0 for n in NAMES}, set(NAMES), NAMES, 4.0
    )
    assert [c.verdict for c in checks] == ["matches"] * 3
    assert observed["failed"] == 8 and observed["failed_by_kind"] == {"503": 7, "500": 1}
    assert observed["failed_bodies"] == {"503 Database is not ready!": 7, "500 the database system is shutting down": 1}


def test_failures_long_after_main_is_ready_differ() -> None:
    failures = {RESTART: NOT_READY, RESTART + 15: NOT_READY}
    checks, _ = judge_postgres_restart(
        _load(failures), RESTART, TIMINGS, {n: 2.0 for n in NAMES}, set(NAMES), NAMES, 4.0
    )
    assert checks[1].verdict == "differs: requests kept failing after main was ready again"


def test_timeouts_or_too_many_failures_differ() -> None:
    timeouts = {RESTART + i / 4: (None, "timeout", None) for i in range(3)}
    checks, observed = judge_postgres_restart(
        _load(timeouts), RESTART, TIMINGS, {n: 2.0 for n in NAMES}, set(NAMES), NAMES, 4.0
    )
    assert not checks[0].matches and observed["failed_by_kind"] == {"timeout": 3}
    many = {RESTART + i / 4: NOT_READY for i in range(20)}  # 5 s of 503s while main was ready after 2 s
    checks, _ = judge_postgres_restart(_load(many), RESTART, TIMINGS, {n: 2.0 for n in NAMES}, set(NAMES), NAMES, 4.0)
    assert not checks[0].matches


def test_a_process_that_lost_its_connection_and_never_logs_recovery_differs() -> None:
    checks, _ = judge_postgres_restart(
        _load({}), RESTART, TIMINGS, {"main": 2.0, "worker-1": 2.1}, set(NAMES), NAMES, 4.0
    )
    assert checks[0].matches and checks[2].verdict == "differs: not logged by ['worker-2']"


def test_a_process_that_did_not_notice_the_restart_is_named_not_failed() -> None:
    # worker-2's only connection was busy in a query: no idle client reported the error, its next ping found
    # Postgres back, so it logged neither the loss nor a recovery
    checks, _ = judge_postgres_restart(
        _load({}), RESTART, TIMINGS, {"main": 2.0, "worker-1": 2.1}, {"main", "worker-1"}, NAMES, 4.0
    )
    assert checks[2].matches and "did not notice: ['worker-2']" in checks[2].observation
    checks, _ = judge_postgres_restart(_load({}), RESTART, TIMINGS, {}, set(), NAMES, 4.0)
    assert checks[2].verdict == "differs: no process logged losing its connection"


def test_redis_outcomes_of_seed_000s_table() -> None:
    assert redis_outcome_matches("aof", 20, 20, 20, {"success": 20})
    assert redis_outcome_matches("none", 20, 20, 0, {"crashed": 20})
    # the other way round, or partly, differs
    assert not redis_outcome_matches("aof", 20, 20, 0, {"crashed": 20})
    assert not redis_outcome_matches("aof", 20, 20, 20, {"success": 19, "error": 1})
    assert not redis_outcome_matches("none", 20, 20, 20, {"success": 20})
    assert not redis_outcome_matches("none", 20, 18, 0, {"crashed": 20})
