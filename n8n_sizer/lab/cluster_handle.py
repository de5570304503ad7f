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

import shlex
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from n8n_sizer.errors import InputError
from n8n_sizer.hosts.host import SshHost

N8N_ROLES = ("main", "webhook", "worker")
RESTART_TIMEOUT_S = 300.0  # a cold n8n start on a busy 2-core machine


@dataclass(frozen=True)
class ClusterProcess:
    host: str
    role: str  # main, webhook, worker, load_balancer, redis, postgres
    name: str  # unique in the cluster: main, webhook-1, worker-1-worker-1, caddy, redis, postgres
    pid: int
    ready_url: str | None = None  # HTTP readiness as the host itself reaches it
    log: str | None = None


class LabClusterHandle:
    """Processes of a deployed lab by host and role; stop, start, signal, readiness over SSH."""

    def __init__(self, inventory_path: Path, python: str = sys.executable) -> None:
        from n8n_sizer.fleet.inventory import load_inventory
        from n8n_sizer.lab.deploy import read_cluster
        from n8n_sizer.lab.state import read_lab_state

        self.path = inventory_path
        self.state = read_lab_state(inventory_path)
        if self.state.folder is None or self.state.client_key is None:
            raise InputError(f"--inventory {inventory_path}: the lab has no folder or key recorded; lab up again")
        self.cluster = read_cluster(self.state)
        from n8n_sizer.safety.files import read_user_text

        self.inventory = load_inventory(read_user_text(inventory_path, "--inventory", max_bytes=1 << 20,
                                                       fix="pass the lab.json that `lab up` wrote"))
        self.folder = Path(self.state.folder)
        self.python = python
        self.name = f"lab-{self.state.lab_id}"
        self._ssh: dict[str, SshHost] = {}

    @classmethod
    def open(cls, inventory_path: Path) -> "LabClusterHandle":
        return cls(inventory_path)

    def __enter__(self) -> "LabClusterHandle":
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
                raise InputError(f"{host}: not a host of the lab {self.state.lab_id}; try one of "
                                 f"{', '.join(sorted(self.inventory.hosts))}")
            h = self.inventory.hosts[host]
            self._ssh[host] = SshHost(host, h.private_ip, h.ssh_user, key_file=Path(self.state.client_key))
        return self._ssh[host]

    def agent(self, host: str, *args: str, timeout_s: float = 60.0) -> Any:
        from n8n_sizer.remote.protocol import Program, run

        return run(self.ssh(host), Program.LAB_AGENT, args, python=self.python, timeout_s=timeout_s)

    def processes(self) -> list[ClusterProcess]:
        """Every role's process: n8n and the load balancer from cluster.json, Postgres and Redis found on the
        data host (Redis: the redis-server; Postgres: the postmaster, whose parent is not a postgres)."""
        out = []
        for host, procs in self.cluster.processes.items():
            out += [ClusterProcess(host, p.role, p.name, p.pid, p.ready_url, p.log) for p in procs]
        if self.cluster.load_balancer_pid is not None:
            ingest = self.ingest_host()
            out.append(ClusterProcess(ingest, "load_balancer", "caddy", self.cluster.load_balancer_pid,
                                      f"http://{self.address(ingest)}:5678/healthz"))
        listed = self.agent(self.data_host, "ps")
        pids = {p["pid"]: p for p in listed}
        for p in listed:
            if p["exe"] == "redis-server":
                out.append(ClusterProcess(self.data_host, "redis", "redis", p["pid"]))
            elif p["exe"] == "postgres" and pids.get(p["ppid"], {}).get("exe") != "postgres":
                out.append(ClusterProcess(self.data_host, "postgres", "postgres", p["pid"]))
        return out

    def find(self, role: str | None = None, host: str | None = None, name: str | None = None) -> list[ClusterProcess]:
        found = [p for p in self.processes() if (role is None or p.role == role) and (host is None or p.host == host)
                 and (name is None or p.name == name)]
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
        return self.agent(proc.host, "stop", "--pid", str(proc.pid), "--snapshot", self._snapshot(proc),
                          "--signal", signal, "--grace", str(grace_s), timeout_s=grace_s + 60)

    def signal(self, proc: ClusterProcess, signal: str) -> None:
        self.agent(proc.host, "signal", "--pid", str(proc.pid), "--signal", signal)

    def _ready_args(self, proc: ClusterProcess) -> list[str]:
        if proc.ready_url:
            return ["--ready-http", proc.ready_url]
        if proc.role == "redis":
            return ["--ready-redis", self.secrets_file]
        raise InputError(f"{proc.name}: no readiness check for role {proc.role}")

    def start(self, proc: ClusterProcess, timeout_s: float = RESTART_TIMEOUT_S) -> tuple[ClusterProcess, float]:
        """Start a stopped process from its snapshot and wait until it is ready; (the process, seconds waited)."""
        res = self.agent(proc.host, "start", "--snapshot", self._snapshot(proc), *self._ready_args(proc),
                         "--timeout", str(timeout_s), timeout_s=timeout_s + 60)
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
            procs = {h: [p.model_copy(update={"pid": pid}) if p.name == old.name and h == old.host else p
                         for p in ps] for h, ps in self.cluster.processes.items()}
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
