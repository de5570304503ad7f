"""GCP cluster: a custom-mode VPC with the topology's subnet, a firewall rule per role, one e2 instance per
host at the address its bundle was rendered with (pulumi-gcp).

GCP firewalls also filter traffic inside the VPC, so besides SSH from the operator (every host) and 5678
from the load generator (the load balancer's host), two rules admit private addresses: 5432/6379 to the
data host from the hosts that run n8n only, and n8n's ports (5678, 5701-5732) to the n8n hosts from the load
balancer's host only. The load generator, in the same subnet, reaches neither.
Networks, subnetworks and firewall rules take no labels: they carry them in their description (gcp.py).
"""

from __future__ import annotations

from collections.abc import Mapping

import pulumi
import pulumi_gcp as gcp

from n8n_sizer.bundle.render_topology import WEBHOOK_HOST_PORT, data_clients
from n8n_sizer.fleet.cluster.spec import ROLE_TYPES, ClusterSpec, host_kind, role_label
from n8n_sizer.fleet.gcp import gcp_instance, gcp_network, label_description
from n8n_sizer.fleet.labels import fleet_labels
from n8n_sizer.fleet.locations import GCP_SSH_USER
from n8n_sizer.fleet.spec import HostSpec

SSH_USER = GCP_SSH_USER


def resource_name(spec: ClusterSpec, suffix: str) -> str:
    return f"n8n-sizer-{spec.stack}-{suffix}"


class GcpClusterHost(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        *,
        kind: str,
        spec: ClusterSpec,
        host: HostSpec,
        role: str,
        tags: list[str],
        private_ip: str,
        subnetwork: pulumi.Input[str],
        public_key: pulumi.Input[str],
        user_data: str,
        expires: str,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(ROLE_TYPES[kind], name, None, opts)
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
            tags=tags,
            network_ip=private_ip,
        )
        nic = self.instance.network_interfaces.apply(lambda nics: nics[0])
        self.public_ip: pulumi.Output[str] = nic.apply(lambda n: n.access_configs[0].nat_ip)
        self.register_outputs({"public_ip": self.public_ip, "private_ip": private_ip})


class GcpCluster(pulumi.ComponentResource):
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
        super().__init__("n8n-sizer:cluster:GcpCluster", name, None, opts)
        from n8n_sizer.fleet.locations import LOADGEN_CLOUD_INIT

        topology = spec.topology
        self.network, self.subnetwork = gcp_network(self, name, spec=spec, expires=expires, cidr=topology.subnet)
        described = label_description(fleet_labels(stack=spec.stack, owner=spec.owner, role="fleet", expires=expires))
        child = pulumi.ResourceOptions(parent=self, ignore_changes=["description"])  # as the network's (gcp_network)
        tag = {k: resource_name(spec, k) for k in ("host", "data", "n8n", "lb")}

        def rule(suffix: str, ports: list[str], sources: pulumi.Input, target: str) -> gcp.compute.Firewall:
            return gcp.compute.Firewall(
                f"{name}-fw-{suffix}",
                name=resource_name(spec, suffix),
                network=self.network.self_link,
                direction="INGRESS",
                allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=ports)],
                source_ranges=sources,
                target_tags=[target],
                description=described,
                opts=child,
            )

        self.ssh_firewall = rule("ssh", ["22"], [spec.operator_cidr], tag["host"])
        # The data ports for the hosts that run n8n, n8n's ports for the load balancer's host: the load
        # generator shares the subnet and reaches neither.
        self.data_firewall = rule("data", ["5432", "6379"], [f"{ip}/32" for ip in data_clients(topology)], tag["data"])
        lb_host = topology.host_with("load_balancer") or topology.host_with("main")
        self.n8n_firewall = rule(
            "n8n-private",
            ["5678", f"{WEBHOOK_HOST_PORT + 1}-{WEBHOOK_HOST_PORT + 32}"],
            [f"{lb_host.private_ip}/32"],
            tag["n8n"],
        )
        after_ssh = pulumi.ResourceOptions(parent=self, depends_on=[self.ssh_firewall])
        self.loadgen = GcpClusterHost(
            f"{name}-{spec.loadgen.name}",
            kind="loadgen",
            spec=spec,
            host=spec.loadgen,
            role="loadgen",
            tags=[tag["host"]],
            private_ip=spec.loadgen_private_ip(),
            subnetwork=self.subnetwork.id,
            public_key=public_key,
            user_data=LOADGEN_CLOUD_INIT,
            expires=expires,
            opts=after_ssh,
        )
        sources = pulumi.Output.all(self.loadgen.public_ip).apply(
            lambda ips: [f"{ip}/32" for ip in ips] + [f"{spec.loadgen_private_ip()}/32"]
        )
        self.lb_firewall = rule("lb", ["5678"], sources, tag["lb"])
        no_lb = topology.total("load_balancer") == 0
        self.hosts: dict[str, GcpClusterHost] = {}
        for host in topology.hosts():
            tags = [tag["host"]]
            if host.roles.postgres or host.roles.redis:
                tags.append(tag["data"])
            if host.roles.main or host.roles.webhook:
                tags.append(tag["n8n"])
            if host.roles.load_balancer or (no_lb and host.roles.main):
                tags.append(tag["lb"])
            self.hosts[host.name] = GcpClusterHost(
                f"{name}-{host.name}",
                kind=host_kind(host),
                spec=spec,
                host=HostSpec(name=host.name, size=host.size),
                role=role_label(host),
                tags=tags,
                private_ip=host.private_ip,
                subnetwork=self.subnetwork.id,
                public_key=public_key,
                user_data=user_data[host.name],
                expires=expires,
                opts=after_ssh,
            )
        self.public_ips = {spec.loadgen.name: self.loadgen.public_ip, **{n: h.public_ip for n, h in self.hosts.items()}}
        self.register_outputs({"network": self.network.id, "public_ips": self.public_ips})
