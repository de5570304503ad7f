"""A topology: host groups with per-host role counts (the contract of `advise --json` and `render --topology`).

`parse_topology` reads the whole `advise --json` object or just `{"topology": [...]}` with optional
`concurrency`, `db_pool_size` (a number or `{main, webhook, worker}`) and `max_connections`, validates it
once, and `Topology.hosts()` expands each group of `count` N into hosts `<name>-1 .. <name>-N`, each with a
fixed private address: the renderer writes those addresses into the bundles and the cluster stacks give the
servers the same ones, so no bundle waits for an address only known after `pulumi up`.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from pydantic import ValidationError

from n8n_sizer.advisor import pools
from n8n_sizer.advisor.answer.contract import (
    DEFAULT_SUBNET,
    FIRST_HOST_OFFSET,
    NAME_RE,
    TOPOLOGY_KEYS,
    ClusterHost,
    HostGroup,
    PoolSizes,
    Roles,
    Topology,
)
from n8n_sizer.advisor.catalog import UnknownSize, find_size
from n8n_sizer.errors import InputError
from n8n_sizer.safety.jsondoc import load_json

__all__ = [
    "DEFAULT_SUBNET",
    "FIRST_HOST_OFFSET",
    "NAME_RE",
    "ClusterHost",
    "HostGroup",
    "PoolSizes",
    "Roles",
    "Topology",
    "parse_topology",
    "load_topology_text",
    "postgres_connections",
    "pools_needed",
    "max_connections",
    "postgres_memory",
]


def postgres_connections(t: Topology) -> int:
    """Connections every process opens (advisor/pools.py, seed 000's formula over the whole topology): this sum,
    not one host's, is what Postgres sees (the ~380 req/s outage in seed 000)."""
    p = t.db_pool_size  # one main: the shape checks say so before anything counts
    return pools.connections(p.main, p.of("webhook"), t.total("webhook"), p.of("worker"), t.total("workers"))


def pools_needed(t: Topology) -> str:
    """Seed 000's formula over the whole topology, written out by advisor/pools.py (`pools.pool_arithmetic`)."""
    p = t.db_pool_size
    processes = [("main", p.main)]
    processes += [("webhook", p.of("webhook"))] * t.total("webhook")
    processes += [("worker", p.of("worker"))] * t.total("workers")
    return pools.pool_arithmetic(processes)


def max_connections(t: Topology) -> int:
    """The given max_connections if it covers the pools, else a refusal; default pools.recommended_max_connections."""
    conns = postgres_connections(t)
    need = pools.required_max_connections(conns)
    if t.max_connections is None:
        return pools.recommended_max_connections(conns)
    if t.max_connections < need:
        raise InputError(
            f"max_connections {t.max_connections} is below what every process's pool needs: "
            f"{pools_needed(t)}; set max_connections to {need} or lower db_pool_size"
        )
    return t.max_connections


def postgres_memory(t: Topology, ram_mib: int, size: str | None, budget_mib: int | None = None) -> pools.PostgresMemory:
    """Memory settings that the topology's `max_connections` implies on its Postgres host (pools.postgres_memory, over
    `budget_mib`, what Postgres has on that host), or a refusal naming the fix."""
    try:
        return pools.postgres_memory(max_connections(t), ram_mib, budget_mib)
    except pools.TooManyConnections as exc:
        raise InputError(
            f"the Postgres host ({size or 'off the catalog'}): {exc}; use a bigger size for it, or lower db_pool_size"
        ) from None


def _check_shape(t: Topology) -> None:
    names: set[str] = set()
    for i, group in enumerate(t.groups):
        key = f"topology[{i}]"
        if group.size is not None:
            try:
                server = find_size(group.size, group.provider)
            except UnknownSize as exc:
                raise InputError(f"{key}.size: {exc} ({group.provider or 'any provider'})") from None
            if group.vcpu is not None and group.vcpu != server.vcpu:
                raise InputError(
                    f"{key}.vcpu {group.vcpu} differs from {server.size}'s {server.vcpu} vCPU; drop vcpu or fix size"
                )
            if group.arch is not None and group.arch != server.arch:
                raise InputError(
                    f"{key}.arch {group.arch} differs from {server.size}'s {server.arch}; drop arch or fix size"
                )
        if not group.roles.listed():
            raise InputError(f"{key} ({group.name}) runs no role; give it roles or remove it")
        unique = group.roles.main or group.roles.postgres or group.roles.redis or group.roles.load_balancer
        if unique and group.count > 1:
            raise InputError(
                f"{key} ({group.name}) has count {group.count} but runs main, postgres, redis or "
                "the load balancer, which exist once; set count: 1 or move those roles"
            )
        expanded = [group.name] if group.count == 1 else [f"{group.name}-{n}" for n in range(1, group.count + 1)]
        for name in expanded:
            if name in names:
                raise InputError(f"{key}: host name {name!r} is used twice; give every group its own name")
            names.add(name)
    for role, what in (("main", "n8n main"), ("postgres", "Postgres")):
        if t.total(role) != 1:
            raise InputError(f"the topology has {t.total(role)} {what} processes; it needs exactly one")
    providers = sorted({g.provider or "off-catalog" for g in t.groups})
    if len(providers) > 1:
        raise InputError(
            f"the topology mixes providers ({', '.join(providers)}); one cluster lives in one provider's "
            "private network: ask again with `advise --provider hetzner` (or gcp), or give every group "
            "the same provider"
        )
    if t.single_host:
        roles = t.groups[0].roles
        if roles.webhook or roles.load_balancer:
            raise InputError(
                "a one-host topology renders today's single-host stack, which has no webhook "
                "processors or load balancer; set webhook and load_balancer to 0, or add hosts"
            )
        return
    if t.total("workers") < 1 or t.total("redis") != 1:
        raise InputError(
            "a topology of several hosts runs queue mode: it needs at least one worker and exactly one redis"
        )
    if t.total("webhook") and t.total("load_balancer") != 1:
        raise InputError(
            f"{t.total('webhook')} webhook processors need a load balancer in front (roles: "
            "load_balancer: 1 on one host) to route /webhook/* to them"
        )
    if t.total("load_balancer") > 1:
        raise InputError("the topology has more than one load balancer; keep one")
    try:
        net = ipaddress.ip_network(t.subnet)
    except ValueError:
        raise InputError(
            f"subnet {t.subnet!r} is not a network; write it as a private IPv4 range, e.g. {DEFAULT_SUBNET}"
        ) from None
    if not net.is_private or net.num_addresses < FIRST_HOST_OFFSET + len(names) + 2:
        raise InputError(f"subnet {t.subnet} must be a private range with room for {len(names)} hosts")


def parse_topology(data: Any, source: str = "topology") -> Topology:
    """Validate a topology object (advise --json, or {"topology": [...]} with optional setup fields)."""
    if not isinstance(data, dict) or not isinstance(data.get("topology"), list):
        raise InputError(
            f"{source} has no `topology` list; pass what `advise --json` prints, or "
            '{"topology": [{"name", "provider", "size", "count", "roles"}]}'
        )
    fields: dict[str, Any] = {"groups": data["topology"]}
    for key in TOPOLOGY_KEYS:
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
        raise InputError(
            f"{source}: {loc or 'input'}: {first['msg'].removeprefix('Value error, ')}; "
            "see docs/cluster.md for the format"
        ) from None
    _check_shape(topology)
    return topology


def load_topology_text(text: str, source: str) -> Topology:
    """A topology from JSON text: bounded nesting and numbers (safety.jsondoc), then `parse_topology`."""
    return parse_topology(load_json(text, source, "pass the output of `advise --json`"), source)
