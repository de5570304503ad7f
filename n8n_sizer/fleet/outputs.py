"""What building a fleet or a cluster stack returns to `__main__.py`: the outputs it exports, and the component."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi

from n8n_sizer.fleet.spec import FleetSpec


@dataclass
class Fleet:
    spec: FleetSpec  # a ClusterSpec for a cluster stack
    expires_at: str
    inventory: pulumi.Output[dict[str, Any]]
    ssh_private_key: pulumi.Output[str] | None
    component: pulumi.ComponentResource
