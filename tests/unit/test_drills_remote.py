"""What the drills send to a fleet host's compose stack: Docker commands over SSH, in the shape Docker takes.

No Docker engine runs on this machine (only the client), so `ComposeHandle` is driven here through a host
that records each command and answers what `docker compose ps` / `redis-cli` / `date` would print; the same
target over a real sshd against real n8n is tests/integration/test_drills_ssh.py with the loopback stack.
The override file and service names are checked against the compose file `render_bundle` writes.
"""

from __future__ import annotations

import json
import re
import shlex
import signal
from pathlib import Path

import pytest
import yaml

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.bundle.render import render_bundle
from n8n_sizer.bundle.secrets import generate_secrets
from n8n_sizer.hosts.host import CommandResult
from n8n_sizer.stack.handle import StackError
from n8n_sizer.stack.remote import REDIS_COMMAND, ComposeHandle, compose_service

SETUP = Setup(mode="queue", workers=2)


class RecordingHost:
    """Records commands; answers by the first matching pattern (what the Docker CLI would print)."""

    name = "cx33-queue"

    def __init__(self, answers: dict[str, tuple[int, str]] | None = None) -> None:
        self.commands: list[str] = []
        self.answers = {
            **(answers or {}),
            r"docker compose ps -aq (\S+)": (0, "c0ffee{0}\n"),
            r"date -u": (0, "2026-11-30T18:00:00.123456789Z\n"),
        }

    def run(self, command: str, timeout_s: float, check: bool = True) -> CommandResult:
        assert timeout_s > 0
        self.commands.append(command)
        code, out = 0, ""
        for pattern, (answer_code, answer) in self.answers.items():
            found = re.search(pattern, command)
            if found:
                code, out = answer_code, answer.format(*found.groups())
                break
        return CommandResult(host=self.name, command=command, exit_code=code, stdout=out, stderr="", duration_s=0.0)


def _target(answers=None) -> tuple[ComposeHandle, RecordingHost]:
    host = RecordingHost(answers)
    return ComposeHandle("cx33-queue", host, SETUP), host


def _rendered_compose() -> dict:
    return yaml.safe_load(render_bundle(SETUP, generate_secrets()).compose)


def test_every_drilled_process_is_a_service_of_the_rendered_stack() -> None:
    services = _rendered_compose()["services"]
    target, _ = _target()
    assert target.process_names == ["postgres", "redis", "main", "worker-1", "worker-2"]
    for name in target.process_names:
        assert compose_service(name) in services
    with pytest.raises(StackError):
        compose_service("runner-main")


def test_the_aof_redis_command_is_the_rendered_one() -> None:
    """Drift guard: the drill's AOF command is what the template runs, so a plain start changes nothing."""
    assert _rendered_compose()["services"]["n8n-redis"]["command"] == REDIS_COMMAND["aof"]
    assert (
        "--appendonly" in REDIS_COMMAND["none"]
        and REDIS_COMMAND["none"][REDIS_COMMAND["none"].index("--save") + 1] == ""
    )


def test_kill_stop_pause_are_dockers_own_actions() -> None:
    target, host = _target()
    target.kill_worker(1)
    assert target.stop_process("worker-2", timeout_s=40) is False  # no exit code 137: n8n stopped by itself
    target.signal("redis", signal.SIGSTOP)
    target.signal("redis", signal.SIGCONT)
    target.signal("main", signal.SIGTERM)
    actions = [c.split(" && ", 1)[1] for c in host.commands if "ps -aq" not in c]
    assert actions == [
        "docker kill c0ffeen8n-worker-1",
        "docker stop -t 40 c0ffeen8n-worker-2",
        "docker inspect -f '{{.State.ExitCode}}' c0ffeen8n-worker-2",
        "docker pause c0ffeen8n-redis",
        "docker unpause c0ffeen8n-redis || true",
        "docker kill -s SIGTERM c0ffeen8n-main",
    ]
    assert all(c.startswith("cd /opt/n8n && ") for c in host.commands)


def test_a_stop_that_docker_had_to_force_says_so() -> None:
    """`docker stop` SIGKILLs after its grace: the container exits 137, and the stop reports it was forced."""
    target, _ = _target({r"docker inspect -f '\{\{\.State\.ExitCode\}\}' c0ffeen8n-worker-1": (0, "137\n")})
    assert target.stop_process("worker-1", timeout_s=5) is True
    target, _ = _target({r"docker inspect -f '\{\{\.State\.ExitCode\}\}' c0ffeen8n-worker-1": (0, "0\n")})
    assert target.stop_process("worker-1", timeout_s=5) is False


def test_a_start_with_other_settings_recreates_from_an_override_then_back() -> None:
    target, host = _target()
    target.start_process("worker-2", {"N8N_ENCRYPTION_KEY": "another-key"}, wait=False)
    command = host.commands[-1]
    assert command.endswith("docker compose -f docker-compose.yml -f drill-override.yml up -d --no-deps n8n-worker-2")
    written = shlex.split(command.split(" && ", 1)[1].split(" > ")[0])[2]
    override = yaml.safe_load(written)  # JSON, read as compose reads it: YAML
    assert override == {
        "services": {"n8n-worker-2": {"environment": {"N8N_ENCRYPTION_KEY": "another-key"}, "restart": "no"}}
    }
    target.start_process("worker-2", wait=False)  # no overrides: the stack's file alone recreates it as rendered
    assert host.commands[-1] == "cd /opt/n8n && docker compose up -d --no-deps n8n-worker-2"


def test_redis_without_persistence_stays_so_until_switched_back() -> None:
    target, host = _target()
    target.start_process("redis", redis_persistence="none", wait=False)
    target.start_process("redis", wait=False)  # restore while the drill runs without persistence
    for command in host.commands[-2:]:
        written = shlex.split(command.split(" && ", 1)[1].split(" > ")[0])[2]
        assert yaml.safe_load(written) == {
            "services": {"n8n-redis": {"command": REDIS_COMMAND["none"], "restart": "no"}}
        }
    target.start_process("redis", redis_persistence="aof", wait=False)
    assert host.commands[-1] == "cd /opt/n8n && docker compose up -d --no-deps n8n-redis"


def test_restart_redis_kills_then_starts_and_waits_for_ping() -> None:
    target, host = _target()
    target.restart_redis("aof")
    actions = [c.split(" && ", 1)[1] for c in host.commands if "ps -aq" not in c]
    assert actions[:2] == ["docker kill c0ffeen8n-redis", "docker compose up -d --no-deps n8n-redis"]
    assert actions[2] == "docker compose exec -T n8n-redis redis-cli ping"


def test_running_is_dockers_state() -> None:
    target, host = _target({r"inspect .* c0ffeen8n-worker-1": (0, "true\n"), r"inspect": (0, "false\n")})
    assert target.is_running("worker-1") and not target.is_running("worker-2")
    assert host.commands[1] == "cd /opt/n8n && docker inspect -f '{{.State.Running}}' c0ffeen8n-worker-1"


def test_readiness_is_the_services_own_healthcheck() -> None:
    services = _rendered_compose()["services"]
    target, host = _target({r"exec -T n8n-worker-1 ": (1, "")})
    assert target.is_ready("main") and not target.is_ready("worker-1")
    assert "wget -qO- http://127.0.0.1:5678/healthz/readiness" in host.commands[0]
    assert host.commands[0].split("n8n-main ", 1)[1] in " ".join(services["n8n-main"]["healthcheck"]["test"])
    assert host.commands[1].split("n8n-worker-1 ", 1)[1] in " ".join(services["n8n-worker-1"]["healthcheck"]["test"])


def test_redis_commands_run_in_the_container_with_its_own_auth() -> None:
    target, host = _target(
        {r"redis-cli -2 --json LLEN": (0, "20\n"), r"CONFIG GET": (0, '["appendonly","yes"]\n'), r"ZCARD": (1, "")}
    )
    assert target.redis("LLEN", "bull:jobs:wait") == 20
    assert target.redis("CONFIG", "GET", "appendonly") == ["appendonly", "yes"]
    assert host.commands[0] == "cd /opt/n8n && docker compose exec -T n8n-redis redis-cli -2 --json LLEN bull:jobs:wait"
    assert not any("REDIS_PASSWORD" in c or "-a " in c for c in host.commands)  # REDISCLI_AUTH is in the container
    with pytest.raises(StackError, match="redis-cli ZCARD"):
        target.redis("ZCARD", "bull:jobs:failed")


def test_log_marks_read_the_services_logs_since_the_hosts_clock() -> None:
    target, host = _target({r"docker compose logs": (0, "old? no\nWorker started execution 7 (job 7)\n\n")})
    mark = target.log_mark("worker-2")
    assert mark.find(r"Worker started execution 7") == ["Worker started execution 7 (job 7)"]
    assert host.commands[-1] == (
        "cd /opt/n8n && docker compose logs --no-color --no-log-prefix "
        "--since 2026-11-30T18:00:00.123456789Z n8n-worker-2 2>&1"
    )


def test_wrong_key_on_compose_is_a_new_container(tmp_path: Path) -> None:
    target, _ = _target()
    ((variant, env),) = target.wrong_key_variants()
    assert "fresh folder" in variant and env == {}
    # workers have no volume in the rendered stack: a recreated worker starts with an empty user folder
    assert "volumes" not in _rendered_compose()["services"]["n8n-worker-2"]


def test_missing_container_is_a_drill_failure() -> None:
    target, _ = _target({r"docker compose ps -aq": (0, "")})
    with pytest.raises(StackError, match="no container for n8n-worker-1"):
        target.kill_worker(1)


def test_json_override_is_valid_yaml_for_awkward_values() -> None:
    target, host = _target()
    target.start_process("main", {"N8N_DEFAULT_BINARY_DATA_MODE": "filesystem", "ODD": "it's: {a} # b"}, wait=False)
    written = shlex.split(host.commands[-1].split(" && ", 1)[1].split(" > ")[0])[2]
    assert yaml.safe_load(written)["services"]["n8n-main"]["environment"]["ODD"] == "it's: {a} # b"
    assert json.loads(written) == yaml.safe_load(written)


def test_a_host_lost_mid_drill_says_how_to_put_the_stack_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from n8n_sizer import drills
    from n8n_sizer.cli.drill import _run_one
    from n8n_sizer.drills.common import DrillContext
    from n8n_sizer.hosts.host import ConnectionLost, HostError
    from n8n_sizer.n8n.client import N8nSession, OwnerLogin

    def lost(ctx):
        raise ConnectionLost("cx33-queue: the SSH connection to root@192.0.2.10:22 dropped")

    monkeypatch.setitem(drills.DRILLS, "kill-worker", lost)
    target, _ = _target({r"docker inspect": (0, "true\n")})  # restore before the drill: everything runs
    ctx = DrillContext(
        stack=target, session=N8nSession(base_url="http://127.0.0.1:9", owner=OwnerLogin.generate(), api_key="unused")
    )
    with pytest.raises(HostError) as raised:
        _run_one("kill-worker", ctx, tmp_path, "both", json_out=False)
    message = str(raised.value)
    assert message.startswith("cx33-queue: the SSH connection to root@192.0.2.10:22 dropped; drill kill-worker")
    assert "`cd /opt/n8n && docker compose up -d` on the host" in message and "\n" not in message
    (folder,) = tmp_path.iterdir()
    assert json.loads((folder / "run.json").read_text())["extra"]["verdict"] == "incomplete"
