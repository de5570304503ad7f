"""What a drill acts on: one queue stack, as processes on this machine or as containers on a fleet host.

Every drill speaks to `DrillTarget`; three targets implement it:
- `LocalTarget`: the `--local` stack (`LocalStack`), signals and restarts by PID on this machine;
- `SshLocalstackTarget` (drills/remote.py): a loopback host reached over SSH (the tests' sshd), whose stack
  `python -m n8n_sizer.bench.localstack` runs, each action one command over SSH;
- `ComposeTarget` (drills/remote.py): a fleet host whose compose stack cloud-init started, each action a
  Docker command over SSH (`docker kill`, `docker stop`, `docker start`, `docker restart`, `docker pause`).

Process names are the local stack's: postgres, redis, main, worker-1, worker-2, ...
"""

from __future__ import annotations

import re
import secrets
import signal as signals
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.bench.localstack import LocalStack

LOG_LINE_CHARS = 300


class LogMark(ABC):
    """The end of a process' log at one moment: `lines()` are the ones written after it."""

    @abstractmethod
    def lines(self) -> list[str]: ...

    def find(self, pattern: str, limit: int = 5) -> list[str]:
        regex = re.compile(pattern)
        return [line[:LOG_LINE_CHARS] for line in self.lines() if regex.search(line)][:limit]


@dataclass
class FileLogMark(LogMark):
    """A log file on this machine and its size at the mark."""

    path: Path
    offset: int

    def lines(self) -> list[str]:
        if not self.path.is_file():
            return []
        with open(self.path, "rb") as handle:
            handle.seek(self.offset)
            text = handle.read().decode("utf-8", "replace")
        return split_lines(text)


@dataclass
class FetchedLogMark(LogMark):
    """A log on another host: `fetch()` returns what was written after the mark."""

    fetch: Callable[[], str]

    def lines(self) -> list[str]:
        return split_lines(self.fetch())


def split_lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines() if line.strip()]


class DrillTarget(ABC):
    """One queue stack a drill can break and restore."""

    name: str
    setup: Setup
    main_url: str  # as seen from this machine (a tunnel for a host reached over SSH)

    @property
    def worker_names(self) -> list[str]:
        return [f"worker-{i}" for i in range(1, self.setup.workers + 1)]

    @property
    def process_names(self) -> list[str]:
        """Every process of the stack, in the order `restore` starts them."""
        return ["postgres", "redis", "main", *self.worker_names]

    @property
    def stall_settings(self) -> dict[str, str]:
        """Bull timings (QUEUE_WORKER_*) the stack sets; {} = n8n's own (60 s lock, 30 s stalled check)."""
        return {}

    @abstractmethod
    def is_running(self, name: str) -> bool: ...

    @abstractmethod
    def is_ready(self, name: str) -> bool:
        """main: /healthz/readiness answers 200; a worker: its /healthz."""

    @abstractmethod
    def wait_ready(self, name: str, timeout_s: float | None = None) -> float: ...

    @abstractmethod
    def stop_process(self, name: str, timeout_s: float | None = None) -> None:
        """Its stop signal, SIGKILL after `timeout_s` (`docker stop -t`)."""

    @abstractmethod
    def start_process(self, name: str, env_overrides: dict[str, str] | None = None, wait: bool = True,
                      redis_persistence: str | None = None) -> None:
        """Start a stopped process on its data; `env_overrides` go to an n8n process' environment (only for
        this start: the next start without them runs the stack's own settings)."""

    @abstractmethod
    def signal(self, name: str, sig: int, whole_group: bool = True) -> None:
        """SIGKILL (`docker kill`), SIGSTOP / SIGCONT (`docker pause` / `unpause`), or another signal."""

    @abstractmethod
    def restart_redis(self, persistence: str | None = None) -> None:
        """SIGKILL Redis (nothing written on the way out), then start it on the same data."""

    @abstractmethod
    def restart_postgres(self) -> None:
        """Fast shutdown (clients disconnected), then start again."""

    @abstractmethod
    def log_mark(self, name: str) -> LogMark: ...

    @abstractmethod
    def redis(self, *args: str) -> Any:
        """One Redis command on the stack's Redis: an int, a str, a list or None."""

    def wrong_key_variants(self) -> list[tuple[str, dict[str, str]]]:
        """(variant, environment) under which wrong-key starts worker-2 with another key."""
        return [("own folder", {})]

    # conveniences the drills read better with
    def kill_worker(self, index: int) -> None:
        self.signal(f"worker-{index}", signals.SIGKILL)

    def stop_worker(self, index: int, timeout_s: float | None = None) -> None:
        self.stop_process(f"worker-{index}", timeout_s)

    def start_worker(self, index: int, env_overrides: dict[str, str] | None = None, wait: bool = True) -> None:
        self.start_process(f"worker-{index}", env_overrides, wait)


class LocalTarget(DrillTarget):
    """The `--local` stack: processes on this machine, by PID."""

    def __init__(self, stack: LocalStack) -> None:
        self.stack = stack
        self.name = "local"
        self.setup = stack.setup

    @property
    def main_url(self) -> str:  # type: ignore[override]
        return self.stack.main_url

    @property
    def process_names(self) -> list[str]:
        return list(self.stack.processes)

    @property
    def stall_settings(self) -> dict[str, str]:
        return {k: v for k, v in self.stack.options.extra_env.items() if k.startswith("QUEUE_WORKER_")}

    def is_running(self, name: str) -> bool:
        return self.stack.is_running(name)

    def is_ready(self, name: str) -> bool:
        try:
            return httpx.get(self.stack.health_url(name), timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def wait_ready(self, name: str, timeout_s: float | None = None) -> float:
        return self.stack.wait_ready(name, timeout_s)

    def stop_process(self, name: str, timeout_s: float | None = None) -> None:
        self.stack.stop_process(name, timeout_s)

    def start_process(self, name: str, env_overrides: dict[str, str] | None = None, wait: bool = True,
                      redis_persistence: str | None = None) -> None:
        self.stack.start_process(name, env_overrides, wait, redis_persistence)

    def signal(self, name: str, sig: int, whole_group: bool = True) -> None:
        self.stack.signal(name, sig, whole_group=whole_group)

    def restart_redis(self, persistence: str | None = None) -> None:
        self.stack.restart_redis(persistence)

    def restart_postgres(self) -> None:
        self.stack.restart_postgres()

    def log_mark(self, name: str) -> LogMark:
        path = self.stack.log_path(name)
        return FileLogMark(path, path.stat().st_size if path.is_file() else 0)

    def redis(self, *args: str) -> Any:
        from n8n_sizer.bench.drills.common import redis_command

        return redis_command(self.stack.redis_port, self.stack.secrets.redis_password, *args)

    def wrong_key_variants(self) -> list[tuple[str, dict[str, str]]]:
        # a fresh user folder: what a worker container without a volume has (seed 000's case); it goes
        # with the stack's folder
        fresh = self.stack.stack_dir / f"wrong-key-{secrets.token_hex(4)}"
        fresh.mkdir(parents=True)
        return [("fresh folder", {"N8N_USER_FOLDER": str(fresh)}), ("own folder", {})]
