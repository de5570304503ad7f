"""`LocalStack`: real n8n, Postgres and Redis started natively on 127.0.0.1, stopped by PID.

    with LocalStack(Setup(mode="queue", workers=1)) as stack:
        httpx.get(stack.main_url + "/healthz")

The stack's folder holds every log (`logs/<name>.log`), the data of Postgres, Redis and each n8n process,
`state.json` (ports, PIDs, URLs; rewritten after every change, so a stop after a partial start finds what
did start) and `secrets.json` (mode 0600). `LocalStack.attach(folder)` takes over a stack that another
process started (`python -m n8n_sizer.remote.native_stack up`, see `remote.native_stack`).

Process control is deliberately small and general, for the drills: `signal(name, sig)`,
`stop_process(name)`, `start_process(name, env_overrides=...)`, plus `restart_redis` and
`restart_postgres` built from them. Names: "main", "worker-1".."worker-N", "redis", "postgres", and with
`StackOptions.webhook_processors` N: "webhook-1".."webhook-N" and "caddy" (see native.ingest).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal as signals
import tempfile
import time
from pathlib import Path

from n8n_sizer.advisor.pools import setup_recommended_max_connections as recommended_max_connections
from n8n_sizer.advisor.setup import Setup
from n8n_sizer.bundle.n8n_env import POSTGRES_DATABASE, POSTGRES_USER, N8nPorts, shutdown_timeouts
from n8n_sizer.bundle.native_env import NativeSecrets, n8n_argv, n8n_env
from n8n_sizer.native import ports as ports_
from n8n_sizer.native import services
from n8n_sizer.native.datastores import DataStores
from n8n_sizer.native.ingest import IngestProcesses, caddy_binary
from n8n_sizer.native.install import N8nInstall, install_n8n
from n8n_sizer.native.ports import FreePorts
from n8n_sizer.native.services import RunningProcess, ServiceError
from n8n_sizer.native.state import SECRETS_FILE, STATE_FILE, StackOptions, StackState, StateFile

__all__ = ["LocalStack", "StackOptions", "StackState", "STATE_FILE", "SECRETS_FILE"]
from n8n_sizer.errors import InputError


class LocalStack(DataStores, IngestProcesses, FreePorts, StateFile):
    """Start and stop one n8n deployment (regular, or queue with N workers and optionally webhook processors
    behind Caddy) on this machine."""

    def __init__(
        self,
        setup: Setup,
        options: StackOptions | None = None,
        stack_dir: Path | None = None,
        install: N8nInstall | None = None,
    ) -> None:
        self.setup = setup
        self.options = options or StackOptions()
        if self.options.pin_cpus is not None and self.options.pin_cpus > (os.cpu_count() or 1):
            raise InputError(
                f"--cpus {self.options.pin_cpus} (pin_cpus) exceeds this machine's {os.cpu_count()} cores; "
                f"try --cpus {os.cpu_count()}"
            )
        if self.options.webhook_processors and setup.mode != "queue":
            raise InputError(
                f"--webhook-processors {self.options.webhook_processors} needs queue mode (webhook "
                "processors take jobs off main through Redis); add --mode queue"
            )
        self._own_dir = stack_dir is None
        self.stack_dir = Path(stack_dir) if stack_dir else Path(tempfile.mkdtemp(prefix="n8n-sizer-stack-"))
        self._install = install
        self.processes: dict[str, RunningProcess] = {}
        self.start_seconds: dict[str, float] = {}
        self._spawned_at: dict[str, float] = {}
        self._secrets: NativeSecrets | None = None
        self.ports: dict[str, N8nPorts] = {}
        self.redis_port: int | None = None
        self.postgres_port: int | None = None
        self.lb_port: int | None = None

    # --- public facts --------------------------------------------------------------------------

    @property
    def main_url(self) -> str:
        """Where clients go: Caddy with webhook processors (it routes the rest to main), else main itself."""
        return f"http://127.0.0.1:{self.lb_port}" if self.lb_port else self.direct_main_url

    @property
    def direct_main_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['main'].http}"

    @property
    def worker_names(self) -> list[str]:
        return [f"worker-{i}" for i in range(1, self.setup.workers + 1)]

    @property
    def uses_postgres(self) -> bool:
        return self.setup.db == "postgres"

    @property
    def uses_redis(self) -> bool:
        return self.setup.mode == "queue"

    @property
    def cpus(self) -> str | None:
        return None if self.options.pin_cpus is None else f"0-{self.options.pin_cpus - 1}"

    @property
    def stop_timeout_s(self) -> float:
        return self.options.stop_timeout_s or float(shutdown_timeouts(self.setup)[1])

    def pid(self, name: str) -> int:
        return self._proc(name).pid

    def port(self, name: str) -> int:
        return self._proc(name).port

    def log_path(self, name: str) -> Path:
        return self.stack_dir / "logs" / f"{name}.log"

    def log_tail(self, name: str, lines: int = 30) -> str:
        return services.log_tail(self.log_path(name), lines)

    def is_running(self, name: str) -> bool:
        return name in self.processes and services.is_running(self.processes[name])

    def health_url(self, name: str) -> str:
        if name == "main":
            return f"{self.direct_main_url}/healthz/readiness"
        if name == "caddy":  # through Caddy to main: its routing works
            return f"{self.main_url}/healthz"
        if name in self.webhook_names:
            return f"http://127.0.0.1:{self.ports[name].http}/healthz/readiness"
        return f"http://127.0.0.1:{self.ports[name].health}/healthz"

    @property
    def secrets(self) -> NativeSecrets:
        if self._secrets is None:
            raise ServiceError("the stack has not been started")
        return self._secrets

    # --- whole stack ---------------------------------------------------------------------------

    def __enter__(self) -> LocalStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> LocalStack:
        """Start Postgres, Redis, main, the webhook processors and Caddy, then the workers; on any failure stop
        what did start, then raise."""
        try:
            self._prepare()
            if self.uses_postgres:
                self._init_postgres()
                self._ready_on_free_ports("postgres")
                services.create_database(self._pg_data, self.postgres_port, POSTGRES_USER, POSTGRES_DATABASE)
            if self.uses_redis:
                self._write_redis_config(self.options.redis_persistence)
                self._ready_on_free_ports("redis")
            self._ready_on_free_ports("main")
            for name in self.webhook_names:  # spawn all, then wait for them together
                self.start_process(name, wait=False)
            for name in self.webhook_names:
                self._ready_on_free_ports(name, spawned=True)
            if self.uses_load_balancer:
                self._ready_on_free_ports("caddy")
            for name in self.worker_names:  # spawn all workers, then wait for them together
                self.start_process(name, wait=False)
            for name in self.worker_names:
                self._ready_on_free_ports(name, spawned=True)
        except BaseException:  # also KeyboardInterrupt: never leave half a stack running
            try:
                self.stop()
            except ServiceError:
                pass  # the original error says more; stop() already tried SIGKILL on everything
            raise
        return self

    def stop(self) -> None:
        """Stop every process this stack started (workers, Caddy, webhook processors, main, Redis, Postgres), by PID."""
        order = [*reversed(self.worker_names), "caddy", *reversed(self.webhook_names), "main", "redis", "postgres"]
        errors = []
        for name in order:
            if name in self.processes:
                try:
                    self.stop_process(name)
                except ServiceError as exc:
                    errors.append(str(exc))
        pg_link = self.stack_dir / "postgres"
        if not errors and pg_link.is_symlink():  # Postgres' data outside the folder (see _init_postgres)
            outside = pg_link.resolve()
            if self._own_dir:
                shutil.rmtree(outside, ignore_errors=True)
            else:  # a folder the caller keeps: bring the data home, leave nothing behind in /tmp
                pg_link.unlink()
                shutil.move(outside, pg_link)
        if self._own_dir and not errors:
            shutil.rmtree(self.stack_dir, ignore_errors=True)
        if errors:
            raise ServiceError("; ".join(errors))

    # --- single processes (for the drills) -----------------------------------------------------

    def signal(self, name: str, sig: int = signals.SIGKILL, whole_group: bool = True) -> bool:
        """Send `sig` to one process (by default with its children, as `docker kill` does)."""
        return services.signal_process(self._proc(name), sig, whole_group=whole_group)

    def stop_process(self, name: str, timeout_s: float | None = None) -> bool:
        """Its stop signal (SIGTERM; Postgres: SIGINT), wait up to `timeout_s`, then SIGKILL; True if forced."""
        forced = services.stop_process(self._proc(name), self.stop_timeout_s if timeout_s is None else timeout_s)
        self._write_state()
        return forced

    def start_process(
        self,
        name: str,
        env_overrides: dict[str, str] | None = None,
        wait: bool = True,
        redis_persistence: str | None = None,
    ) -> RunningProcess:
        """(Re)start one process on its ports and data; `env_overrides` go to an n8n process' environment."""
        if self.is_running(name):
            raise ServiceError(f"{name} is already running (PID {self.pid(name)})")
        self._spawned_at[name] = time.monotonic()
        if name == "postgres":
            proc = services.start_postgres(
                self._pg_data,
                self.postgres_port,
                recommended_max_connections(self.setup),
                self.log_path(name),
                self.cpus,
            )
        elif name == "redis":
            if redis_persistence is not None:
                self._write_redis_config(redis_persistence)
            proc = services.start_redis(self._redis_dir / "redis.conf", self.redis_port, self.log_path(name), self.cpus)
        elif name == "main" or name in self.worker_names or name in self.webhook_names:
            proc = self._spawn_n8n(name, env_overrides or {})
        elif name == "caddy" and self.uses_load_balancer:
            proc = self._spawn_caddy()
        else:
            raise InputError(
                f"process {name!r} is not part of this stack; try one of {', '.join(self.ports) or 'main'}"
            )
        self.processes[name] = proc
        self._write_state()
        if wait:
            self.wait_ready(name)
        return proc

    def wait_ready(self, name: str, timeout_s: float | None = None) -> float:
        """Block until the process serves (readiness, health, PING, pg_isready); returns seconds since spawn."""
        proc = self._proc(name)
        timeout = timeout_s or self.options.start_timeout_s
        if name == "postgres":
            services.wait_postgres(proc, self._pg_data, timeout)
        elif name == "redis":
            services.wait_redis(proc, self.secrets.redis_password, timeout)
        else:
            url = self.health_url(name)
            services.wait_until(proc, lambda: services.http_ok(url), timeout, f"ready at {url}")
        seconds = time.monotonic() - self._spawned_at.get(name, time.monotonic())
        self.start_seconds[name] = round(seconds, 2)
        self._write_state()
        return seconds

    def kill_worker(self, index: int) -> bool:
        return self.signal(f"worker-{index}", signals.SIGKILL)

    def stop_worker(self, index: int, timeout_s: float | None = None) -> None:
        self.stop_process(f"worker-{index}", timeout_s)

    def start_worker(
        self, index: int, env_overrides: dict[str, str] | None = None, wait: bool = True
    ) -> RunningProcess:
        return self.start_process(f"worker-{index}", env_overrides, wait)

    # --- state file ----------------------------------------------------------------------------

    # --- internals -----------------------------------------------------------------------------

    def _proc(self, name: str) -> RunningProcess:
        if name not in self.processes:
            raise InputError(
                f"process {name!r} was not started in this stack; started: {', '.join(self.processes) or 'none'}"
            )
        return self.processes[name]

    def _prepare(self) -> None:
        if self.uses_load_balancer:
            caddy_binary()  # refuse before anything is written or started when Caddy is missing
        if self._install is None:
            self._install = install_n8n(self.setup.n8n_version, quiet=True)
        self.stack_dir.mkdir(parents=True, exist_ok=True)
        if any(self.stack_dir.iterdir()):  # an old stack's data, logs or secrets: never overwrite them
            raise InputError(
                f"--state {self.stack_dir} is not empty; choose a new folder (or remove this one "
                f"after `down --state {self.stack_dir}`)"
            )
        # Postgres runs as its own user when we are root: it must be able to pass through this folder.
        self.stack_dir.chmod(0o711)
        (self.stack_dir / "logs").mkdir(exist_ok=True)
        self._secrets = NativeSecrets(
            encryption_key=secrets.token_hex(24),
            postgres_password=secrets.token_urlsafe(24),
            redis_password=secrets.token_urlsafe(24),
            redis_n8n_password=secrets.token_urlsafe(24),
            extra_env=dict(self.options.extra_env),
        )
        secrets_path = self.stack_dir / SECRETS_FILE
        fd = os.open(secrets_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(self._secrets.model_dump_json())
        names = ["main", *self.worker_names, *self.webhook_names]
        ports = ports_.unique_ports(2 * len(names) + 4)
        self.postgres_port, self.redis_port = ports.pop(), ports.pop()
        main_http = ports.pop()
        self.ports = {"main": N8nPorts(http=main_http, broker=ports.pop())}
        for name in self.worker_names:
            self.ports[name] = N8nPorts(http=main_http, broker=ports.pop(), health=ports.pop())
        for name in self.webhook_names:  # `n8n webhook` starts no task broker; its broker port is only kept apart
            self.ports[name] = N8nPorts(http=ports.pop(), broker=ports.pop())
        self.lb_port = ports.pop() if self.uses_load_balancer else None
        if not self.uses_postgres:
            self.postgres_port = None
        if not self.uses_redis:
            self.redis_port = None

    def _spawn_n8n(self, name: str, env_overrides: dict[str, str]) -> RunningProcess:
        role = "main" if name == "main" else "webhook" if name in self.webhook_names else "worker"
        folder = self.stack_dir / "n8n" / name
        folder.mkdir(parents=True, exist_ok=True)
        ports = self.ports[name]
        env = n8n_env(
            self.setup,
            role=role,
            ports=ports,
            user_folder=folder,
            secrets=self.secrets,
            postgres_port=self.postgres_port,
            redis_port=self.redis_port,
            path=self._install.env_path(),
            home=os.environ.get("HOME", str(folder)),
            log_level=self.options.n8n_log_level,
            extra={**self.options.extra_env, **env_overrides},
            webhook_processors=self.options.webhook_processors,
            public_url=f"http://127.0.0.1:{self.lb_port}/" if self.uses_load_balancer else None,
        )
        argv = (
            n8n_argv(self._install.node_bin, self._install.n8n_bin, self.setup, role)
            if role != "webhook"
            else [str(self._install.node_bin), str(self._install.n8n_bin), "webhook"]
        )
        return services.spawn(
            name,
            argv,
            env,
            self.log_path(name),
            ports.health if role == "worker" else ports.http,
            cwd=folder,
            cpus=self.cpus,
            health_port=ports.health,
            broker_port=ports.broker,
        )
