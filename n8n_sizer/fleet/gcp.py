"""GCP fleet: a VPC of its own, two firewall rules and one e2 instance per host (pulumi-gcp).

Why a VPC of its own: a project's `default` network often carries `default-allow-ssh` (22 from
0.0.0.0/0) and `default-allow-internal`; a fresh custom-mode VPC denies all ingress until a rule
allows it, so the only ways in are the two rules below (22 from the operator, 5678 from the load
generator). Instances run Ubuntu 24.04 LTS from `ubuntu-os-cloud`, which runs cloud-init at first
boot and reads the `user-data` metadata key, so the same `#cloud-config` as on Hetzner boots the stack.

GCP firewall rules, networks and subnetworks take no labels: they are named `n8n-sizer-<stack>-*`
and carry the labels as `key=value` words in their description, which the reaper reads.
"""

from __future__ import annotations

from collections.abc import Mapping

import pulumi
import pulumi_gcp as gcp

from n8n_sizer.fleet.labels import fleet_labels
from n8n_sizer.fleet.locations import GCP_IMAGE, GCP_SSH_USER, gcp_region
from n8n_sizer.fleet.spec import FleetSpec, HostSpec

HOST_TYPES = {"target": "n8n-sizer:fleet:Target", "loadgen": "n8n-sizer:fleet:LoadGenerator"}
SUBNET_CIDR = "10.89.0.0/24"
BOOT_DISK_GB = 20
SSH_USER = GCP_SSH_USER


def resource_name(spec: FleetSpec, suffix: str) -> str:
    return f"n8n-sizer-{spec.stack}-{suffix}"


def label_description(labels: Mapping[str, str]) -> str:
    """`n8n-sizer fleet: project=n8n-sizer stack=s owner=o role=fleet expires-at=...` (parsed by the reaper)."""
    return "n8n-sizer fleet: " + " ".join(f"{k}={v}" for k, v in labels.items())


def gcp_network(
    parent: pulumi.Resource, name: str, *, spec: FleetSpec, expires: str, cidr: str
) -> tuple[gcp.compute.Network, gcp.compute.Subnetwork]:
    """The stack's own VPC and subnet; their labels live in the description (networks have none)."""
    described = label_description(fleet_labels(stack=spec.stack, owner=spec.owner, role="fleet", expires=expires))
    # A description change would replace a network; the first `up`'s expiry stays (see the reaper).
    child = pulumi.ResourceOptions(parent=parent, ignore_changes=["description"])
    network = gcp.compute.Network(
        f"{name}-net", name=resource_name(spec, "net"), auto_create_subnetworks=False, description=described, opts=child
    )
    subnetwork = gcp.compute.Subnetwork(
        f"{name}-subnet",
        name=resource_name(spec, "subnet"),
        network=network.id,
        region=gcp_region(spec.location),
        ip_cidr_range=cidr,
        description=described,
        opts=child,
    )
    return network, subnetwork


def gcp_instance(
    parent: pulumi.Resource,
    name: str,
    *,
    spec: FleetSpec,
    host: HostSpec,
    role: str,
    subnetwork: pulumi.Input[str],
    public_key: pulumi.Input[str],
    user_data: pulumi.Input[str] | None,
    expires: str,
    tags: list[str],
    network_ip: str | None = None,
) -> gcp.compute.Instance:
    """One instance of a fleet or a cluster, labelled, with an ephemeral public IP, its user-data a secret."""
    metadata: dict[str, pulumi.Input[str]] = {
        "ssh-keys": pulumi.Output.from_input(public_key).apply(lambda k: f"{SSH_USER}:{k.strip()}"),
    }
    if user_data is not None:
        metadata["user-data"] = pulumi.Output.secret(user_data)
    return gcp.compute.Instance(
        name,
        name=resource_name(spec, host.name),
        machine_type=spec.server_of(host).size,
        zone=spec.location,
        boot_disk=gcp.compute.InstanceBootDiskArgs(
            initialize_params=gcp.compute.InstanceBootDiskInitializeParamsArgs(image=GCP_IMAGE, size=BOOT_DISK_GB),
            auto_delete=True,
        ),
        network_interfaces=[
            gcp.compute.InstanceNetworkInterfaceArgs(
                subnetwork=subnetwork,
                network_ip=network_ip,
                access_configs=[gcp.compute.InstanceNetworkInterfaceAccessConfigArgs()],  # ephemeral public IP
            )
        ],
        metadata=metadata,
        labels=fleet_labels(stack=spec.stack, owner=spec.owner, role=role, expires=expires),
        tags=tags,
        # Secrets in user-data are generated on every `pulumi up`; cloud-init only reads them at first
        # boot, so a new value would only make the metadata lie about the running stack.
        opts=pulumi.ResourceOptions(parent=parent, ignore_changes=["metadata"]),
    )


class GcpHost(pulumi.ComponentResource):
    """One instance of the fleet, a Target or the LoadGenerator (the type token says which)."""

    def __init__(
        self,
        name: str,
        *,
        spec: FleetSpec,
        host: HostSpec,
        role: str,
        subnetwork: pulumi.Input[str],
        public_key: pulumi.Input[str],
        user_data: pulumi.Input[str] | None,
        expires: str,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(HOST_TYPES[role], name, None, opts)
        self.instance = gcp_instance(
            self,
            name,
            spec=spec,
            host=host,
            role=role,
            subnetwork=subnetwork,
            public_key=public_key,
            user_data=user_data,
            expires=expires,
            tags=[resource_name(spec, "host"), resource_name(spec, role)],
        )
        nic = self.instance.network_interfaces.apply(lambda nics: nics[0])
        self.private_ip: pulumi.Output[str] = nic.apply(lambda n: n.network_ip)
        self.public_ip: pulumi.Output[str] = nic.apply(lambda n: n.access_configs[0].nat_ip)
        self.register_outputs({"public_ip": self.public_ip, "private_ip": self.private_ip})


class GcpFleet(pulumi.ComponentResource):
    """The whole GCP fleet of a stack."""

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
        super().__init__("n8n-sizer:fleet:GcpFleet", name, None, opts)
        self.network, self.subnetwork = gcp_network(self, name, spec=spec, expires=expires, cidr=SUBNET_CIDR)
        described = label_description(fleet_labels(stack=spec.stack, owner=spec.owner, role="fleet", expires=expires))
        child = pulumi.ResourceOptions(parent=self, ignore_changes=["description"])  # as the network's (gcp_network)
        host_tag, target_tag = resource_name(spec, "host"), resource_name(spec, "target")
        self.ssh_firewall = gcp.compute.Firewall(
            f"{name}-fw-ssh",
            name=resource_name(spec, "ssh"),
            network=self.network.self_link,
            direction="INGRESS",
            allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=["22"])],
            source_ranges=[spec.operator_cidr],
            target_tags=[host_tag],
            description=described,
            opts=child,
        )
        self.loadgen = GcpHost(
            f"{name}-{spec.loadgen.name}",
            spec=spec,
            host=spec.loadgen,
            role="loadgen",
            subnetwork=self.subnetwork.id,
            public_key=public_key,
            user_data=loadgen_user_data,
            expires=expires,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.ssh_firewall]),
        )
        loadgen_ranges = pulumi.Output.all(self.loadgen.public_ip, self.loadgen.private_ip).apply(
            lambda ips: [f"{ip}/32" for ip in ips]
        )
        self.n8n_firewall = gcp.compute.Firewall(
            f"{name}-fw-n8n",
            name=resource_name(spec, "n8n"),
            network=self.network.self_link,
            direction="INGRESS",
            allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=["5678"])],
            source_ranges=loadgen_ranges,
            target_tags=[target_tag],
            description=described,
            opts=child,
        )
        self.targets = {
            t.name: GcpHost(
                f"{name}-{t.name}",
                spec=spec,
                host=t,
                role="target",
                subnetwork=self.subnetwork.id,
                public_key=public_key,
                user_data=user_data[t.name],
                expires=expires,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[self.ssh_firewall]),
            )
            for t in spec.targets
        }
        self.hosts: dict[str, GcpHost] = {spec.loadgen.name: self.loadgen, **self.targets}
        self.register_outputs(
            {"network": self.network.id, "public_ips": {n: h.public_ip for n, h in self.hosts.items()}}
        )

    def addresses(self) -> dict[str, tuple[pulumi.Output[str], pulumi.Output[str] | None]]:
        """Per host name: (public IP, VPC IP)."""
        return {n: (h.public_ip, h.private_ip) for n, h in self.hosts.items()}
