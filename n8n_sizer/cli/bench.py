"""`bench`: parse flags, call `n8n_sizer.bench.session`, show progress and the summary."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    app.command("bench", help=BENCH_HELP)(bench)


BENCH_HELP = """Benchmark real n8n: constant-rate steps, every request recorded, executions counted (ledger).

Examples:
  n8n-sizer bench --local --mode queue --workers 1 --rates 2 --step-seconds 10 --warmup 10
  n8n-sizer bench --local --mode queue --workers 1 --webhook-processors 2 --rates 5,10 --step-seconds 30
  n8n-sizer bench --stack single --ssh-key ~/.ssh/n8n-sizer
  n8n-sizer bench --resume 20261130T151500Z-1a2b3c
  n8n-sizer bench --local --find-max --rates 5,60 --step-seconds 60 --p95-ms 2000
  n8n-sizer bench --local --soak 4h --rate 0.2
  n8n-sizer bench --local --mode queue --workers 1 --workflow signed-webhook --shape burst:2:8:10:30 --malformed 0.08
  n8n-sizer bench --local --history history.json --scales 1,2,4 --step-seconds 60
"""


def bench(
    stack: str | None = typer.Option(None, "--stack", help="Pulumi stack whose `inventory` output lists the hosts."),
    inventory: Path | None = typer.Option(
        None, "--inventory", help="Inventory JSON (pulumi stack output --json inventory)."
    ),
    local: bool = typer.Option(False, "--local", help="Start n8n on this machine and load it from here."),
    mode: str = typer.Option("regular", "--mode", help="--local: regular or queue."),
    workers: int | None = typer.Option(
        None, "--workers", help="--local: queue-mode workers (default 1 in queue mode)."
    ),
    db: str | None = typer.Option(None, "--db", help="--local: postgres (default) or sqlite (regular mode only)."),
    cpus: int | None = typer.Option(None, "--cpus", help="--local: pin the stack to this many cores (taskset)."),
    workflow: str = typer.Option(
        "light", "--workflow", help="light, code-heavy, signed-webhook or a workflow JSON file."
    ),
    body: Path | None = typer.Option(None, "--body", help="JSON request body for your own --workflow FILE."),
    shape: str = typer.Option(
        "constant",
        "--shape",
        help="constant (the --rates steps), ramp:FROM:TO or burst:BASE:PEAK:BURST_S:PERIOD_S (one step of --step-seconds).",
    ),
    payload_bytes: int | None = typer.Option(
        None,
        "--payload-bytes",
        help="Send a JSON body of about N bytes (default 1200 with signed-webhook or --malformed).",
    ),
    hmac_secret_file: Path | None = typer.Option(
        None,
        "--hmac-secret-file",
        help="HMAC-SHA256 secret signing each body (X-Signature); generated 0600 when absent, never printed.",
    ),
    malformed: float = typer.Option(
        0.0,
        "--malformed",
        help="Share of malformed requests: bad signature, invalid JSON, schema mismatch, oversize, in turn.",
    ),
    respond: str | None = typer.Option(
        None,
        "--respond",
        help="signed-webhook: last-node (answer after the work, default), immediately (202 once checked, work after) or received (202 at ingest, nothing refused).",
    ),
    rates: str = typer.Option(
        "5,20,50", "--rates", help="Constant arrival rates, req/s, one step each (the queue-mode test's plan)."
    ),
    step_seconds: float = typer.Option(180.0, "--step-seconds", help="Seconds per step."),
    sweep: str = typer.Option(
        "",
        "--concurrency-sweep",
        help="Closed-model steps after the rates, e.g. 1,10,25,50 (the five-VPS benchmark's sweep).",
    ),
    warmup: int = typer.Option(200, "--warmup", help="Warm-up requests before the steps (not recorded)."),
    timeout_s: float = typer.Option(120.0, "--timeout", help="Client timeout per request, seconds."),
    max_in_flight: int = typer.Option(
        1000, "--max-in-flight", help="Open requests at most; more are recorded as dropped."
    ),
    drain_s: float = typer.Option(
        60.0, "--drain-seconds", help="How long stored executions may catch up after the load."
    ),
    rest_s: float = typer.Option(
        0.0,
        "--rest-seconds",
        help="After the warm-up, seconds with no load whose per-role CPU (the kernel's counts, where readable) is "
        "each process's idle CPU, kept in run.json (0: none).",
    ),
    ssh_key: Path | None = typer.Option(None, "--ssh-key", help="Private key for the fleet's hosts."),
    ssh_port: int = typer.Option(22, "--ssh-port", help="SSH port of the fleet's hosts."),
    out: str = typer.Option("results", "--out", help="Folder that holds run folders."),
    json_out: bool = typer.Option(False, "--json", help="Print run id, run folder and ledgers as one JSON object."),
    swap_calls: bool = typer.Option(
        False,
        "--swap-calls",
        help="Your --workflow's calls out go to local stand-ins; replace those no stand-in can be put in front of (an app whose host is fixed, a remote vector store...) by an HTTP call to a stand-in waiting the assumed time; without it such a workflow is refused.",
    ),
    resume: str | None = typer.Option(None, "--resume", help="Continue an unfinished run (its id or folder)."),
    find_max: bool = typer.Option(
        False,
        "--find-max",
        help="Bisect the highest rate within --p95-ms and the error budget; --rates LOW,HIGH are the bounds.",
    ),
    p95_ms: float | None = typer.Option(None, "--p95-ms", help="--find-max: p95 latency target, ms (default 2000)."),
    error_budget: float | None = typer.Option(
        None, "--error-budget", help="--find-max: failed fraction of requests allowed (default 0)."
    ),
    tolerance: float | None = typer.Option(
        None, "--tolerance", help="--find-max: stop when the bracket is this narrow, req/s (default 1)."
    ),
    soak: str | None = typer.Option(
        None,
        "--soak",
        help="Soak: one steady --rate for this long (4h, 30m), 30-minute buckets (as the e2-micro soak).",
    ),
    rate: float | None = typer.Option(None, "--rate", help="--soak: the steady rate, req/s."),
    webhook_processors: int = typer.Option(
        0,
        "--webhook-processors",
        help="--local --mode queue: `n8n webhook` processes behind Caddy, which takes the load (main keeps the editor and API).",
    ),
    history: Path | None = typer.Option(
        None,
        "--history",
        help="--local: replay this history's mix (`n8n-sizer history export`), each workflow at its measured rate, calls answered by a stand-in after the measured waits (docs/history.md).",
    ),
    scales: str = typer.Option(
        "1", "--scales", help="--history: one step per factor of the measured rates, e.g. 1,2,4."
    ),
) -> None:
    from n8n_sizer.bench.plan import MAX_REST_S
    from n8n_sizer.bench.session import resume_bench, start_bench
    from n8n_sizer.cli.args import check_bench_args
    from n8n_sizer.cli.bench_view import bench_progress, print_summary
    from n8n_sizer.errors import InputError
    from n8n_sizer.safety.files import require_output_folder
    from n8n_sizer.safety.numbers import Range, check_number

    if history is not None:  # a mix of workflows at their own rates (cli/history_replay.py)
        from n8n_sizer.advisor.setup import Setup
        from n8n_sizer.cli.history_replay import refuse_others, run_history_replay
        from n8n_sizer.safety.files import require_output_folder

        refuse_others(
            local,
            {
                "--stack": stack is not None,
                "--inventory": inventory is not None,
                "--workflow": workflow != "light",
                "--body": body is not None,
                "--find-max": find_max,
                "--soak": soak is not None,
                "--resume": resume is not None,
                "--shape": shape != "constant",
                "--concurrency-sweep": bool(sweep),
                "--payload-bytes": payload_bytes is not None,
                "--malformed": bool(malformed),
                "--hmac-secret-file": hmac_secret_file is not None,
                "--webhook-processors": bool(webhook_processors),
                "--cpus": cpus is not None,
            },
        )
        if mode not in ("regular", "queue"):
            raise InputError(f"--mode {mode!r}: regular or queue")
        setup = Setup(mode="queue", workers=workers or 1) if mode == "queue" else Setup(mode="regular")
        out_dir = require_output_folder(out, "--out", fix="try --out results")
        return run_history_replay(history, setup, scales, step_seconds, out_dir, json_out, timeout_s, max_in_flight)
    if scales != "1":
        raise InputError("--scales multiplies a --history mix's rates; pass --history FILE with it, or use --rates")
    if webhook_processors and (resume is not None or not local or mode != "queue"):
        raise InputError(
            f"--webhook-processors {webhook_processors} applies to a new --local --mode queue run "
            "(webhook processors need queue mode); add --local --mode queue or drop it"
        )
    check_number("--webhook-processors", webhook_processors, Range(0, 9, example="2"))
    check_number("--rest-seconds", rest_s, Range(0, MAX_REST_S, example="60"))
    if rest_s and resume is not None:
        raise InputError(f"--rest-seconds {rest_s:g} applies to a new run, not --resume; drop it")
    if resume is not None:
        out_dir = require_output_folder(out, "--out", fix="try --out results")
    else:
        out_dir = check_bench_args(
            stack=stack,
            local=local,
            mode=mode,
            workers=workers,
            db=db,
            cpus=cpus,
            workflow=workflow,
            body=body,
            inventory=inventory,
            rates=rates,
            step_seconds=step_seconds,
            sweep=sweep,
            warmup=warmup,
            timeout_s=timeout_s,
            max_in_flight=max_in_flight,
            drain_s=drain_s,
            ssh_key=ssh_key,
            ssh_port=ssh_port,
            p95_ms=p95_ms,
            error_budget=error_budget,
            tolerance=tolerance,
            soak=soak,
            rate=rate,
            out=out,
            find_max=find_max,
            shape=shape,
            payload_bytes=payload_bytes,
            hmac_secret_file=hmac_secret_file,
            malformed=malformed,
            respond=respond,
        )
    out = out_dir
    # Defaults applied here, so a --find-max-only flag given without --find-max was refused above.
    p95_ms = 2000.0 if p95_ms is None else p95_ms
    error_budget = 0.0 if error_budget is None else error_budget
    tolerance = 1.0 if tolerance is None else tolerance
    with bench_progress(enabled=not json_out) as progress:
        if resume is not None:
            summary = resume_bench(resume, out, progress)
        else:
            from n8n_sizer.cli.bench_view import make_request

            req = make_request(
                stack=stack,
                inventory=inventory,
                local=local,
                mode=mode,
                workers=workers,
                db=db,
                cpus=cpus,
                workflow=workflow,
                rates=rates,
                step_seconds=step_seconds,
                sweep=sweep,
                warmup=warmup,
                timeout_s=timeout_s,
                max_in_flight=max_in_flight,
                drain_s=drain_s,
                ssh_key=ssh_key,
                ssh_port=ssh_port,
                find_max=find_max,
                p95_ms=p95_ms,
                error_budget=error_budget,
                tolerance=tolerance,
                soak=soak,
                rate=rate,
                shape=shape,
                payload_bytes=payload_bytes,
                hmac_secret_file=hmac_secret_file,
                malformed=malformed,
                respond=respond,
            )
            req = req.model_copy(
                update={
                    "webhook_processors": webhook_processors,
                    "plan": req.plan.model_copy(update={"rest_s": rest_s}),
                }
            )
            summary = start_bench(req, out, progress, workflow_body=body, swap_calls=swap_calls)
    print_summary(summary, json_out)
