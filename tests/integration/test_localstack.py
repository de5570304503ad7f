"""Real n8n (npm), Debian's Postgres and Redis started natively by `LocalStack`, set up over HTTP.

- regular (SQLite) and queue (1 worker, Postgres, Redis): a workflow is created and activated, N webhook
  calls answer 200 with the computed result, and n8n stored exactly as many successful executions;
- the queue stack's worker runs the code-heavy workflow (Code loop -> Wait -> Set), and main and the worker
  ran Bull as n8n's own Redis ACL user: no command, key or channel of theirs denied (ACL LOG empty), and that
  user cannot FLUSHALL, CONFIG, KEYS or read outside its prefixes;
- `python -m n8n_sizer.remote.native_stack up` starts a detached stack (own sessions, alive after `up` exits,
  pinned with `--cpus 1`),
  `status`, `signal`, `start-process` and `down` work, and after `down` none of its PIDs runs;
- a start that fails half way (or is interrupted by Ctrl-C) stops what it had started;
- a port taken between choosing it and binding it is chosen anew.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.n8n.client import ExecutionCounts, N8nApiError, N8nClient
from n8n_sizer.native import ports as native_ports
from n8n_sizer.native import services
from n8n_sizer.native.redis import RedisError, redis_command
from n8n_sizer.native.services import ServiceError
from n8n_sizer.native.stack import LocalStack, StackOptions

pytestmark = pytest.mark.integration

LOCALSTACK = [sys.executable, "-m", "n8n_sizer.remote.native_stack"]


def wait_counts(client: N8nClient, workflow_id: str, expected: int, timeout_s: float = 60) -> ExecutionCounts:
    """Executions are written as they finish: wait until `expected` are stored and none still runs."""
    deadline = time.monotonic() + timeout_s
    while True:
        counts = client.count_executions(workflow_id)
        settled = counts.total >= expected and not {"new", "running"} & counts.by_status.keys()
        if settled or time.monotonic() > deadline:
            return counts
        time.sleep(0.5)


def call_light(url: str, n: int) -> list[httpx.Response]:
    with httpx.Client(timeout=60) as http, ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(lambda i: http.post(url, json={"number": i}), range(n)))


@pytest.mark.parametrize("fixture_name", ["regular_stack", "queue_stack"])
def test_light_workflow_every_200_is_a_stored_execution(fixture_name, request):
    running = request.getfixturevalue(fixture_name)
    workflow_id, url = running.deploy("light")
    responses = call_light(url, 20)
    assert [r.status_code for r in responses] == [200] * 20, [r.text[:200] for r in responses if r.status_code != 200]
    assert [r.json()["doubled"] for r in responses] == [2 * i for i in range(20)]
    with running.client() as client:
        counts = wait_counts(client, workflow_id, 20)
    assert counts.total == 20 and counts.by_status == {"success": 20}
    with running.client() as client:  # pages of 7 (3 pages, `nextCursor` followed) give the same answer
        executions = client.list_executions(workflow_id, page_size=7)
        assert len({e["id"] for e in executions}) == 20 and client.count_executions(workflow_id, page_size=7) == counts
        assert client.execution_status(executions[0]["id"]) == "success"


def test_queue_worker_runs_code_heavy(queue_stack):
    workflow_id, url = queue_stack.deploy("code-heavy")
    with httpx.Client(timeout=60) as http:
        answers = [http.post(url, json={}) for _ in range(2)]
    assert [a.status_code for a in answers] == [200, 200]
    # Code loop (~0.19 s CPU) -> Wait 0.5 s -> Set: the Set node's field arrives with the loop's result.
    assert all(a.json()["done"] is True and a.json()["x"] == 38197 for a in answers)
    with queue_stack.client() as client:
        assert wait_counts(client, workflow_id, 2).by_status == {"success": 2}
    # The worker executed them, not main: its log names the jobs.
    assert "Worker started execution" in queue_stack.stack.log_tail("worker-1", 200)
    # n8n read N8N_EXECUTIONS_QUEUE_KEEP_LAST_COMPLETED: Bull kept the finished jobs (n8n's 0 deletes
    # them at once, and main can then wait forever on a fast one; advisor/settings.py).
    stack = queue_stack.stack
    assert redis_command(stack.redis_port, stack.secrets.redis_password, "ZCARD", "bull:jobs:completed") >= 2
    assert_n8n_ran_bull_as_its_own_redis_user(stack)


def assert_n8n_ran_bull_as_its_own_redis_user(stack: LocalStack) -> None:
    """Main and the worker ran Bull (jobs added, taken, completed; pub/sub) as n8n's ACL user with the rendered
    rules (`bundle.n8n_env.redis_acl_user`): every n8n connection is that user, Redis denied none of their
    commands, keys or channels (ACL LOG), and the user cannot FLUSHALL, reconfigure or read outside its keys."""
    admin = stack.secrets.redis_password

    def as_admin(*args: str):
        return redis_command(stack.redis_port, admin, *args)

    listed = as_admin("CLIENT", "LIST").splitlines()
    clients = [dict(f.split("=", 1) for f in line.split() if "=" in f) for line in listed]
    users = [c["user"] for c in clients if c.get("cmd") != "client|list"]  # leave out this very connection
    assert users and set(users) == {"n8n"}, users  # main and the worker: queue, blocking and pub/sub clients
    assert len(users) >= 4, users
    denied = as_admin("ACL", "LOG")
    assert denied == [], denied  # nothing n8n 2.41.1 and Bull did was refused
    n8n_pw = stack.secrets.redis_n8n_password

    def as_n8n(*args: str):
        return redis_command(stack.redis_port, n8n_pw, *args, user="n8n")

    assert as_n8n("LLEN", "bull:jobs:wait") == 0  # its own keys it reads
    for forbidden in (
        ("FLUSHALL",),
        ("CONFIG", "GET", "requirepass"),
        ("KEYS", "*"),
        ("GET", "not-n8n:key"),
        ("ACL", "LIST"),
    ):
        with pytest.raises(RedisError, match="NOPERM"):
            as_n8n(*forbidden)
    with pytest.raises(RedisError):  # the default user's password is not n8n's
        redis_command(stack.redis_port, n8n_pw, "PING")


def test_api_errors_name_url_status_and_body(regular_stack):
    with regular_stack.client(login=True) as client:
        with pytest.raises(N8nApiError) as caught:
            client.setup_owner(regular_stack.session.owner)  # the owner exists already
        assert caught.value.status == 400
        assert f"POST {regular_stack.main_url}/rest/owner/setup: HTTP 400" in str(caught.value)
        assert "owner" in str(caught.value).lower()
        assert client.get_workflow_editor(regular_stack.deploy("light")[0]) > 0


def test_detached_up_signal_restart_down(tmp_path):
    state = tmp_path / "stack"
    # `up` in its own session stands for an SSH session that ends right after the command.
    up = subprocess.run(
        [*LOCALSTACK, "up", "--mode", "queue", "--workers", "1", "--cpus", "1", "--state", str(state)],
        capture_output=True,
        text=True,
        timeout=300,
        start_new_session=True,
    )
    try:
        assert up.returncode == 0, up.stderr[-2000:]
        printed = json.loads(up.stdout)
        secrets_file = json.loads((state / "secrets.json").read_text())
        assert secrets_file["redis_password"] not in up.stdout and secrets_file["encryption_key"] not in up.stdout
        assert oct((state / "secrets.json").stat().st_mode & 0o777) == "0o600"
        procs = printed["processes"]
        assert set(procs) == {"postgres", "redis", "main", "worker-1"}
        for proc in procs.values():  # alive after `up` exited, each the leader of its own session
            assert services.process_start_ticks(proc["pid"]) == proc["start_ticks"]
            assert os.getsid(proc["pid"]) == proc["pid"]
            for pid in services.group_pids(proc["pid"]):  # --cpus 1: taskset onto core 0, children included
                assert "Cpus_allowed_list:\t0\n" in Path(f"/proc/{pid}/status").read_text()
        assert httpx.get(printed["main_url"] + "/healthz/readiness").status_code == 200
        status = subprocess.run(
            [*LOCALSTACK, "status", "--state", str(state)], capture_output=True, text=True, timeout=60
        )
        assert status.returncode == 0 and json.loads(status.stdout)["healthy"] == {"main": True, "worker-1": True}

        killed = subprocess.run(
            [*LOCALSTACK, "signal", "--state", str(state), "--process", "worker-1"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert json.loads(killed.stdout)["sent"] is True
        status = subprocess.run(
            [*LOCALSTACK, "status", "--state", str(state)], capture_output=True, text=True, timeout=60
        )
        assert status.returncode == 1 and json.loads(status.stdout)["running"]["worker-1"] is False
        again = subprocess.run(
            [*LOCALSTACK, "start-process", "--state", str(state), "--process", "worker-1"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert again.returncode == 0, again.stderr[-2000:]
        new_worker = json.loads(again.stdout)["pid"]
        assert new_worker != procs["worker-1"]["pid"]
        # the restarted worker runs its JS task runner; main runs none in queue mode, where manual executions
        # go to the workers too (OFFLOAD_MANUAL_EXECUTIONS_TO_WORKERS, bundle/n8n_env.py), so it never executes
        assert len(services.group_pids(new_worker)) >= 2
    finally:
        down = subprocess.run([*LOCALSTACK, "down", "--state", str(state)], capture_output=True, text=True, timeout=300)
    assert down.returncode == 0, down.stderr[-2000:]
    final = json.loads((state / "state.json").read_text())["processes"]
    for proc in final.values():
        assert services.process_start_ticks(proc["pid"]) != proc["start_ticks"], f"{proc['name']} still runs"
        assert services.group_pids(proc["pid"]) == [], f"{proc['name']}'s children still run"
    assert "worker-1" in final and final["worker-1"]["pid"] == new_worker
    # Postgres ran outside the private tmp_path; `down` brought its data back into the folder.
    assert (state / "postgres" / "data" / "PG_VERSION").is_file() and not (state / "postgres").is_symlink()


def test_failed_start_stops_what_had_started(n8n_install):
    # An unknown module name makes main exit at start, after Postgres came up.
    options = StackOptions(extra_env={"N8N_DISABLED_MODULES": "no-such-module"})
    stack = LocalStack(Setup(mode="regular"), options, install=n8n_install)
    with pytest.raises(ServiceError) as caught:
        stack.start()
    assert "main exited before ready" in str(caught.value)
    assert "no-such-module" in str(caught.value)  # the log tail says why
    assert set(stack.processes) == {"postgres", "main"}
    for proc in stack.processes.values():
        assert not services.is_running(proc) and services.group_pids(proc.pid) == []


def test_ports_taken_before_binding_are_chosen_anew(n8n_install, monkeypatch):
    # Steer the first choice of ports onto ports this test holds, as another test run or an outgoing
    # connection's ephemeral port would: Postgres and n8n really fail to bind and get new ports.
    held: list[socket.socket] = []
    choose = native_ports.unique_ports

    def first_choice_taken(count: int) -> list[int]:
        ports = choose(count)
        if not held:
            for port in ports:
                sock = socket.socket()
                sock.bind(("127.0.0.1", port))
                sock.listen()
                held.append(sock)
        return ports

    monkeypatch.setattr(native_ports, "unique_ports", first_choice_taken)
    try:
        with LocalStack(Setup(mode="regular"), install=n8n_install) as stack:
            taken = {sock.getsockname()[1] for sock in held}
            assert stack.postgres_port not in taken and stack.ports["main"].http not in taken
            assert httpx.get(stack.health_url("main")).status_code == 200
            assert "already in use" in stack.log_path("main").read_text()
    finally:
        for sock in held:
            sock.close()


def test_ctrl_c_during_start_stops_what_had_started(tmp_path, n8n_install):
    state = tmp_path / "stack"
    script = (
        "import sys; from pathlib import Path; from n8n_sizer.advisor.setup import Setup; "
        "from n8n_sizer.native.stack import LocalStack; "
        "LocalStack(Setup(mode='queue', workers=1), stack_dir=Path(sys.argv[1])).start(); print('started')"
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", script, str(state)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # Ctrl-C once main was spawned, while it is still starting
            if (state / "state.json").exists() and "main" in json.loads((state / "state.json").read_text())[
                "processes"
            ]:
                break
            time.sleep(0.05)
        os.kill(owner.pid, signal.SIGINT)
        out, err = owner.communicate(timeout=120)
    finally:
        if owner.poll() is None:
            owner.kill()
    assert "KeyboardInterrupt" in err and "started" not in out
    processes = json.loads((state / "state.json").read_text())["processes"]
    assert {"postgres", "redis", "main"} <= set(processes)
    for proc in processes.values():
        assert services.process_start_ticks(proc["pid"]) != proc["start_ticks"], f"{proc['name']} still runs"
        assert services.group_pids(proc["pid"]) == []
    assert not (state / "postgres").is_symlink()  # data brought back into the folder, nothing left in /tmp
