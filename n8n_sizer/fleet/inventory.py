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

import json
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from n8n_sizer.advisor.catalog import Arch, Provider
from n8n_sizer.advisor.setup import Setup
from n8n_sizer.errors import InputError
from n8n_sizer.safety.frozen import Frozen

Role = Literal["target", "loadgen", "cluster"]


class InventoryHost(Frozen):
    name: str
    role: Role
    provider: Provider
    size: str
    vcpu: int = Field(gt=0)
    arch: Arch
    public_ip: str
    private_ip: str | None = None
    ssh_user: str
    setup: Setup | None = None
    roles: dict[str, int] | None = None  # a cluster host's process counts per role (deploy.topology.Roles)

    @model_validator(mode="after")
    def _setup_for_targets(self) -> "InventoryHost":
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
    stack: str
    provider: Provider
    location: str
    expires_at: str
    hosts: dict[str, InventoryHost] = Field(min_length=2)
    subnet: str | None = None  # a cluster's private network
    lab: dict[str, Any] | None = None  # `lab up`'s state, for `lab down` (see the module docstring)

    @model_validator(mode="after")
    def _one_loadgen(self) -> "Inventory":
        for key, host in self.hosts.items():
            if key != host.name:
                raise ValueError(f"hosts[{key!r}] names itself {host.name!r}")
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


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def load_inventory(text: str) -> Inventory:
    """Parse the JSON of `pulumi stack output --json inventory`; InputError when it is not one."""
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise InputError(f"inventory is not JSON ({exc.msg} at line {exc.lineno}); pass the output of "
                         "`pulumi stack output --json inventory`") from None
    except (ValueError, RecursionError) as exc:  # NaN/Infinity, a 5,000-digit number, 100,000 brackets
        reason = str(exc) if isinstance(exc, ValueError) else "nested too deeply"
        raise InputError(f"inventory is not usable JSON ({reason[:80]}); pass the output of "
                         "`pulumi stack output --json inventory`") from None
    try:
        return Inventory.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "top level"
        raise InputError(f"inventory {where}: {first['msg'].removeprefix('Value error, ')}; pass the output "
                         "of `pulumi stack output --json inventory` for a stack that is up") from None
