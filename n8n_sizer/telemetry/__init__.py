"""Telemetry while a stack is under load: the sampler, its probes (command + pure parser) and the alerts.

Owns: `sampler` (samples per host and role into samples.jsonl), `probes/` (one fact per source: /proc, ps,
docker stats, Postgres, Redis, n8n's /metrics), `alerts` (rules judged on the samples).
May import: hosts, n8n, runs (the sample record), errors.
"""
