"""`check --topology DIR`: every host's own rules (deploy/check.py) plus the rules across hosts
(deploy/rules_cluster.py), over the folders `render --topology` writes: `DIR/<host>/docker-compose.yml`
with its `.env`, and `DIR/topology.json` (hosts' vCPUs, private addresses and subnet) when present.
"""

from __future__ import annotations

import json
from pathlib import Path

from n8n_sizer.deploy.check import check_compose
from n8n_sizer.deploy.composefile import load_compose
from n8n_sizer.deploy.render import COMPOSE_FILE, ENV_FILE
from n8n_sizer.deploy.render_topology import MANIFEST_FILE
from n8n_sizer.deploy.rule import RuleResult
from n8n_sizer.deploy.rules_cluster import RULES, Cluster, HostFiles
from n8n_sizer.deploy.secrets import parse_env_text
from n8n_sizer.errors import InputError


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"--topology: cannot read {path} ({getattr(exc, 'strerror', None) or exc}); "
                         "pass a folder written by `render --topology`") from None


def _manifest(folder: Path) -> dict:
    path = folder / MANIFEST_FILE
    if not path.exists():
        return {}
    try:
        doc = json.loads(_read(path))
    except json.JSONDecodeError:
        raise InputError(f"--topology: {path} is not JSON; re-render the folder or delete that file") from None
    return doc if isinstance(doc, dict) else {}


def check_topology(folder: Path, longest_execution_s: int | None = None) -> list[RuleResult]:
    """Every host's rules, named `<host>:<rule>`, then the cross-host rules."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"--topology {folder} is not a folder; pass the --out folder of `render --topology`")
    host_dirs = sorted(p for p in folder.iterdir() if (p / COMPOSE_FILE).is_file())
    if not host_dirs:
        raise InputError(f"--topology {folder} has no <host>/{COMPOSE_FILE}; render one with "
                         f"`n8n-sizer render --topology advice.json --out {folder}`")
    manifest = _manifest(folder)
    known = {h.get("name"): h for h in manifest.get("hosts", []) if isinstance(h, dict)}
    results: list[RuleResult] = []
    hosts: list[HostFiles] = []
    for host_dir in host_dirs:
        text = _read(host_dir / COMPOSE_FILE)
        env_path = host_dir / ENV_FILE
        env = parse_env_text(_read(env_path)) if env_path.exists() else {}
        meta = known.get(host_dir.name, {})
        vcpu = meta.get("vcpu") if isinstance(meta.get("vcpu"), int) else None
        for r in check_compose(text, env, vcpu, longest_execution_s=longest_execution_s):
            results.append(r.model_copy(update={"rule": f"{host_dir.name}:{r.rule}"}))
        hosts.append(HostFiles(name=host_dir.name, compose=load_compose(text, env),
                               private_ip=meta.get("private_ip")))
    cluster = Cluster(hosts=hosts, subnet=manifest.get("subnet") if not manifest.get("single_host") else None)
    results += [rule(cluster) for rule in RULES.values()]
    return results
