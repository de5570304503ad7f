"""Hetzner Cloud fleet: an SSH key, two firewalls and one server per host (pulumi-hcloud).

Policy, checked by tests/infra: inbound 22 only from the operator's CIDR, inbound 5678 only from the
load generator's address, nothing else (a Hetzner firewall with inbound rules drops everything it does
not allow). Servers get their firewall at creation (`firewall_ids`), so no window exists in which a
fresh VM is open. Every resource carries the fleet labels, `expires-at` included.
"""

from __future__ import annotations

from collections.abc import Mapping

import pulumi
import pulumi_hcloud as hcloud

from n8n_sizer.fleet.labels import fleet_labels
from n8n_sizer.fleet.locations import HETZNER_IMAGE, HETZNER_SSH_USER
from n8n_sizer.fleet.spec import FleetSpec, HostSpec

HOST_TYPES = {"target": "n8n-sizer:fleet:Target", "loadgen": "n8n-sizer:fleet:LoadGenerator"}


def resource_name(spec: FleetSpec, suffix: str) -> str:
    """Provider-side name, unique per project: `n8n-sizer-<stack>-<suffix>`."""
    return f"n8n-sizer-{spec.stack}-{suffix}"


def hetzner_server(
    parent: pulumi.Resource,
    name: str,
    *,
    spec: FleetSpec,
    host: HostSpec,
    role: str,
    ssh_key_id: pulumi.Input[str],
    firewall_ids: list[pulumi.Input[str]],
    user_data: pulumi.Input[str] | None,
    expires: str,
    networks: list | None = None,
    depends_on: list | None = None,
) -> hcloud.Server:
    """One server of a fleet or a cluster, labelled, its user_data a secret, parented to `parent`."""
    server_size = spec.server_of(host)
    # Ask for the image of the size's architecture explicitly: CAX sizes need the arm64 build.
    image = hcloud.get_image_output(
        name=HETZNER_IMAGE,
        with_architecture=server_size.arch,
        most_recent=True,
        opts=pulumi.InvokeOptions(parent=parent),
    )
    return hcloud.Server(
        name,
        name=resource_name(spec, host.name),
        server_type=server_size.size,
        location=spec.location,
        image=image.id.apply(str),
        ssh_keys=[ssh_key_id],
        firewall_ids=[pulumi.Output.from_input(f).apply(int) for f in firewall_ids],
        networks=networks,
        user_data=pulumi.Output.secret(user_data) if user_data is not None else None,
        labels=fleet_labels(stack=spec.stack, owner=spec.owner, role=role, expires=expires),
        public_nets=[hcloud.ServerPublicNetArgs(ipv4_enabled=True, ipv6_enabled=True)],
        # user_data carries secrets generated on every `pulumi up`; applying a new one would
        # replace the server. It only runs at first boot anyway: to change a setup, replace it.
        opts=pulumi.ResourceOptions(parent=parent, ignore_changes=["user_data"], depends_on=depends_on),
    )


class HetznerHost(pulumi.ComponentResource):
    """One server of the fleet, a Target or the LoadGenerator (the type token says which)."""

    public_ip: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        *,
        spec: FleetSpec,
        host: HostSpec,
        role: str,
        ssh_key_id: pulumi.Input[str],
        firewall_id: pulumi.Input[str],
        user_data: pulumi.Input[str] | None,
        expires: str,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(HOST_TYPES[role], name, None, opts)
        self.server = hetzner_server(
            self,
            name,
            spec=spec,
            host=host,
            role=role,
            ssh_key_id=ssh_key_id,
            firewall_ids=[firewall_id],
            user_data=user_data,
            expires=expires,
        )
        self.public_ip = self.server.ipv4_address
        self.register_outputs({"public_ip": self.public_ip, "server_id": self.server.id})


class HetznerFleet(pulumi.ComponentResource):
    """The whole Hetzner fleet of a stack."""

    def __init__(
        self,
        name: str,
        *,
        spec: FleetSpec,
        public_key: pulumi.Input[str],
        user_data: Mapping[str, pulumi.Input[str]],
        loadgen_user_data: str,
        expires: str,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("n8n-sizer:fleet:HetznerFleet", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        shared = fleet_labels(stack=spec.stack, owner=spec.owner, role="fleet", expires=expires)
        self.ssh_key = hcloud.SshKey(
            f"{name}-ssh", name=resource_name(spec, "ssh"), public_key=public_key, labels=shared, opts=child
        )
        ssh_rule = hcloud.FirewallRuleArgs(
            direction="in",
            protocol="tcp",
            port="22",
            source_ips=[spec.operator_cidr],
            description="SSH from the operator",
        )
        self.loadgen_firewall = hcloud.Firewall(
            f"{name}-fw-loadgen", name=resource_name(spec, "loadgen"), rules=[ssh_rule], labels=shared, opts=child
        )
        self.loadgen = HetznerHost(
            f"{name}-{spec.loadgen.name}",
            spec=spec,
            host=spec.loadgen,
            role="loadgen",
            ssh_key_id=self.ssh_key.id,
            firewall_id=self.loadgen_firewall.id,
            user_data=loadgen_user_data,
            expires=expires,
            opts=child,
        )
        n8n_rule = hcloud.FirewallRuleArgs(
            direction="in",
            protocol="tcp",
            port="5678",
            source_ips=[self.loadgen.public_ip.apply(lambda ip: f"{ip}/32")],
            description="n8n from the load generator",
        )
        self.target_firewall = hcloud.Firewall(
            f"{name}-fw-targets",
            name=resource_name(spec, "targets"),
            rules=[ssh_rule, n8n_rule],
            labels=shared,
            opts=child,
        )
        self.targets = {
            t.name: HetznerHost(
                f"{name}-{t.name}",
                spec=spec,
                host=t,
                role="target",
                ssh_key_id=self.ssh_key.id,
                firewall_id=self.target_firewall.id,
                user_data=user_data[t.name],
                expires=expires,
                opts=child,
            )
            for t in spec.targets
        }
        self.hosts: dict[str, HetznerHost] = {spec.loadgen.name: self.loadgen, **self.targets}
        self.register_outputs(
            {"ssh_key_id": self.ssh_key.id, "public_ips": {n: h.public_ip for n, h in self.hosts.items()}}
        )

    def addresses(self) -> dict[str, tuple[pulumi.Output[str], pulumi.Output[str] | None]]:
        """Per host name: (public IP, private IP). Hetzner hosts talk over public IPs, so no private one."""
        return {n: (h.public_ip, None) for n, h in self.hosts.items()}


SSH_USER = HETZNER_SSH_USER
