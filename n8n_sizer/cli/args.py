"""Checks of `bench`, `drill` and `report` arguments made before the library runs: numbers through the
shared validator, every file argument through the shared reader, so a hostile value is one line (exit 2)
and never a traceback, a hang or a flag dropped without a word."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from n8n_sizer.errors import InputError
from n8n_sizer.safety import numbers as n
from n8n_sizer.safety.files import read_user_bytes, read_user_text, require_folder, require_output_folder

BUILT_IN_WORKFLOWS = ("light", "code-heavy", "long-wait", "binary-read", "signed-webhook")
MAX_BODY_BYTES = 1 << 20
PAYLOAD_BYTES = n.Range(64, MAX_BODY_BYTES, example="1200")
MAX_KEY_BYTES = 64 * 1024
SOAK_S = n.Range(0, 30 * 86_400, low_open=True, example="4h")  # a month: beyond it, a typo
STEP_S = n.Range(0, 86_400, low_open=True, example="180")
TIMEOUT_S = n.Range(0, 3600, low_open=True, example="120")
TOLERANCE = n.Range(0, 100_000, low_open=True, example="1")
USERS = n.Range(1, 100_000, example="25")


def _json(text: str, what: str, fix: str) -> Any:
    def constant(name: str) -> None:
        raise ValueError(f"{name} is not a JSON number")

    try:
        return json.loads(text, parse_constant=constant)
    except json.JSONDecodeError as exc:
        raise InputError(f"{what} is not valid JSON ({exc.msg} at line {exc.lineno}); {fix}") from None
    except (ValueError, RecursionError) as exc:
        reason = str(exc)[:80] if isinstance(exc, ValueError) else "nested too deeply"
        raise InputError(f"{what} is not usable JSON ({reason}); {fix}") from None


def check_list(text: str, flag: str, allowed: n.Range, integer: bool) -> None:
    """`--rates 5,20` or `--concurrency-sweep 1,10`: every item a finite number inside `allowed`."""
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        try:
            value = int(item) if integer else float(item)
        except ValueError:
            raise InputError(
                f"{flag} {text!r}: {item!r} is not {'a whole number' if integer else 'a number'}; "
                f"try {flag} {allowed.example}"
            ) from None
        n.check_number(f"{flag} item", value, allowed)


def check_inventory(path: Path, flag: str = "--inventory") -> None:
    from n8n_sizer.fleet.inventory import load_inventory

    fix = f"save one with `pulumi stack output --json inventory > {path}`"
    text = read_user_text(path, flag, fix=fix, max_bytes=1 << 20)
    try:
        load_inventory(text)
    except InputError as exc:
        raise InputError(f"{flag} {path}: {exc}") from None


def check_workflow(spec: str) -> None:
    """A workflow file (not a built-in name): JSON object with a `nodes` list of node objects."""
    if spec in BUILT_IN_WORKFLOWS:
        return
    fix = f"export the workflow from n8n's editor (Download), or use one of {', '.join(BUILT_IN_WORKFLOWS[:2])}"
    doc = _json(read_user_text(spec, "--workflow", fix=fix, max_bytes=8 << 20), f"--workflow {spec}", fix)
    nodes = doc.get("nodes") if isinstance(doc, dict) else None
    if not isinstance(nodes, list) or not nodes:
        raise InputError(f"--workflow {spec} has no `nodes` list; {fix}")
    for i, node in enumerate(nodes):
        if (
            not isinstance(node, dict)
            or not isinstance(node.get("type", ""), str)
            or not isinstance(node.get("parameters", {}), dict)
        ):
            raise InputError(f"--workflow {spec}: nodes[{i}] is not a node object with a type and parameters; {fix}")
    for key, kind in (("connections", dict), ("settings", (dict, type(None))), ("name", str)):
        if key in doc and not isinstance(doc[key], kind):
            raise InputError(f"--workflow {spec}: `{key}` has the wrong type; {fix}")


def check_payload_args(payload_bytes, hmac_secret_file, malformed, respond, workflow: str) -> None:
    """--payload-bytes, --malformed (a share below 1), --respond (signed-webhook only), --hmac-secret-file (an
    existing file is read as it is, never overwritten; a new one needs a folder to be written in)."""
    n.check_numbers(
        {"--payload-bytes": (payload_bytes, PAYLOAD_BYTES), "--malformed": (malformed, n.Range(0, 1, example="0.08"))}
    )
    if malformed >= 1:
        raise InputError(f"--malformed {malformed:g}: every request malformed leaves nothing to measure; try 0.08")
    if respond is not None and respond not in ("last-node", "immediately", "received"):
        raise InputError(f"--respond {respond}: choose last-node, immediately or received")
    if respond is not None and workflow != "signed-webhook":
        raise InputError(f"--respond {respond} sets signed-webhook's response mode; add --workflow signed-webhook")
    if hmac_secret_file is not None:
        path = Path(hmac_secret_file)
        if path.exists():
            from n8n_sizer.bench.payloads import load_secret

            load_secret(path)
        elif not path.parent.is_dir():
            raise InputError(
                f"--hmac-secret-file {path}: its folder {path.parent} does not exist; create it or "
                f"point at a file in an existing folder"
            )


def check_body(path: Path) -> None:
    fix = "pass the JSON your webhook expects, in UTF-8"
    data = read_user_bytes(path, "--body", fix=fix, max_bytes=MAX_BODY_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"--body {path} is not UTF-8 text; {fix}") from None
    _json(text, f"--body {path}", fix)


def check_ssh_key(path: Path | None) -> None:
    if path is not None:
        read_user_bytes(
            path, "--ssh-key", fix="pass the private key the fleet was created with", max_bytes=MAX_KEY_BYTES
        )


def check_bench_args(
    *,
    stack=None,
    local: bool,
    mode: str,
    workers,
    db,
    cpus,
    workflow: str,
    body,
    inventory,
    rates: str,
    step_seconds: float,
    sweep: str,
    warmup: int,
    timeout_s: float,
    max_in_flight: int,
    drain_s: float,
    ssh_key,
    ssh_port: int,
    p95_ms: float,
    error_budget: float,
    tolerance: float,
    soak,
    rate,
    out: str,
    find_max: bool = False,
    shape: str = "constant",
    payload_bytes=None,
    hmac_secret_file=None,
    malformed: float = 0.0,
    respond=None,
) -> Path:
    """Everything `bench` can check before it starts anything; returns the --out folder."""
    chosen = [name for name, on in (("--stack", stack), ("--inventory", inventory), ("--local", local)) if on]
    if len(chosen) != 1:  # the same words as bench's own check, which runs after this one
        raise InputError(
            "say where to run: exactly one of --stack NAME, --inventory FILE or --local"
            + (f" (got {' and '.join(chosen)})" if chosen else "")
        )
    cores = os.cpu_count() or 1
    n.check_numbers(
        {
            "--workers": (workers, n.WORKERS),
            "--cpus": (cpus, n.Range(1, cores, example="1")),
            "--step-seconds": (step_seconds, STEP_S),
            "--warmup": (warmup, n.COUNT),
            "--timeout": (timeout_s, TIMEOUT_S),
            "--max-in-flight": (max_in_flight, n.IN_FLIGHT),
            "--drain-seconds": (drain_s, n.SECONDS_OR_ZERO),
            "--ssh-port": (ssh_port, n.PORT),
            "--p95-ms": (p95_ms, n.LATENCY_MS),
            "--error-budget": (error_budget, n.FRACTION),
            "--tolerance": (tolerance, TOLERANCE),
            "--rate": (rate, n.RATE_PER_S),
        }
    )
    check_list(rates, "--rates", n.RATE_PER_S, integer=False)
    check_payload_args(payload_bytes, hmac_secret_file, malformed, respond, workflow)
    from n8n_sizer.bench.shapes import parse_shape

    if parse_shape(shape) is not None and (find_max or soak is not None):
        raise InputError(
            f"--shape {shape} is one step of its own; --find-max and --soak hold constant rates: "
            f"drop --shape or run them separately"
        )
    check_list(sweep, "--concurrency-sweep", USERS, integer=True)
    if soak is not None:
        from n8n_sizer.bench.plan import parse_duration

        seconds = parse_duration(soak)
        if not math.isfinite(seconds) or not SOAK_S.holds(seconds):
            raise InputError(f"--soak {soak!r} is outside (0, 30 days]; try --soak 4h")
    if not find_max:
        unused = [
            f
            for f, v in (("--p95-ms", p95_ms), ("--error-budget", error_budget), ("--tolerance", tolerance))
            if v is not None
        ]
        if unused:
            raise InputError(f"{', '.join(unused)} only apply with --find-max; add --find-max or drop them")
    if local and ssh_key is not None:
        raise InputError("--ssh-key applies to fleet hosts (--stack/--inventory); --local needs none: drop it")
    if not local:
        ignored = [f for f, v in (("--workers", workers), ("--db", db), ("--cpus", cpus)) if v is not None]
        if ignored or mode != "regular":
            raise InputError(
                f"{', '.join(ignored) or '--mode'} only apply with --local (a fleet host runs the "
                "setup its stack file gives it); drop them or add --local"
            )
    if body is not None:
        check_body(body)
    check_workflow(workflow)
    check_ssh_key(ssh_key)
    if inventory is not None:
        check_inventory(inventory)
    return require_output_folder(out, "--out", fix="try --out results", writable=True)


def check_run_folders(runs: list[Path]) -> None:
    """`report RUN...`: each an existing, readable folder, none given twice (its rows would count twice)."""
    seen: dict[str, Path] = {}
    for run in runs:
        require_folder(run, "run folder", fix="pass a folder bench wrote, e.g. results/<run-id>")
        key = os.path.realpath(run)
        if key in seen:
            raise InputError(
                f"run folder {run} is given twice (also as {seen[key]}); its rows would count twice: name each run once"
            )
        seen[key] = run


def check_result_specs(results: Path) -> None:
    """`advise --results`: each run's bench spec, checked whole as `report` checks it (bench.session)."""
    from n8n_sizer.bench.session import check_bench_spec
    from n8n_sizer.runs.fit_input import find_runs
    from n8n_sizer.runs.store import RUN_JSON, RunStore

    for run in find_runs(Path(results)):
        check_bench_spec(RunStore.open(run).manifest, run / RUN_JSON)
