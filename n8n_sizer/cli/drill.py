"""`drill`: run the queue-mode test's failure drills on a local stack or a fleet host and record them like bench runs."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    app.command("drill", help=DRILL_HELP)(drill)


DRILL_HELP = """Break a queue stack the ways the queue-mode test did; record what happened next to what it saw.

Drills: kill-worker, wrong-key, redis-restart, postgres-restart,
binary-filesystem, graceful-shutdown, redis-blip. Name one or more: they run
in that order on one stack, each restoring what it broke.

--local starts Postgres, Redis (AOF), n8n main and 2 workers on this machine
and stops them after; the actions are signals to those processes.

--inventory FILE (or --stack NAME) with --target NAME drills that fleet
host's compose stack over SSH with Docker's actions (docker kill, stop, start,
restart, pause) and leaves it running as rendered.

Each outcome goes to OUT/<run-id>/run.json (kind drill);
`n8n-sizer report OUT/<run-id>` renders it as a table.

Examples:
  n8n-sizer drill kill-worker --local
  n8n-sizer drill redis-restart --local --persistence none --json
  n8n-sizer drill kill-worker wrong-key --inventory inventory.json \\
      --target cx33-queue-2w --ssh-key ~/.ssh/n8n-sizer

On a deployed lab (--inventory lab.json of `lab up`, after `lab deploy`; no
--target): stop-worker-host, kill-webhook, restart-redis, partition, rolling-restart, each
under a short load through the lab's load balancer, with the cluster's ledger:
  n8n-sizer drill stop-worker-host kill-webhook partition --inventory lab.json
"""


def drill(
    names: list[str] = typer.Argument(
        ...,
        metavar="NAME",
        help="kill-worker, wrong-key, redis-restart, "
        "postgres-restart, binary-filesystem, graceful-shutdown or redis-blip.",
    ),
    local: bool = typer.Option(False, "--local", help="Start the stack on this machine, stop it after."),
    stack: str | None = typer.Option(None, "--stack", help="Pulumi stack whose `inventory` output lists the hosts."),
    inventory: Path | None = typer.Option(
        None, "--inventory", help="Inventory JSON (pulumi stack output --json inventory)."
    ),
    target: str | None = typer.Option(
        None, "--target", help="The inventory's host to drill: queue mode, >= 2 workers."
    ),
    ssh_key: Path | None = typer.Option(None, "--ssh-key", help="Private key for the fleet's hosts."),
    ssh_port: int = typer.Option(22, "--ssh-port", help="SSH port of the fleet's hosts."),
    n8n_login: Path | None = typer.Option(
        None,
        "--n8n-login",
        help="Fleet host: the owner login a bench run saved "
        "(results/<run>/secrets/<target>.json); default OUT/logins/<target>.json, "
        "written when the drill sets n8n up itself.",
    ),
    persistence: str | None = typer.Option(
        None, "--persistence", help="redis-restart: aof, none or both (default both)."
    ),
    seed_timing: bool = typer.Option(
        False,
        "--seed-timing",
        help="kill-worker on a stack the drill starts: keep n8n's "
        "Bull timings (60 s lock, 30 s stalled check) instead of the shortened 10 s / 5 s.",
    ),
    out: str = typer.Option("results", "--out", help="Folder that holds run folders."),
    json_out: bool = typer.Option(
        False, "--json", help="Print run id, folder, verdict and checks, one JSON object per drill."
    ),
) -> None:
    from n8n_sizer.drills import DRILLS, FAST_STALL_ENV, drill_stack
    from n8n_sizer.errors import InputError

    if inventory is not None and _is_lab(inventory):
        from n8n_sizer.cli.drill_lab import lab_drills

        given = {
            "--local": local,
            "--stack": stack,
            "--target": target,
            "--ssh-key": ssh_key,
            "--n8n-login": n8n_login,
            "--persistence": persistence,
            "--seed-timing": seed_timing,
        }
        return lab_drills(names, inventory, out, json_out, [flag for flag, v in given.items() if v])
    for name in names:
        if name not in DRILLS:
            raise InputError(f"drill {name!r} is unknown; try one of {', '.join(DRILLS)}")
    fleet = stack is not None or inventory is not None
    if local and (fleet or target):
        raise InputError("--local and --inventory/--stack/--target name two targets; pick one")
    if stack is not None and inventory is not None:
        raise InputError("--stack and --inventory both name the fleet; pick one")
    if fleet and not target:
        raise InputError(
            "--target is missing; name the inventory's queue-mode host to drill, e.g. --target cx33-queue-2w"
        )
    if target and not fleet:
        raise InputError(f"--target {target}: no fleet given; add --inventory FILE or --stack NAME")
    if not local and not fleet:
        raise InputError("no target given; try --local, or --inventory FILE --target NAME")
    if persistence is not None and "redis-restart" not in names:
        raise InputError(
            f"--persistence {persistence} applies to the redis-restart drill only; drop it or add redis-restart"
        )
    persistence = "both" if persistence is None else persistence
    if persistence not in ("aof", "none", "both"):
        raise InputError(f"--persistence {persistence}: unknown; try aof, none or both")
    if local and (ssh_key is not None or n8n_login is not None):
        raise InputError("--ssh-key and --n8n-login apply to a fleet host; --local needs neither: drop them")
    from n8n_sizer.cli.args import check_inventory, check_ssh_key
    from n8n_sizer.safety import numbers
    from n8n_sizer.safety.files import read_user_text, require_output_folder

    numbers.check_number("--ssh-port", ssh_port, numbers.PORT)
    out = require_output_folder(out, "--out", fix="try --out results", writable=True)
    if inventory is not None:
        check_inventory(inventory)
    check_ssh_key(ssh_key)
    if n8n_login is not None:
        read_user_text(
            n8n_login,
            "--n8n-login",
            fix="pass the login file a bench run saved (results/<run>/secrets/<target>.json)",
            max_bytes=64 * 1024,
        )
    stall = {} if seed_timing else dict(FAST_STALL_ENV)
    if local:
        if not json_out:
            typer.echo(
                f"starting a local queue stack (Postgres, Redis, main, 2 workers) for {', '.join(names)} ...", err=True
            )
        context = drill_stack(fast_stall=not seed_timing)
    else:
        context = _fleet_context(stack, inventory, target, ssh_key, ssh_port, n8n_login, out, stall, json_out)
    with context as ctx:
        for name in names:
            _run_one(name, ctx, out, persistence, json_out)


def _is_lab(inventory: Path) -> bool:
    """A lab's inventory (it has the `lab` section `lab up` writes): the cluster drills, not a fleet target."""
    from n8n_sizer.errors import InputError
    from n8n_sizer.safety.files import read_user_text
    from n8n_sizer.safety.jsondoc import load_json

    fix = "pass the inventory `lab up` or `pulumi stack output --json inventory` wrote"
    try:  # anything unreadable is left to the fleet checks below, which read it through the same reader
        data = load_json(
            read_user_text(inventory, "--inventory", fix=fix, max_bytes=1 << 20), f"--inventory {inventory}", fix
        )
    except InputError:
        return False
    return isinstance(data, dict) and isinstance(data.get("lab"), dict)


def _fleet_context(stack, inventory, target, ssh_key, ssh_port, n8n_login, out, stall, json_out):
    from n8n_sizer.bench.session import read_inventory_file, read_stack_inventory
    from n8n_sizer.drills.remote import remote_drill_stack, require_drillable
    from n8n_sizer.errors import InputError
    from n8n_sizer.fleet.inventory import Inventory
    from n8n_sizer.hosts.host import SshHost
    from n8n_sizer.stack.bringup import stack_kind_for

    data = read_inventory_file(inventory) if inventory is not None else read_stack_inventory(stack)
    hosts = {h.name: h for h in Inventory.model_validate(data).targets()}
    if target not in hosts:
        raise InputError(
            f"--target {target}: not a target host of the inventory; try one of {', '.join(sorted(hosts))}"
        )
    host = hosts[target]
    require_drillable(target, host.setup)
    ssh = SshHost(host.name, host.public_ip, host.ssh_user, key_file=ssh_key, port=ssh_port)
    ssh.run("true", timeout_s=30)  # unreachable or a refused key: one line now, before anything is recorded
    kind = stack_kind_for(host.public_ip)
    if not json_out:
        what = "its compose stack" if kind == "compose" else "a local stack started on it over SSH"
        typer.echo(f"drilling {target} ({host.public_ip}, {what}) ...", err=True)
    login = n8n_login if n8n_login is not None else out / "logins" / f"{target}.json"
    return remote_drill_stack(target, ssh, kind, host.setup, login_file=login, extra_env=stall)


def _run_one(name: str, ctx, out: Path, persistence: str, json_out: bool) -> None:
    import json

    from n8n_sizer.drills import run_drill
    from n8n_sizer.hosts.host import HostError
    from n8n_sizer.stack.handle import StackError
    from n8n_sizer.stack.remote import ComposeHandle

    params = {"persistence": persistence} if name == "redis-restart" else {}
    try:
        store = run_drill(name, ctx, out, **params)
    except StackError as exc:  # not a finding about n8n: the drill could not set its situation up or see it
        typer.echo(
            f"n8n-sizer: drill {name} on {ctx.stack.name} could not finish ({exc}); recorded as incomplete "
            f"in {out}; the stack was restored",
            err=True,
        )
        raise typer.Exit(1) from None
    except HostError as exc:  # lost the host (or a command failed) mid-drill: the restore may not have run
        if not isinstance(ctx.stack, ComposeHandle):
            raise
        raise HostError(
            f"{exc}; drill {name} is recorded as incomplete in {out}; the compose stack may be left "
            f"partly down: `cd {ctx.stack.stack_dir} && docker compose up -d` on the host puts it back "
            f"as rendered"
        ) from None
    extra = store.manifest.extra
    if json_out:
        typer.echo(
            json.dumps(
                {
                    "run_id": store.run_id,
                    "folder": str(store.folder),
                    "drill": name,
                    "target": ctx.stack.name,
                    "verdict": extra["verdict"],
                    "checks": extra["checks"],
                }
            )
        )
        return
    typer.echo(f"drill {name} on {ctx.stack.name}: {extra['verdict']}  (run {store.run_id}, {store.folder})")
    for item in extra["checks"]:
        typer.echo(f"- {item['verdict']}: {item['observation']}")
        typer.echo(f"    the queue-mode test saw: {item['expected']}")
