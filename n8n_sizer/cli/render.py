"""`render` and `check`: parse flags, call n8n_sizer.bundle, print one line per file or rule."""

from __future__ import annotations

from pathlib import Path

import typer

RENDER_HELP = """Write docker-compose.yml, .env (0600) and cloud-init.yaml for an n8n stack.

Example: n8n-sizer render --mode queue --workers 2 --out ./n8n-stack

An existing .env in --out keeps every secret (N8N_ENCRYPTION_KEY is never rotated).

Multi-host: n8n-sizer render --topology advice.json --out ./cluster (one bundle per host, docs/cluster.md).
"""

CHECK_HELP = """Lint a Docker Compose file against the n8n queue-mode checklist; exit 1 if a rule fails.

Example: n8n-sizer check docker-compose.yml --env .env --vcpu 4

A whole cluster: n8n-sizer check --topology ./cluster (each host's rules plus the cross-host ones).
"""

# Setup fields -> the flag that set them, so a validation error names the flag.
_FLAGS = {
    "mode": "--mode",
    "workers": "--workers",
    "concurrency": "--concurrency",
    "runner_concurrency": "--runner-concurrency",
    "production_limit": "--production-limit",
    "db": "--db",
    "db_pool_size": "--pool",
    "n8n_version": "--n8n-version",
    "longest_execution_s": "--longest-execution-s",
    "held_mb": "--held-mb",
    "queue_depth_jobs": "--queue-depth",
}


ENV_FILES_LIMIT = 8 * 1024 * 1024


def _ranges():
    from n8n_sizer.safety.numbers import Range

    return Range(0, 100_000, low_open=True, example="10.9"), Range(1, 100_000_000, example="100000")


def register(app: typer.Typer) -> None:
    app.command("render", help=RENDER_HELP)(render)
    app.command("check", help=CHECK_HELP)(check)


def build_setup(**fields: object):
    """A `Setup` from flag values; a bad combination becomes an `InputError` naming the flag."""
    from pydantic import ValidationError

    from n8n_sizer.advisor.setup import Setup
    from n8n_sizer.errors import InputError

    if fields["mode"] == "queue" and fields["workers"] < 1:
        raise InputError(f"--workers {fields['workers']}: queue mode needs at least one worker; try --workers 2")
    if fields["mode"] == "regular" and fields["workers"]:
        raise InputError(
            f"--workers {fields['workers']}: regular mode runs no workers; drop --workers or use --mode queue"
        )
    if fields["mode"] == "queue" and fields["db"] != "postgres":
        raise InputError("--db sqlite: queue mode needs Postgres; try --db postgres")
    try:
        return Setup(**{k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first.get("loc") else "input"
        flag = _FLAGS.get(field, field)
        raise InputError(f"{flag} {fields.get(field)!r}: {first['msg']}; see `n8n-sizer render --help`") from None


def render(
    mode: str | None = typer.Option(None, "--mode", help="regular or queue (not with --topology)."),
    workers: int | None = typer.Option(
        None, "--workers", help="Queue-mode workers (default 2 in queue mode, 0 in regular)."
    ),
    concurrency: int | None = typer.Option(
        None, "--concurrency", help="Executions per worker (worker --concurrency; queue mode, default 10)."
    ),
    runner_concurrency: int | None = typer.Option(
        None, "--runner-concurrency", help="N8N_RUNNERS_MAX_CONCURRENCY per runner (default 5)."
    ),
    pool: int | None = typer.Option(
        None, "--pool", help="DB_POSTGRESDB_POOL_SIZE per n8n process (Postgres only, default 2)."
    ),
    production_limit: int | None = typer.Option(None, "--production-limit", help="N8N_CONCURRENCY_PRODUCTION_LIMIT."),
    db: str | None = typer.Option(None, "--db", help="postgres (default) or sqlite (sqlite: regular mode only)."),
    n8n_version: str | None = typer.Option(None, "--n8n-version", help="Exact n8n version for n8n and runners images."),
    longest_execution_s: int | None = typer.Option(
        None, "--longest-execution-s", help="Longest workflow run; shutdown timeouts go above it (default 30)."
    ),
    max_connections: int | None = typer.Option(
        None, "--max-connections", help="Postgres max_connections, 1..262143 (default: what the pools need)."
    ),
    held_mb: float | None = typer.Option(
        None,
        "--held-mb",
        help="MiB one execution in flight holds (advise's figure for your workflow); sizes the memory limits "
        "(default: the light workflow's measured 10.9).",
    ),
    queue_depth: int | None = typer.Option(
        None,
        "--queue-depth",
        help="Jobs Redis holds waiting before it refuses new ones (its maxmemory; default 100000).",
    ),
    profile: str = typer.Option(
        "bench", "--profile", help="bench (plain HTTP on 5678) or production (Caddy TLS for --domain)."
    ),
    domain: str | None = typer.Option(None, "--domain", help="Public DNS name for --profile production."),
    public_url: str | None = typer.Option(
        None,
        "--public-url",
        help="URL n8n shows for webhooks: required for a --topology of several hosts (never localhost); default from --domain, else http://localhost:5678/ on one bench host.",
    ),
    out: str = typer.Option(..., "--out", help="Folder to write into (created if missing)."),
    topology: Path | None = typer.Option(
        None, "--topology", help='advise --json output (or {"topology": [...]}): one bundle per host.'
    ),
    generate_missing_secrets: bool = typer.Option(
        False,
        "--generate-missing-secrets",
        help="An existing .env in --out lacks a secret: generate it (never replaces one that is there).",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print what was written as one JSON object (no secret in it)."),
) -> None:
    from n8n_sizer.bundle.render import write_bundle
    from n8n_sizer.errors import InputError
    from n8n_sizer.safety import numbers as n
    from n8n_sizer.safety.files import require_output_folder

    HELD_MB, QUEUE_DEPTH = _ranges()
    n.check_numbers(
        {
            "--workers": (workers, n.WORKERS),
            "--concurrency": (concurrency, n.CONCURRENCY),
            "--runner-concurrency": (runner_concurrency, n.CONCURRENCY),
            "--pool": (pool, n.POOL),
            "--production-limit": (production_limit, n.PRODUCTION_LIMIT),
            "--longest-execution-s": (longest_execution_s, n.LONGEST_EXECUTION_S),
            "--max-connections": (max_connections, n.POSTGRES_MAX_CONNECTIONS),
            "--held-mb": (held_mb, HELD_MB),
            "--queue-depth": (queue_depth, QUEUE_DEPTH),
        }
    )
    if topology is not None:
        # The topology file sets all of these; a flag it would drop without a word is refused instead.
        ignored = {
            "--mode": mode,
            "--workers": workers,
            "--concurrency": concurrency,
            "--runner-concurrency": runner_concurrency,
            "--pool": pool,
            "--production-limit": production_limit,
            "--db": db,
            "--n8n-version": n8n_version,
            "--longest-execution-s": longest_execution_s,
            "--max-connections": max_connections,
            "--held-mb": held_mb,
            "--queue-depth": queue_depth,
        }
        given = [flag for flag, value in ignored.items() if value is not None]
        if given:
            raise InputError(
                f"{', '.join(given)} would be ignored: with --topology the file sets them (its "
                "concurrency, db_pool_size, max_connections, n8n_version, longest_execution_s, held_mb, "
                "queue_depth_jobs keys); "
                f"drop {' '.join(given)}, or edit the file"
            )
        out_dir = require_output_folder(out, "--out", fix="try --out ./cluster")
        return _say(
            out_dir,
            _render_topology(
                topology,
                out_dir,
                profile=profile,
                domain=domain,
                public_url=public_url,
                generate_missing=generate_missing_secrets,
            ),
            json_out,
        )
    db = db or "postgres"
    runner_concurrency = 5 if runner_concurrency is None else runner_concurrency
    longest_execution_s = 30 if longest_execution_s is None else longest_execution_s
    if mode is None:
        raise InputError("--mode is missing; try --mode queue, or pass --topology advice.json")
    if mode not in ("regular", "queue"):
        raise InputError(f"--mode {mode!r} is unknown; try --mode queue or --mode regular")
    if db not in ("postgres", "sqlite"):
        raise InputError(f"--db {db!r} is unknown; try --db postgres or --db sqlite")
    # A flag the stack would not use is refused, not dropped without a word.
    if db == "sqlite" and pool is not None:
        raise InputError(
            f"--pool {pool} sets the Postgres connection pool, and --db sqlite has none; drop --pool "
            "or use --db postgres"
        )
    if mode == "regular" and concurrency is not None:
        raise InputError(
            f"--concurrency {concurrency} is per queue-mode worker, and regular mode runs none; use "
            "--production-limit to cap regular mode, or --mode queue"
        )
    out_dir = require_output_folder(out, "--out", fix="try --out ./n8n-stack")
    if workers is None:
        workers = 2 if mode == "queue" else 0
    setup = build_setup(
        mode=mode,
        workers=workers,
        concurrency=concurrency,
        runner_concurrency=runner_concurrency,
        production_limit=production_limit,
        db=db,
        db_pool_size=pool,
        n8n_version=n8n_version,
        longest_execution_s=longest_execution_s,
        held_mb=held_mb,
        queue_depth_jobs=queue_depth,
    )
    _say(
        out_dir,
        write_bundle(
            setup,
            out_dir,
            profile=profile,
            domain=domain,
            public_url=public_url,
            max_connections=max_connections,
            generate_missing_secrets=generate_missing_secrets,
        ),
        json_out,
    )


def _say(out_dir: Path, messages: list[str], json_out: bool) -> None:
    """What render wrote: its messages one per line, or one JSON object with the files now in the folder."""
    if not json_out:
        for line in messages:
            typer.echo(line)
        return
    import json

    files = sorted(str(p.relative_to(out_dir)) for p in Path(out_dir).rglob("*") if p.is_file())
    typer.echo(json.dumps({"out": str(out_dir), "files": files, "messages": messages}))


def _render_topology(
    path: Path, out: Path, *, profile: str, domain: str | None, public_url: str | None, generate_missing: bool
) -> list[str]:
    from n8n_sizer.bundle.render_topology import write_topology
    from n8n_sizer.bundle.topology import load_topology_text
    from n8n_sizer.safety.files import read_user_text

    text = read_user_text(path, "--topology", fix="pass the file `advise --json` wrote", max_bytes=4 << 20)
    return list(
        write_topology(
            load_topology_text(text, f"--topology {path}"),
            out,
            profile=profile,
            domain=domain,
            public_url=public_url,
            generate_missing_secrets=generate_missing,
        )
    )


def _read_env(path: Path, flag: str) -> dict[str, str]:
    from n8n_sizer.bundle.secrets import parse_env_text
    from n8n_sizer.safety.files import read_user_text

    return parse_env_text(read_user_text(path, flag, fix="pass a readable .env text file", max_bytes=1 << 20))


def _folder_env(file: Path) -> dict[str, str]:
    """The .env beside the compose file, which Compose reads for COMPOSE_FILE; {} when there is none or it cannot
    be read (check then reads nothing from it)."""
    from n8n_sizer.errors import InputError

    beside = file.parent / ".env"
    if not beside.is_file():
        return {}
    try:
        return _read_env(beside, ".env beside FILE")
    except InputError:
        return {}


def _env_files(text: str, base: Path, source: str) -> dict[str, dict[str, str]]:
    """Read every `env_file:` the compose file names, relative to its folder, as Compose does."""
    from n8n_sizer.bundle.compose_source import parse_compose_doc
    from n8n_sizer.errors import InputError

    doc = parse_compose_doc(text, source)
    found: dict[str, dict[str, str]] = {}
    total = 0
    for spec in doc["services"].values():
        entries = (spec or {}).get("env_file") or []
        for entry in [entries] if isinstance(entries, (str, dict)) else entries:
            rel = str(entry.get("path", "")) if isinstance(entry, dict) else str(entry)
            path = base / rel
            # Only regular files: a pipe or device named here must not hang check.
            if rel and rel not in found and path.is_file():
                found[rel] = _read_env(path, "env_file")
                total += sum(len(k) + len(v) for k, v in found[rel].items())
                if total > ENV_FILES_LIMIT:  # many spellings of one large file must not fill memory
                    raise InputError(
                        f"the env_file entries of {base} add up to more than {ENV_FILES_LIMIT:,} "
                        "characters; check reads at most that much: trim them"
                    )
    return found


def check(
    file: Path | None = typer.Argument(None, help="The docker-compose.yml to lint."),
    env: Path | None = typer.Option(None, "--env", help="A .env file to resolve ${VAR} references from."),
    vcpu: int | None = typer.Option(None, "--vcpu", help="vCPUs of the server, to judge the worker count."),
    longest_execution_s: int | None = typer.Option(
        None, "--longest-execution-s", help="Longest workflow run, to judge shutdown timeouts."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print a JSON list of rule results."),
    topology: Path | None = typer.Option(
        None, "--topology", help="A folder written by `render --topology`: check every host and the rules across them."
    ),
    ram: int | None = typer.Option(
        None, "--ram", help="The server's RAM in MiB, to hold every container's memory limit to it (e.g. 4096)."
    ),
) -> int:
    from n8n_sizer.bundle.checks.one_host import check_compose
    from n8n_sizer.errors import InputError
    from n8n_sizer.safety import numbers as n
    from n8n_sizer.safety.files import read_user_text
    from n8n_sizer.safety.yamldoc import MAX_YAML_BYTES

    n.check_numbers({"--vcpu": (vcpu, n.VCPU), "--longest-execution-s": (longest_execution_s, n.LONGEST_EXECUTION_S)})
    if topology is not None:
        if file is not None or env is not None or vcpu is not None or ram is not None:
            raise InputError(
                "--topology reads every host's compose file, .env, vCPUs and RAM itself; drop FILE, --env, --vcpu "
                "and --ram"
            )
        from n8n_sizer.bundle.checks.all_hosts import check_topology

        return _print_results(check_topology(topology, longest_execution_s), json_out)
    if file is None:
        raise InputError("FILE is missing; pass a docker-compose.yml, or --topology DIR for a rendered cluster")
    from n8n_sizer.bundle.compose_source import refuse_other_compose_files

    text = read_user_text(file, "FILE", fix="pass the path of a compose file", max_bytes=MAX_YAML_BYTES)
    values = _read_env(env, "--env") if env is not None else {}
    refuse_other_compose_files(file, {**_folder_env(file), **values})  # judge the file Compose would run
    env_files = _env_files(text, file.parent, f"FILE {file}")
    results = check_compose(
        text, values, vcpu, longest_execution_s=longest_execution_s, env_files=env_files, ram_mib=ram
    )
    return _print_results(results, json_out)


def _print_results(results, json_out: bool) -> int:
    import json

    failed = sum(r.status == "fail" for r in results)
    if json_out:
        typer.echo(json.dumps([r.model_dump() for r in results], indent=2))
    else:
        from n8n_sizer.safety.text import printable

        for r in results:  # messages quote the compose file: names and values echoed printable (safety.text)
            line = printable(f"{r.status.upper():4}  {r.rule:18}  {r.message}", limit=2000)
            typer.echo(line + (f"\n      fix: {printable(r.fix, limit=2000)}" if r.fix else ""))
        passed = sum(r.status == "pass" for r in results)
        typer.echo(f"{passed} passed, {failed} failed, {len(results) - passed - failed} not applicable")
    return 1 if failed else 0
