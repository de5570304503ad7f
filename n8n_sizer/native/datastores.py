"""What `LocalStack` does with its Postgres and Redis: their folders, first setup and restarts (for the drills).

A mixin, so the stack's one class keeps one set of names (`stack.restart_redis()`, `stack.postgres_socket_dir`)
while its module stays small.
"""

from __future__ import annotations

import os
import signal as signals
import tempfile
from pathlib import Path

from n8n_sizer.bundle.n8n_env import POSTGRES_USER
from n8n_sizer.native import services


class DataStores:
    """Postgres and Redis of a `LocalStack` (which provides stack_dir, secrets, ports and the process control)."""

    def restart_redis(self, persistence: str | None = None) -> None:
        """SIGKILL Redis (no chance to write anything), then start it on the same port and folder."""
        self.signal("redis", signals.SIGKILL)
        self.stop_process("redis", timeout_s=5)
        self.start_process("redis", redis_persistence=persistence)

    def restart_postgres(self) -> None:
        """Fast shutdown (SIGINT: clients disconnected, no recovery needed), then start again."""
        self.stop_process("postgres")
        self.start_process("postgres")

    @property
    def postgres_socket_dir(self) -> Path:
        """Where Postgres puts its unix socket (trust auth for the superuser): the data folder."""
        return self._pg_data

    @property
    def _pg_data(self) -> Path:
        # Resolved: Postgres (its own user) must not walk through a private parent by the link's path.
        return (self.stack_dir / "postgres").resolve() / "data"

    @property
    def _redis_dir(self) -> Path:
        return self.stack_dir / "redis"

    def _init_postgres(self) -> None:
        # As root, Postgres runs as Debian's `postgres` user, which must pass through every parent folder;
        # a private parent (pytest's tmp_path is 0700) forces the data into a folder of its own in /tmp,
        # linked from the stack folder so `attach` finds it.
        pg_root = self.stack_dir / "postgres"
        if os.geteuid() == 0 and not all(parent.stat().st_mode & 0o001 for parent in self.stack_dir.resolve().parents):
            outside = Path(tempfile.mkdtemp(prefix="n8n-sizer-pg-"))
            outside.chmod(0o711)
            pg_root.symlink_to(outside)
        else:
            pg_root.mkdir()
            pg_root.chmod(0o711)
        services.init_postgres(self._pg_data, POSTGRES_USER, self.secrets.postgres_password)

    def _write_redis_config(self, persistence: str) -> None:
        self._redis_dir.mkdir(exist_ok=True)
        services.write_redis_config(
            self._redis_dir / "redis.conf",
            self._redis_dir,
            self.redis_port,
            self.secrets.redis_password,
            persistence,
            n8n_password=self.secrets.redis_n8n_password,
        )
