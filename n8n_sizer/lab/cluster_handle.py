"""A deployed lab cluster, operated by role over SSH: the cluster drills' hands.

`lab deploy` records every process it started in `<lab folder>/cluster.json` (a `LabCluster`); the data host's
Postgres and Redis are found on that host by their programs. Each action is one command over SSH (the lab's
client key) on the host that runs the process, with `python -m n8n_sizer.remote.lab_agent` doing the
signalling there, so a PID is only ever signalled inside its own host's namespace:

    with LabClusterHandle.open(Path("lab.json")) as lab:
        worker = lab.find(role="worker", host="worker-1")[0]
        lab.stop(worker)          # SIGTERM, n8n's graceful shutdown, SIGKILL after the grace
        lab.start(worker)         # the same argv and environment, waits for /healthz/readiness
        lab.ready(worker)

A process started again gets a new PID; cluster.json is rewritten with it, so the next drill (or a bench run)
finds it. Snapshots of stopped processes (argv and environment, secrets included) are 0600 files in
`<lab folder>/drills/`, removed once the process runs again.
"""

from __future__ import annotations

import json
import shlex
import signal as signals
import sys
import time
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

from n8n_sizer.errors import InputError
from n8n_sizer.hosts.host import SshHost
from n8n_sizer.lab.cluster_record import N8N_ROLES, ClusterProcess, recorded_pids, redis_password_file
from n8n_sizer.stack.handle import FetchedLogMark, LogMark, StackError, StackHandle, wait_until

RESTART_TIMEOUT_S = 300.0  # a cold n8n start on a busy 2-core machine


class LabClusterHandle(StackHandle):
    """Processes of a deployed lab by host and role; stop, start, signal, readiness over SSH. As a `StackHandle`
    (the protocol of a single-host stack) each process is addressed by its unique name in the cluster."""

    def __init__(self, inventory_path: Path, python: str | None = None) -> None:
        from n8n_sizer.fleet.inventory import load_inventory
        from n8n_sizer.lab.deploy import read_cluster
        from n8n_sizer.lab.state import read_lab_state

        self.path = inventory_path
        self.state = read_lab_state(inventory_path)
        if self.state.folder is None or self.state.client_key is None:
            raise InputError(f"--inventory {inventory_path}: the lab has no folder or key recorded; lab up again")
        self.cluster = read_cluster(self.state)
        from n8n_sizer.safety.files import read_user_text

        self.inventory = load_inventory(
            read_user_text(
                inventory_path, "--inventory", max_bytes=1 << 20, fix="pass the lab.json that `lab up` wrote"
            )
        )
        self.folder = Path(self.state.folder)
        # The interpreter `lab deploy` left for the hosts (lab.deploy._same_code_python): the host agent runs the
        # code that deployed the cluster, not whatever the venv's own install points to.
        wrapper = self.folder / "hosts" / "python"
        self.python = python or (str(wrapper) if wrapper.is_file() else sys.executable)
        self.name = f"lab-{self.state.lab_id}"
        self._ssh: dict[str, SshHost] = {}
        from n8n_sizer.bundle.topology import parse_topology

        self.topology = parse_topology(self.state.topology, f"--inventory {inventory_path}: lab.topology")
        self.setup = self.topology.setup()
        self.main_url = self.cluster.url

    @classmethod
    def open(cls, inventory_path: Path) -> LabClusterHandle:
        return cls(inventory_path)

    def __enter__(self) -> LabClusterHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for host in self._ssh.values():
            host.close()
        self._ssh.clear()

    # --- where things are -------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return self.cluster.url

    @property
    def data_host(self) -> str:
        return self.cluster.data_host

    @property
    def secrets_file(self) -> str:
        return self.cluster.secrets_file

    def address(self, host: str) -> str:
        return self.inventory.hosts[host].private_ip

    def worker_hosts(self) -> list[str]:
        return [h for h, procs in self.cluster.processes.items() if any(p.role == "worker" for p in procs)]

    def ingest_host(self) -> str:
        return next(h for h, procs in self.cluster.processes.items() if any(p.role == "main" for p in procs))

    def ssh(self, host: str) -> SshHost:
        if host not in self._ssh:
            if host not in self.inventory.hosts:
                raise InputError(
                    f"{host}: not a host of the lab {self.state.lab_id}; try one of "
                    f"{', '.join(sorted(self.inventory.hosts))}"
                )
            h = self.inventory.hosts[host]
            self._ssh[host] = SshHost(host, h.private_ip, h.ssh_user, key_file=Path(self.state.client_key))
        return self._ssh[host]

    def agent(self, host: str, *args: str, timeout_s: float = 60.0) -> Any:
        from n8n_sizer.remote.protocol import Program, run

        return run(self.ssh(host), Program.LAB_AGENT, args, python=self.python, timeout_s=timeout_s)

    def pids_by_host(self) -> dict[str, dict[str, int]]:
        """{host: {process name: PID}} of everything the deploy recorded (n8n, Caddy, Postgres, Redis)."""
        return recorded_pids(self.cluster)

    def processes(self) -> list[ClusterProcess]:
        """Every role's process: n8n and the load balancer from cluster.json, Postgres and Redis found on the
        data host (Redis: the redis-server; Postgres: the postmaster, whose parent is not a postgres)."""
        out = []
        for host, procs in self.cluster.processes.items():
            out += [ClusterProcess(host, p.role, p.name, p.pid, p.ready_url, p.log) for p in procs]
        if self.cluster.load_balancer_pid is not None:
            ingest = self.ingest_host()
            out.append(
                ClusterProcess(
                    ingest,
                    "load_balancer",
                    "caddy",
                    self.cluster.load_balancer_pid,
                    f"http://{self.address(ingest)}:5678/healthz",
                )
            )
        listed = self.agent(self.data_host, "ps")
        pids = {p["pid"]: p for p in listed}
        for p in listed:
            if p["exe"] == "redis-server":
                out.append(ClusterProcess(self.data_host, "redis", "redis", p["pid"]))
            elif p["exe"] == "postgres" and pids.get(p["ppid"], {}).get("exe") != "postgres":
                out.append(ClusterProcess(self.data_host, "postgres", "postgres", p["pid"]))
        return out

    def find(self, role: str | None = None, host: str | None = None, name: str | None = None) -> list[ClusterProcess]:
        found = [
            p
            for p in self.processes()
            if (role is None or p.role == role)
            and (host is None or p.host == host)
            and (name is None or p.name == name)
        ]
        return found

    # --- acting on a process ----------------------------------------------------------------------------
    def _snapshot(self, proc: ClusterProcess) -> str:
        folder = self.folder / "drills"
        folder.mkdir(mode=0o700, exist_ok=True)
        return str(folder / f"{proc.host}-{proc.name}.json")

    def has_snapshot(self, proc: ClusterProcess) -> bool:
        return Path(self._snapshot(proc)).is_file()

    def save(self, proc: ClusterProcess) -> None:
        """Snapshot a running process so it can be started again if it exits by itself (a partition)."""
        self.agent(proc.host, "save", "--pid", str(proc.pid), "--snapshot", self._snapshot(proc))

    def stop(self, proc: ClusterProcess, signal: str = "TERM", grace_s: float = 35.0) -> dict:
        """Stop it (its snapshot kept for `start`); SIGKILL to its group after `grace_s`. What happened."""
        return self.agent(
            proc.host,
            "stop",
            "--pid",
            str(proc.pid),
            "--snapshot",
            self._snapshot(proc),
            "--signal",
            signal,
            "--grace",
            str(grace_s),
            timeout_s=grace_s + 60,
        )

    def signal_process(self, proc: ClusterProcess, signal: str) -> None:
        self.agent(proc.host, "signal", "--pid", str(proc.pid), "--signal", signal)

    def _ready_args(self, proc: ClusterProcess) -> list[str]:
        if proc.ready_url:
            return ["--ready-http", proc.ready_url]
        if proc.role == "redis":
            return ["--ready-redis", self.secrets_file]
        raise InputError(f"{proc.name}: no readiness check for role {proc.role}")

    def start(self, proc: ClusterProcess, timeout_s: float = RESTART_TIMEOUT_S) -> tuple[ClusterProcess, float]:
        """Start a stopped process from its snapshot and wait until it is ready; (the process, seconds waited)."""
        res = self.agent(
            proc.host,
            "start",
            "--snapshot",
            self._snapshot(proc),
            *self._ready_args(proc),
            "--timeout",
            str(timeout_s),
            timeout_s=timeout_s + 60,
        )
        new = replace(proc, pid=int(res["pid"]))
        self._record_pid(proc, new.pid)
        return new, float(res["ready_s"])

    def running(self, proc: ClusterProcess) -> bool:
        return any(p["pid"] == proc.pid for p in self.agent(proc.host, "ps"))

    def ready(self, proc: ClusterProcess) -> bool:
        return bool(self.agent(proc.host, "ready", *self._ready_args(proc))["ready"])

    def _record_pid(self, old: ClusterProcess, pid: int) -> None:
        """cluster.json follows a restart, so whoever reads it next finds the running process."""
        from n8n_sizer.lab.deploy import write_cluster

        if old.role == "load_balancer":
            self.cluster = self.cluster.model_copy(update={"load_balancer_pid": pid})
        elif old.role in N8N_ROLES:
            procs = {
                h: [p.model_copy(update={"pid": pid}) if p.name == old.name and h == old.host else p for p in ps]
                for h, ps in self.cluster.processes.items()
            }
            self.cluster = self.cluster.model_copy(update={"processes": procs})
        else:
            return  # Postgres and Redis are found on the data host, not recorded
        write_cluster(self.folder, self.cluster)

    def restore(self) -> list[str]:
        """Start every recorded process that is not running and has a snapshot (a drill cut short); names."""
        started = []
        procs = self.processes()
        if not any(p.role == "redis" for p in procs):  # a stopped Redis is not found on the data host
            procs.append(ClusterProcess(self.data_host, "redis", "redis", 0))
        for proc in procs:
            if self.has_snapshot(proc) and (proc.pid == 0 or not self.running(proc)):
                self.start(proc)
                started.append(proc.name)
        return started

    def drop_snapshot(self, proc: ClusterProcess) -> None:
        """The process outlived the drill: its saved snapshot (secrets in it) goes."""
        Path(self._snapshot(proc)).unlink(missing_ok=True)

    # --- logs and commands --------------------------------------------------------------------------------
    def log_size(self, proc: ClusterProcess) -> int:
        if not proc.log:
            return 0
        res = self.ssh(proc.host).run(f"stat -c %s {shlex.quote(proc.log)}", timeout_s=30)
        return int(res.stdout.strip() or 0)

    def log_since(self, proc: ClusterProcess, offset: int) -> list[str]:
        if not proc.log:
            return []
        res = self.ssh(proc.host).run(f"tail -c +{offset + 1} {shlex.quote(proc.log)}", timeout_s=30)
        return res.stdout.splitlines()

    def run(self, host: str, command: str, timeout_s: float = 30.0, check: bool = True):
        return self.ssh(host).run(command, timeout_s=timeout_s, check=check)

    # --- StackHandle: the cluster driven as a single-host stack is, by process name ----------------------------
    def up(self, exits: ExitStack, attach: bool = False) -> str:
        """Take over the deployed cluster (`lab deploy`, or a bench, deploys it): every recorded process must
        still run; `exits` closes the SSH connections. The load balancer's URL."""
        exits.callback(self.close)
        for host, pids in self.pids_by_host().items():
            for name, pid in pids.items():
                if self.run(host, f"kill -0 {int(pid)}", check=False).exit_code != 0:
                    raise InputError(
                        f"--inventory {self.path}: the deployed cluster's {name} on {host} (PID {pid}) "
                        "is not running; `lab down` and `lab up` for a fresh cluster"
                    )
        return self.main_url

    def bookkeeping(self) -> dict[str, Any]:
        return {"lab_folder": str(self.folder)}

    @property
    def process_names(self) -> list[str]:
        return [p.name for p in self.processes()]

    @property
    def worker_names(self) -> list[str]:
        return [p.name for p in self.processes() if p.role == "worker"]

    def _named(self, name: str) -> ClusterProcess:
        found = self.find(name=name)
        if not found:
            raise StackError(f"{self.name}: no process {name!r}; the cluster has {', '.join(self.process_names)}")
        return found[0]

    def is_running(self, name: str) -> bool:
        found = self.find(name=name)
        return bool(found) and self.running(found[0])

    def is_ready(self, name: str) -> bool:
        return self.ready(self._named(name))

    def wait_ready(self, name: str, timeout_s: float | None = None) -> float:
        proc, started = self._named(name), time.monotonic()
        wait_until(lambda: self.ready(proc), timeout_s or RESTART_TIMEOUT_S, f"{self.name}: {name} ready")
        return time.monotonic() - started

    def stop_process(self, name: str, timeout_s: float | None = None) -> bool:
        proc = self._named(name)
        grace = 35.0 if timeout_s is None else timeout_s
        return bool(self.stop(proc, "INT" if proc.role == "postgres" else "TERM", grace).get("forced"))

    def start_process(
        self,
        name: str,
        env_overrides: dict[str, str] | None = None,
        wait: bool = True,
        redis_persistence: str | None = None,
    ) -> None:
        if env_overrides or redis_persistence is not None or not wait:
            raise StackError(
                f"{self.name}: a lab process starts again exactly as it was stopped (its snapshot); "
                "environment overrides, another persistence or no wait are not offered"
            )
        stopped = [p for p in self._stopped_candidates() if p.name == name]
        if not stopped or not self.has_snapshot(stopped[0]):
            raise StackError(f"{self.name}: {name} was not stopped through this handle (no snapshot)")
        self.start(stopped[0])

    def _stopped_candidates(self) -> list[ClusterProcess]:
        procs = self.processes()
        if not any(p.role == "redis" for p in procs):  # a stopped Redis is not found on the data host
            procs.append(ClusterProcess(self.data_host, "redis", "redis", 0))
        return procs

    def signal(self, name: str, sig: int, whole_group: bool = True) -> None:
        word = signals.Signals(sig).name.removeprefix("SIG")
        proc = self._named(name)
        if word == "KILL" and whole_group:  # as a crash: the whole group, snapshot kept for start_process
            self.stop(proc, "KILL", 0.0)
        else:
            self.signal_process(proc, word)

    def restart_redis(self, persistence: str | None = None) -> None:
        if persistence is not None:
            raise StackError(f"{self.name}: the lab's Redis restarts with the persistence it was deployed with")
        redis = self._named("redis")
        self.stop(redis, "KILL", 0.0)
        self.start(redis)

    def restart_postgres(self) -> None:
        raise StackError(f"{self.name}: restart-postgres is not driven on a lab cluster yet (no readiness check)")

    def log_mark(self, name: str) -> LogMark:
        proc = self._named(name)
        offset = self.log_size(proc)
        return FetchedLogMark(lambda: "\n".join(self.log_since(proc, offset)))

    def redis(self, *args: str) -> Any:
        """One command on the data host's Redis, the password read there from a 0600 file (never on a
        command line)."""
        if self.cluster.data is None:
            raise StackError(f"{self.name}: the cluster record has no data host endpoints")
        words = " ".join(shlex.quote(a) for a in args)
        secret = shlex.quote(redis_password_file(self.cluster))
        res = self.run(
            self.data_host,
            f'REDISCLI_AUTH="$(cat {secret})" redis-cli -h 127.0.0.1 '
            f"-p {int(self.cluster.data.redis_port)} -2 --json {words}",
            check=False,
        )
        if res.exit_code != 0 or res.stdout.startswith("(error)"):
            raise StackError(f"{self.name}: redis-cli {' '.join(args[:2])}: {(res.stdout + res.stderr).strip()[:200]}")
        return json.loads(res.stdout) if res.stdout.strip() else None
