"""Render a `Setup` into docker-compose.yml, .env and cloud-init user data.

`render_bundle` is pure (text in, text out) so the fleet can use it as user data and tests can compare
it with golden files; `write_bundle` is the I/O edge that keeps an existing .env's secrets.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from n8n_sizer import versions
from n8n_sizer.advisor import pools
from n8n_sizer.advisor.pools import default_postgres_memory
from n8n_sizer.advisor.pools import (
    setup_recommended_max_connections as recommended_max_connections,
)
from n8n_sizer.advisor.pools import (
    setup_required_max_connections as required_max_connections,
)
from n8n_sizer.advisor.ram import held_mib
from n8n_sizer.advisor.setup import Setup
from n8n_sizer.bundle.cloudinit import USER_DATA_LIMIT_BYTES, render_cloud_init
from n8n_sizer.bundle.drain import drain_context
from n8n_sizer.bundle.limits import memory_table, redis_maxmemory_mib, with_node_heap
from n8n_sizer.bundle.n8n_env import (
    COMPOSE_WIRING,
    REDIS_N8N_PASSWORD_REF,
    postgres_init,
    redis_acl_user,
    role_env,
    shape_of_setup,
    shutdown_timeouts,
)
from n8n_sizer.bundle.secrets import (
    ENV_NAMES,
    StackSecrets,
    read_secret_copy,
    secret_messages,
    settle_secrets,
)
from n8n_sizer.errors import InputError
from n8n_sizer.safety.files import read_user_text
from n8n_sizer.safety.frozen import Frozen
from n8n_sizer.safety.urls import require_url
from n8n_sizer.safety.write import probe_writable, write_atomic

Profile = Literal["bench", "production"]
TEMPLATES_DIR = Path(__file__).resolve().parent.parent / "templates"
VERSION_RE = re.compile(r"^\d+\.\d+\.\d+$")
DOMAIN_RE = re.compile(r"^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]$")
POSTGRES_MAX_CONNECTIONS_LIMIT = 262143  # Postgres refuses to start above this (MAX_BACKENDS)
BENCH_PUBLIC_URL = "http://localhost:5678/"
COMPOSE_FILE, ENV_FILE, CLOUD_INIT_FILE = "docker-compose.yml", ".env", "cloud-init.yaml"


class Bundle(Frozen):
    """The three rendered files, as text."""

    compose: str
    env: str  # holds the secrets
    cloud_init: str  # embeds env

    def __repr__(self) -> str:  # keep the secrets out of logs and tracebacks
        return f"Bundle(compose=<{len(self.compose)} chars>, env=<hidden>, cloud_init=<{len(self.cloud_init)} chars>)"

    __str__ = __repr__


def template_env() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES_DIR)),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,  # YAML and dotenv, not HTML
    )
    env.filters["yaml_value"] = json.dumps  # a JSON string is a YAML double-quoted scalar: "true" stays a string
    return env


def compose_env(setup: Setup, profile: str, domain: str | None) -> dict[str, dict[str, str]]:
    """Each n8n service's environment (main, its runner, every worker and its runner) from `role_env`."""
    shape = shape_of_setup(setup, profile, domain)
    out = {
        "n8n-main": role_env(shape, "main", COMPOSE_WIRING),
        "runner-main": role_env(shape, "runner", COMPOSE_WIRING, broker_host="n8n-main"),
    }
    for n in range(1, setup.workers + 1):
        out[f"n8n-worker-{n}"] = role_env(shape, "worker", COMPOSE_WIRING)
        out[f"runner-worker-{n}"] = role_env(shape, "runner", COMPOSE_WIRING, broker_host=f"n8n-worker-{n}")
    return out


def describe(setup: Setup, profile: str) -> str:
    """One line echoing the inputs the stack was rendered from."""
    if setup.mode == "queue":
        shape = f"queue mode, {setup.workers} workers x --concurrency {setup.concurrency}"
    else:
        shape = "regular mode"
    limit = f", production limit {setup.production_limit}" if setup.production_limit is not None else ""
    db = f"Postgres pool {setup.db_pool_size}" if setup.db == "postgres" else "SQLite"
    return (
        f"{shape}{limit}, runner limit {setup.runner_concurrency}, {db}, n8n {setup.n8n_version}, "
        f"longest execution {setup.longest_execution_s} s, profile {profile}"
    )


def validate_access(profile: str, domain: str | None, public_url: str | None) -> None:
    """How users reach the stack, for one host and a cluster alike: the profile, its domain, the public URL."""
    if profile not in ("bench", "production"):
        raise InputError(f"--profile {profile!r} is unknown; try --profile bench or --profile production")
    if profile == "production" and not domain:
        raise InputError(
            "--profile production needs --domain (Caddy gets its TLS certificate for it); try --domain n8n.example.com"
        )
    if domain and profile != "production":
        raise InputError(f"--domain {domain} only applies to --profile production; add --profile production")
    if domain and not DOMAIN_RE.fullmatch(domain):
        raise InputError(f"--domain {domain!r} is not a DNS name; try --domain n8n.example.com")
    if public_url is not None:
        require_url(public_url, "--public-url")  # the one URL grammar (safety/urls.py)


def public_url_for(profile: str, domain: str | None, public_url: str | None, *, cluster: bool = False) -> str:
    """The URL n8n gives out for its webhooks and editor. A cluster and the production profile are reached from
    outside: theirs is --public-url, or https://<domain>/ in production; never a loopback name or address
    (webhooks registered with other services would point nowhere). One bench host keeps localhost."""
    if public_url is None:
        if profile == "production":
            return f"https://{domain}/"
        if cluster:
            raise InputError(
                "a cluster needs --public-url, the address its webhooks are called at (the load "
                "balancer's); try --public-url http://n8n.example.com:5678/"
            )
        return BENCH_PUBLIC_URL
    url = require_url(public_url, "--public-url")
    if profile == "production" or cluster:
        if url.is_loopback:
            raise InputError(
                f"--public-url {public_url} is this machine's own address; a "
                f"{'cluster' if cluster else 'production stack'} is called from outside: try "
                "--public-url https://n8n.example.com/"
            )
    return public_url


def _validate(
    setup: Setup, profile: str, domain: str | None, public_url: str | None, max_connections: int | None
) -> int:
    """Refuse inputs that would render a broken stack; return Postgres' max_connections."""
    if not VERSION_RE.fullmatch(setup.n8n_version):
        raise InputError(
            f"--n8n-version {setup.n8n_version!r} is not an exact MAJOR.MINOR.PATCH version "
            f"(images must be pinned); try --n8n-version {versions.N8N_VERSION}"
        )
    validate_access(profile, domain, public_url)
    if setup.mode == "queue" and setup.production_limit is not None and setup.production_limit != setup.concurrency:
        raise InputError(
            f"--production-limit {setup.production_limit} would override --concurrency "
            f"{setup.concurrency} on every worker in queue mode (it is per worker, the queue-mode test); drop "
            f"--production-limit or set it to {setup.concurrency}"
        )
    if setup.db != "postgres":
        if max_connections is not None:
            raise InputError("--max-connections applies to Postgres only; drop it or use --db postgres")
        return 0
    if max_connections is None:
        return recommended_max_connections(setup)
    if not 1 <= max_connections <= POSTGRES_MAX_CONNECTIONS_LIMIT:
        raise InputError(
            f"--max-connections {max_connections} is outside the 1..{POSTGRES_MAX_CONNECTIONS_LIMIT} "
            f"Postgres accepts; try --max-connections {recommended_max_connections(setup)}"
        )
    if max_connections < required_max_connections(setup):
        raise InputError(
            f"--max-connections {max_connections} is below what n8n's pools need: "
            f"{pools.pool_arithmetic(pools.setup_processes(setup))}; try --max-connections {required_max_connections(setup)} "
            f"or a smaller --pool"
        )
    return max_connections


def render_bundle(
    setup: Setup,
    secrets: StackSecrets,
    *,
    profile: str = "bench",
    domain: str | None = None,
    public_url: str | None = None,
    benchmark_host: bool = True,
    max_connections: int | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> Bundle:
    """Render compose, .env and cloud-init for `setup`. Pure: no file I/O.

    Raises `InputError` for inputs that would make a broken stack: a `max_connections` below the pools'
    need (the message has the arithmetic), cloud-init over 32 KiB (the message has the size), an
    unpinned version, a production profile without a domain.
    """
    max_conn = _validate(setup, profile, domain, public_url, max_connections)
    pg = default_postgres_memory(max_conn) if setup.db == "postgres" else None
    memory = memory_table(setup, pg)
    env = template_env()
    summary = describe(setup, profile)
    stop_grace_s = shutdown_timeouts(setup)[1]
    repo = versions.N8N_IMAGE.rsplit(":", 1)[0]
    runners_repo = versions.RUNNERS_IMAGE.rsplit(":", 1)[0]
    compose = env.get_template("compose.yml.j2").render(
        setup=setup,
        summary=summary,
        profile=profile,
        domain=domain or "",
        queue=setup.mode == "queue",
        postgres=setup.db == "postgres",
        images={
            "n8n": f"{repo}:{setup.n8n_version}",
            "runners": f"{runners_repo}:{setup.n8n_version}",  # runners share n8n's version
            "postgres": versions.POSTGRES_IMAGE,
            "redis": versions.REDIS_IMAGE,
            "caddy": versions.CADDY_IMAGE,
        },
        stop_grace_s=stop_grace_s,
        drain=drain_context(stop_grace_s),
        max_connections=max_conn,
        pool_arithmetic=pools.pool_arithmetic(pools.setup_processes(setup)) if setup.db == "postgres" else "",
        env=with_node_heap(compose_env(setup, profile, domain), memory),
        memory_mib=memory,
        pg=pg,
        redis_maxmemory_mib=redis_maxmemory_mib(setup.queue_depth_jobs),
        held_mb=f"{held_mib(setup):g}",
        postgres_init=postgres_init(),
        redis_acl=redis_acl_user(REDIS_N8N_PASSWORD_REF),
    )
    public_url = public_url_for(profile, domain, public_url)
    env_text = env.get_template("env.j2").render(
        secrets=secrets, public_url=public_url, extra_env=dict(extra_env or {})
    )
    cloud_init = render_cloud_init(
        env, compose=compose, env_text=env_text, summary=summary, benchmark_host=benchmark_host, workers=setup.workers
    )
    return Bundle(compose=compose, env=env_text, cloud_init=cloud_init)


def _prepare_out_dir(out_dir: Path) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"--out {out_dir} is a file, not a folder; try --out {out_dir.parent / 'n8n-stack'}")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(
            f"--out {out_dir} cannot be created ({exc.strerror or exc}); try a folder you own, e.g. --out ./n8n-stack"
        ) from None
    probe_writable(out_dir, "--out", "try a folder you own, e.g. --out ./n8n-stack")


def keep_previous(compose_path: Path, new_text: str) -> Path | None:
    """Before `compose_path` is replaced with `new_text`: when the file there differs (it may carry the
    user's edits), copy it to `<name>.previous` with its own mode (a 0600 file stays 0600) and return that
    path. A link or unreadable file is refused, never replaced."""
    if not os.path.lexists(compose_path):
        return None
    if compose_path.is_symlink():
        raise InputError(
            f"{compose_path} is a symbolic link; n8n-sizer does not replace a linked file: "
            "render into another --out folder"
        )
    previous = read_user_text(
        compose_path,
        "the existing compose file",
        fix="it is never replaced unread: fix its permissions or render into another --out folder",
    )
    if previous == new_text:
        return None
    saved = compose_path.with_name(compose_path.name + ".previous")
    mode = os.lstat(compose_path).st_mode & 0o777
    write_atomic(saved, previous, private=False, mode=mode, what="--out")
    return saved


def write_bundle(
    setup: Setup,
    out_dir: Path,
    *,
    profile: str = "bench",
    domain: str | None = None,
    public_url: str | None = None,
    max_connections: int | None = None,
    generate_missing_secrets: bool = False,
) -> list[str]:
    """Write docker-compose.yml, .env (0600) and cloud-init.yaml (0600: it embeds .env) into `out_dir`.

    Every secret of an existing .env is kept, and so is every other line, as written. An existing .env
    that lacks a secret is refused unless `generate_missing_secrets`; a new secret is generated only for
    a new .env or when that flag asks. Returns messages for the user, which never contain a secret.
    """
    out_dir = Path(out_dir)
    env_path = out_dir / ENV_FILE
    env_copy = read_secret_copy(env_path)
    copies = [c for c in (env_copy, read_secret_copy(out_dir / CLOUD_INIT_FILE)) if c is not None]
    # One rule for every path (settle_secrets): a secret .env or cloud-init.yaml still holds is kept.
    secrets, kept, settled = settle_secrets(env_path, copies, generate_missing=generate_missing_secrets)
    entries = env_copy.entries if env_copy is not None else None
    existing = {k: e.value for k, e in (entries or {}).items()}
    if public_url is None and profile != "production" and existing.get("N8N_PUBLIC_URL"):
        public_url = require_url(existing["N8N_PUBLIC_URL"], f"{env_path}: N8N_PUBLIC_URL").text
    # Other variables go back exactly as written (quotes, `$` references and comments included).
    extra = {k: e.written for k, e in (entries or {}).items() if k not in ENV_NAMES.values() and k != "N8N_PUBLIC_URL"}
    # Render first: a refused setup leaves no folder and no file behind.
    bundle = render_bundle(
        setup,
        secrets,
        profile=profile,
        domain=domain,
        public_url=public_url,
        benchmark_host=profile == "bench",
        max_connections=max_connections,
        extra_env=extra,
    )
    _prepare_out_dir(out_dir)
    compose_path = out_dir / COMPOSE_FILE
    # The .env first: if a later file fails, the secrets on disk are still the ones the others use.
    write_atomic(env_path, bundle.env, private=True, what="--out")
    write_atomic(out_dir / CLOUD_INIT_FILE, bundle.cloud_init, private=True, what="--out")
    # A differing compose file may carry the user's edits: its copy is written before the new one replaces it.
    saved = keep_previous(compose_path, bundle.compose)
    write_atomic(compose_path, bundle.compose, private=False, what="--out")
    messages = [f"wrote {compose_path} ({describe(setup, profile)})"]
    if saved is not None:
        messages.append(f"the previous {COMPOSE_FILE} differed: kept as {saved}")
    source = f"in {env_path}" if env_copy is not None else f"from {out_dir / CLOUD_INIT_FILE} (there was no .env)"
    said, new = secret_messages(kept, source, env_path)
    messages += settled + said
    if not new and kept:
        messages.append(f"wrote {env_path} (mode 0600), no new secrets")
    if extra:
        messages.append(f"kept {len(extra)} other variable(s) of the previous .env: {', '.join(sorted(extra))}")
    size = len(bundle.cloud_init.encode("utf-8"))
    messages.append(
        f"wrote {out_dir / CLOUD_INIT_FILE} (mode 0600, {size:,} of {USER_DATA_LIMIT_BYTES:,} "
        "bytes of Hetzner's user_data limit)"
    )
    if setup.db == "postgres":
        chosen = max_connections if max_connections is not None else recommended_max_connections(setup)
        messages.append(
            f"Postgres max_connections {chosen}; n8n's pools need {pools.pool_arithmetic(pools.setup_processes(setup))}"
        )
    return messages
