"""What `n8n-sizer bench` needs around the library: flag checks, the live progress display, the summary."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from n8n_sizer.bench.plan import FindMax, build_plan, parse_duration, parse_rates, parse_sweep
from n8n_sizer.bench.run import Progress
from n8n_sizer.bench.session import BenchRequest, BenchSummary, read_inventory_file, read_stack_inventory
from n8n_sizer.errors import InputError
from n8n_sizer.runs.ledger import format_ledger
from n8n_sizer.runs.store import RunStore


def make_request(
    *,
    stack,
    inventory,
    local,
    mode,
    workers,
    db,
    cpus,
    workflow,
    rates,
    step_seconds,
    sweep,
    warmup,
    timeout_s,
    max_in_flight,
    drain_s,
    ssh_key,
    ssh_port,
    find_max=False,
    p95_ms=2000.0,
    error_budget=0.0,
    tolerance=1.0,
    soak=None,
    rate=None,
    shape="constant",
    payload_bytes=None,
    hmac_secret_file=None,
    malformed=0.0,
    respond=None,
) -> BenchRequest:
    chosen = [name for name, on in (("--stack", stack), ("--inventory", inventory), ("--local", local)) if on]
    if len(chosen) != 1:
        raise InputError(
            "say where to run: exactly one of --stack NAME, --inventory FILE or --local"
            + (f" (got {' and '.join(chosen)})" if chosen else "")
        )
    search = None
    if find_max and soak is not None:
        raise InputError("--find-max and --soak are separate runs; choose one")
    if find_max:
        bounds = parse_rates(rates)
        if len(bounds) != 2 or sweep:
            raise InputError(
                f"--find-max searches between two rates: --rates LOW,HIGH (got --rates {rates}"
                f"{' and a sweep' if sweep else ''}); try --rates 5,60"
            )
        search = FindMax(
            low_per_s=min(bounds),
            high_per_s=max(bounds),
            p95_ms=p95_ms,
            error_budget=error_budget,
            tolerance_per_s=tolerance,
            step_s=step_seconds,
        )
        rates, sweep = ",".join(f"{b:g}" for b in sorted(bounds)), ""
    if soak is not None:
        if rate is None or sweep:
            raise InputError("--soak holds one steady rate: add --rate R (e.g. --rate 0.2) and no --concurrency-sweep")
        rates, step_seconds = f"{rate:g}", parse_duration(soak)
    elif rate is not None:
        raise InputError("--rate goes with --soak DURATION; for steps use --rates 5,20,50")
    from n8n_sizer.bench.shapes import parse_shape

    plan = build_plan(
        parse_rates(rates),
        step_seconds,
        parse_sweep(sweep),
        timeout_s=timeout_s,
        max_in_flight=max_in_flight,
        warmup_requests=warmup,
        drain_s=drain_s,
        shape=parse_shape(shape),
    )
    mode_fields = {
        "find_max": search,
        "soak": soak is not None,
        "payload_bytes": payload_bytes,
        "malformed": malformed,
        "hmac_secret_file": str(Path(hmac_secret_file).resolve()) if hmac_secret_file else None,
        "respond": respond,
    }
    if ssh_key is not None and not ssh_key.is_file():
        raise InputError(f"--ssh-key {ssh_key}: no such file; pass the private key the fleet was created with")
    if local:
        from n8n_sizer.advisor.setup import Setup

        if mode not in ("regular", "queue"):
            raise InputError(f"--mode {mode}: choose regular or queue")
        n = workers if workers is not None else (1 if mode == "queue" else 0)
        if mode == "queue" and n < 1:
            raise InputError(f"--workers {n}: queue mode needs at least one worker; try --workers 1")
        if mode == "regular" and n != 0:
            raise InputError(f"--workers {n}: regular mode runs no workers; try --mode queue --workers {n}")
        if mode == "queue" and db == "sqlite":
            raise InputError("--db sqlite: queue mode needs Postgres; drop --db or use --mode regular")
        setup = Setup(mode=mode, workers=n, db=db or "postgres")
        return BenchRequest(
            source="local", local_setup=setup, pin_cpus=cpus, plan=plan, workflow=workflow, **mode_fields
        )
    if stack:
        return BenchRequest(
            source="stack",
            stack=stack,
            inventory=read_stack_inventory(stack),
            plan=plan,
            workflow=workflow,
            ssh_key=str(ssh_key) if ssh_key else None,
            ssh_port=ssh_port,
            **mode_fields,
        )
    return BenchRequest(
        source="inventory",
        inventory=read_inventory_file(inventory),
        plan=plan,
        workflow=workflow,
        inventory_path=str(Path(inventory).resolve()),
        ssh_key=str(ssh_key) if ssh_key else None,
        ssh_port=ssh_port,
        **mode_fields,
    )


@contextmanager
def bench_progress(enabled: bool) -> Iterator[Progress | None]:
    """A rich progress bar per target on stderr, on a terminal only (so stderr in logs and pipes carries
    nothing but errors): what each target does and how much of the plan has run."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as RichProgress

    lock = threading.Lock()
    tasks: dict[str, int] = {}
    display = RichProgress(
        TextColumn("{task.fields[target]:<16}"),
        TextColumn("{task.description:<20}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
    )

    def update(target: str, what: str, fraction: float) -> None:
        with lock:
            if target not in tasks:
                tasks[target] = display.add_task(what, target=target, total=1.0)
            display.update(tasks[target], description=what, completed=fraction)

    with display:
        yield update


def step_rows(store: RunStore) -> list[dict]:
    rows: dict[tuple[str, str], dict] = {}
    for s in store.read_samples():
        if s.labels.get("source") != "load":
            continue
        row = rows.setdefault(
            (s.labels["target"], s.labels["step"]),
            {"target": s.labels["target"], "step": s.labels["step"], "errors": {}},
        )
        if s.metric == "errors":
            if s.value:
                row["errors"][s.labels["class"]] = int(s.value)
        else:
            row[s.metric] = s.value
    return list(rows.values())


def print_summary(summary: BenchSummary, json_out: bool) -> None:
    if json_out:
        data = {
            "run_id": summary.run_id,
            "folder": summary.folder,
            "ledgers": {k: v.model_dump(mode="json") for k, v in summary.ledgers.items()},
        }
        print(json.dumps(data, indent=2))
        return
    store = RunStore.open(Path(summary.folder))
    print(f"run {summary.run_id}: {summary.folder}")
    print(
        f"{'target':<16} {'step':<16} {'offered':>8} {'achieved':>9} {'answered/min':>12} {'p50 ms':>8} "
        f"{'p95 ms':>8} {'p99 ms':>8}  errors"
    )
    for r in step_rows(store):
        offered = r.get("offered_rate", r.get("concurrency"))

        def ms(key: str, r: dict = r) -> str:
            return f"{r[key]:>8.0f}" if key in r else f"{'-':>8}"

        errors = ", ".join(f"{k} {v}" for k, v in sorted(r["errors"].items())) or "0"
        print(
            f"{r['target']:<16} {r['step']:<16} {offered:>8g} {r.get('achieved_rate', 0):>9.2f} "
            f"{r.get('answered_per_min', 0):>12.0f} {ms('latency_p50')} {ms('latency_p95')} {ms('latency_p99')}  {errors}"
        )
    for name, ledger in summary.ledgers.items():
        print(format_ledger(name, ledger))
    for name, result in store.manifest.extra.get("find_max", {}).items():
        print(format_find_max(name, result))
    for name, buckets in store.manifest.extra.get("soak", {}).items():
        from n8n_sizer.bench.soak import SoakBucket, render_soak_table

        print(f"soak {name} (30-minute buckets, as the e2-micro soak)")
        print(render_soak_table([SoakBucket.model_validate(b) for b in buckets]))
    sys.stdout.flush()


def format_find_max(name: str, result: dict) -> str:
    """The search's answer and every measurement it rests on."""
    best = result["max_rate_per_s"]
    head = (
        f"find-max {name}: "
        + (f"{best:g} req/s" if best is not None else "no rate passed")
        + f" (p95 <= {result['p95_target_ms']:g} ms, error budget {result['error_budget']:g})"
    )
    if result.get("at_upper_bound"):
        head += "; the upper bound passed: the maximum may be higher"
    if result.get("confirmed") is False:
        head += "; NOT confirmed when measured again"
    rows = [
        f"  {s['outcome']['rate_per_s']:>8g} req/s  {'pass' if s['passed'] else 'fail'}  {s['reason']}"
        for s in result["steps"]
    ]
    return "\n".join([head, *rows])
