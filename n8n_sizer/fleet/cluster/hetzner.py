"""Hetzner cluster: one Network with a cloud subnet, a firewall per role, one server per host (pulumi-hcloud).

Every server joins the network at creation (`networks=[...]` with the address its bundle was rendered
with), so the private interface exists when cloud-init binds Postgres and Redis to it. Firewalls: SSH from
the operator on every server; on the data host 5432/6379 only from the private subnet; on the load
balancer's host 5678 only from the load generator. Hetzner firewalls filter the public interface only, so
the data ports are also bound to the private address alone and the data host's cloud-init admits only the n8n
hosts' private addresses to them (the load generator shares the subnet).
"""

from __future__ import annotations

from collections.abc import Mapping

import pulumi
import pulumi_hcloud as hcloud

from n8n_sizer.bundle.render_topology import data_clients
from n8n_sizer.bundle.topology import ClusterHost
from n8n_sizer.fleet.cluster.spec import ROLE_TYPES, ClusterSpec, host_kind, role_label
from n8n_sizer.fleet.hetzner import hetzner_server
from n8n_sizer.fleet.labels import fleet_labels
from n8n_sizer.fleet.locations import HETZNER_LOCATIONS, HETZNER_SSH_USER
from n8n_sizer.fleet.spec import HostSpec

SSH_USER = HETZNER_SSH_USER


def network_range(subnet: str) -> str:
    """The hcloud Network around the topology's subnet: its /16 (10.89.0.0/16 for 10.89.0.0/24)."""
    import ipaddress

    net = ipaddress.ip_network(subnet)
    return str(net.supernet(new_prefix=16) if net.prefixlen > 16 else net)


def resource_name(spec: ClusterSpec, suffix: str) -> str:
    return f"n8n-sizer-{spec.stack}-{suffix}"


class PrivateNetwork(pulumi.ComponentResource):
    """The cluster's hcloud Network and its subnet in the location's network zone."""

    def __init__(
        self, name: str, *, spec: ClusterSpec, labels: dict[str, str], opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("n8n-sizer:cluster:PrivateNetwork", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.network = hcloud.Network(
            f"{name}-net",
            name=resource_name(spec, "net"),
            ip_range=network_range(spec.topology.subnet),
            labels=labels,
            opts=child,
        )
        self.subnet = hcloud.NetworkSubnet(
            f"{name}-subnet",
            network_id=self.network.id.apply(int),
            type="cloud",
            network_zone=HETZNER_LOCATIONS[spec.location],
            ip_range=spec.topology.subnet,
            opts=child,
        )
        self.register_outputs({"network_id": self.network.id, "subnet": spec.topology.subnet})


class HetznerClusterHost(pulumi.ComponentResource):
    """One server; the type token names its role (DataHost, IngestHost, WorkerHost, LoadGenerator)."""

    def __init__(
        self,
        name: str,
        *,
        kind: str,
        spec: ClusterSpec,
        host: HostSpec,
        role: str,
        private_ip: str,
        network: PrivateNetwork,
        ssh_key_id: pulumi.Input[str],
        firewall_ids: list[pulumi.Input[str]],
        user_data: str,
        expires: str,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(ROLE_TYPES[kind], name, None, opts)
        self.server = hetzner_server(
            self,
            name,
            spec=spec,
            host=host,
            role=role,
            ssh_key_id=ssh_key_id,
            firewall_ids=firewall_ids,
            user_data=user_data,
            expires=expires,
            depends_on=[network.subnet],
            networks=[hcloud.ServerNetworkArgs(network_id=network.network.id.apply(int), ip=private_ip)],
        )
        self.public_ip = self.server.ipv4_address
        self.register_outputs({"public_ip": self.public_ip, "private_ip": private_ip})


class HetznerCluster(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        *,
        spec: ClusterSpec,
        public_key: pulumi.Input[str],
        user_data: Mapping[str, str],
        expires: str,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("n8n-sizer:cluster:HetznerCluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        shared = fleet_labels(stack=spec.stack, owner=spec.owner, role="fleet", expires=expires)
        topology = spec.topology
        self.network = PrivateNetwork(f"{name}-private", spec=spec, labels=shared, opts=child)
        self.ssh_key = hcloud.SshKey(
            f"{name}-ssh", name=resource_name(spec, "ssh"), public_key=public_key, labels=shared, opts=child
        )
        ssh = hcloud.FirewallRuleArgs(
            direction="in",
            protocol="tcp",
            port="22",
            source_ips=[spec.operator_cidr],
            description="SSH from the operator",
        )
        self.ssh_firewall = hcloud.Firewall(
            f"{name}-fw-ssh", name=resource_name(spec, "ssh"), rules=[ssh], labels=shared, opts=child
        )
        # Hetzner filters the public interface only; on the private network the data host's own DOCKER-USER
        # rules (its cloud-init, bundle.cloudinit.data_port_rules) admit the same n8n hosts and no one else.
        data_rules = [
            hcloud.FirewallRuleArgs(
                direction="in",
                protocol="tcp",
                port=port,
                source_ips=[f"{ip}/32" for ip in data_clients(topology)],
                description=f"{what} from the n8n hosts",
            )
            for port, what in (("5432", "Postgres"), ("6379", "Redis"))
        ]
        self.data_firewall = hcloud.Firewall(
            f"{name}-fw-data", name=resource_name(spec, "data"), rules=data_rules, labels=shared, opts=child
        )
        self.loadgen = HetznerClusterHost(
            f"{name}-{spec.loadgen.name}",
            kind="loadgen",
            spec=spec,
            host=spec.loadgen,
            role="loadgen",
            private_ip=spec.loadgen_private_ip(),
            network=self.network,
            ssh_key_id=self.ssh_key.id,
            firewall_ids=[self.ssh_firewall.id],
            user_data=_loadgen_user_data(),
            expires=expires,
            opts=child,
        )
        lb_rule = hcloud.FirewallRuleArgs(
            direction="in",
            protocol="tcp",
            port="5678",
            source_ips=[self.loadgen.public_ip.apply(lambda ip: f"{ip}/32")],
            description="the load balancer from the load generator",
        )
        self.lb_firewall = hcloud.Firewall(
            f"{name}-fw-lb", name=resource_name(spec, "lb"), rules=[lb_rule], labels=shared, opts=child
        )
        self.hosts: dict[str, HetznerClusterHost] = {}
        for host in topology.hosts():
            self.hosts[host.name] = HetznerClusterHost(
                f"{name}-{host.name}",
                kind=host_kind(host),
                spec=spec,
                host=HostSpec(name=host.name, size=host.size),
                role=role_label(host),
                private_ip=host.private_ip,
                network=self.network,
                ssh_key_id=self.ssh_key.id,
                firewall_ids=self._firewalls(host, topology.total("load_balancer") == 0),
                user_data=user_data[host.name],
                expires=expires,
                opts=child,
            )
        self.public_ips = {spec.loadgen.name: self.loadgen.public_ip, **{n: h.public_ip for n, h in self.hosts.items()}}
        self.register_outputs({"network_id": self.network.network.id, "public_ips": self.public_ips})

    def _firewalls(self, host: ClusterHost, no_lb: bool) -> list[pulumi.Input[str]]:
        ids: list[pulumi.Input[str]] = [self.ssh_firewall.id]
        if host.roles.postgres or host.roles.redis:
            ids.append(self.data_firewall.id)
        if host.roles.load_balancer or (no_lb and host.roles.main):
            ids.append(self.lb_firewall.id)
        return ids


def _loadgen_user_data() -> str:
    from n8n_sizer.fleet.locations import LOADGEN_CLOUD_INIT

    return LOADGEN_CLOUD_INIT
