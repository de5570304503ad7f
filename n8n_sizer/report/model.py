"""The report's data model: a run read back from its folder, and one table row per setup and step.

`load_run` reads run.json, requests.jsonl and samples.jsonl; `step_rows` turns them into `StepRow`s, which the
Markdown (`build`) and the plots (`plots`) both draw from.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from n8n_sizer.errors import InputError
from n8n_sizer.runs.records import RequestRecord, RunManifest, Sample
from n8n_sizer.runs.stats import (
    answered_latencies,
    error_kind,
    is_shaped,
    peak_stack_ram_mib,
    percentile,
    role_demands_ms,
    select,
    shaped_offered_per_s,
    step_concurrency,
    step_rate,
    step_throughput,
    step_windows,
    within,
)
from n8n_sizer.runs.store import RunStore
from n8n_sizer.safety.frozen import Frozen
from n8n_sizer.safety.text import printable


@dataclass(frozen=True)
class RunData:
    folder: Path
    manifest: RunManifest
    requests: list[RequestRecord]
    samples: list[Sample]

    def targets(self) -> list[str]:
        names = list(self.manifest.hosts) + sorted({r.target for r in self.requests})
        return list(dict.fromkeys(names))

    def setup(self, target: str) -> dict:
        return self.manifest.setup_of(target) or {}

    def facts(self, target: str) -> dict:
        return self.manifest.facts_of(target)

    def samples_of(self, target: str) -> list[Sample]:
        """Telemetry of one target: samples labelled with it as `target` or `host`; with one target, all."""
        mine = [s for s in self.samples if target in (s.labels.get("target"), s.labels.get("host"))]
        return mine if mine or len(self.targets()) > 1 else list(self.samples)

    def windows(self, target: str) -> dict[str, tuple[float, float]]:
        """Each step's (start, end): from run.json's step bookkeeping, else from the requests' schedule."""
        spans = step_windows(r for r in self.requests if r.target == target)
        steps = self.manifest.extra.get("steps", {}).get(target, {})
        for name, info in steps.items():
            if info.get("started_s") is not None and info.get("finished_s") is not None:
                spans[name] = (info["started_s"], info["finished_s"])
        return dict(sorted(spans.items(), key=lambda kv: kv[1][0]))


def load_run(run: str | Path) -> RunData:
    if not (Path(run) / "run.json").is_file():
        raise InputError(
            f"{run} is not a run folder (no run.json in it); try one of the folders in results/ "
            f"that `n8n-sizer bench` wrote"
        )
    store = RunStore.open(Path(run))
    from n8n_sizer.bench.session import check_bench_spec

    check_bench_spec(store.manifest, store.folder / "run.json")
    return RunData(store.folder, store.manifest, store.read_requests(), store.read_samples())


class StepRow(Frozen):
    """One line of seed 000's table: a setup at one load step."""

    run_id: str
    target: str
    setup: str
    host: str
    step: str
    offered_rate_per_s: float | None
    concurrency: int | None = None  # users of a closed-model step (seed 002's sweep)
    duration_s: float
    fired: int
    answered: int
    answered_per_min: float | None  # None: the step's answers span no measurable time (see MIN_SPAN_S)
    errors: dict[str, int]  # by kind: "500", "503", "timeout", "reset", "refused", "other"
    not_sent: int  # kept back by the in-flight cap ("dropped"), not an error of the server
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    peak_stack_ram_mib: float | None
    editor_p95_ms: float | None
    editor_failed: int = 0  # editor calls that failed or timed out in the step (not in the p95)
    saturated: bool | None = None  # a rate step that did not keep up (runs.stats.step_throughput); None: closed step
    saturation: str | None = None  # why, in words ("kept up" when it did)
    demand_ms: dict[str, float] = {}  # CPU ms per answered execution by role (utilisation law), from telemetry


def setup_label(setup: dict) -> str:
    """ "queue, 2 workers (c=10)", "regular, postgres, limit 10", "regular, sqlite"."""
    if not setup:
        return "unknown setup"
    if setup.get("mode") == "queue":
        n = setup.get("workers", 0)
        label = f"queue, {n} worker{'s' if n != 1 else ''}"
        if setup.get("concurrency") is not None:
            label += f" (c={setup['concurrency']})"
        return label
    label = f"regular, {setup.get('db', '?')}"
    limit = setup.get("production_limit")
    if limit not in (None, -1):
        label += f", limit {limit}"
    return label


def host_label(target: str, facts: dict) -> str:
    parts = []
    if facts.get("vcpu"):
        parts.append(f"{facts['vcpu']} vCPU")
    if facts.get("ram_mib"):
        parts.append(f"{facts['ram_mib'] / 1024:.1f} GiB")
    return f"{target} ({', '.join(parts)})" if parts else target


# A step whose answers span less than this has no measurable rate: one request answered "in 0 ms" is not
# 60,000,000,000 answered per minute.
MIN_SPAN_S = 0.001


def _closed_span(reqs, start: float, end: float) -> float:
    """A closed (or unnamed) step's span: its bookkeeping window, and at least from its first scheduled request
    to its last answer, so the rate never runs above what its own requests took."""
    first = min(r.scheduled_s for r in reqs)
    done = max(r.scheduled_s + (r.latency_ms or 0.0) / 1000.0 for r in reqs)
    return max(end - start, done - first, 0.0)


def _per_min(answered: int, span_s: float) -> float | None:
    if answered == 0:
        return 0.0
    return answered * 60 / span_s if span_s >= MIN_SPAN_S else None


def step_rows(run: RunData) -> list[StepRow]:
    rows = []
    for target in run.targets():
        mine = [r for r in run.requests if r.target == target]
        telemetry = run.samples_of(target)
        for step, (start, end) in run.windows(target).items():
            reqs = [r for r in mine if r.step == step]
            if not reqs:
                continue
            sent = [r for r in reqs if r.error_class != "dropped"]
            rate = step_rate(step) or (shaped_offered_per_s(reqs) if is_shaped(step) else None)
            # a rate step: answered over the span the answers needed (runs.stats.step_throughput), so a step that
            # fell behind reads as what it carried; a closed step: per minute of the step's own span
            carried = step_throughput(reqs, rate) if rate else None
            lat = answered_latencies(reqs)
            duration = carried.span_s if carried is not None else _closed_span(reqs, start, end)
            kinds = Counter(k for r in sent if (k := error_kind(r)) is not None)
            window = within(telemetry, start, end)
            editor = [s.value for s in select(window, "editor_get_workflow_ms")]
            editor_failed = len(select(window, "probe_error", probe="editor"))
            rows.append(
                StepRow(
                    run_id=run.manifest.run_id,
                    target=printable(target),  # names from the run's files: never an escape sequence in a report
                    setup=printable(setup_label(run.setup(target))),
                    host=printable(host_label(target, run.facts(target))),
                    step=printable(step),
                    offered_rate_per_s=rate,
                    concurrency=step_concurrency(step),
                    duration_s=duration,
                    demand_ms=role_demands_ms(window, start, end, len(lat)),
                    saturated=carried.saturated if carried is not None else None,
                    saturation=carried.why if carried is not None else None,
                    fired=len(sent),
                    answered=len(lat),
                    answered_per_min=_per_min(len(lat), duration),
                    errors=dict(kinds),
                    not_sent=len(reqs) - len(sent),
                    p50_ms=percentile(lat, 50),
                    p95_ms=percentile(lat, 95),
                    p99_ms=percentile(lat, 99),
                    peak_stack_ram_mib=peak_stack_ram_mib(window),
                    editor_p95_ms=percentile(editor, 95),
                    editor_failed=editor_failed,
                )
            )
    return rows
