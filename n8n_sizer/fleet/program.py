"""The Pulumi program's body: stack config -> FleetSpec -> provider components -> outputs.

`__main__.py` calls `fleet_spec_from_pulumi()` and `build_fleet()`; tests call the same two with
Pulumi mocks. Cloud-init for each target comes from the deploy room (`render_bundle(...).cloud_init`)
with secrets generated at `pulumi up` time; it reaches the providers as a Pulumi secret only.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pulumi

from n8n_sizer.errors import InputError
from n8n_sizer.fleet.inventory import Inventory
from n8n_sizer.fleet.locations import LOADGEN_CLOUD_INIT
from n8n_sizer.fleet.outputs import Fleet, assemble
from n8n_sizer.fleet.spec import NAMESPACE, FleetSpec, TargetSpec

USER_DATA_LIMIT_BYTES = 32 * 1024  # Hetzner's user_data limit; GCP's metadata value limit is larger
_OBJECT_KEYS = ("loadgen", "targets", "cluster")  # structured values reach the program as JSON text

RenderUserData = Callable[[TargetSpec], str]


def render_target_cloud_init(target: TargetSpec) -> str:
    """The deploy room's `#cloud-config` for one target, with freshly generated secrets."""
    from n8n_sizer.bundle.render import render_bundle
    from n8n_sizer.bundle.secrets import generate_secrets

    return render_bundle(
        target.setup, generate_secrets(), profile="bench", benchmark_host=True, max_connections=target.max_connections
    ).cloud_init


def fleet_spec_from_pulumi() -> FleetSpec:
    """Read every `n8n-sizer:*` key of the running stack into one FleetSpec (InputError on a bad one)."""
    from pulumi.runtime import config as runtime_config

    prefix = f"{NAMESPACE}:"
    keys = {k for k in (runtime_config.CONFIG.get() | (runtime_config.get_config_env() or {})) if k.startswith(prefix)}
    values: dict[str, Any] = {}
    for key in sorted(keys):
        raw = runtime_config.get_config(key)
        short = key[len(prefix) :]
        if short in _OBJECT_KEYS and isinstance(raw, str):
            try:
                raw = json.loads(raw)
            except json.JSONDecodeError:
                raise InputError(f"{key} is not a list/mapping; write it as in stacks/Pulumi.single.yaml") from None
        values[short] = raw
    from n8n_sizer.fleet.stackfile import parse_stack_config

    spec = parse_stack_config(values, stack=pulumi.get_stack())
    refuse_example_cidr(spec)
    return spec


def refuse_example_cidr(spec: FleetSpec) -> None:
    """`pulumi up` opens SSH to `operator_cidr`: the shipped stack files' placeholder (a documentation range,
    RFC 5737) is refused here, where it would become a firewall rule; `cost` and `teardown` may read it."""
    from n8n_sizer.safety.network import check_ssh_cidr

    try:
        check_ssh_cidr(spec.operator_cidr, allow_wide=spec.allow_wide_ssh)
    except ValueError as exc:
        raise InputError(
            f"{NAMESPACE}:{exc}; pulumi config set {NAMESPACE}:operator_cidr <your public IP>/32"
        ) from None


def render_user_data(spec: FleetSpec, render: RenderUserData) -> dict[str, str]:
    """Cloud-init per target name; a refusal from the renderer names the target's config key."""
    out = {}
    for i, target in enumerate(spec.targets):
        key = f"{NAMESPACE}:targets[{i}].setup"
        try:
            text = render(target)
        except InputError as exc:
            raise InputError(f"{key}: {exc}") from None
        size = len(text.encode("utf-8"))
        if size >= USER_DATA_LIMIT_BYTES:
            raise InputError(
                f"{key}: its cloud-init is {size} bytes, over the 32 KiB user_data limit; "
                "use fewer workers or report it as a bug in the deploy templates"
            )
        out[target.name] = text
    return out


def build_fleet(
    spec: FleetSpec, *, now: datetime | None = None, render: RenderUserData = render_target_cloud_init
) -> Fleet:
    """Create the fleet's resources for `spec` and return its outputs (inventory, generated SSH key).
    A cluster stack (`n8n-sizer:cluster`) goes to fleet/cluster/ with its own renderer."""
    from n8n_sizer.fleet.cluster.build import build_cluster
    from n8n_sizer.fleet.cluster.spec import ClusterSpec

    if isinstance(spec, ClusterSpec):
        return build_cluster(spec, now=now)
    user_data = render_user_data(spec, render)
    return assemble(spec, now, lambda expires, public_key: _servers(spec, user_data, expires, public_key))


def _servers(spec: FleetSpec, user_data: dict[str, str], expires: str, public_key: pulumi.Input[str]):
    if spec.provider == "hetzner":
        from n8n_sizer.fleet import hetzner as provider

        component = provider.HetznerFleet(
            spec.stack,
            spec=spec,
            public_key=public_key,
            user_data=user_data,
            loadgen_user_data=LOADGEN_CLOUD_INIT,
            expires=expires,
        )
    else:
        from n8n_sizer.fleet import gcp as provider  # type: ignore[no-redef]

        component = provider.GcpFleet(
            spec.stack,
            spec=spec,
            public_key=public_key,
            user_data=user_data,
            loadgen_user_data=LOADGEN_CLOUD_INIT,
            expires=expires,
        )
    addresses = component.addresses()
    names = list(addresses)
    flat = [ip for n in names for ip in addresses[n]]

    def to_inventory(ips: list[str | None]) -> dict[str, Any]:
        hosts = {}
        for i, name in enumerate(names):
            host = next(h for h in spec.hosts if h.name == name)
            server = spec.server_of(host)
            setup = getattr(host, "setup", None)
            hosts[name] = {
                "name": name,
                "role": "loadgen" if host is spec.loadgen else "target",
                "provider": spec.provider,
                "size": server.size,
                "vcpu": server.vcpu,
                "arch": server.arch,
                "public_ip": ips[2 * i],
                "private_ip": ips[2 * i + 1],
                "ssh_user": provider.SSH_USER,
                "setup": setup.model_dump(mode="json") if setup is not None else None,
            }
        inventory = Inventory(
            stack=spec.stack, provider=spec.provider, location=spec.location, expires_at=expires, hosts=hosts
        )
        return inventory.model_dump(mode="json")

    return component, pulumi.Output.all(*flat).apply(to_inventory)
