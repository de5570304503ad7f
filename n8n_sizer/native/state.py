"""The local stack's options and its state file (`state.json`): models shared by `LocalStack`, its
command-line entry and whoever reads a stack's state over SSH."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.native.install import N8nInstall
from n8n_sizer.bundle.n8n_env import N8nPorts
from n8n_sizer.native.services import RunningProcess
from n8n_sizer.safety.frozen import Frozen

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
