"""The one model of a topology: what `advise --json` writes and `render --topology`, `advise --topology` and
`lab up --topology` read. A single host is a one-host topology (regular or queue mode on one server).

- `Roles`: process counts on ONE host of a group; `HostGroup`: `count` identical hosts of a catalog size (or,
  off the catalog, of `vcpu` cores); `PoolSizes`: DB_POSTGRESDB_POOL_SIZE per n8n role, None where the role
  does not run; `Topology`: the groups with the settings every host shares.
- `Topology.hosts()` expands each group of `count` N into hosts `<name>-1 .. <name>-N`, each with a fixed
  private address (the renderer writes them into the bundles; the cluster stacks give the servers the same).

The shape rules that need the whole topology (exactly one main and Postgres, one provider, a load balancer in
front of webhook processors) live with the parser, `bundle/topology.py`.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from n8n_sizer.advisor.catalog import find_size
from n8n_sizer.advisor.pools import RAM_MIB_PER_VCPU_ASSUMED
from n8n_sizer.advisor.setup import (
    DEFAULT_DB_POOL_SIZE,
    DEFAULT_GRACEFUL_SHUTDOWN_S,
    DEFAULT_RUNNER_CONCURRENCY,
    DEFAULT_WORKER_CONCURRENCY,
    MAX_WORKERS,
    Setup,
)
from n8n_sizer.safety.frozen import Frozen
from n8n_sizer.safety.names import matching
from n8n_sizer.safety.network import check_private_subnet
from n8n_sizer.versions import N8N_VERSION

NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,20}[a-z0-9]$")
MAX_GROUP_HOSTS = 200  # `advise --max-hosts` at most
# One /24 inside the Hetzner network's /16 and GCP's subnet. Hetzner keeps .1 for its gateway and GCP the
# first two and last two addresses, so hosts start at .10.
DEFAULT_SUBNET = "10.89.0.0/24"
FIRST_HOST_OFFSET = 10
ROLE_NAMES = ("main", "webhook", "workers", "postgres", "redis", "load_balancer")


class Roles(Frozen):
    """Process counts on ONE host of a group."""

    main: int = Field(0, ge=0, le=1)  # multi-main needs an n8n licence: out of scope
    webhook: int = Field(0, ge=0, le=MAX_WORKERS)
    workers: int = Field(0, ge=0, le=MAX_WORKERS)
    postgres: int = Field(0, ge=0, le=1)
    redis: int = Field(0, ge=0, le=1)
    load_balancer: int = Field(0, ge=0, le=1)

    def counts(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in ROLE_NAMES}

    def listed(self) -> list[str]:
        return [name for name, n in self.counts().items() if n]


class HostGroup(Frozen):
    name: Annotated[
        str,
        AfterValidator(
            matching(
                NAME_RE,
                "{value!r} is not a host group name; use 2-22 lowercase "
                "letters, digits and dashes, starting with a letter, e.g. worker",
            )
        ),
    ]
    provider: Literal["hetzner", "gcp"] | None = None  # None: a host of `vcpu` cores off the catalog
    size: str | None = Field(None, max_length=40)
    vcpu: int | None = Field(None, ge=1, le=512)
    arch: Literal["x86", "arm"] | None = None
    count: int = Field(1, ge=1, le=MAX_GROUP_HOSTS)
    roles: Roles
    monthly_eur: float | None = Field(None, ge=0, le=1e7)  # what `advise --json` estimated, per host; not rendered

    @model_validator(mode="after")
    def _sized(self) -> HostGroup:
        if self.size is None and self.vcpu is None:
            raise ValueError(f"group {self.name}: give a catalog `size` (e.g. cx33) or, off the catalog, `vcpu`")
        return self

    def server(self) -> tuple[int, int, str]:
        """(vCPU, RAM MiB, arch) of one host: the catalog's, or `vcpu` cores at the RAM this tool assumes per vCPU."""
        if self.size is not None:
            s = find_size(self.size, self.provider)
            return s.vcpu, s.ram_mib, s.arch
        return self.vcpu, RAM_MIB_PER_VCPU_ASSUMED * self.vcpu, self.arch or "x86"


class PoolSizes(Frozen):
    """DB_POSTGRESDB_POOL_SIZE per n8n role; None where the role does not run."""

    main: int = Field(DEFAULT_DB_POOL_SIZE, ge=1, le=500)
    webhook: int | None = Field(None, ge=1, le=500)
    worker: int | None = Field(None, ge=1, le=500)

    def of(self, role: str) -> int:
        """The pool a process of `role` opens (n8n's default where the topology left it unset)."""
        value = getattr(self, role)
        return DEFAULT_DB_POOL_SIZE if value is None else value


class ClusterHost(Frozen):
    """One server of an expanded topology."""

    name: str
    group: str
    provider: Literal["hetzner", "gcp"] | None
    size: str | None
    vcpu: int
    ram_mib: int
    arch: Literal["x86", "arm"]
    roles: Roles
    private_ip: str


class Topology(Frozen):
    """The groups and what every host shares: `advise --json`'s `topology` with its settings."""

    groups: tuple[HostGroup, ...] = Field(min_length=1, max_length=64)
    concurrency: int = Field(DEFAULT_WORKER_CONCURRENCY, ge=1, le=100_000)  # long waits: setup.py says why
    runner_concurrency: int = Field(DEFAULT_RUNNER_CONCURRENCY, ge=1, le=1000)
    production_limit: int | None = Field(None, ge=1, le=100_000)  # regular mode's N8N_CONCURRENCY_PRODUCTION_LIMIT
    db_pool_size: PoolSizes = PoolSizes()
    max_connections: int | None = Field(None, ge=1, le=100000)
    n8n_version: str = Field(N8N_VERSION, max_length=40, pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$")
    longest_execution_s: int = Field(DEFAULT_GRACEFUL_SHUTDOWN_S, ge=1, le=86400)
    held_mb: float | None = Field(None, gt=0, le=100_000)  # Setup.held_mb: what one execution in flight holds
    queue_depth_jobs: int | None = Field(None, ge=1, le=100_000_000)  # Setup.queue_depth_jobs: Redis' maxmemory
    # the one subnet rule (safety/network.py, issue 24): private IPv4, no host bits, not loopback/link-local/0/8
    subnet: Annotated[str, AfterValidator(check_private_subnet)] = Field(DEFAULT_SUBNET, max_length=43)

    def total(self, role: str) -> int:
        return sum(getattr(g.roles, role) * g.count for g in self.groups)

    @property
    def single_host(self) -> bool:
        return len(self.groups) == 1 and self.groups[0].count == 1

    def hosts(self) -> list[ClusterHost]:
        net = ipaddress.ip_network(self.subnet)
        out: list[ClusterHost] = []
        for group in self.groups:
            vcpu, ram, arch = group.server()
            for i in range(1, group.count + 1):
                name = group.name if group.count == 1 else f"{group.name}-{i}"
                out.append(
                    ClusterHost(
                        name=name,
                        group=group.name,
                        provider=group.provider,
                        size=group.size,
                        vcpu=vcpu,
                        ram_mib=ram,
                        arch=arch,
                        roles=group.roles,
                        private_ip=str(net[FIRST_HOST_OFFSET + len(out)]),
                    )
                )
        return out

    def host_with(self, role: str) -> ClusterHost | None:
        return next((h for h in self.hosts() if getattr(h.roles, role)), None)

    def setup(self) -> Setup:
        """The one `Setup` a topology is rendered, recorded and reported as. One host: regular mode without workers
        (with its production limit, if any), queue mode with them; a cluster: queue mode with every host's
        workers (lab runs are recorded so)."""
        if len(self.groups) > 1 or self.groups[0].count > 1:
            workers = sum(h.roles.workers for h in self.hosts())
            return Setup(
                mode="queue",
                workers=max(workers, 1),
                concurrency=self.concurrency,
                held_mb=self.held_mb,
                queue_depth_jobs=self.queue_depth_jobs,
            )
        workers = self.groups[0].roles.workers
        return Setup(
            mode="queue" if workers else "regular",
            workers=workers,
            concurrency=self.concurrency,
            runner_concurrency=self.runner_concurrency,
            db="postgres",
            production_limit=None if workers else self.production_limit,
            db_pool_size=self.db_pool_size.of("worker") if workers else self.db_pool_size.main,
            n8n_version=self.n8n_version,
            longest_execution_s=self.longest_execution_s,
            held_mb=self.held_mb,
            queue_depth_jobs=self.queue_depth_jobs,
        )


# The keys of `advise --json` (and of a hand-written topology file) that make up a topology.
TOPOLOGY_KEYS = (
    "concurrency",
    "runner_concurrency",
    "production_limit",
    "max_connections",
    "n8n_version",
    "longest_execution_s",
    "subnet",
    "held_mb",
    "queue_depth_jobs",
)
