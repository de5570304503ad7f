"""A topology: host groups with per-host role counts (the contract of `advise --json` and `render --topology`).

`parse_topology` reads the whole `advise --json` object or just `{"topology": [...]}` with optional
`concurrency`, `db_pool_size` (a number or `{main, webhook, worker}`) and `max_connections`, validates it
once, and `Topology.hosts()` expands each group of `count` N into hosts `<name>-1 .. <name>-N`, each with a
fixed private address: the renderer writes those addresses into the bundles and the cluster stacks give the
servers the same ones, so no bundle waits for an address only known after `pulumi up`.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, ValidationError

from n8n_sizer.advisor.catalog import ServerSize, UnknownSize, find_size
from n8n_sizer.advisor.setup import (
    CONNECTION_HEADROOM,
    DEFAULT_DB_POOL_SIZE,
    DEFAULT_GRACEFUL_SHUTDOWN_S,
    DEFAULT_RUNNER_CONCURRENCY,
    DEFAULT_WORKER_CONCURRENCY,
    POSTGRES_DEFAULT_MAX_CONNECTIONS,
    Setup,
)
from n8n_sizer.errors import InputError
from n8n_sizer.safety.jsondoc import load_json
from n8n_sizer.safety.names import matching
from n8n_sizer.safety.network import check_private_subnet
from n8n_sizer.versions import N8N_VERSION
from n8n_sizer.safety.frozen import Frozen

NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,20}[a-z0-9]$")
# One /24 inside the Hetzner network's /16 and GCP's subnet. Hetzner keeps .1 for its gateway and GCP the
# first two and last two addresses, so hosts start at .10.
DEFAULT_SUBNET = "10.89.0.0/24"
FIRST_HOST_OFFSET = 10
# PGTune's rules: shared_buffers a quarter of RAM; work_mem = (RAM - shared_buffers) / (3 x max_connections),
# and never below Postgres' own default of 4 MiB (below it sorts spill to disk).
SHARED_BUFFERS_FRACTION = 0.25
MIN_WORK_MEM_MIB = 4


class Roles(Frozen):
    """Process counts on ONE host of a group."""

    main: int = Field(0, ge=0, le=1)  # multi-main needs an n8n licence: out of scope
    webhook: int = Field(0, ge=0, le=32)
    workers: int = Field(0, ge=0, le=32)
    postgres: int = Field(0, ge=0, le=1)
    redis: int = Field(0, ge=0, le=1)
    load_balancer: int = Field(0, ge=0, le=1)

    def listed(self) -> list[str]:
        return [name for name, n in self.model_dump().items() if n]


class HostGroup(Frozen):
    name: Annotated[str, AfterValidator(matching(NAME_RE, "{value!r} is not a host group name; use 2-22 lowercase "
                                                 "letters, digits and dashes, starting with a letter, e.g. worker"))]
    provider: Literal["hetzner", "gcp"]
    size: str
    vcpu: int | None = Field(None, ge=1)
    count: int = Field(1, ge=1, le=32)
    roles: Roles
    monthly_eur: float | None = Field(None, ge=0)  # what `advise --json` estimated; informational, not rendered


class PoolSizes(Frozen):
    """DB_POSTGRESDB_POOL_SIZE per role."""

    main: int = Field(DEFAULT_DB_POOL_SIZE, ge=1, le=500)
    webhook: int = Field(DEFAULT_DB_POOL_SIZE, ge=1, le=500)
    worker: int = Field(DEFAULT_DB_POOL_SIZE, ge=1, le=500)


class Host(Frozen):
    """One server of an expanded topology."""

    name: str
    group: str
    provider: Literal["hetzner", "gcp"]
    size: str
    vcpu: int
    ram_mib: int
    roles: Roles
    private_ip: str


class Topology(Frozen):
    groups: tuple[HostGroup, ...] = Field(min_length=1)
    concurrency: int = Field(DEFAULT_WORKER_CONCURRENCY, ge=1, le=1000)
    runner_concurrency: int = Field(DEFAULT_RUNNER_CONCURRENCY, ge=1, le=1000)
    db_pool_size: PoolSizes = PoolSizes()
    max_connections: int | None = Field(None, ge=1)
    n8n_version: str = N8N_VERSION
    longest_execution_s: int = Field(DEFAULT_GRACEFUL_SHUTDOWN_S, ge=1, le=86400)
    subnet: Annotated[str, AfterValidator(check_private_subnet)] = DEFAULT_SUBNET  # the one rule (safety.network)

    def total(self, role: str) -> int:
        return sum(getattr(g.roles, role) * g.count for g in self.groups)

    @property
    def single_host(self) -> bool:
        return len(self.groups) == 1 and self.groups[0].count == 1

    def hosts(self) -> list[Host]:
        net = ipaddress.ip_network(self.subnet)
        out: list[Host] = []
        for group in self.groups:
            server = find_size(group.size, group.provider)
            for i in range(1, group.count + 1):
                name = group.name if group.count == 1 else f"{group.name}-{i}"
                out.append(Host(name=name, group=group.name, provider=group.provider, size=server.size,
                                vcpu=server.vcpu, ram_mib=server.ram_mib, roles=group.roles,
                                private_ip=str(net[FIRST_HOST_OFFSET + len(out)])))
        return out

    def host_with(self, role: str) -> Host | None:
        return next((h for h in self.hosts() if getattr(h.roles, role)), None)

    def single_setup(self) -> Setup:
        """The `Setup` of a one-host topology: today's single-host stack (regular mode without workers)."""
        workers = self.groups[0].roles.workers
        return Setup(mode="queue" if workers else "regular", workers=workers, concurrency=self.concurrency,
                     runner_concurrency=self.runner_concurrency, db="postgres",
                     db_pool_size=self.db_pool_size.worker if workers else self.db_pool_size.main,
                     n8n_version=self.n8n_version, longest_execution_s=self.longest_execution_s)


def postgres_connections(t: Topology) -> int:
    """Connections every process opens: main holds pool + 1 (seed 000), webhook processors and workers
    their pool each. This sum, not one host's, is what Postgres sees (the ~380 req/s outage in seed 000)."""
    pools = t.db_pool_size
    return t.total("main") * (pools.main + 1) + t.total("webhook") * pools.webhook + t.total("workers") * pools.worker


def pool_arithmetic(t: Topology) -> str:
    pools = t.db_pool_size
    parts = [f"main (pool {pools.main} + 1)"]
    if t.total("webhook"):
        parts.append(f"{t.total('webhook')} webhook x {pools.webhook}")
    if t.total("workers"):
        parts.append(f"{t.total('workers')} workers x {pools.worker}")
    return f"{' + '.join(parts)} + {CONNECTION_HEADROOM} headroom = {postgres_connections(t) + CONNECTION_HEADROOM}"


def max_connections(t: Topology) -> int:
    """The given max_connections if it covers the pools, else a refusal; default max(100, need)."""
    need = postgres_connections(t) + CONNECTION_HEADROOM
    if t.max_connections is None:
        return max(POSTGRES_DEFAULT_MAX_CONNECTIONS, need)
    if t.max_connections < need:
        raise InputError(f"max_connections {t.max_connections} is below what every process's pool needs: "
                         f"{pool_arithmetic(t)}; set max_connections to {need} or lower db_pool_size")
    return t.max_connections


class PostgresMemory(Frozen):
    max_connections: int
    shared_buffers_mib: int
    work_mem_mib: int
    effective_cache_size_mib: int


def postgres_memory(t: Topology, ram_mib: int, size: str) -> PostgresMemory:
    """Memory settings that `max_connections` implies on a host of `ram_mib` (PGTune's rules), or a refusal
    when each connection would get less than Postgres' default work_mem."""
    conns = max_connections(t)
    shared = int(ram_mib * SHARED_BUFFERS_FRACTION)
    work_mem = (ram_mib - shared) // (3 * conns)
    if work_mem < MIN_WORK_MEM_MIB:
        most = (ram_mib - shared) // (3 * MIN_WORK_MEM_MIB)
        raise InputError(f"the Postgres host ({size}, {ram_mib} MiB) cannot give {conns} connections "
                         f"{MIN_WORK_MEM_MIB} MiB of work_mem each (at most {most}); use a bigger size for it, "
                         "or lower db_pool_size")
    return PostgresMemory(max_connections=conns, shared_buffers_mib=shared, work_mem_mib=work_mem,
                          effective_cache_size_mib=int(ram_mib * 0.75))


def _check_shape(t: Topology) -> None:
    names: set[str] = set()
    for i, group in enumerate(t.groups):
        key = f"topology[{i}]"
        try:
            server: ServerSize = find_size(group.size, group.provider)
        except UnknownSize as exc:
            raise InputError(f"{key}.size: {exc} ({group.provider})") from None
        if group.vcpu is not None and group.vcpu != server.vcpu:
            raise InputError(f"{key}.vcpu {group.vcpu} differs from {server.size}'s {server.vcpu} vCPU; "
                             "drop vcpu or fix size")
        if not group.roles.listed():
            raise InputError(f"{key} ({group.name}) runs no role; give it roles or remove it")
        unique = group.roles.main or group.roles.postgres or group.roles.redis or group.roles.load_balancer
        if unique and group.count > 1:
            raise InputError(f"{key} ({group.name}) has count {group.count} but runs main, postgres, redis or "
                             "the load balancer, which exist once; set count: 1 or move those roles")
        expanded = [group.name] if group.count == 1 else [f"{group.name}-{n}" for n in range(1, group.count + 1)]
        for name in expanded:
            if name in names:
                raise InputError(f"{key}: host name {name!r} is used twice; give every group its own name")
            names.add(name)
    for role, what in (("main", "n8n main"), ("postgres", "Postgres")):
        if t.total(role) != 1:
            raise InputError(f"the topology has {t.total(role)} {what} processes; it needs exactly one")
    if len({g.provider for g in t.groups}) > 1:
        raise InputError("the topology mixes providers; one cluster lives in one provider's private network")
    if t.single_host:
        roles = t.groups[0].roles
        if roles.webhook or roles.load_balancer:
            raise InputError("a one-host topology renders today's single-host stack, which has no webhook "
                             "processors or load balancer; set webhook and load_balancer to 0, or add hosts")
        return
    if t.total("workers") < 1 or t.total("redis") != 1:
        raise InputError("a topology of several hosts runs queue mode: it needs at least one worker and "
                         "exactly one redis")
    if t.total("webhook") and t.total("load_balancer") != 1:
        raise InputError(f"{t.total('webhook')} webhook processors need a load balancer in front (roles: "
                         "load_balancer: 1 on one host) to route /webhook/* to them")
    if t.total("load_balancer") > 1:
        raise InputError("the topology has more than one load balancer; keep one")
    net = ipaddress.ip_network(t.subnet)
    if not net.is_private or net.num_addresses < FIRST_HOST_OFFSET + len(names) + 2:
        raise InputError(f"subnet {t.subnet} must be a private range with room for {len(names)} hosts")


def parse_topology(data: Any, source: str = "topology") -> Topology:
    """Validate a topology object (advise --json, or {"topology": [...]} with optional setup fields)."""
    if not isinstance(data, dict) or not isinstance(data.get("topology"), list):
        raise InputError(f"{source} has no `topology` list; pass what `advise --json` prints, or "
                         '{"topology": [{"name", "provider", "size", "count", "roles"}]}')
    fields: dict[str, Any] = {"groups": data["topology"]}
    for key in ("concurrency", "runner_concurrency", "max_connections", "n8n_version", "longest_execution_s",
                "subnet"):
        if data.get(key) is not None:
            fields[key] = data[key]
    pool = data.get("db_pool_size")
    if isinstance(pool, int) and not isinstance(pool, bool):
        fields["db_pool_size"] = {"main": pool, "webhook": pool, "worker": pool}
    elif pool is not None:
        fields["db_pool_size"] = pool
    try:
        topology = Topology.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first.get("loc", ())).replace("groups.", "topology.")
        raise InputError(f"{source}: {loc or 'input'}: {first['msg'].removeprefix('Value error, ')}; "
                         "see docs/cluster.md for the format") from None
    _check_shape(topology)
    return topology


def load_topology_text(text: str, source: str) -> Topology:
    """A topology from JSON text: bounded nesting and numbers (safety.jsondoc), then `parse_topology`."""
    return parse_topology(load_json(text, source, "pass the output of `advise --json`"), source)
