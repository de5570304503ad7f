"""`check --topology DIR`: every host's own rules (bundle/checks/one_host.py), the rules across hosts
(bundle/checks/rules_cluster.py) and the drift rules here (one host's n8n version or worker concurrency unlike the
others, host folders that topology.json lists but are gone, or that it does not list), over the folders
`render --topology` writes: `DIR/<host>/docker-compose.yml` with its `.env`, and `DIR/topology.json`.

Every file goes through the one reader (`safety.files.read_user_text`): a FIFO, a device, a huge or
non-UTF-8 file is one line, never a hang.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from n8n_sizer.bundle.checks import rules_access as access
from n8n_sizer.bundle.checks import rules_cluster as across
from n8n_sizer.bundle.checks.one_host import MAX_RAM_MIB, MIN_RAM_MIB, check_compose
from n8n_sizer.bundle.checks.rule import RuleResult, fail, na, ok
from n8n_sizer.bundle.checks.rules_cluster import Cluster, HostFiles
from n8n_sizer.bundle.checks.rules_n8n import _concurrency
from n8n_sizer.bundle.composefile import image_base, load_compose
from n8n_sizer.bundle.drain import rule_webhook_drain, rule_worker_drain
from n8n_sizer.bundle.render import COMPOSE_FILE, ENV_FILE
from n8n_sizer.bundle.render_topology import MANIFEST_FILE
from n8n_sizer.bundle.secrets import parse_env_text
from n8n_sizer.errors import InputError
from n8n_sizer.safety.files import read_user_text, require_folder
from n8n_sizer.safety.jsondoc import load_json
from n8n_sizer.safety.network import check_private_subnet

MAX_HOST_FOLDERS = 256  # a topology has at most a few dozen hosts
FIX = "pass the --out folder of `render --topology`"


# The rules across hosts, by name (`check --topology` runs them in this order).
RULES: dict[str, Callable[[Cluster], RuleResult]] = {
    "cluster-encryption-key": across.rule_one_key,
    "cluster-data-endpoints": across.rule_data_endpoints,
    "cluster-pool": across.rule_cluster_pool,
    "webhook-routes": across.rule_webhook_routes,
    "webhook-drain": rule_webhook_drain,
    "worker-drain": rule_worker_drain,
    "main-webhooks-off": across.rule_main_webhooks_off,
    "data-ports-private": access.rule_data_ports_private,
    "cluster-redis": across.rule_cluster_redis,
    "pgbouncer-transaction": across.rule_pgbouncer_transaction,
    "cluster-postgres-role": access.rule_cluster_postgres_role,
    "cluster-redis-acl": access.rule_cluster_redis_acl,
    "cluster-public-url": across.rule_public_url,
}


def _read(path: Path, max_bytes: int = 2 << 20) -> str:
    return read_user_text(path, "--topology: file", fix=FIX, max_bytes=max_bytes)


def _manifest(folder: Path) -> dict | None:
    path = folder / MANIFEST_FILE
    if not os.path.lexists(path):
        return None
    doc = load_json(_read(path, 1 << 20), f"--topology: {path}", "re-render the folder or delete that file")
    fix = "re-render the folder or delete that file"
    if not isinstance(doc, dict) or not isinstance(doc.get("hosts", []), list):
        raise InputError(f"--topology: {path} is not a topology.json (an object with a hosts list); {fix}")
    if doc.get("subnet") is not None:  # the one subnet rule: a hand-edited subnet is refused, not trusted
        try:
            check_private_subnet(doc["subnet"])
        except ValueError as exc:
            raise InputError(f"--topology: {path}: {exc}; {fix}") from None
    for host in doc.get("hosts", []):
        ip = host.get("private_ip") if isinstance(host, dict) else None
        if ip is not None and not _is_ipv4(ip):
            raise InputError(f"--topology: {path}: private_ip {str(ip)[:60]!r} is not an IPv4 address; {fix}")
    return doc


def _is_ipv4(value: object) -> bool:
    import ipaddress

    try:
        return isinstance(value, str) and len(value) <= 15 and ipaddress.ip_address(value).version == 4
    except ValueError:
        return False


def rule_host_folders(listed: list[str] | None, found: list[str]) -> RuleResult:
    """The host folders must be exactly the hosts topology.json lists: a missing one is a host that will
    not be deployed (or was deleted by hand), an extra one a host of another render that would be."""
    if listed is None:
        return na("host-folders", f"no {MANIFEST_FILE}: nothing to compare the host folders with")
    missing, extra = sorted(set(listed) - set(found)), sorted(set(found) - set(listed))
    if missing or extra:
        parts = ([f"listed but missing: {', '.join(missing)}"] if missing else []) + (
            [f"not listed: {', '.join(extra)}"] if extra else []
        )
        return fail(
            "host-folders",
            f"host folders differ from {MANIFEST_FILE} ({'; '.join(parts)})",
            "render the topology again into this folder (it writes every host), and remove folders of "
            "hosts that are no longer in it",
        )
    return ok("host-folders", f"{len(found)} host folders, as {MANIFEST_FILE} lists")


def _one_value(rule: str, where_by_value: dict[str, list[str]], what: str, fix: str) -> RuleResult:
    """Pass when every process shows one value of `what`; else fail naming each value and where it runs."""
    if not where_by_value:
        return na(rule, f"no process with {what}")
    if len(where_by_value) > 1:
        listed = "; ".join(f"{v} on {', '.join(where[:4])}" for v, where in sorted(where_by_value.items()))
        return fail(rule, f"{what} differs between hosts ({listed})", fix)
    return ok(rule, f"one {what} ({next(iter(where_by_value))}) on every host")


def rule_one_version(c: Cluster) -> RuleResult:
    """Every n8n process of the cluster runs one n8n version: a main on one version and workers on another
    migrate and read the database differently."""
    tags: dict[str, list[str]] = {}
    for h, s in c.n8n:
        tag = image_base(s.image)[1] if s.image else None
        tags.setdefault(tag or "latest", []).append(f"{h.name}/{s.name}")
    return _one_value(
        "cluster-n8n-version",
        tags,
        "n8n version",
        "render every host from one topology (one n8n_version), or set the same image tag everywhere",
    )


def rule_one_concurrency(c: Cluster) -> RuleResult:
    """Every worker takes the same --concurrency: the topology's capacity and pools assume it."""
    values: dict[str, list[str]] = {}
    for h, s in c.services("worker"):
        value = _concurrency(s)
        values.setdefault("unreadable" if value is None else str(value), []).append(f"{h.name}/{s.name}")
    return _one_value(
        "cluster-concurrency",
        values,
        "worker --concurrency",
        "render every host from one topology (one concurrency), or give every worker the same value",
    )


def _host_dirs(folder: Path) -> list[Path]:
    entries = sorted(os.scandir(folder), key=lambda e: e.name)
    dirs = [
        Path(e.path)
        for e in entries
        if e.is_dir(follow_symlinks=False) and os.path.lexists(os.path.join(e.path, COMPOSE_FILE))
    ]
    if len(dirs) > MAX_HOST_FOLDERS:
        raise InputError(f"--topology {folder} has {len(dirs):,} host folders, above {MAX_HOST_FOLDERS}; {FIX}")
    return dirs


def check_topology(folder: Path, longest_execution_s: int | None = None) -> list[RuleResult]:
    """Every host's rules, named `<host>:<rule>`, then the cross-host and drift rules."""
    if not os.path.isdir(folder):
        raise InputError(f"--topology {folder} is not a folder; {FIX}")
    folder = require_folder(folder, "--topology", fix=FIX)
    host_dirs = _host_dirs(folder)
    if not host_dirs:
        raise InputError(
            f"--topology {folder} has no <host>/{COMPOSE_FILE}; render one with "
            f"`n8n-sizer render --topology advice.json --out {folder}`"
        )
    manifest = _manifest(folder)
    entries = [h for h in (manifest or {}).get("hosts", []) if isinstance(h, dict) and isinstance(h.get("name"), str)]
    known = {h["name"]: h for h in entries}
    results: list[RuleResult] = []
    hosts: list[HostFiles] = []
    for host_dir in host_dirs:
        text = _read(host_dir / COMPOSE_FILE)
        env_path = host_dir / ENV_FILE
        env = parse_env_text(_read(env_path, 1 << 20)) if os.path.lexists(env_path) else {}
        meta = known.get(host_dir.name, {})
        vcpu = meta.get("vcpu") if isinstance(meta.get("vcpu"), int) and 1 <= meta["vcpu"] <= 1024 else None
        compose = load_compose(text, env, source=str(host_dir / COMPOSE_FILE))  # a refusal names the file
        ram_mib = meta.get("ram_mib")
        ram_mib = ram_mib if isinstance(ram_mib, int) and MIN_RAM_MIB <= ram_mib <= MAX_RAM_MIB else None
        for r in check_compose(text, env, vcpu, longest_execution_s=longest_execution_s, ram_mib=ram_mib):
            results.append(r.model_copy(update={"rule": f"{host_dir.name}:{r.rule}"}))
        ip = meta.get("private_ip")
        hosts.append(
            HostFiles(
                name=host_dir.name,
                compose=compose,
                private_ip=ip if isinstance(ip, str) and len(ip) <= 45 else None,
            )
        )
    subnet = (manifest or {}).get("subnet")
    single = bool((manifest or {}).get("single_host"))
    cluster = Cluster(hosts=hosts, subnet=subnet if isinstance(subnet, str) and not single else None)
    results += [rule(cluster) for rule in RULES.values()]
    listed = [h["name"] for h in entries] if manifest is not None else None
    results += [
        rule_host_folders(listed, [d.name for d in host_dirs]),
        rule_one_version(cluster),
        rule_one_concurrency(cluster),
    ]
    return results
