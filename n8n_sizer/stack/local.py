"""`LocalHandle`: the `--local` stack (`LocalStack`) as a `StackHandle`: processes on this machine, by PID."""

from __future__ import annotations

import secrets
from contextlib import ExitStack
from typing import Any

import httpx

from n8n_sizer.native.redis import RedisError, redis_command
from n8n_sizer.native.services import ServiceError
from n8n_sizer.native.stack import LocalStack
from n8n_sizer.stack.handle import FileLogMark, LogMark, StackError, StackHandle


class LocalHandle(StackHandle):
    """The `--local` stack: processes on this machine, by PID."""

    def __init__(self, stack: LocalStack, name: str = "local") -> None:
        self.stack = stack
        self.name = name
        self.setup = stack.setup

    def up(self, exits: ExitStack, attach: bool = False) -> str:
        """Start the processes (a started stack is left as it is); `exits` stops them by PID."""
        if not self.stack.processes:
            exits.callback(self.stack.stop)
            try:
                self.stack.start()
            except ServiceError as exc:  # it quotes the service's log: one line, not a traceback
                raise StackError(
                    f"{self.name}: the local stack did not start: {' '.join(str(exc).split())[:600]}"
                ) from None
        return self.stack.main_url

    def bookkeeping(self) -> dict[str, Any]:
        return {
            "stack_dir": str(self.stack.stack_dir),
            "pids": {n: p.pid for n, p in self.stack.processes.items()},
            "webhook_processors": self.stack.options.webhook_processors,
        }

    def sampler_args(self, n8n_metrics: bool) -> dict[str, Any] | None:
        from n8n_sizer.stack.sampling import local_stack_telemetry

        return local_stack_telemetry(self.stack, n8n_metrics=n8n_metrics)

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

    def stop_process(self, name: str, timeout_s: float | None = None) -> bool:
        return self.stack.stop_process(name, timeout_s)

    def start_process(
        self,
        name: str,
        env_overrides: dict[str, str] | None = None,
        wait: bool = True,
        redis_persistence: str | None = None,
    ) -> None:
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
        try:
            return redis_command(self.stack.redis_port, self.stack.secrets.redis_password, *args)
        except RedisError as exc:
            raise StackError(f"{self.name}: {exc}") from None

    def wrong_key_variants(self) -> list[tuple[str, dict[str, str]]]:
        # a fresh user folder: what a worker container without a volume has (seed 000's case); it goes
        # with the stack's folder
        fresh = self.stack.stack_dir / f"wrong-key-{secrets.token_hex(4)}"
        fresh.mkdir(parents=True)
        return [("fresh folder", {"N8N_USER_FOLDER": str(fresh)}), ("own folder", {})]
