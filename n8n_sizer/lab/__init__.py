"""A multi-host topology as network namespaces on this machine: the lab (`lab up`, `lab down`).

Owns: the pure plan of a lab (namespace names, addresses, link names and the `ip` commands; `plan`), the private
sshd per namespace (`sshd`), bringing a lab up and down by name and PID (`netns`), and the roles deployed into
its hosts over SSH (`data`: Postgres and Redis on the data host's private address). Nothing it creates
reaches beyond one private bridge on this machine: the namespaces get no default route.
May import: hosts, deploy (the topology and its addresses), fleet (the inventory model only), localstack (the
native services, on the lab host), safety, errors.
"""
