"""A multi-host topology as network namespaces on this machine: the lab (`lab up`, `lab down`).

Owns: the pure plan of a lab (namespace names, addresses, link names and the `ip` commands; `plan`), the private
sshd per namespace (`sshd`), bringing a lab up and down by name and PID (`netns`), and the roles deployed into
its hosts over SSH (`data`: Postgres and Redis on the data host's private address; `n8n_role`: main and
workers against them; `ingest`: the load balancer; `deploy`: all of them, role by role, and the cluster's record),
a CPU budget per host (`cpu`), the deployed cluster's record (`cluster_record`) and the cluster operated by host
and role (`cluster_handle`, one more `StackHandle`), with `host_agent` doing the signalling on each host (run there
as `remote.lab_agent`); `bench --inventory lab.json` over it (`bench`: bring-up, telemetry, a step; `generators`:
the load from the generator hosts) and the cluster drills (`drills/`). Nothing it creates reaches beyond one private bridge on this
machine: the namespaces get no default route.
May import: advisor (Setup), bundle (the topology, its addresses, the n8n environment), fleet (the inventory
model only), hosts, native (the native services, run on the lab host), remote (the launcher), stack (the handle),
bench (the load driver, shapes, accounting), drills (outcome types), n8n, runs, telemetry, safety, errors.
"""
