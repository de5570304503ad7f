"""The local stack's options and its state file (`state.json`): models shared by `LocalStack`, its
command-line entry and whoever reads a stack's state over SSH."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Self

from pydantic import Field

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.bundle.n8n_env import N8nPorts
from n8n_sizer.bundle.native_env import NativeSecrets
from n8n_sizer.errors import InputError
from n8n_sizer.native.install import N8nInstall
from n8n_sizer.native.services import RunningProcess
from n8n_sizer.safety.files import read_user_text
from n8n_sizer.safety.frozen import Frozen
from n8n_sizer.safety.write import write_atomic

STATE_FILE = "state.json"
SECRETS_FILE = "secrets.json"


class StackOptions(Frozen):
    """How to run the stack on this machine, beyond the `Setup` it stands for."""

    redis_persistence: Literal["aof", "none"] = "aof"  # seed 000: AOF everysec; "none" for drill 3
    pin_cpus: int | None = Field(None, ge=1)  # taskset every process onto cores 0..K-1 to stand for K vCPU
    extra_env: dict[str, str] = {}  # added to every n8n process' environment
    start_timeout_s: float = 180.0  # 2 shared cores, first start migrates an empty database (~11 s alone)
    stop_timeout_s: float | None = None  # None: the stop grace period of bundle.n8n_env.shutdown_timeouts
    n8n_log_level: Literal["error", "warn", "info", "debug"] = "info"
    # `n8n webhook` processes behind Caddy (queue mode only): see native.ingest
    webhook_processors: int = Field(0, ge=0, le=9)


class StackState(Frozen):
    """What `state.json` holds: no secret, only where the secrets file is."""

    setup: Setup
    options: StackOptions
    stack_dir: Path
    main_url: str  # where clients go: Caddy with webhook processors, else main
    install: N8nInstall
    ports: dict[str, N8nPorts]  # per n8n process
    redis_port: int | None
    postgres_port: int | None
    lb_port: int | None = None  # Caddy's, with webhook processors: then main_url is Caddy's
    processes: dict[str, RunningProcess]
    secrets_path: Path
    start_seconds: dict[str, float]  # seconds from spawn to ready, per process (last start)


class StateFile:
    """LocalStack's `state.json`: what it writes after every change, and how another process takes the stack over
    from it (`attach`)."""

    def state(self) -> StackState:
        shown = self.options.model_copy(
            update={"extra_env": {key: "(in secrets file)" for key in self.options.extra_env}}
        )
        return StackState(
            setup=self.setup,
            options=shown,
            stack_dir=self.stack_dir,
            main_url=self.main_url,
            install=self._install,
            ports=self.ports,
            redis_port=self.redis_port,
            postgres_port=self.postgres_port,
            lb_port=self.lb_port,
            processes=self.processes,
            secrets_path=self.stack_dir / SECRETS_FILE,
            start_seconds=self.start_seconds,
        )

    @classmethod
    def attach(cls, stack_dir: Path) -> Self:
        """Take over a stack started by another process (e.g. a detached `up`) from its state file."""
        path = Path(stack_dir) / STATE_FILE
        if not path.is_file():
            raise InputError(f"--state {stack_dir}: no {STATE_FILE} there; start a stack with `up --state {stack_dir}`")
        fix = f"start a stack with `up --state {stack_dir}`"
        state = StackState.model_validate_json(read_user_text(path, "--state", fix=fix))
        secrets_ = NativeSecrets.model_validate_json(
            read_user_text(state.secrets_path, "the stack's secrets", fix=fix, private=True)
        )
        options = state.options.model_copy(update={"extra_env": secrets_.extra_env})
        stack = cls(state.setup, options, state.stack_dir, state.install)
        stack._own_dir = False
        stack._secrets = secrets_
        stack.ports, stack.redis_port, stack.postgres_port = dict(state.ports), state.redis_port, state.postgres_port
        stack.lb_port = state.lb_port
        stack.processes, stack.start_seconds = dict(state.processes), dict(state.start_seconds)
        return stack

    def _write_state(self) -> None:
        if self._install is None or "main" not in self.ports:
            return
        write_atomic(self.stack_dir / STATE_FILE, self.state().model_dump_json(indent=2) + "\n", private=False)
