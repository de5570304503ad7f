"""Real n8n, Postgres and Redis as native processes on one host, per role: the stack tests and `bench --local` run.

Owns: the n8n/Node install (`install`), service processes and their PIDs (`services`), the stack's saved state
(`state`), the stack itself (`stack.LocalStack`); its command line for use over SSH is `remote.native_stack`.
May import: advisor, bundle (the n8n environment for a setup and role), hosts, errors, versions.
"""
