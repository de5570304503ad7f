"""What building a fleet or a cluster stack returns to `__main__.py`: the outputs it exports, and the component."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pulumi

from n8n_sizer.fleet.labels import expires_at
from n8n_sizer.fleet.spec import FleetSpec
from n8n_sizer.fleet.sshkey import fleet_ssh_key


@dataclass
class Fleet:
    spec: FleetSpec  # a ClusterSpec for a cluster stack
    expires_at: str
    inventory: pulumi.Output[dict[str, Any]]
    ssh_private_key: pulumi.Output[str] | None
    component: pulumi.ComponentResource


# (expires-at label value, the servers' SSH public key) -> (the provider component, its inventory output)
CreateServers = Callable[[str, pulumi.Input[str]], tuple[pulumi.ComponentResource, pulumi.Output[dict[str, Any]]]]


def assemble(spec: FleetSpec, now: datetime | None, create: CreateServers) -> Fleet:
    """What every stack program does around its servers: one expiry stamp for every label, one SSH key (generated
    unless the stack file gives one), then `create` builds the provider's component and its inventory."""
    expires = expires_at(now or datetime.now(UTC), spec.ttl_hours)
    public_key, private_key = fleet_ssh_key(spec)
    component, inventory = create(expires, public_key)
    return Fleet(spec=spec, expires_at=expires, inventory=inventory, ssh_private_key=private_key, component=component)
