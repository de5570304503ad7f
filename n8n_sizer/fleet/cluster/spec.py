"""The cluster stack's spec: a fleet stack whose `n8n-sizer:cluster` key holds a topology, and the role of
each host. Pure model (no Pulumi), shared by the cluster program (`cluster/build.py`) and its per-provider
components (`cluster/hetzner.py`, `cluster/gcp.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from n8n_sizer.bundle.topology import ClusterHost, Topology, parse_topology
from n8n_sizer.errors import InputError
from n8n_sizer.fleet.spec import NAMESPACE, FleetSpec, HostSpec, TargetSpec, _KeyError

USER_DATA_LIMIT_BYTES = {"hetzner": 32 * 1024, "gcp": 256 * 1024}  # Hetzner's user_data; GCP's metadata value
LOADGEN_OFFSET = 9  # the load generator's private address: just below the first cluster host's (.10)
ROLE_TYPES = {
    "data": "n8n-sizer:cluster:DataHost",
    "ingest": "n8n-sizer:cluster:IngestHost",
    "worker": "n8n-sizer:cluster:WorkerHost",
    "loadgen": "n8n-sizer:fleet:LoadGenerator",
}
RenderCluster = Callable[[Topology, str], dict[str, str]]  # (topology, public URL) -> host: cloud-init


class ClusterSpec(FleetSpec):
    """A fleet spec with a topology in place of targets."""

    targets: tuple[TargetSpec, ...] = Field(default=(), max_length=0)
    cluster: dict[str, Any]
    # The URL n8n gives out for webhooks: the load balancer's name as the outside calls it (never localhost).
    public_url: str | None = None

    @field_validator("cluster", mode="before")
    @classmethod
    def _read_file(cls, v: Any) -> Any:
        if isinstance(v, dict) and set(v) == {"topology_file"}:
            from n8n_sizer.safety.files import read_user_text
            from n8n_sizer.safety.jsondoc import load_json

            path = Path(str(v["topology_file"]))
            fix = "write it with `advise --json > advice.json`, relative to the project folder"
            try:  # the one reader and the one JSON loader: a FIFO, a device, 100,000 brackets are one line
                return load_json(
                    read_user_text(path, "topology_file", fix=fix, max_bytes=4 << 20), f"topology_file {path}", fix
                )
            except InputError as exc:
                raise ValueError(str(exc)) from None
        return v

    @model_validator(mode="after")
    def _topology_fits(self) -> ClusterSpec:
        try:
            topology = self.topology
        except InputError as exc:
            raise _KeyError("cluster", str(exc)) from None
        if any(g.size is None for g in topology.groups):
            raise _KeyError(
                "cluster",
                "a host group has no catalog size (only vcpu): a stack creates servers of a "
                "size; ask `advise` without --vcpu, or with one a catalog size has (e.g. --vcpu 4)",
            )
        providers = {g.provider or "none" for g in topology.groups}
        if providers != {self.provider}:
            raise _KeyError(
                "cluster",
                f"the topology's provider {', '.join(sorted(providers))} differs from "
                f"n8n-sizer:provider {self.provider}; one stack lives in one provider",
            )
        from n8n_sizer.bundle.render import public_url_for

        try:
            public_url_for("bench", None, self.public_url, cluster=True)
        except InputError as exc:
            raise _KeyError(
                "public_url",
                f"{exc}; set it: pulumi config set n8n-sizer:public_url "
                "http://n8n.example.com:5678/ (a name pointed at the load balancer's host)",
            ) from None
        names = {h.name for h in topology.hosts()}
        if self.loadgen.name in names:
            raise _KeyError("loadgen.name", f"{self.loadgen.name!r} is also a cluster host; rename one")
        for host in topology.hosts():
            if (
                self.provider == "hetzner"
                and host.size.startswith(("cx", "cax"))
                and self.location in ("ash", "hil", "sin")
            ):
                raise _KeyError(
                    "cluster", f"{host.size} is sold in Hetzner's EU locations only; use fsn1, nbg1 or hel1"
                )
        # Whatever `pulumi up` would refuse when it renders the hosts (max_connections under the pools, a
        # Postgres host too small for its connections, cloud-init over the limit) is refused here, so `cost`
        # never prices a stack the program will not build.
        from n8n_sizer.bundle.render_topology import render_topology
        from n8n_sizer.bundle.secrets import generate_secrets

        try:
            render_topology(topology, generate_secrets(), profile="bench", public_url=self.public_url)
        except InputError as exc:
            raise _KeyError("cluster", str(exc)) from None
        return self

    @property
    def topology(self) -> Topology:
        return parse_topology(self.cluster, f"{NAMESPACE}:cluster")

    @property
    def hosts(self) -> tuple[HostSpec, ...]:
        return (self.loadgen, *[HostSpec(name=h.name, size=h.size) for h in self.topology.hosts()])

    def loadgen_private_ip(self) -> str:
        import ipaddress

        return str(ipaddress.ip_network(self.topology.subnet)[LOADGEN_OFFSET])


def host_kind(host: ClusterHost) -> str:
    """The component type of a host: its most load-bearing role decides (data > ingest > worker)."""
    roles = host.roles
    if roles.postgres or roles.redis:
        return "data"
    if roles.main or roles.webhook or roles.load_balancer:
        return "ingest"
    return "worker"


def role_label(host: ClusterHost) -> str:
    """`postgres-redis`, `main-webhook-lb`, `workers`: a label value valid on both providers."""
    short = {"load_balancer": "lb"}
    return "-".join(short.get(r, r) for r in host.roles.listed())
