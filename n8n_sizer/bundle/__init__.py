"""Render a setup into files (compose, .env, cloud-init) and lint compose files: the stack as code.

Owns: the n8n environment for a setup and a role (`n8n_env`; `native_env` wires it for n8n processes started
outside Docker: the native stack and the lab), rendering (`render`, `render_topology`, `cloudinit`), secrets and the
private-file writer (`secrets`), and `check` with its rules (`checks/`).
May import: advisor, jinja2, pyyaml.
"""
