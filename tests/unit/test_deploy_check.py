"""check_compose: the good fixture passes, each broken fixture fails exactly its rule; parsing details."""

from __future__ import annotations

from pathlib import Path

import pytest

from n8n_sizer.bundle.checks.one_host import RULES, check_compose
from n8n_sizer.bundle.composefile import duration_s, interpolate, load_compose
from n8n_sizer.bundle.secrets import parse_env_text
from n8n_sizer.errors import InputError

DATA = Path(__file__).resolve().parent.parent / "data" / "compose"
ENV = parse_env_text((DATA / "good.env").read_text())
ENV_FILES = {"n8n.env": parse_env_text((DATA / "n8n.env").read_text())}


def _check(name: str, env: dict | None = None, **kwargs):
    kwargs.setdefault("vcpu", 4)
    kwargs.setdefault("longest_execution_s", 60)
    kwargs.setdefault("ram_mib", 8192)
    kwargs.setdefault("env_files", ENV_FILES)
    return check_compose((DATA / name).read_text(), ENV if env is None else env, **kwargs)


def test_good_fixture_passes_every_rule() -> None:
    results = _check("good-queue.yml")
    assert [r.rule for r in results] == list(RULES)
    assert {r.rule: r.status for r in results} == {rule: "pass" for rule in RULES}


def test_there_is_a_broken_fixture_for_every_rule() -> None:
    assert sorted(p.stem.removeprefix("broken-") for p in DATA.glob("broken-*.yml")) == sorted(RULES)


@pytest.mark.parametrize("rule", sorted(RULES))
def test_broken_fixture_fails_exactly_its_rule(rule: str) -> None:
    results = _check(f"broken-{rule}.yml")
    failed = [r for r in results if r.status == "fail"]
    assert [r.rule for r in failed] == [rule], [(r.rule, r.message) for r in failed]
    assert failed[0].fix and failed[0].message


def test_unresolved_variables_are_reported_not_guessed() -> None:
    results = {r.rule: r for r in _check("good-queue.yml", env={})}
    assert results["variables"].status == "fail"
    for name in ("N8N_ENCRYPTION_KEY", "POSTGRES_PASSWORD", "RUNNERS_AUTH_TOKEN"):
        assert name in results["variables"].message
    # the same unresolved reference on main and worker is still one key
    assert results["encryption-key"].status == "pass"


def test_env_file_that_was_not_read_is_reported() -> None:
    results = {r.rule: r for r in _check("good-queue.yml", env_files={})}
    assert "env_file:n8n.env" in results["variables"].message
    assert results["pruning"].status == "fail"  # its limits live in that file


def test_workers_vs_cores_needs_vcpu() -> None:
    results = {r.rule: r for r in _check("broken-workers-vs-cores.yml", vcpu=None)}
    assert results["workers-vs-cores"].status == "n/a"
    assert {r.rule: r for r in _check("broken-workers-vs-cores.yml", vcpu=8)}["workers-vs-cores"].status == "pass"


def test_longest_execution_above_the_shutdown_timeout_fails() -> None:
    results = {r.rule: r for r in _check("good-queue.yml", longest_execution_s=600)}
    assert results["shutdown-timeout"].status == "fail"
    assert "600 s" in results["shutdown-timeout"].message


def test_regular_sqlite_stack_has_rules_that_do_not_apply() -> None:
    text = """
services:
  n8n:
    image: n8nio/n8n:latest
    ports: ["5678:5678"]
    environment: {N8N_METRICS: "true"}
"""
    results = {r.rule: r for r in check_compose(text)}
    assert results["redis-noeviction"].status == "n/a"
    assert results["postgres-pool"].status == "n/a"
    assert results["worker-concurrency"].status == "n/a"
    assert results["images-pinned"].status == "fail" and "latest" in results["images-pinned"].message
    assert results["metrics-public"].status == "fail"
    assert results["shutdown-timeout"].status == "fail"  # Docker's 10 s default < n8n's 30 s


def test_not_a_compose_file_is_an_input_error() -> None:
    with pytest.raises(InputError, match="services"):
        check_compose("just: text\n")
    with pytest.raises(InputError, match="YAML"):
        check_compose("services: [\n")


def test_interpolation_follows_compose() -> None:
    missing: set[str] = set()
    env = {"A": "1", "E": ""}
    assert interpolate("$A ${A} $$A ${B:-d} ${E:-d} ${E-d} ${A:+x} ${B:+x}", env, missing) == "1 1 $A d d  x "
    assert missing == set()
    assert interpolate("${B} ${C:?need C}", env, missing) == "${B} ${C:?need C}"
    assert missing == {"B", "C"}


def test_ports_and_durations_are_parsed() -> None:
    text = """
services:
  a:
    image: x:1.2.3
    ports: ["127.0.0.1:5678:5678", "9000:5679/tcp", {target: 80, host_ip: "::1"}, "5680"]
    stop_grace_period: 1m30s
"""
    service = load_compose(text).services[0]
    assert [(p.container_port, p.public) for p in service.ports] == [
        (5678, False),
        (5679, True),
        (80, False),
        (5680, True),
    ]
    assert service.stop_grace_s == 90
    assert duration_s("500ms") == 0.5 and duration_s("2h") == 7200 and duration_s("soon") is None


def test_an_unreadable_worker_concurrency_is_named_not_read_as_zero() -> None:
    text = (DATA / "good-queue.yml").read_text()
    assert "--concurrency 10" in text
    results = {
        r.rule: r
        for r in check_compose(
            text.replace("--concurrency 10", "--concurrency ten", 1),
            ENV,
            vcpu=4,
            longest_execution_s=60,
            env_files=ENV_FILES,
        )
    }
    failed = results["worker-concurrency"]
    assert failed.status == "fail" and "not a whole number" in failed.message and "=0" not in failed.message


@pytest.mark.parametrize(
    "old, new, said",
    [
        ("QUEUE_BULL_REDIS_USERNAME: n8n", "QUEUE_BULL_REDIS_USERNAME: bull", "which no --user of Redis defines"),
        ("QUEUE_BULL_REDIS_USERNAME: n8n", "QUEUE_BULL_REDIS_USERNAME: default", "as the default user"),
        ("~bull:* ~n8n:*", "~*", "may use every key or command"),
        (" -@dangerous", "", "may use every key or command"),
    ],
)
def test_redis_acl_fails_a_login_that_is_not_n8n_s_own_limited_user(old: str, new: str, said: str) -> None:
    text = (DATA / "good-queue.yml").read_text()
    assert old in text
    results = {
        r.rule: r
        for r in check_compose(text.replace(old, new), ENV, vcpu=4, longest_execution_s=60, env_files=ENV_FILES)
    }
    assert results["redis-acl"].status == "fail" and said in results["redis-acl"].message
    assert "--user n8n on" in results["redis-acl"].fix


def test_the_rendered_queue_stack_passes_redis_acl_and_its_user_is_the_one_n8n_gets() -> None:
    from n8n_sizer.advisor.setup import Setup
    from n8n_sizer.bundle.n8n_env import REDIS_N8N_RULES
    from n8n_sizer.bundle.render import render_bundle
    from n8n_sizer.bundle.secrets import generate_secrets

    bundle = render_bundle(Setup(mode="queue", workers=2), generate_secrets())
    env = parse_env_text(bundle.env)
    results = {r.rule: r for r in check_compose(bundle.compose, env, vcpu=4)}
    assert results["redis-acl"].status == "pass", results["redis-acl"].message
    compose = load_compose(bundle.compose, env)
    redis = compose.by_role("redis")[0]
    at = redis.command.index("--user")
    assert redis.command[at + 1 : at + 4] == ["n8n", "on", ">" + env["REDIS_N8N_PASSWORD"]]
    assert tuple(redis.command[at + 4 : at + 4 + len(REDIS_N8N_RULES)]) == REDIS_N8N_RULES
    assert redis.command[redis.command.index("--requirepass") + 1] == env["REDIS_PASSWORD"]
    assert env["REDIS_PASSWORD"] != env["REDIS_N8N_PASSWORD"]
    for s in compose.n8n:
        assert s.env["QUEUE_BULL_REDIS_USERNAME"] == "n8n"
        assert s.env["QUEUE_BULL_REDIS_PASSWORD"] == env["REDIS_N8N_PASSWORD"]
