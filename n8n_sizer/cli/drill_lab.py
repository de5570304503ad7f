"""`drill NAME --inventory lab.json`: the cluster drills on a deployed lab, one run folder per drill."""

from __future__ import annotations

import json
from pathlib import Path

import typer


def lab_drills(names: list[str], inventory: Path, out: str, json_out: bool, extra_flags: list[str]) -> None:
    from n8n_sizer.errors import InputError
    from n8n_sizer.lab.drills.cluster_drills import LAB_DRILLS, run_lab_drill
    from n8n_sizer.lab.drills.context import lab_drill_context
    from n8n_sizer.safety.files import require_output_folder
    from n8n_sizer.stack.handle import StackError

    for name in names:
        if name not in LAB_DRILLS:
            raise InputError(f"drill {name!r} is not a cluster drill; on a lab try one of {', '.join(LAB_DRILLS)}")
    if extra_flags:
        raise InputError(
            f"{', '.join(extra_flags)}: not for a lab inventory (the lab's hosts are all drilled); drop them"
        )
    folder = require_output_folder(out, "--out", fix="try --out results", writable=True)
    with lab_drill_context(inventory) as ctx:
        if not json_out:
            typer.echo(f"drilling {ctx.lab.name} through {ctx.lab.url}: {', '.join(names)} ...", err=True)
        for name in names:
            try:
                store = run_lab_drill(name, ctx, folder)
            except StackError as exc:  # the drill could not set up or observe: not a finding about n8n
                typer.echo(
                    f"n8n-sizer: drill {name} on {ctx.lab.name} could not finish ({exc}); recorded as "
                    f"incomplete in {folder}",
                    err=True,
                )
                raise typer.Exit(1) from None
            extra = store.manifest.extra
            if json_out:
                typer.echo(
                    json.dumps(
                        {
                            "run_id": store.run_id,
                            "folder": str(store.folder),
                            "drill": name,
                            "target": ctx.lab.name,
                            "verdict": extra["verdict"],
                            "checks": extra["checks"],
                            "ledger": extra["observed"]["ledger"],
                        }
                    )
                )
                continue
            typer.echo(f"drill {name} on {ctx.lab.name}: {extra['verdict']}  (run {store.run_id}, {store.folder})")
            for item in extra["checks"]:
                typer.echo(f"- {item['verdict']}: {item['observation']}")
                typer.echo(f"    n8n promises: {item['expected']}")
