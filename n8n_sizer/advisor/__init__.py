"""Pure sizing domain: server catalog, embedded measurements, capacity model + fit, per-role demands,
multi-host topologies and their search, recommendations, pool math.

Imports nothing that does I/O beyond reading the package's own embedded data files. Map: capacity.py (one
host's laws), roles.py (CPU per execution by role, with the named priors), pools.py (pools and max_connections),
setup.py (one host's n8n setup), settings.py (one function per recommended setting), ram.py, catalog.py,
measurements.py / points.py (the embedded data and which rows measure capacity), fit.py / validate.py (the fit
and its leave-one-out check), engine.py (an advisor from the data), recommend.py (the answer), and answer/: the
topology contract (contract.py), host groups and their bounds (layout.py), the cheapest topology for a rate
(topology_search.py), the recommendation's records (base.py), its words (explain.py), one host (single.py),
several (multi.py), a topology the user gives (given.py), the ways past it (alternatives.py) and bursts
(burst.py). docs/advise-topology.md describes the model.
"""
