"""`drill`: run one of seed 000's failure drills on a local stack and record it like a bench run."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    app.command("drill", help=DRILL_HELP)(drill)


DRILL_HELP = """Break a local queue stack one of seed 000's ways; record the outcome next to the seed's.

Drills: kill-worker, wrong-key, redis-restart, postgres-restart, binary-filesystem, graceful-shutdown,
redis-blip.
--local starts Postgres, Redis (AOF), n8n main and 2 workers on this machine, runs the drill, restores
what it broke and stops everything it started. The outcome goes to OUT/<run-id>/run.json (kind drill);
`n8n-sizer report OUT/<run-id>` renders it as a table.

Examples:
  n8n-sizer drill kill-worker --local
  n8n-sizer drill redis-restart --local --persistence none --json
"""


def drill(
    name: str = typer.Argument(..., help="kill-worker, wrong-key, redis-restart, postgres-restart, binary-filesystem, "
                                                 "graceful-shutdown or redis-blip."),
    local: bool = typer.Option(False, "--local", help="Start the stack on this machine (the only target so far)."),
    persistence: str = typer.Option("both", "--persistence", help="redis-restart: aof, none or both."),
    seed_timing: bool = typer.Option(False, "--seed-timing", help="kill-worker: keep n8n's Bull timings "
                                     "(60 s lock, 30 s stalled check) instead of the shortened 10 s / 5 s."),
    out: Path = typer.Option(Path("results"), "--out", help="Folder that holds run folders."),
    json_out: bool = typer.Option(False, "--json", help="Print run id, folder, verdict and checks as one JSON object."),
) -> None:
    import json

    from n8n_sizer.bench.drills import DRILLS, drill_stack, run_drill
    from n8n_sizer.errors import InputError

    if name not in DRILLS:
        raise InputError(f"drill {name!r} is unknown; try one of {', '.join(DRILLS)}")
    if not local:
        raise InputError("no target given; try --local (drills on fleet hosts are not implemented yet)")
    if persistence not in ("aof", "none", "both"):
        raise InputError(f"--persistence {persistence}: unknown; try aof, none or both")
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is a file; try a folder such as results")
    params = {"persistence": persistence} if name == "redis-restart" else {}
    if not json_out:
        typer.echo(f"starting a local queue stack (Postgres, Redis, main, 2 workers) for {name} ...", err=True)
    with drill_stack(fast_stall=not seed_timing) as ctx:
        store = run_drill(name, ctx, out, **params)
    extra = store.manifest.extra
    if json_out:
        typer.echo(json.dumps({"run_id": store.run_id, "folder": str(store.folder), "drill": name,
                               "verdict": extra["verdict"], "checks": extra["checks"]}))
        return
    typer.echo(f"drill {name}: {extra['verdict']}  (run {store.run_id}, {store.folder})")
    for item in extra["checks"]:
        typer.echo(f"- {item['verdict']}: {item['observation']}")
        typer.echo(f"    seed 000: {item['expected']}")
