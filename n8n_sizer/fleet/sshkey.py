"""The fleet's SSH key: the operator's public key from the stack file, or a generated one kept as a secret output."""

from __future__ import annotations

import pulumi

from n8n_sizer.fleet.spec import FleetSpec


def fleet_ssh_key(spec: FleetSpec) -> tuple[pulumi.Input[str], pulumi.Output[str] | None]:
    """(public key for the servers, private key output or None). Without `ssh_public_key` in the stack file an
    ED25519 key is generated (pulumi-tls); its private half is exported as a Pulumi secret, never in plain text."""
    if spec.ssh_public_key is not None:
        return spec.ssh_public_key, None
    import pulumi_tls as tls

    key = tls.PrivateKey("ssh", algorithm="ED25519")
    return key.public_key_openssh, pulumi.Output.secret(key.private_key_openssh)
