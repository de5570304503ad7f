"""`Inventory`: the fleet as the bench driver sees it, read from `pulumi stack output --json inventory`.

Shape (JSON):

    {"stack": "single", "provider": "hetzner", "location": "hel1", "expires_at": "2026-12-01t10-00z",
     "hosts": {"loadgen": {"name": "loadgen", "role": "loadgen", "provider": "hetzner", "size": "cx33",
                           "vcpu": 4, "arch": "x86", "public_ip": "203.0.113.10", "private_ip": null,
                           "ssh_user": "root", "setup": null},
               "cx33-queue-2w": {..., "role": "target", "setup": {"mode": "queue", "workers": 2, ...}}}}

`private_ip` is None on Hetzner (the fleet uses public addresses, filtered by the firewall) and the
VPC address on GCP. `setup` is None for the load generator and the target's `Setup` otherwise.

A cluster (a cluster stack, or `lab up`'s namespaces) lists hosts of role "cluster" with `roles` (the
topology's process counts on that host) instead of a `setup`, and may have several load generators. A lab's
inventory also carries `lab`: the lab's own state (bridge, namespaces, PIDs, key folder) that `lab down`
reads; this model keeps it opaque and n8n_sizer.lab validates it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, ValidationError, model_validator

from n8n_sizer.advisor.catalog import Arch, Provider
from n8n_sizer.advisor.setup import Setup
from n8n_sizer.errors import InputError
from n8n_sizer.safety.frozen import Frozen
from n8n_sizer.safety.jsondoc import load_json
from n8n_sizer.safety.network import check_host, check_user

Role = Literal["target", "loadgen", "cluster"]


# One grammar for host names, addresses and login users (safety/network.py), shared with the lab and the
# stack files: no `host:port`, `user@host`, URL, whitespace or newline reaches an SSH target, a k6 script
# or a remote path.
HostName = Annotated[str, AfterValidator(lambda v: check_host(v, "host"))]
Word = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9 ._:-]{0,63}$")]  # no newline, no quote, bounded


class InventoryHost(Frozen):
    name: HostName
    role: Role
    provider: Provider
    size: Word
    vcpu: int = Field(gt=0, le=1024)
    arch: Arch
    public_ip: HostName
    private_ip: HostName | None = None
    ssh_user: Annotated[str, AfterValidator(lambda v: check_user(v, "ssh_user"))]
    setup: Setup | None = None
    roles: dict[str, int] | None = None  # a cluster host's process counts per role (bundle.topology.Roles)

    @model_validator(mode="after")
    def _setup_for_targets(self) -> InventoryHost:
        if self.role == "cluster" and (self.roles is None or self.setup is not None):
            raise ValueError(f"cluster host {self.name} needs roles and no setup")
        if self.role != "cluster" and self.roles is not None:
            raise ValueError(f"{self.role} {self.name} must not carry roles (only cluster hosts do)")
        if self.role == "target" and self.setup is None:
            raise ValueError(f"target {self.name} has no setup")
        if self.role == "loadgen" and self.setup is not None:
            raise ValueError(f"load generator {self.name} must not carry a setup")
        return self


class Inventory(Frozen):
    stack: Word
    provider: Provider
    location: Word
    expires_at: Word
    hosts: dict[str, InventoryHost] = Field(min_length=2, max_length=256)
    subnet: str | None = None  # a cluster's private network
    lab: dict[str, Any] | None = None  # `lab up`'s state, for `lab down` (see the module docstring)

    @model_validator(mode="after")
    def _one_loadgen(self) -> Inventory:
        for key, host in self.hosts.items():
            if key != host.name:
                raise ValueError(f"hosts[{key[:60]!r}] names itself {host.name!r}")
        loadgens = [h for h in self.hosts.values() if h.role == "loadgen"]
        if self.cluster_hosts():
            if not loadgens:
                raise ValueError("a cluster inventory needs at least one load generator, found none")
            if self.targets():
                raise ValueError("an inventory lists either targets or cluster hosts, not both")
        elif len(loadgens) != 1:
            raise ValueError(f"an inventory has exactly one load generator, found {len(loadgens)}")
        return self

    def cluster_hosts(self) -> list[InventoryHost]:
        return [h for h in self.hosts.values() if h.role == "cluster"]

    def loadgens(self) -> list[InventoryHost]:
        return [h for h in self.hosts.values() if h.role == "loadgen"]

    def targets(self) -> list[InventoryHost]:
        return [h for h in self.hosts.values() if h.role == "target"]

    def loadgen(self) -> InventoryHost:
        return next(h for h in self.hosts.values() if h.role == "loadgen")


def load_inventory(text: str) -> Inventory:
    """Parse the JSON of `pulumi stack output --json inventory`; InputError when it is not one."""
    data = load_json(text, "inventory", "pass the output of `pulumi stack output --json inventory`")
    try:
        return Inventory.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(repr(p)[1:-1][:60] if isinstance(p, str) else str(p) for p in first["loc"]) or "top level"
        raise InputError(
            f"inventory {where}: {first['msg'].removeprefix('Value error, ')[:300]}; pass the output "
            "of `pulumi stack output --json inventory` for a stack that is up"
        ) from None
