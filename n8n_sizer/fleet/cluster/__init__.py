"""Cluster stacks: a topology on servers that share one private network (`stacks/Pulumi.cluster-*.yaml`).

`spec` (the stack's model, no Pulumi), `build` (the program: user data, network, servers, inventory) and one
module of components per provider (`hetzner`, `gcp`).
"""
