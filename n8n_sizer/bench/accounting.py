"""Per-role CPU from the kernel's accounting, and the data stores' operations, counted at each step's two ends.

When the bench runs as root on a machine with cgroup v1 `cpuacct`, every process of the stack is placed in a
group of its own role and host (`<top>/<host>/<role>`; `hosts.cgroups`): main, each webhook processor and
worker (their task runners, already started as their children, in `runner`), Postgres and Redis with every
child (the backends Postgres forks later start in its group), the load balancer. Only `cpuacct` is used, so a
lab host's CPU quota (its `cpu` group, `lab.cpu`) still holds its processes. A step's CPU per role is the
difference of `cpuacct.usage` between the two readings; Redis commands and Postgres transactions likewise.

Groups of a local stack live under a top group of this run (`n8n-sizer-<random>`) and are removed at the end,
which moves the processes back to the root group; a lab's live under the lab's own top group (`lab.cpu`), so a
second bench reuses them and `lab down` removes them with the lab.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

from n8n_sizer.hosts.cgroups import PREFIX, CgroupError, CpuGroup, available_mounts, descendants, remove_tree
from n8n_sizer.hosts.host import Host, LocalHost
from n8n_sizer.runs.records import StepCounters
from n8n_sizer.runs.stats import role_of
from n8n_sizer.telemetry.probes import Probe, batch_command, split_batch
from n8n_sizer.telemetry.probes.ops import (
    parse_commandstats,
    parse_transactions,
    pg_xacts_command,
    redis_commands,
    redis_commandstats_command,
)

N8N_ROLES = ("main", "webhook", "worker")  # n8n processes whose children are their task runners
OPS_TIMEOUT_S = 15


@dataclass(frozen=True)
class Reading:
    time_s: float
    usage_ns: dict[tuple[str, str], int]  # (host, role) -> cpuacct.usage; role "" = the lab host's whole group
    redis_commands: int | None
    postgres_transactions: int | None


@dataclass
class Accounting:
    """The groups of one bench target and the commands that read its data stores' counters."""

    mounts: dict[str, Path]
    top: str
    remove_top: bool  # a local stack's own top group; a lab's belongs to the lab
    groups: dict[tuple[str, str], CpuGroup] = field(default_factory=dict)
    hosts: dict[str, CpuGroup] = field(default_factory=dict)  # a lab host's own group (lab.cpu), read, never made
    ops_host: Host | None = None
    redis_command: str | None = None
    pg_command: str | None = None

    def place(self, host: str, name: str, pid: int) -> None:
        """Process `name` (a stack's process name: main, worker-1, postgres, caddy...) and its children."""
        role = role_of(name)
        if role is None:
            return
        tree = descendants(pid)
        children = tree[1:] if role in N8N_ROLES else []
        for r, pids in ((role, [p for p in tree if p not in children]), ("runner", children)):
            for p in pids:
                self._group(host, r).add(p, with_children=False)

    def _group(self, host: str, role: str) -> CpuGroup:
        if (host, role) not in self.groups:
            self.groups[(host, role)] = CpuGroup(
                f"{self.top}/{host}/{role}", self.mounts, controllers=("cpuacct",)
            ).create()
        return self.groups[(host, role)]

    def read(self) -> Reading:
        usage = {}
        for key, group in [*self.groups.items(), *(((h, ""), g) for h, g in self.hosts.items())]:
            try:
                usage[key] = group.usage_ns()
            except (OSError, CgroupError):
                continue
        redis = postgres = None
        probes = {k: v for k, v in (("redis_ops", self.redis_command), ("pg_xacts", self.pg_command)) if v}
        if probes and self.ops_host is not None:
            script = batch_command([Probe(k, v, _unused) for k, v in probes.items()])
            outs = split_batch(self.ops_host.run(script, timeout_s=OPS_TIMEOUT_S, check=False).stdout)
            try:
                if "redis_ops" in outs and outs["redis_ops"].exit_code == 0:
                    redis = redis_commands(parse_commandstats(outs["redis_ops"].text))
                if "pg_xacts" in outs and outs["pg_xacts"].exit_code == 0:
                    postgres = parse_transactions(outs["pg_xacts"].text)
            except ValueError:  # ProbeParseError: a reading that cannot be trusted is left out, not zero
                pass
        return Reading(time.time(), usage, redis, postgres)

    def close(self) -> None:
        if self.remove_top:
            remove_tree(self.top, {"cpuacct": self.mounts["cpuacct"]})


def _unused(text, time_s, labels):  # read() parses the counters itself, not into samples
    return []


def step_counters(before: Reading, after: Reading) -> StepCounters:
    """The difference of two readings; a counter that went backwards (a restart) or was not read is None."""
    per_host: dict[str, dict[str, float]] = {}
    whole: dict[str, float] = {}
    for key, end in after.usage_ns.items():
        start = before.usage_ns.get(key)
        if start is not None and end >= start:
            if key[1]:
                per_host.setdefault(key[0], {})[key[1]] = (end - start) / 1e6
            else:
                whole[key[0]] = (end - start) / 1e6
    roles: dict[str, float] = {}
    for host_roles in per_host.values():
        for role, ms in host_roles.items():
            roles[role] = roles.get(role, 0.0) + ms

    def delta(a: int | None, b: int | None) -> int | None:
        return None if a is None or b is None or b < a else b - a

    return StepCounters(
        role_cpu_ms=roles or None,
        host_role_cpu_ms=per_host or None,
        host_cpu_ms=whole or None,
        redis_commands=delta(before.redis_commands, after.redis_commands),
        postgres_transactions=delta(before.postgres_transactions, after.postgres_transactions),
        counted_s=max(0.0, after.time_s - before.time_s),
    )


def local_accounting(stack) -> Accounting | None:
    """Groups for a `LocalStack`'s processes (this machine), or None when cgroups cannot be used here."""
    from n8n_sizer.bundle.n8n_env import POSTGRES_DATABASE, POSTGRES_USER

    mounts = available_mounts()
    if not mounts:
        return None
    acc = Accounting(mounts, f"{PREFIX}{secrets.token_hex(3)}", remove_top=True, ops_host=LocalHost())
    try:
        for name, proc in stack.processes.items():
            acc.place("local", name, proc.pid)
    except CgroupError:
        acc.close()
        return None
    secret = Path(stack.stack_dir) / "redis-probe.secret"  # written by stack.sampling before the steps
    if stack.uses_redis and stack.redis_port and secret.exists():
        acc.redis_command = redis_commandstats_command(stack.redis_port, password_file=str(secret))
    if stack.uses_postgres and stack.postgres_port:
        acc.pg_command = pg_xacts_command(
            stack.postgres_port, str(stack.postgres_socket_dir), user=POSTGRES_USER, database=POSTGRES_DATABASE
        )
    return acc


def lab_accounting(
    pids: dict[str, dict[str, int]], data, redis_secret: str | None, top: str | None = None
) -> Accounting | None:
    """Groups for a lab cluster's processes ({host: {name: PID}}), under the lab's top group (`lab.cpu`) when it
    has one (kept for the lab's life), else under one of this run's own; with the data host's Redis (redis-cli in
    the data host's network namespace, on its loopback) and Postgres (its socket: every namespace shares this
    machine's filesystem)."""
    mounts = available_mounts()
    if not mounts:
        return None
    acc = Accounting(mounts, top or f"{PREFIX}{secrets.token_hex(3)}", remove_top=top is None, ops_host=LocalHost())
    try:
        for host, procs in pids.items():
            for name, pid in procs.items():
                acc.place(host, name, pid)
            if top is not None:
                acc.hosts[host] = CpuGroup(f"{top}/{host}", mounts, controllers=("cpuacct",))
    except CgroupError:
        acc.close()
        return None
    if data is not None:
        if redis_secret:
            # inside the data host's namespace: its firewall resets Redis connections from the lab's bridge address
            acc.redis_command = redis_commandstats_command(
                data.redis_port, "127.0.0.1", password_file=redis_secret, netns_pid=data.redis_pid
            )
        acc.pg_command = pg_xacts_command(
            data.postgres_port, str(Path(data.secrets_file).parent / "postgres"), user=data.user, database=data.database
        )
    return acc
