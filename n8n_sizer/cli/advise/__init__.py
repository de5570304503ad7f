"""`advise`: parse the request, call the advisor, format the recommendation."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    app.command("advise", help=ADVISE_HELP)(advise)


ADVISE_HELP = """Recommend mode, workers, concurrency, pools and servers (one host or a multi-host topology) for a webhook rate.

Works on the measurements embedded in the package; --results refits on your own bench runs.

Examples: advise --rps 40 --vcpu 4 | advise --rps 200 --json > advice.json | advise --rps 20 --max-hosts 1 |
advise --rps 5 --vcpu 4 --workload code-heavy --json | advise --rps 20 --provider hetzner | advise --validate |
advise --rps 10 --vcpu 4 --burst 4 --burst-seconds 60 | advise --rps 200 --topology advice.json |
advise --rps 10 --workflow my-flow.json --wait-ms 300 | advise --workflow chat.json --rps 2 --wait "OpenAI Chat Model=2000" |
advise --history history.json --vcpu 4 --scale 2
"""


def advise(
    rps: float | None = typer.Option(None, "--rps", help="Sustained webhook rate to carry, requests per second (> 0)."),
    vcpu: int | None = typer.Option(
        None, "--vcpu", help="vCPUs of each host; omit to get the cheapest catalog sizes that fit."
    ),
    max_hosts: int | None = typer.Option(
        None,
        "--max-hosts",
        help="Most hosts in the answer (default 40, or 1 with --compose); 1 asks the single-server question.",
    ),
    arch: str = typer.Option("x86", "--arch", help="CPU architecture: x86 or arm."),
    provider: str | None = typer.Option(None, "--provider", help="Limit server sizes to hetzner or gcp."),
    workload: str | None = typer.Option(
        None, "--workload", help="light (default) or code-heavy (see docs/advise.md); not with --cpu-ms/--wait-ms."
    ),
    cpu_ms: float | None = typer.Option(
        None, "--cpu-ms", help="Custom profile: CPU ms your Code nodes spend per execution."
    ),
    wait_ms: float | None = typer.Option(
        None, "--wait-ms", help="Custom profile: ms each execution waits on I/O (Wait, API calls)."
    ),
    p95_ms: float | None = typer.Option(None, "--p95-ms", help="p95 latency target in ms at the requested rate."),
    results: Path | None = typer.Option(None, "--results", help="Folder of your bench results to refit the model on."),
    validate: bool = typer.Option(
        False,
        "--validate",
        help="Leave-one-out accuracy over the embedded measurements (a line per held-out point as it goes), then exit.",
    ),
    quick: bool = typer.Option(
        False, "--quick", help="With --validate: capacity points, lab topologies and prices only (no per-role steps)."
    ),
    burst: float | None = typer.Option(
        None,
        "--burst",
        help="A burst at --rps x this multiple (e.g. 4): backlog, drain time, p95 and what to put in front; with --burst-seconds.",
    ),
    burst_seconds: float | None = typer.Option(None, "--burst-seconds", help="How long the --burst lasts, seconds."),
    drain_seconds: float | None = typer.Option(
        None,
        "--drain-seconds",
        help="With --burst: its backlog must be worked off within this many seconds (with --p95-ms, the burst's p95 too); the answer is sized up until it is.",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object instead of the report."),
    compose: str | None = typer.Option(None, "--compose", help="Also render the recommended stack into this folder."),
    generate_missing_secrets: bool = typer.Option(
        False,
        "--generate-missing-secrets",
        help="--compose: an existing .env there lacks a secret: generate it (never replaces one that is there).",
    ),
    topology: Path | None = typer.Option(
        None,
        "--topology",
        help='Score this topology (advise --json output, or {"topology": [...]}) instead of searching: its capacity, bound and pools.',
    ),
    workflow: Path | None = typer.Option(
        None,
        "--workflow",
        help="Price your workflow export (the JSON n8n's editor downloads) from its nodes, no bench run: docs/workflow-price.md. --cpu-ms is then its Code nodes' own CPU, --wait-ms each HTTP call's wait.",
    ),
    items: int | None = typer.Option(
        None, "--items", help="With --workflow: items per execution (each node runs once per item)."
    ),
    calibration: Path | None = typer.Option(
        None, "--calibration", help="With --workflow: the Code nodes' CPU from `n8n-sizer calibrate FILE`."
    ),
    expression_engine: str = typer.Option(
        "default",
        "--expression-engine",
        help="With --workflow: price under n8n's default (isolated) expression engine or legacy (faster, not isolated).",
    ),
    on_this_machine: bool = typer.Option(
        False,
        "--on-this-machine",
        help="With --topology: every host shares this machine's cores at this machine's measured speed (the lab, docs/lab.md).",
    ),
    wait: list[str] | None = typer.Option(
        None,
        "--wait",
        help='With --workflow: NODE=MS, the wait per call of a node (its name or type, e.g. "OpenAI Chat Model=2000" or httpRequest=300); repeatable.',
    ),
    branch: list[str] | None = typer.Option(
        None,
        "--branch",
        help="With --workflow: NODE=SHARE, the share (0 to 1) of executions that take the branch starting at NODE (after an IF, Switch, Filter...); repeatable. Default: the dearest branch.",
    ),
    history: Path | None = typer.Option(
        None,
        "--history",
        help="Size the mix of workflows in this history (`n8n-sizer history export`), each at its own rate: docs/history.md.",
    ),
    from_n8n: str | None = typer.Option(
        None, "--from-n8n", help="Read the history from this n8n instance now (API key: N8N_API_KEY or --api-key-file)."
    ),
    scale: list[str] | None = typer.Option(
        None,
        "--scale",
        help="With a history: what if the load were 3 times (--scale 3) or one workflow's 5 times (--scale NAME=5); repeatable.",
    ),
    since: str | None = typer.Option(None, "--since", help="With --from-n8n: start of the window (default 7d)."),
    until: str | None = typer.Option(None, "--until", help="With --from-n8n: end of the window (default now)."),
    api_key_file: Path | None = typer.Option(
        None, "--api-key-file", help="With --from-n8n: the API key on one line in a chmod 600 file (else N8N_API_KEY)."
    ),
) -> None:
    from n8n_sizer.cli.advise.inputs import AdviseOptions
    from n8n_sizer.cli.advise.view import run_advise

    return run_advise(
        AdviseOptions(
            rps=rps,
            vcpu=vcpu,
            max_hosts=max_hosts,
            arch=arch,
            provider=provider,
            workload=workload,
            cpu_ms=cpu_ms,
            wait_ms=wait_ms,
            p95_ms=p95_ms,
            results=results,
            validate=validate,
            json_out=json_out,
            compose=compose,
            generate_missing_secrets=generate_missing_secrets,
            burst=burst,
            burst_seconds=burst_seconds,
            drain_seconds=drain_seconds,
            topology=topology,
            on_this_machine=on_this_machine,
            workflow=workflow,
            items=items,
            calibration=calibration,
            expression_engine=expression_engine,
            wait=tuple(wait or ()),
            branch=tuple(branch or ()),
            quick=quick,
            history=history,
            from_n8n=from_n8n,
            scale=scale or None,
            since=since,
            until=until,
            api_key_file=api_key_file,
        )
    )
