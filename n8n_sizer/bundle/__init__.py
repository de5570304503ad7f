"""Render a setup into files (compose, .env, cloud-init) and lint compose files: the stack as code.

Owns: the n8n environment for a setup and a role (`n8n_env`, shared with the native stack), rendering
(`render`, `cloudinit`), secrets and the private-file writer (`secrets`), and `check` with its rules.
May import: advisor, jinja2, pyyaml.
"""
