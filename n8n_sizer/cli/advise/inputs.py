"""`advise`'s request (`AdviseOptions`, what the CLI passes on) and its input checks: every refusal is one line
naming the option and the fix (InputError, exit 2), before the advisor runs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from n8n_sizer.errors import InputError

ARCHES = ("x86", "arm")


MAX_HOSTS_LIMIT = 200


PROVIDERS = ("hetzner", "gcp")


def check_inputs(
    rps: float | None,
    vcpu: int | None,
    arch: str,
    provider: str | None,
    p95_ms: float | None,
    validate: bool,
    cpu_ms: float | None = None,
    wait_ms: float | None = None,
    workload: str | None = None,
    max_hosts: int | None = None,
) -> None:
    from n8n_sizer.safety import numbers as n

    n.check_numbers(
        {
            "--rps": (rps, n.RATE_PER_S),
            "--vcpu": (vcpu, n.VCPU),
            "--cpu-ms": (cpu_ms, n.CPU_MS),
            "--wait-ms": (wait_ms, n.WAIT_MS),
            "--p95-ms": (p95_ms, n.LATENCY_MS),
        }
    )
    if workload is not None and (cpu_ms is not None or wait_ms is not None):
        given = " and ".join(f for f, v in (("--cpu-ms", cpu_ms), ("--wait-ms", wait_ms)) if v is not None)
        raise InputError(
            f"{given} describe a custom workload, and --workload {workload} names another; drop "
            f"--workload to size the custom one, or drop {given}"
        )
    if validate:
        given = [
            f
            for f, v in (
                ("--rps", rps),
                ("--vcpu", vcpu),
                ("--provider", provider),
                ("--p95-ms", p95_ms),
                ("--workload", workload),
                ("--cpu-ms", cpu_ms),
                ("--wait-ms", wait_ms),
                ("--max-hosts", max_hosts),
            )
            if v is not None
        ]
        if given:
            raise InputError(
                f"--validate scores the model on its measurements and ignores {', '.join(given)}; "
                "run it alone (with --results or --json if you like), or drop --validate"
            )
    if not validate and rps is None:
        raise InputError("--rps is required: the sustained webhook rate to carry, e.g. --rps 40")
    # (with --workflow, a schedule's own rate stands in for a missing --rps: view.py asks the export first)
    if rps is not None and not rps > 0:
        raise InputError(f"--rps must be > 0 (got {rps:g}); it is requests per second, e.g. --rps 40")
    if vcpu is not None and vcpu <= 0:
        raise InputError(f"--vcpu must be >= 1 (got {vcpu}); omit it to get the cheapest size that fits")
    if max_hosts is not None and not 1 <= max_hosts <= MAX_HOSTS_LIMIT:
        raise InputError(f"--max-hosts must be 1 to {MAX_HOSTS_LIMIT} (got {max_hosts}); 1 asks for a single server")
    if arch not in ARCHES:
        raise InputError(f"unknown --arch {arch!r}; accepted: {', '.join(ARCHES)}")
    if provider is not None and provider not in PROVIDERS:
        raise InputError(f"unknown --provider {provider!r}; accepted: {', '.join(PROVIDERS)}")
    if p95_ms is not None and not p95_ms > 0:
        raise InputError(f"--p95-ms must be > 0 (got {p95_ms:g}); it is the latency target in milliseconds")


def check_given(topology, on_this_machine: bool, validate: bool, vcpu, max_hosts, provider, compose) -> None:
    """--topology scores the user's own layout: the search's flags would be ignored, so they are refused."""
    if on_this_machine and topology is None:
        raise InputError(
            "--on-this-machine puts every host of a --topology on this machine's cores; pass "
            "--topology FILE with it (e.g. the lab's topology), or drop it"
        )
    if topology is None:
        return
    given = [
        f
        for f, v in (("--vcpu", vcpu), ("--max-hosts", max_hosts), ("--provider", provider), ("--compose", compose))
        if v is not None
    ] + (["--validate"] if validate else [])
    if given:
        raise InputError(
            f"--topology scores the topology in the file, so {', '.join(given)} would be ignored; "
            "drop it, or drop --topology to let advise search"
        )


def check_burst(burst, burst_seconds, validate: bool, drain_seconds=None) -> None:
    from n8n_sizer.safety import numbers as n

    n.check_numbers(
        {
            "--burst": (burst, n.Range(1, 1000, example="4")),
            "--burst-seconds": (burst_seconds, n.SECONDS),
            "--drain-seconds": (drain_seconds, n.SECONDS),
        }
    )
    if drain_seconds is not None and burst is None:
        raise InputError(
            "--drain-seconds is how soon a --burst's backlog must be worked off; give --burst and "
            "--burst-seconds with it, or drop it"
        )
    if (burst is None) != (burst_seconds is None):
        raise InputError(
            "--burst and --burst-seconds go together: the peak as a multiple of --rps and how long it "
            "lasts, e.g. --burst 4 --burst-seconds 60"
        )
    if burst is not None and validate:
        raise InputError("--validate scores the model and sizes nothing, so --burst would be ignored; drop one")


def check_workflow(o: AdviseOptions) -> None:
    """--workflow prices an export; its own flags mean nothing without it, and --workload names another workflow."""
    if o.workflow is None:
        given = [f for f, v in (("--items", o.items), ("--calibration", o.calibration)) if v is not None]
        given += ["--expression-engine"] if o.expression_engine != "default" else []
        given += [f for f, v in (("--wait", o.wait), ("--branch", o.branch)) if v]
        if given:
            raise InputError(
                f"{', '.join(given)} describe a --workflow FILE priced from its nodes; pass --workflow "
                "with them, or drop them"
            )
        return
    if o.workload is not None:
        raise InputError(f"--workflow {o.workflow} and --workload {o.workload} name two workflows; keep one")
    if o.items is not None and not 1 <= o.items <= 1_000_000:
        raise InputError(f"--items must be 1 to 1,000,000 (got {o.items}); it is items per execution")
    if o.expression_engine not in ("default", "legacy"):
        raise InputError(f"unknown --expression-engine {o.expression_engine!r}; accepted: default, legacy")
    if o.validate:
        raise InputError(
            "--workflow prices an export from the cost table; --validate scores the model on its "
            "measurements: drop one of them"
        )


@dataclass(frozen=True)
class AdviseOptions:
    """What `advise` was asked, as one object: the command line as typer parsed it, before any check."""

    rps: float | None
    vcpu: int | None
    arch: str
    provider: str | None
    workload: str | None
    cpu_ms: float | None
    wait_ms: float | None
    p95_ms: float | None
    results: Path | None
    validate: bool
    json_out: bool
    compose: str | None
    generate_missing_secrets: bool = False
    max_hosts: int | None = None
    burst: float | None = None
    burst_seconds: float | None = None
    drain_seconds: float | None = None
    topology: Path | None = None
    on_this_machine: bool = False
    workflow: Path | None = None
    items: int | None = None
    calibration: Path | None = None
    expression_engine: str = "default"
    wait: tuple[str, ...] = ()  # --wait NODE=MS (with --workflow)
    branch: tuple[str, ...] = ()  # --branch NODE=SHARE (with --workflow)
    quick: bool = False
    history: Path | None = None  # --history FILE: the mix of an instance's workflows (cli/advise/mix.py)
    from_n8n: str | None = None  # --from-n8n URL: the same, read now
    scale: list[str] | None = None
    since: str | None = None
    until: str | None = None
    api_key_file: Path | None = None


def parse_branches(pairs: tuple[str, ...]) -> dict[str, float]:
    """--branch NODE=SHARE (repeatable): {node name: share of executions, 0 to 1}; one line for anything else."""
    out: dict[str, float] = {}
    for pair in pairs:
        name, sep, value = pair.rpartition("=")
        if not sep or not name.strip():
            raise InputError(
                f"--branch {_shown(pair)}: give NODE=SHARE, the first node of a branch and the share (0 to 1) of "
                'executions that take it, e.g. --branch "Send reply=0.3"'
            )
        try:
            share = float(value)
        except ValueError:
            share = float("nan")
        if not 0.0 <= share <= 1.0:  # also refuses nan and inf
            raise InputError(f"--branch {_shown(pair)}: the share must be a number from 0 to 1")
        out[name.strip()] = share
    return out


def _shown(text: str) -> str:
    from n8n_sizer.advisor.workflow_price.export import printable

    return repr(printable(text, 60))
