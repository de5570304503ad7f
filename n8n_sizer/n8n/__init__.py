"""n8n's REST API: owner setup, login, API key, workflows (one loader, one deploy path), executions.

Owns: the HTTP client (`client.N8nClient`), the workflow files and their loader (`workflows`), and the link that
sets an n8n instance up for a bench (`link`: owner, API key file, deployed workflow).
May import: httpx, hosts (to read a remote API-key file), errors.
"""
