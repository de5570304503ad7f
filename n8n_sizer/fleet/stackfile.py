"""A stack file (`stacks/Pulumi.<stack>.yaml`) into its spec: a fleet of targets, or a cluster (a topology).

Kept apart from `spec` so that the plain fleet's model does not depend on the cluster's (which builds on it).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from n8n_sizer.errors import InputError
from n8n_sizer.fleet.spec import FleetSpec, namespace_values, parse_fleet_config, read_stack_config


def parse_stack_config(values: Mapping[str, Any], *, stack: str) -> FleetSpec:
    """A stack with `n8n-sizer:cluster` (a topology) becomes a `ClusterSpec` (fleet/cluster/spec.py), else a FleetSpec."""
    if "cluster" in values:
        from n8n_sizer.fleet.cluster.spec import ClusterSpec

        return parse_fleet_config(values, stack=stack, model=ClusterSpec)
    return parse_fleet_config(values, stack=stack)


def load_stack_file(path: Path | str) -> FleetSpec:
    """Parse `stacks/Pulumi.<stack>.yaml` into a FleetSpec; the stack name comes from the file name."""
    path = Path(path)
    name = path.name
    if not (name.startswith("Pulumi.") and name.endswith((".yaml", ".yml"))):
        raise InputError(f"stack file {path} must be named Pulumi.<stack>.yaml")
    stack = name[len("Pulumi.") :].rsplit(".", 1)[0]
    return parse_stack_config(namespace_values(read_stack_config(path)), stack=stack)
