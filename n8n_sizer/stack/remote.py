"""Stack handles on a host reached over SSH (Fabric): a loopback or lab host whose stack
`python -m n8n_sizer.remote.native_stack` runs (`SshNativeHandle`), or a fleet host's compose stack that cloud-init
started (`ComposeHandle`). n8n's API and webhooks are reached directly on this machine's loopback, else through
an SSH tunnel to main's port (5678 is open only to the load generator); everything else is a command on the host.
"""

from __future__ import annotations

import json
import shlex
import signal as signals
import time
from contextlib import ExitStack
from ipaddress import ip_address
from pathlib import Path
from typing import Any

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.bundle.limits import redis_maxmemory_mib
from n8n_sizer.bundle.n8n_env import REDIS_N8N_PASSWORD_REF, redis_acl_user
from n8n_sizer.hosts.host import Host, HostError, SshHost
from n8n_sizer.remote.protocol import Program, run
from n8n_sizer.stack.bringup import native_up_args, wait_compose_stack
from n8n_sizer.stack.handle import FetchedLogMark, LogMark, StackError, StackHandle, wait_until

TUNNEL_HOST = "127.0.0.1"


class SshNativeHandle(StackHandle):
    """A stack that `remote.native_stack` runs on the host; one command per action."""

    def __init__(
        self, name: str, host: Host, setup: Setup, state_dir: str, extra_env: dict[str, str] | None = None
    ) -> None:
        self.name, self.host, self.setup, self.state_dir = name, host, setup, state_dir
        self.extra_env = dict(extra_env or {})
        self.state: dict[str, Any] = {}
        self.main_url = ""
        self._main_port: int | None = None

    # --- the stack's life ---------------------------------------------------------------------------

    def _cli(self, command: str, *args: str, timeout_s: float = 120.0, check: bool = True) -> dict:
        """One command of the native stack's program on the host (`remote.Program.NATIVE_STACK`); its result, or
        {} when an unchecked command printed none."""
        return (
            run(
                self.host,
                Program.NATIVE_STACK,
                [command, "--state", self.state_dir, *args],
                timeout_s=timeout_s,
                check=check,
            )
            or {}
        )

    def up(self, exits: ExitStack, attach: bool = False) -> str:
        """Start the stack (the setup, `extra_env`) detached on the host, or with `attach` take over the one a
        dropped session left running (--resume); `exits` stops it. Main is reached directly when the host is
        this machine's loopback, else through an SSH tunnel."""
        exits.callback(self.down)  # registered before the tunnel: runs after it closed
        if attach:
            self.state = self._cli("status", timeout_s=60)
        else:
            env = [a for key, value in self.extra_env.items() for a in ("--env", f"{key}={value}")]
            self.state = self._cli("up", *shlex.split(native_up_args(self.setup)), *env, timeout_s=900)
        if "main_url" not in self.state:
            raise HostError(
                f"{self.name}: `native_stack {'status' if attach else 'up'}` printed no state with main_url"
            )
        self._main_port = int(self.state["main_url"].rsplit(":", 1)[1])
        self.main_url = _tunnel(self.host, self._main_port, exits)
        return self.main_url

    def bookkeeping(self) -> dict[str, Any]:
        return {"stack_dir": self.state_dir}

    def sampler_args(self, n8n_metrics: bool) -> dict[str, Any] | None:
        if not _is_loopback(self.host):
            return None  # the sampler reads the stack's state file: only where it is this machine's
        from n8n_sizer.native.stack import LocalStack
        from n8n_sizer.stack.sampling import local_stack_telemetry

        return local_stack_telemetry(LocalStack.attach(Path(self.state_dir)), n8n_metrics=n8n_metrics)

    def down(self) -> None:
        """Stop the stack by its state file's PIDs; nothing to do when `up` failed before writing one."""
        if self.host.run(f"test -f {shlex.quote(self.state_dir)}/state.json", timeout_s=30, check=False).exit_code == 0:
            self._cli("down", timeout_s=180)

    def _refresh(self) -> None:
        self.state = self._cli("status", check=False)
        port = int(self.state["main_url"].rsplit(":", 1)[1])
        if port != self._main_port:  # the tunnel points at the old port: nothing a drill says would hold
            raise StackError(f"{self.name}: main came back on port {port} instead of {self._main_port}")

    # --- StackHandle ------------------------------------------------------------------------------

    @property
    def process_names(self) -> list[str]:
        return list(self.state.get("processes", {}))

    @property
    def stall_settings(self) -> dict[str, str]:
        return {k: v for k, v in self.extra_env.items() if k.startswith("QUEUE_WORKER_")}

    def is_running(self, name: str) -> bool:
        return bool(self._cli("status", check=False).get("running", {}).get(name))

    def is_ready(self, name: str) -> bool:
        return bool(self._cli("status", check=False).get("healthy", {}).get(name))

    def wait_ready(self, name: str, timeout_s: float | None = None) -> float:
        args = ["--process", name] + (["--timeout", f"{timeout_s:g}"] if timeout_s else [])
        return float(self._cli("wait-ready", *args, timeout_s=(timeout_s or 180) + 30)["ready_after_s"])

    def stop_process(self, name: str, timeout_s: float | None = None) -> bool:
        args = ["--process", name] + (["--timeout", f"{timeout_s:g}"] if timeout_s is not None else [])
        return bool(self._cli("stop-process", *args, timeout_s=(timeout_s or 120) + 30).get("forced"))

    def start_process(
        self,
        name: str,
        env_overrides: dict[str, str] | None = None,
        wait: bool = True,
        redis_persistence: str | None = None,
    ) -> None:
        args = ["--process", name]
        for key, value in (env_overrides or {}).items():
            args += ["--env", f"{key}={value}"]
        if not wait:
            args.append("--no-wait")
        if redis_persistence is not None:
            args += ["--redis-persistence", redis_persistence]
        self._cli("start-process", *args, timeout_s=300)
        self._refresh()

    def signal(self, name: str, sig: int, whole_group: bool = True) -> None:
        args = ["--process", name, "--signal", signals.Signals(sig).name]
        self._cli("signal", *args, *([] if whole_group else ["--no-group"]))

    def restart_redis(self, persistence: str | None = None) -> None:
        self._cli("restart-redis", *(["--redis-persistence", persistence] if persistence else []), timeout_s=120)

    def restart_postgres(self) -> None:
        self._cli("restart-postgres", timeout_s=180)

    def log_mark(self, name: str) -> LogMark:
        path = shlex.quote(f"{self.state_dir}/logs/{name}.log")
        size = self.host.run(f"stat -c %s {path} 2>/dev/null || echo 0", timeout_s=30).stdout.strip() or "0"
        return FetchedLogMark(
            lambda: self.host.run(f"tail -c +{int(size) + 1} {path} 2>/dev/null || true", timeout_s=60).stdout
        )

    def redis(self, *args: str) -> Any:
        return self._cli("redis", *args, timeout_s=30)["reply"]

    def wrong_key_variants(self) -> list[tuple[str, dict[str, str]]]:
        fresh = self.host.run(f"mktemp -d {shlex.quote(self.state_dir)}/wrong-key-XXXXXX", timeout_s=30).stdout.strip()
        return [("fresh folder", {"N8N_USER_FOLDER": fresh}), ("own folder", {})]


# The compose stack's services (templates/compose.yml.j2) by the drills' process names.
def compose_service(name: str) -> str:
    if name in ("main", "redis", "postgres") or (name.startswith("worker-") and name[7:].isdigit()):
        return f"n8n-{name}"
    raise StackError(f"no compose service for process {name!r}")


_REDIS_USERS = ["--requirepass", "${REDIS_PASSWORD}", "--user", *redis_acl_user(REDIS_N8N_PASSWORD_REF)]
# the stack's Redis limit at the default queue depth (the drills' stacks are rendered with it)
_REDIS_LIMIT = ["--maxmemory", f"{redis_maxmemory_mib(None)}mb", "--maxmemory-policy", "noeviction"]
REDIS_COMMAND = {  # templates/compose.yml.j2's n8n-redis command, and the drill's no-persistence variant
    "aof": [
        "redis-server",
        *_REDIS_USERS,
        "--appendonly",
        "yes",
        "--appendfsync",
        "everysec",
        *_REDIS_LIMIT,
    ],
    # its own (never written) RDB file: an older dump.rdb in the volume must not come back as if persisted
    "none": [
        "redis-server",
        *_REDIS_USERS,
        "--appendonly",
        "no",
        "--save",
        "",
        "--dbfilename",
        "drill-no-persistence.rdb",
        *_REDIS_LIMIT,
    ],
}
# What each service's healthcheck asks (templates/compose.yml.j2), run with `docker compose exec`.
READY_COMMAND = {
    "main": "wget -qO- http://127.0.0.1:5678/healthz/readiness",
    "worker": "wget -qO- http://127.0.0.1:5678/healthz",
    "redis": "redis-cli ping",
    "postgres": "pg_isready -U n8n -d n8n",
}


class ComposeHandle(StackHandle):
    """The compose stack cloud-init started in `stack_dir` on a fleet host; Docker's actions over SSH.

    A process with other settings (another key, another binary-data mode, Redis without persistence) is its
    service recreated from the stack's file plus a drill override file (`docker compose -f docker-compose.yml
    -f drill-override.yml up -d --no-deps SERVICE`); the next plain start recreates it from the stack's file
    alone, so `restore` always ends on the stack as rendered. `docker kill` counts as a manual stop: the
    `unless-stopped` restart policy does not bring the container back (moby, daemon/kill.go).
    """

    OVERRIDE = "drill-override.yml"

    def __init__(self, name: str, host: Host, setup: Setup, stack_dir: str = "/opt/n8n") -> None:
        self.name, self.host, self.setup, self.stack_dir = name, host, setup, stack_dir
        self.main_url = ""
        self.redis_persistence = "aof"

    def up(self, exits: ExitStack, attach: bool = False) -> str:
        """cloud-init started the stack: wait for its ready marker and main's readiness (the fleet's stack
        outlives the run: nothing to take down)."""
        self.main_url = wait_compose_stack(self.host, exits)
        return self.main_url

    def sampler_args(self, n8n_metrics: bool) -> dict[str, Any] | None:
        from n8n_sizer.telemetry.probes.containers import compose_stack_probes

        return {"probes": compose_stack_probes(queue=self.setup.mode == "queue", postgres=self.setup.db == "postgres")}

    def _run(self, command: str, timeout_s: float = 120.0, check: bool = True):
        return self.host.run(f"cd {shlex.quote(self.stack_dir)} && {command}", timeout_s=timeout_s, check=check)

    def _container(self, name: str) -> str:
        """The service's container id (running or not); DrillFailed when it has none."""
        out = self._run(f"docker compose ps -aq {compose_service(name)}", timeout_s=60).stdout.split()
        if not out:
            raise StackError(f"{self.name}: the compose stack has no container for {compose_service(name)}")
        return out[0]

    def is_running(self, name: str) -> bool:
        res = self._run(f"docker inspect -f '{{{{.State.Running}}}}' {self._container(name)}", check=False)
        return res.exit_code == 0 and res.stdout.strip() == "true"

    def is_ready(self, name: str) -> bool:
        probe = READY_COMMAND["worker" if name.startswith("worker-") else name]
        res = self._run(f"docker compose exec -T {compose_service(name)} {probe}", timeout_s=30, check=False)
        return res.exit_code == 0

    def wait_ready(self, name: str, timeout_s: float | None = None) -> float:
        started = time.monotonic()
        wait_until(lambda: self.is_ready(name), timeout_s or 180.0, f"{self.name}: {compose_service(name)} ready", 1.0)
        return time.monotonic() - started

    def stop_process(self, name: str, timeout_s: float | None = None) -> bool:
        grace = f" -t {max(int(round(timeout_s)), 0)}" if timeout_s is not None else ""  # else its stop_grace_period
        container = self._container(name)
        self._run(f"docker stop{grace} {container}", timeout_s=(timeout_s or 120) + 60)
        # `docker stop` SIGKILLs after the grace: the container then exits 137 (128 + SIGKILL), else n8n's own code
        code = self._run(f"docker inspect -f '{{{{.State.ExitCode}}}}' {container}", timeout_s=30, check=False)
        return code.stdout.strip() == str(128 + signals.SIGKILL)

    def start_process(
        self,
        name: str,
        env_overrides: dict[str, str] | None = None,
        wait: bool = True,
        redis_persistence: str | None = None,
    ) -> None:
        self._run(self.start_command(name, env_overrides, redis_persistence), timeout_s=300)
        if wait:
            self.wait_ready(name)

    def start_command(
        self, name: str, env_overrides: dict[str, str] | None = None, redis_persistence: str | None = None
    ) -> str:
        """`docker compose up -d --no-deps SERVICE`, with a drill override file written first when the start
        differs from the stack's file (an environment override, or Redis without persistence)."""
        service = compose_service(name)
        if name == "redis" and redis_persistence is not None:
            self.redis_persistence = redis_persistence
        override: dict[str, Any] = {}
        if env_overrides:
            override = {"environment": dict(env_overrides)}
        if name == "redis" and self.redis_persistence != "aof":
            override = {"command": REDIS_COMMAND[self.redis_persistence]}
        if not override:
            return f"docker compose up -d --no-deps {service}"
        # Docker must not bring a container with the drill's settings back by itself (a worker with the wrong
        # key would restart in a loop): only `restore`, from the stack's own file, starts it again
        override["restart"] = "no"
        # compose files are YAML, and JSON is YAML: no quoting of its own to get wrong
        text = json.dumps({"services": {service: override}})
        return (
            f"printf '%s\\n' {shlex.quote(text)} > {self.OVERRIDE} && "
            f"docker compose -f docker-compose.yml -f {self.OVERRIDE} up -d --no-deps {service}"
        )

    def signal(self, name: str, sig: int, whole_group: bool = True) -> None:
        self._run(self.signal_command(sig, self._container(name)), timeout_s=60)

    @staticmethod
    def signal_command(sig: int, container: str) -> str:
        if sig == signals.SIGKILL:
            return f"docker kill {container}"
        if sig == signals.SIGSTOP:  # the cgroup freezer: every process of the container stops, as SIGSTOP does
            return f"docker pause {container}"
        if sig == signals.SIGCONT:
            return f"docker unpause {container} || true"  # not paused: nothing to do
        return f"docker kill -s {signals.Signals(sig).name} {container}"

    def restart_redis(self, persistence: str | None = None) -> None:
        self.signal("redis", signals.SIGKILL)
        self.start_process("redis", redis_persistence=persistence)

    def restart_postgres(self) -> None:
        # the postgres image's STOPSIGNAL is SIGINT: a fast shutdown, as the local drill's
        self._run(f"docker restart {self._container('postgres')}", timeout_s=180)
        self.wait_ready("postgres")

    def log_mark(self, name: str) -> LogMark:
        since = self._run("date -u +%Y-%m-%dT%H:%M:%S.%NZ", timeout_s=30).stdout.strip()
        service = compose_service(name)
        return FetchedLogMark(
            lambda: (
                self._run(
                    f"docker compose logs --no-color --no-log-prefix --since {since} {service} 2>&1",
                    timeout_s=60,
                    check=False,
                ).stdout
            )
        )

    def redis(self, *args: str) -> Any:
        # REDISCLI_AUTH is in the container's environment (templates/compose.yml.j2): no password on a command line
        cmd = " ".join(shlex.quote(a) for a in args)
        res = self._run(f"docker compose exec -T n8n-redis redis-cli -2 --json {cmd}", timeout_s=30, check=False)
        if res.exit_code != 0 or res.stdout.startswith("(error)"):
            raise StackError(f"{self.name}: redis-cli {' '.join(args[:2])}: {(res.stdout + res.stderr).strip()[:200]}")
        return json.loads(res.stdout) if res.stdout.strip() else None

    def wrong_key_variants(self) -> list[tuple[str, dict[str, str]]]:
        # a recreated worker container starts with an empty user folder (workers have no volume): seed 000's case;
        # its "own folder" with the stack's key does not outlive the recreation
        return [("fresh folder (a new container; workers have no volume)", {})]


def _tunnel(host: Host, port: int, tunnels: ExitStack) -> str:
    """Main's URL from here: direct on this machine's loopback, else an SSH tunnel closed by `tunnels`."""
    if _is_loopback(host):
        return f"http://{TUNNEL_HOST}:{port}"
    return f"http://{TUNNEL_HOST}:{tunnels.enter_context(host.tunnel(port))}"


def _is_loopback(host: Host) -> bool:
    address = getattr(host, "address", None) or getattr(host, "hostname", None)
    if not isinstance(host, SshHost):
        return True
    try:
        return ip_address(str(address)).is_loopback
    except ValueError:
        return False
