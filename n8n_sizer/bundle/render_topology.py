"""Render a `Topology` into one bundle per host: `DIR/<host>/{docker-compose.yml, .env, cloud-init.yaml}`.

`render_topology` is pure (it returns text); `write_topology` is the I/O edge. One secret set serves every
host: it lives in `DIR/.secrets.env` (0600), is generated once and kept on every re-render, exactly as a
single stack's `.env` is (`merge_secrets`). A one-host topology renders today's single-host stack.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from n8n_sizer import versions
from n8n_sizer.advisor.ram import HELD_MIB_PER_EXECUTION
from n8n_sizer.bundle import topology as topo
from n8n_sizer.bundle.cloudinit import USER_DATA_LIMIT_BYTES, data_port_rules, render_cloud_init
from n8n_sizer.bundle.drain import drain_context
from n8n_sizer.bundle.limits import cluster_memory, postgres_budget_mib, redis_maxmemory_mib, with_node_heap
from n8n_sizer.bundle.n8n_env import (
    COMPOSE_WIRING,
    REDIS_N8N_PASSWORD_REF,
    Wiring,
    postgres_init,
    redis_acl_user,
    role_env,
    shape_of_topology,
    shutdown_seconds,
)
from n8n_sizer.bundle.render import (
    CLOUD_INIT_FILE,
    COMPOSE_FILE,
    ENV_FILE,
    VERSION_RE,
    Bundle,
    _prepare_out_dir,
    keep_previous,
    public_url_for,
    render_bundle,
    template_env,
    validate_access,
)
from n8n_sizer.bundle.secrets import (
    ENV_NAMES,
    SecretCopy,
    StackSecrets,
    read_secret_copy,
    secret_messages,
    settle_secrets,
    write_private,
)
from n8n_sizer.errors import InputError
from n8n_sizer.safety.frozen import Frozen
from n8n_sizer.safety.urls import require_url
from n8n_sizer.safety.write import check_folder, make_folder, write_atomic

SECRETS_FILE = ".secrets.env"
MANIFEST_FILE = "topology.json"
LB_PORT = 5678  # the bench driver and the firewall keep n8n's port: the load balancer answers on it
# How long Caddy keeps retrying a request whose upstream refused the connection (a processor that is stopping
# or restarting) on the others: longer than a health check's interval and timeout, shorter than a client's wait.
LB_TRY_S = 10
WEBHOOK_HOST_PORT = 5700  # + k: a webhook processor published on its private address for an LB elsewhere
# Paths n8n stops serving on main with N8N_DISABLE_PRODUCTION_MAIN_PROCESS=true (the `webhooksEnabled` block
# of packages/cli/src/abstract-server.ts): production webhooks, waiting webhooks, forms, waiting forms, MCP.
# /webhook-test/*, /form-test/*, /mcp-test/* and everything else stay on main (n8n-io/n8n-hosting's table).
WEBHOOK_PATHS = ("/webhook/*", "/webhook-waiting/*", "/form/*", "/form-waiting/*", "/mcp/*")


class ClusterBundle(Frozen):
    """Every host's bundle and the manifest (no secrets) that `check --topology` and the fleet read."""

    hosts: dict[str, Bundle]
    manifest: str


def describe_topology(t: topo.Topology, profile: str) -> str:
    return (
        f"1 main, {t.total('webhook')} webhook processors, {t.total('workers')} workers x --concurrency "
        f"{t.concurrency} on {len(t.hosts())} hosts; pools main {t.db_pool_size.main}, webhook "
        f"{t.db_pool_size.of('webhook')}, worker {t.db_pool_size.of('worker')}; runner limit {t.runner_concurrency}; "
        f"n8n {t.n8n_version}; profile {profile}"
    )


def _validate(t: topo.Topology, profile: str, domain: str | None, public_url: str | None) -> None:
    if not VERSION_RE.fullmatch(t.n8n_version):
        raise InputError(
            f"n8n_version {t.n8n_version!r} is not an exact MAJOR.MINOR.PATCH version (images "
            f"must be pinned); try {versions.N8N_VERSION}"
        )
    validate_access(profile, domain, public_url)


def _lb_context(t: topo.Topology, lb_host: topo.ClusterHost | None, profile: str, domain: str | None) -> dict | None:
    if lb_host is None:
        return None
    webhook_up, main_up = [], []
    for h in t.hosts():
        local = h.name == lb_host.name
        for k in range(1, h.roles.webhook + 1):
            webhook_up.append(f"n8n-webhook-{k}:5678" if local else f"{h.private_ip}:{WEBHOOK_HOST_PORT + k}")
        if h.roles.main:
            main_up.append("n8n-main:5678" if local else f"{h.private_ip}:5678")
    return {
        "site": f":{LB_PORT}" if profile == "bench" else domain,
        "webhook_paths": WEBHOOK_PATHS if webhook_up else (),
        "webhook_upstreams": webhook_up,
        "main_upstreams": main_up,
    }


def cluster_wiring(t: topo.Topology) -> Wiring:
    """How a container of any host finds Postgres and Redis: the data host's private address."""
    pg_host, redis_host = t.host_with("postgres"), t.host_with("redis")
    return COMPOSE_WIRING.model_copy(
        update={
            "postgres_host": pg_host.private_ip if pg_host else "",
            "redis_host": redis_host.private_ip if redis_host else "",
        }
    )


def host_env(
    t: topo.Topology, host: topo.ClusterHost, profile: str, domain: str | None, wiring: Wiring | None = None
) -> dict[str, dict[str, str]]:
    """Every n8n service of `host` (by its compose name) and its environment, from `role_env`. The lab
    starts the same processes with the same function and its own `wiring`."""
    shape, wiring = shape_of_topology(t, profile, domain), wiring or cluster_wiring(t)
    out: dict[str, dict[str, str]] = {}
    if host.roles.main:
        out["n8n-main"] = role_env(shape, "main", wiring)
        out["runner-main"] = role_env(shape, "runner", wiring, broker_host="n8n-main")
    for k in range(1, host.roles.webhook + 1):
        out[f"n8n-webhook-{k}"] = role_env(shape, "webhook", wiring)
    for k in range(1, host.roles.workers + 1):
        out[f"n8n-worker-{k}"] = role_env(shape, "worker", wiring)
        out[f"runner-worker-{k}"] = role_env(shape, "runner", wiring, broker_host=f"n8n-worker-{k}")
    return out


def _host_context(
    t: topo.Topology, host: topo.ClusterHost, profile: str, domain: str | None, pg: topo.PostgresMemory
) -> dict:
    lb_host = t.host_with("load_balancer")
    roles = host.roles
    lb_elsewhere = lb_host is not None and lb_host.name != host.name
    if roles.main and lb_elsewhere:
        main_publish = f"{host.private_ip}:5678"
    elif roles.main and lb_host is None:
        main_publish = "5678"  # no load balancer: main takes the traffic itself, firewalled as today
    else:
        main_publish = None
    webhooks = [
        {"name": f"n8n-webhook-{k}", "publish": f"{host.private_ip}:{WEBHOOK_HOST_PORT + k}" if lb_elsewhere else None}
        for k in range(1, roles.webhook + 1)
    ]
    grace_seconds = shutdown_seconds(t.longest_execution_s)[1]
    repo, runners_repo = versions.N8N_IMAGE.rsplit(":", 1)[0], versions.RUNNERS_IMAGE.rsplit(":", 1)[0]
    memory = cluster_memory(t, host, pg)
    return dict(
        t=t,
        host=host,
        profile=profile,
        domain=domain or "",
        summary=describe_topology(t, profile),
        n8n=bool(roles.main or roles.webhook or roles.workers),
        main=bool(roles.main),
        webhooks=webhooks,
        workers=[f"n8n-worker-{k}" for k in range(1, roles.workers + 1)],
        postgres=bool(roles.postgres),
        redis=bool(roles.redis),
        lb=_lb_context(t, lb_host, profile, domain) if roles.load_balancer else None,
        main_publish=main_publish,
        pg=pg,
        pool_arithmetic=topo.pools_needed(t),
        images={
            "n8n": f"{repo}:{t.n8n_version}",
            "runners": f"{runners_repo}:{t.n8n_version}",
            "postgres": versions.POSTGRES_IMAGE,
            "redis": versions.REDIS_IMAGE,
            "caddy": versions.CADDY_IMAGE,
        },
        stop_grace_s=grace_seconds,
        lb_try_s=LB_TRY_S,
        drain=drain_context(grace_seconds),
        env=with_node_heap(host_env(t, host, profile, domain), memory),
        memory_mib=memory,
        pg_budget_mib=postgres_budget_mib(t, t.host_with("postgres")),
        redis_maxmemory_mib=redis_maxmemory_mib(t.queue_depth_jobs),
        held_mb=f"{t.held_mb if t.held_mb is not None else HELD_MIB_PER_EXECUTION:g}",
        postgres_init=postgres_init(),
        redis_acl=redis_acl_user(REDIS_N8N_PASSWORD_REF),
    )


def pg_settings(t: topo.Topology) -> topo.pools.PostgresMemory:
    """Postgres' settings on its host: PGTune over what its host leaves it (limits.postgres_budget_mib)."""
    pg_host = t.host_with("postgres")
    return topo.postgres_memory(t, pg_host.ram_mib, pg_host.size, postgres_budget_mib(t, pg_host))


def data_clients(t: topo.Topology) -> list[str]:
    """The private addresses that may reach Postgres and Redis: the hosts that run an n8n process."""
    return [h.private_ip for h in t.hosts() if h.roles.main or h.roles.webhook or h.roles.workers]


def ingest_caddyfile(t: topo.Topology, profile: str = "bench", domain: str | None = None) -> str:
    """The load balancer's Caddyfile exactly as `render_topology` writes it into the ingest bundle (no secrets,
    no public URL needed: the routing table only), for the native stack and the lab."""
    import yaml

    lb_host = t.host_with("load_balancer")
    if lb_host is None:
        raise InputError("the topology has no load balancer; give one host load_balancer: 1")
    pg = pg_settings(t)
    compose = (
        template_env().get_template("cluster-compose.yml.j2").render(**_host_context(t, lb_host, profile, domain, pg))
    )
    return yaml.safe_load(compose)["configs"]["caddyfile"]["content"]


def _env_values(secrets: StackSecrets, n8n: bool, public_url: str, redis: bool = False) -> dict[str, str]:
    if not n8n:  # least privilege: a data host never sees the encryption key or the runner token
        return {
            "POSTGRES_PASSWORD": secrets.postgres_password,
            "REDIS_PASSWORD": secrets.redis_password,
            "REDIS_N8N_PASSWORD": secrets.redis_n8n_password,
        }
    values = {**{name: getattr(secrets, field) for field, name in ENV_NAMES.items()}, "N8N_PUBLIC_URL": public_url}
    if not redis:  # n8n logs in to Redis as its ACL user: the default user's password stays on the data host
        del values["REDIS_PASSWORD"]
    return values


def manifest_of(t: topo.Topology, profile: str) -> str:
    """`topology.json`: hosts with roles, sizes and private addresses; no secrets."""
    if t.single_host:  # today's stack: its own pool arithmetic (render.py)
        from n8n_sizer.advisor.pools import setup_recommended_max_connections as recommended_max_connections

        conns = t.max_connections or recommended_max_connections(t.setup())
    else:
        conns = pg_settings(t).max_connections
    doc = {
        "subnet": t.subnet,
        "profile": profile,
        "single_host": t.single_host,
        "max_connections": conns,
        "hosts": [h.model_dump(mode="json") for h in t.hosts()],
    }
    return json.dumps(doc, indent=2) + "\n"


def render_topology(
    t: topo.Topology,
    secrets: StackSecrets,
    *,
    profile: str = "bench",
    domain: str | None = None,
    public_url: str | None = None,
    extra_env: Mapping[str, Mapping[str, str]] | None = None,
) -> ClusterBundle:
    """Render every host's bundle. Pure. Refuses (InputError) pools over max_connections, a Postgres host
    too small for its connections, an unpinned version, or a cloud-init over the user-data limit."""
    _validate(t, profile, domain, public_url)
    extra_env = extra_env or {}
    public_url = public_url_for(profile, domain, public_url, cluster=not t.single_host)
    hosts = t.hosts()
    if t.single_host:
        host = hosts[0]
        bundle = render_bundle(
            t.setup(),
            secrets,
            profile=profile,
            domain=domain,
            public_url=public_url,
            benchmark_host=True,
            max_connections=t.max_connections,
            extra_env=extra_env.get(host.name),
        )
        return ClusterBundle(hosts={host.name: bundle}, manifest=manifest_of(t, profile))
    pg = pg_settings(t)
    env = template_env()
    out: dict[str, Bundle] = {}
    for host in hosts:
        ctx = _host_context(t, host, profile, domain, pg)
        compose = env.get_template("cluster-compose.yml.j2").render(**ctx)
        env_text = env.get_template("cluster-env.j2").render(
            host=host.name,
            secrets_file=SECRETS_FILE,
            n8n=ctx["n8n"],
            values=_env_values(secrets, ctx["n8n"], public_url, ctx["redis"]),
            extra_env=dict(extra_env.get(host.name, {})),
        )
        try:
            cloud_init = render_cloud_init(
                env,
                compose=compose,
                env_text=env_text,
                summary=f"host {host.name}: {describe_topology(t, profile)}",
                benchmark_host=True,
                workers=host.roles.workers,
                data_rules=data_port_rules(t.subnet, data_clients(t))
                if host.roles.postgres or host.roles.redis
                else None,
            )
        except InputError as exc:
            raise InputError(f"host {host.name}: {exc}") from None
        out[host.name] = Bundle(compose=compose, env=env_text, cloud_init=cloud_init)
    return ClusterBundle(hosts=out, manifest=manifest_of(t, profile))


def _secret_copies(out_dir: Path, host_names: list[str]) -> list[SecretCopy]:
    """Every file under `out_dir` that holds the cluster's secrets: `.secrets.env` first, then each host's
    `.env` and `cloud-init.yaml`, for the hosts of this topology and any host folder a previous render left."""
    copies = [read_secret_copy(out_dir / SECRETS_FILE)]
    folders = list(dict.fromkeys(host_names + _previous_hosts(out_dir)))
    for name in folders:
        folder = out_dir / name
        if folder.is_symlink():
            raise InputError(
                f"--out {out_dir}: host folder {folder} is a symbolic link; n8n-sizer neither reads "
                "secrets through it nor writes into it: remove the link or render into another folder"
            )
        copies += [read_secret_copy(folder / ENV_FILE), read_secret_copy(folder / CLOUD_INIT_FILE)]
    return [c for c in copies if c is not None]


def _previous_hosts(out_dir: Path) -> list[str]:
    """Host folders a previous render left (a folder with a .env or cloud-init.yaml); more than 64 is refused
    (a topology has at most a few dozen hosts, and each copy is read whole: their number is bounded too)."""
    if not out_dir.is_dir():
        return []
    found = []
    for entry in sorted(os.scandir(out_dir), key=lambda e: e.name)[:4096]:
        if (
            entry.is_dir(follow_symlinks=False)
            and topo.NAME_RE.fullmatch(entry.name)
            and any(os.path.lexists(os.path.join(entry.path, f)) for f in (ENV_FILE, CLOUD_INIT_FILE))
        ):
            found.append(entry.name)
    if len(found) > 64:
        raise InputError(
            f"--out {out_dir} holds {len(found)} host folders, more than any topology has (64 at "
            "most are read); render into a fresh folder"
        )
    return found


def write_topology(
    t: topo.Topology,
    out_dir: Path,
    *,
    profile: str = "bench",
    domain: str | None = None,
    public_url: str | None = None,
    generate_missing_secrets: bool = False,
) -> list[str]:
    """Write every host's bundle, the shared secrets (0600) and topology.json; keep every existing secret
    (`settle_secrets`: any copy's value is kept, copies that disagree are refused)."""
    out_dir = Path(out_dir)
    names = [h.name for h in t.hosts()]
    copies = _secret_copies(out_dir, names)
    secrets, kept, said = settle_secrets(out_dir / SECRETS_FILE, copies, generate_missing=generate_missing_secrets)
    extra: dict[str, dict[str, str]] = {}
    for copy in copies:
        if copy.path.name != ENV_FILE or copy.path.parent.name not in names:
            continue
        values = {k: e.value for k, e in copy.entries.items()}
        extra[copy.path.parent.name] = {
            k: e.written for k, e in copy.entries.items() if k not in ENV_NAMES.values() and k != "N8N_PUBLIC_URL"
        }
        if public_url is None and profile != "production" and values.get("N8N_PUBLIC_URL"):
            public_url = require_url(values["N8N_PUBLIC_URL"], f"{copy.path}: N8N_PUBLIC_URL").text
    cluster = render_topology(t, secrets, profile=profile, domain=domain, public_url=public_url, extra_env=extra)
    fix = "render into another --out folder"
    for name in cluster.hosts:  # every host folder checked before the first byte is written
        check_folder(out_dir / name, "--out: host folder", fix=fix, missing_ok=True)
    _prepare_out_dir(out_dir)
    messages = []
    write_private(out_dir / SECRETS_FILE, "".join(f"{n}={getattr(secrets, f)}\n" for f, n in ENV_NAMES.items()))
    for name, bundle in cluster.hosts.items():
        folder = make_folder(out_dir / name, "--out: host folder", fix=fix)
        write_private(folder / ENV_FILE, bundle.env)
        write_private(folder / CLOUD_INIT_FILE, bundle.cloud_init)
        saved = keep_previous(folder / COMPOSE_FILE, bundle.compose)
        if saved is not None:
            messages.append(f"the previous {folder / COMPOSE_FILE} differed: kept as {saved}")
        write_atomic(folder / COMPOSE_FILE, bundle.compose, private=False, what="--out")
        size = len(bundle.cloud_init.encode("utf-8"))
        messages.append(f"wrote {folder}/ (cloud-init {size:,} of {USER_DATA_LIMIT_BYTES:,} bytes)")
    write_atomic(out_dir / MANIFEST_FILE, cluster.manifest, private=False, what="--out")
    messages.insert(0, f"rendered {len(cluster.hosts)} host bundle(s): {describe_topology(t, profile)}")
    origin = "from the existing copies" if kept else ""
    messages += said + secret_messages(kept, origin, out_dir / SECRETS_FILE)[0]
    if not t.single_host:
        messages.append(
            f"Postgres pools: {topo.pools_needed(t)}; check it all with `n8n-sizer check --topology {out_dir}`"
        )
    return messages
