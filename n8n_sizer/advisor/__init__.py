"""Pure sizing domain: server catalog, embedded measurements, capacity model + fit, per-role demands,
multi-host topologies and their search, recommendations, pool math.

Imports nothing that does I/O beyond reading the package's own embedded data files. Map: capacity.py (one
host's laws), roles.py (CPU per execution by role, with the named priors), topology.py (host groups and
their bounds), search.py (the cheapest topology for a rate), pools.py (pools and max_connections),
recommend.py (the answer), answer*.py (its output), explain.py (its words), fit.py / validate.py (the fit
and its leave-one-out check). docs/advise-topology.md describes the model.
"""
