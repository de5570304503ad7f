"""`StackHandle`: one n8n stack on a host, as the bench and the drills both drive it.

A handle brings its stack up (or attaches to it) and down, gives main's URL as seen from this machine, and
controls each process by its role name (postgres, redis, main, worker-1, worker-2, ...): running, ready, stop,
start (with environment overrides), signal; it marks and reads the processes' logs and speaks to the stack's
Redis. Three implementations:
- `LocalHandle` (stack/local.py): the `--local` stack (`LocalStack`), signals and restarts by PID here;
- `SshNativeHandle` (stack/remote.py): a host reached over SSH whose stack `python -m n8n_sizer.remote.native_stack`
  runs, each action one command over SSH;
- `ComposeHandle` (stack/remote.py): a fleet host whose compose stack cloud-init started, each action a Docker
  command over SSH (`docker kill`, `docker stop`, `docker start`, `docker restart`, `docker pause`).
"""

from __future__ import annotations

import re
import signal as signals
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.errors import RemoteError

LOG_LINE_CHARS = 300


class StackError(RemoteError):
    """The stack did not do what a handle asked (no such process, not ready in time, Redis refused)."""


def wait_until(condition: Callable[[], Any], timeout_s: float, what: str, poll_s: float = 0.5) -> Any:
    """Poll until `condition()` is truthy; returns its value, or raises StackError naming `what`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise StackError(f"{what}: not reached within {timeout_s:.0f} s")
        time.sleep(poll_s)


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


class StackHandle(ABC):
    """One n8n stack on a host: its life (up/down), main's URL, its processes by role, logs and Redis."""

    name: str
    setup: Setup
    main_url: str  # as seen from this machine (a tunnel for a host reached over SSH)

    @abstractmethod
    def up(self, exits: ExitStack, attach: bool = False) -> str:
        """Start the stack (or, with `attach`, take over the one already running) and register what takes it
        down on `exits`; returns main's URL as seen from this machine."""

    def bookkeeping(self) -> dict[str, Any]:
        """What a run saves about the stack to find it again on --resume (folders, PIDs); {} = nothing."""
        return {}

    def sampler_args(self, n8n_metrics: bool) -> dict[str, Any] | None:
        """`Sampler` arguments (probes, processes, trees) for this stack; None = the bench chooses."""
        return None

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
    def stop_process(self, name: str, timeout_s: float | None = None) -> bool:
        """Its stop signal, SIGKILL after `timeout_s` (`docker stop -t`). True when the stop had to be forced:
        the process still ran at the end of the grace and was SIGKILLed (a graceful stop that failed)."""

    @abstractmethod
    def start_process(
        self,
        name: str,
        env_overrides: dict[str, str] | None = None,
        wait: bool = True,
        redis_persistence: str | None = None,
    ) -> None:
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

    def stop_worker(self, index: int, timeout_s: float | None = None) -> bool:
        return self.stop_process(f"worker-{index}", timeout_s)

    def start_worker(self, index: int, env_overrides: dict[str, str] | None = None, wait: bool = True) -> None:
        self.start_process(f"worker-{index}", env_overrides, wait)
