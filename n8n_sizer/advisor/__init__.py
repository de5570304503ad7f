"""Pure sizing domain: server catalog, embedded measurements, capacity model, recommendations, pool math.

Imports nothing that does I/O beyond reading the package's own embedded data file.
"""
