"""Turn bench run folders into advisor Measurements, so `advise --results DIR` refits on the user's runs.

One Measurement per target and load step, from the step's load samples (answered per minute, errors by
class, latency percentiles) and the target's setup and host facts in run.json. Requests the driver never
sent because the in-flight cap was full ("dropped") are not errors of the server, as in seed 000's k6 runs.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from n8n_sizer.advisor.measurements import Hardware, Load, MeasuredSetup, Measurement, Results
from n8n_sizer.advisor.roles import MEASURED_ROLES  # the roles whose CPU per execution the fit takes as data
from n8n_sizer.errors import InputError
from n8n_sizer.runs.records import Sample
from n8n_sizer.runs.stats import is_shaped, role_demands_ms, step_windows
from n8n_sizer.runs.store import RUN_JSON, RunStore


def find_runs(path: Path) -> list[Path]:
    """Run folders at `path` (a run folder itself, or a folder of them)."""
    if not path.exists():
        raise InputError(
            f"--results {path}: no such folder; give the folder `n8n-sizer bench --out` wrote (default results/)"
        )
    if not path.is_dir():
        raise InputError(
            f"--results {path}: not a folder; give the folder `n8n-sizer bench --out` wrote (default results/)"
        )
    if (path / RUN_JSON).is_file():
        return [path]
    runs = sorted(p for p in path.iterdir() if (p / RUN_JSON).is_file())
    if not runs:
        raise InputError(
            f"--results {path}: no bench runs in it (no */{RUN_JSON}); run `n8n-sizer bench --local "
            f"--rates 5,20,50 --out {path}` first"
        )
    return runs


def _workflow_name(manifest_workflow: str | None) -> str:
    if not manifest_workflow:
        return "unknown"
    name = Path(manifest_workflow).name
    return name[:-5] if name.endswith(".json") else name


def measurements_from_run(folder: Path) -> list[Measurement]:
    store = RunStore.open(folder)
    manifest = store.manifest
    if manifest.kind not in ("bench", "find-max", "soak"):
        return []
    steps: dict[tuple[str, str], list[Sample]] = defaultdict(list)
    for s in store.read_samples():
        if s.labels.get("source") == "load" and "step" in s.labels:
            steps[(s.labels.get("target", "local"), s.labels["step"])].append(s)
    workflow = _workflow_name(manifest.workflow)
    telemetry = [s for s in store.read_samples() if s.labels.get("source") != "load"]
    windows = _step_windows(manifest, store.read_requests()) if telemetry else {}
    out: list[Measurement] = []
    for (target, step), samples in sorted(steps.items()):
        if is_shaped(step):  # a ramp or a burst is no steady state: the capacity model fits steady rates only
            continue
        info = manifest.hosts.get(target, {})
        facts = info.get("facts") or {}
        setup = manifest.setup_of(target)
        if not setup or not facts.get("vcpu"):
            continue
        value = {s.metric: s.value for s in samples if s.metric != "errors"}
        errors = sum(int(s.value) for s in samples if s.metric == "errors" and s.labels.get("class") != "dropped")
        # per-role CPU per execution (utilisation law) from the telemetry sampled during the step
        span = windows.get((target, step))
        mine = [s for s in telemetry if s.labels.get("target", target) == target]
        demands = role_demands_ms(mine, span[0], span[1], int(value.get("answered", 0))) if span else {}
        counted = manifest.extra.get("steps", {}).get(target, {}).get(step, {}).get("role_cpu_ms")
        if counted and span and int(value.get("answered", 0)) > 0:  # the kernel's accounting beats sampling
            demands = {role: ms / int(value["answered"]) for role, ms in counted.items()}
        open_load = "offered_rate" in value
        out.append(
            Measurement(
                id=f"{manifest.run_id}-{target}-{step}",
                source=f"results/{manifest.run_id}",
                table="bench step",
                n8n_version=info.get("n8n_version"),
                hardware=_hardware(info, target),
                workflow=workflow,
                setup=_setup(setup, info),
                load=Load(
                    kind="open" if open_load else "closed",
                    offered_rps=value.get("offered_rate"),
                    concurrency=int(value["concurrency"]) if "concurrency" in value else None,
                    duration_s=value.get("step_duration"),
                    generator="n8n-sizer bench",
                ),
                results=Results(
                    answered_per_min=value.get("answered_per_min"),
                    errors=errors,
                    p50_ms=value.get("latency_p50"),
                    p95_ms=value.get("latency_p95"),
                    p99_ms=value.get("latency_p99"),
                    demand_executions_per_s=(
                        int(value.get("answered", 0)) / (span[1] - span[0]) if demands and span[1] > span[0] else None
                    ),
                    **{f"{role}_cpu_ms": ms for role, ms in demands.items() if role in MEASURED_ROLES},
                ),
            )
        )
    return out + [m for m in (_rest_row(manifest, target, workflow) for target in manifest.hosts) if m is not None]


# the n8n processes the model gives an idle CPU (CapacityModel.idle_cores_on)
IDLE_ROLES = ("main", "webhook", "worker")


def _hardware(info: dict, target: str) -> Hardware:
    facts = info["facts"]
    return Hardware(
        provider=str(info.get("provider", "local")),
        size=info.get("size"),
        vcpu=facts["vcpu"],
        arch="arm" if str(facts.get("arch", "")).lower() in ("aarch64", "arm64") else "x86",
        ram_mib=int(facts["ram_mib"]) if facts.get("ram_mib") else None,
        host_class=f"user:{facts.get('cpu_model') or target}",
        speed_probe_ms=info.get("speed_probe_ms"),
    )


def _setup(setup: dict, info: dict) -> MeasuredSetup:
    return MeasuredSetup(
        mode=setup["mode"],
        workers=setup.get("workers", 0),
        concurrency=setup.get("concurrency"),
        runner_concurrency=setup.get("runner_concurrency"),
        production_limit=setup.get("production_limit"),
        db=setup.get("db", "postgres"),
        db_pool_size=setup.get("db_pool_size"),
        webhook_processors=int(info.get("webhook_processors") or 0),
    )


def _rest_row(manifest, target: str, workflow: str) -> Measurement | None:
    """The target's `--rest-seconds` window as a row of its own (load kind `idle`): each n8n role's CPU cores per
    process with no load, from the kernel's counts; None without such a window."""
    info = manifest.hosts.get(target, {})
    rest, facts, setup = info.get("rest") or {}, info.get("facts") or {}, manifest.setup_of(target)
    if not rest.get("role_cpu_ms") or not rest.get("counted_s") or not setup or not facts.get("vcpu"):
        return None
    wh = int(info.get("webhook_processors") or 0)
    count = {"main": 1, "webhook": wh, "worker": setup.get("workers", 0)}
    cores = {
        role: ms / 1000.0 / rest["counted_s"] / count[role]
        for role, ms in rest["role_cpu_ms"].items()
        if role in IDLE_ROLES and count[role] > 0
    }
    return Measurement(
        id=f"{manifest.run_id}-{target}-rest",
        source=f"results/{manifest.run_id}",
        table="bench rest window",
        n8n_version=info.get("n8n_version"),
        hardware=_hardware(info, target),
        workflow=workflow,
        setup=_setup(setup, info),
        load=Load(kind="idle", offered_rps=0, duration_s=rest["counted_s"], generator="n8n-sizer bench"),
        results=Results(idle_cores=cores or None),
    )


def _step_windows(manifest, requests) -> dict[tuple[str, str], tuple[float, float]]:
    """(target, step) -> (start, end): the run's own step bookkeeping, else the requests' schedule."""
    out: dict[tuple[str, str], tuple[float, float]] = {}
    for target in {r.target for r in requests}:
        for step, span in step_windows(r for r in requests if r.target == target).items():
            out[(target, step)] = span
    for target, steps in manifest.extra.get("steps", {}).items():
        for step, info in steps.items():
            if info.get("started_s") is not None and info.get("finished_s") is not None:
                out[(target, step)] = (info["started_s"], info["finished_s"])
    return out


def load_results(path: Path) -> list[Measurement]:
    runs = find_runs(path)
    rows = [m for run in runs for m in measurements_from_run(run)]
    if not rows:
        # advise a --resume only for a run bench would resume: not finished, not --find-max, not --local
        resumable = [
            m.run_id
            for m in (RunStore.open(r).manifest for r in runs)
            if m.finished_s is None and m.kind != "find-max" and m.spec.get("source") != "local"
        ]
        fix = (
            f"finish one with `n8n-sizer bench --resume {resumable[0]}`"
            if resumable
            else "run `n8n-sizer bench` to completion first (a finished run cannot be resumed)"
        )
        raise InputError(f"--results {path}: its runs hold no finished load steps with host facts; {fix}")
    return rows
