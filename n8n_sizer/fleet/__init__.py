"""The benchmark fleet as Pulumi code: fleet spec from stack files, components per provider, cost, teardown, reaper.

May import: advisor, bundle, pulumi and its providers, httpx (the provider APIs the reaper calls).
"""
