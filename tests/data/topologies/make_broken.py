"""Regenerate the broken cluster fixtures: `.venv/bin/python -m tests.data.topologies.make_broken`.

Each `broken-<rule>/` is the advise-rps-400 cluster rendered with fake secrets, then changed in one place
so that exactly `<rule>` fails (tests/unit/test_topology_check.py asserts that). Only compose files, .env
files and topology.json are kept: `check --topology` reads nothing else.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from n8n_sizer.bundle.render_topology import MANIFEST_FILE, render_topology
from n8n_sizer.bundle.secrets import StackSecrets
from n8n_sizer.bundle.topology import load_topology_text

HERE = Path(__file__).resolve().parent
FAKE = StackSecrets(encryption_key="0123456789abcdef" * 4, postgres_password="fixture-fake-postgres-password",
                    redis_password="fixture-fake-redis-password", runners_auth_token="fixture-fake-runners-token",
                    redis_n8n_password="fixture-fake-redis-n8n-password")
PGBOUNCER = '''
  pgbouncer:
    image: edoburu/pgbouncer:v1.23.1-p3
    restart: unless-stopped
    environment:
      DB_HOST: n8n-postgres
      DB_USER: n8n
      DB_PASSWORD: "${POSTGRES_PASSWORD}"
      POOL_MODE: transaction

configs:
'''
# rule -> (host, file, old text, new text)
EDITS = {
    "cluster-encryption-key": ("worker-2", ".env", "N8N_ENCRYPTION_KEY=0123456789abcdef",
                               "N8N_ENCRYPTION_KEY=fedcba9876543210"),
    "cluster-data-endpoints": ("worker-2", "docker-compose.yml", 'DB_POSTGRESDB_HOST: "10.89.0.10"',
                               'DB_POSTGRESDB_HOST: "10.89.0.99"'),
    "cluster-pool": ("data", "docker-compose.yml", "max_connections=120", "max_connections=100"),
    "webhook-routes": ("ingest", "docker-compose.yml", "handle /form/* {", "handle /forms/* {"),
    "webhook-drain": ("ingest", "docker-compose.yml", "health_uri /healthz/drain", "health_uri /healthz/readiness"),
    "worker-drain": ("worker-2", "docker-compose.yml", '      EXTERNAL_HOOK_FILES: "/etc/n8n-sizer/drain-hook.js"\n', ""),
    "main-webhooks-off": ("ingest", "docker-compose.yml", '      N8N_DISABLE_PRODUCTION_MAIN_PROCESS: "true"\n', ""),
    "data-ports-private": ("data", "docker-compose.yml", '"10.89.0.10:5432:5432"', '"5432:5432"'),
    "cluster-redis": ("data", "docker-compose.yml", '"--appendonly", "yes"', '"--appendonly", "no"'),
    "pgbouncer-transaction": ("data", "docker-compose.yml", "\nconfigs:\n", PGBOUNCER),
    "cluster-postgres-role": ("data", "docker-compose.yml", "POSTGRES_USER: postgres", "POSTGRES_USER: n8n"),
    "cluster-redis-acl": ("data", "docker-compose.yml", '"-@dangerous", ', ""),
    "cluster-public-url": ("ingest", ".env", "N8N_PUBLIC_URL=http://n8n.example.com:5678/",
                           "N8N_PUBLIC_URL=http://localhost:5678/"),
}


def render_good(folder: Path) -> None:
    topology = load_topology_text((HERE / "advise-rps-400.json").read_text(), "advise-rps-400.json")
    cluster = render_topology(topology, FAKE, public_url="http://n8n.example.com:5678/")
    folder.mkdir(parents=True)
    (folder / MANIFEST_FILE).write_text(cluster.manifest)
    for name, bundle in cluster.hosts.items():
        (folder / name).mkdir()
        (folder / name / "docker-compose.yml").write_text(bundle.compose)
        (folder / name / ".env").write_text(bundle.env)


def main() -> None:
    for rule, (host, name, old, new) in EDITS.items():
        folder = HERE / f"broken-{rule}"
        shutil.rmtree(folder, ignore_errors=True)
        render_good(folder)
        path = folder / host / name
        text = path.read_text()
        # one place, or every n8n service of one host (each carries its own environment)
        assert text.count(old) >= 1, (rule, old)
        path.write_text(text.replace(old, new))


if __name__ == "__main__":
    main()
