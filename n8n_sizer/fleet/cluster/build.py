"""Cluster stacks: a topology on servers that share one private network (`stacks/Pulumi.cluster-*.yaml`).

A cluster stack is a fleet stack whose `n8n-sizer:cluster` key holds a topology (what `advise --json`
prints, or `{"topology": [...]}` written by hand, or `{"topology_file": "advice.json"}`) instead of
`targets`. Every host's cloud-init is its bundle from `bundle.render_topology`, rendered once per
`pulumi up` with one secret set; each server gets the private address the bundles were rendered with.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import pulumi

from n8n_sizer.bundle.topology import Topology
from n8n_sizer.errors import InputError
from n8n_sizer.fleet.cluster.spec import USER_DATA_LIMIT_BYTES, ClusterSpec, RenderCluster
from n8n_sizer.fleet.outputs import Fleet, assemble
from n8n_sizer.fleet.spec import NAMESPACE, HostSpec
from n8n_sizer.safety.frozen import Frozen


def render_cluster_cloud_init(topology: Topology, public_url: str) -> dict[str, str]:
    """Each host's `#cloud-config`, rendered once with one freshly generated secret set."""
    from n8n_sizer.bundle.render_topology import render_topology
    from n8n_sizer.bundle.secrets import generate_secrets

    cluster = render_topology(topology, generate_secrets(), profile="bench", public_url=public_url)
    return {name: bundle.cloud_init for name, bundle in cluster.hosts.items()}


class ClusterHostEntry(Frozen):
    name: str
    role: Literal["cluster", "loadgen"]
    roles: dict[str, int]
    provider: Literal["hetzner", "gcp"]
    size: str
    vcpu: int
    arch: str
    public_ip: str
    private_ip: str
    ssh_user: str


class ClusterInventory(Frozen):
    """The cluster as the operator and the bench driver see it: every host, its roles, both addresses."""

    stack: str
    provider: Literal["hetzner", "gcp"]
    location: str
    expires_at: str
    subnet: str
    hosts: dict[str, ClusterHostEntry]


def cluster_user_data(spec: ClusterSpec, render: RenderCluster) -> dict[str, str]:
    try:
        rendered = render(spec.topology, spec.public_url or "")
    except InputError as exc:
        raise InputError(f"{NAMESPACE}:cluster: {exc}") from None
    limit = USER_DATA_LIMIT_BYTES[spec.provider]
    for name, text in rendered.items():
        if len(text.encode("utf-8")) > limit:
            raise InputError(
                f"{NAMESPACE}:cluster: host {name}'s cloud-init is over {limit:,} bytes; "
                "split its processes over more hosts"
            )
    return rendered


def build_cluster(
    spec: ClusterSpec, *, now: datetime | None = None, render: RenderCluster = render_cluster_cloud_init
) -> Fleet:
    """Create the cluster's network, firewalls and servers; return its inventory output."""
    user_data = cluster_user_data(spec, render)
    return assemble(spec, now, lambda expires, public_key: _servers(spec, user_data, expires, public_key))


def _servers(spec: ClusterSpec, user_data: dict[str, str], expires: str, public_key: pulumi.Input[str]):
    if spec.provider == "hetzner":
        from n8n_sizer.fleet.cluster import hetzner as provider

        component = provider.HetznerCluster(
            spec.stack, spec=spec, public_key=public_key, user_data=user_data, expires=expires
        )
    else:
        from n8n_sizer.fleet.cluster import gcp as provider  # type: ignore[no-redef]

        component = provider.GcpCluster(
            spec.stack, spec=spec, public_key=public_key, user_data=user_data, expires=expires
        )
    hosts = spec.topology.hosts()
    names = [spec.loadgen.name, *[h.name for h in hosts]]
    public_ips = [component.public_ips[n] for n in names]

    def to_inventory(ips: list[str]) -> dict[str, Any]:
        entries = {}
        for name, ip in zip(names, ips, strict=True):
            host = next((h for h in hosts if h.name == name), None)
            size = spec.server_of(spec.loadgen) if host is None else spec.server_of(HostSpec(name=name, size=host.size))
            entries[name] = ClusterHostEntry(
                name=name,
                role="loadgen" if host is None else "cluster",
                roles={} if host is None else host.roles.model_dump(),
                provider=spec.provider,
                size=size.size,
                vcpu=size.vcpu,
                arch=size.arch,
                public_ip=ip,
                private_ip=spec.loadgen_private_ip() if host is None else host.private_ip,
                ssh_user=provider.SSH_USER,
            )
        return ClusterInventory(
            stack=spec.stack,
            provider=spec.provider,
            location=spec.location,
            expires_at=expires,
            subnet=spec.topology.subnet,
            hosts=entries,
        ).model_dump(mode="json")

    return component, pulumi.Output.all(*public_ips).apply(to_inventory)
