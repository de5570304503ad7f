"""Load and run orchestration: plans, the open-model load driver, k6, find-max, soak, and the bench session.

Owns: `plan` (rates, steps), `load` (the built-in constant-arrival driver), `k6` (the k6 script and its
summary), `find_max` (find-max), `soak`, `run` (one run over a stack handle), `session` (a bench request from the
CLI to a results folder), `stackup` (deploying a stack to a target host), `lab` and `agent` (a lab's cluster as one
target, its load split over the lab's generators).
May import: n8n, hosts, native, runs, telemetry, bundle, advisor, fleet (the inventory model), lab (deploying a
lab's topology), errors.
"""
