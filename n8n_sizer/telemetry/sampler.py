"""The sampler: every second during a run, run the probes on a host and append Samples to samples.jsonl.

One tick = one shell command on the host (the probes batched, see `probes.batch_command`), so sampling
costs one fork locally or one SSH round trip remotely. Cumulative counters become rates between ticks
(`probes.rates`). A probe that fails (non-zero exit, unparsable output, host timeout) is written as a
`probe_error` sample naming the probe and the error: nothing is dropped silently (seed 004's lesson).

Each n8n process's task runner is a child process that n8n restarts after 15 s idle
(N8N_RUNNERS_AUTO_SHUTDOWN_TIMEOUT, seed 000's field note 3), so children are rediscovered every tick
and labelled `<process>-runner`.

Editor responsiveness (seed 000: time to GET one workflow over the editor's REST call, every 5 s) runs
in its own thread, because under overload that call took 21 to 41 s and must not stall the probes.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from n8n_sizer.hosts.host import Host
from n8n_sizer.runs.records import Sample
from n8n_sizer.telemetry.probes import Probe, batch_command, split_batch
from n8n_sizer.telemetry.probes.host import parse_children, process_probe, process_tree_probe
from n8n_sizer.telemetry.probes.rates import counters_to_rates, is_counter

ERROR_METRIC = "probe_error"
EDITOR_METRIC = "editor_get_workflow_ms"


def append_samples(path: Path, samples: Sequence[Sample]) -> None:
    """Append samples as JSON lines in ONE O_APPEND write, so lines from the load driver writing the same
    file at the same time never interleave mid-line."""
    if not samples:
        return
    data = "".join(s.model_dump_json() + "\n" for s in samples).encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def error_sample(
    probe: str, error: str, time_s: float, labels: Mapping[str, str], exit_code: int | None = None
) -> Sample:
    """A failed probe, kept: value 1, the probe's name, the exit code and the error's last 300 characters."""
    tail = " ".join(error.split())[-300:] or "no output"
    code = "none" if exit_code is None else str(exit_code)
    return Sample(
        metric=ERROR_METRIC,
        value=1.0,
        unit="count",
        time_s=time_s,
        labels={**labels, "probe": probe, "exit_code": code, "error": tail},
    )


def read_tick(
    outputs: Mapping[str, tuple[int | None, str]], probes: Sequence[Probe], time_s: float, labels: Mapping[str, str]
) -> list[Sample]:
    """Parse one tick's outputs {probe name: (exit code, text)} into samples, errors included. Pure."""
    out: list[Sample] = []
    for probe in probes:
        code, text = outputs.get(probe.name, (None, "probe produced no output (batch cut short)"))
        if code != 0:
            out.append(error_sample(probe.name, text, time_s, labels, code))
            continue
        try:
            out += probe.samples(text, time_s, labels)
        except Exception as exc:  # ProbeParseError, or a parser meeting output it never saw: kept, not fatal
            out.append(error_sample(probe.name, f"{type(exc).__name__}: {exc}", time_s, labels, code))
    return out


class Sampler:
    """Samples `probes` (plus CPU/RSS of `processes` and their runner children) on `host` every
    `interval_s` into `sink` until `stop()`. Use as a context manager.

    `sink` is a samples.jsonl path or a callable taking a batch of samples (`RunStore.append_samples`).
    `editor_check` performs one editor call (raises on failure); the sampler times it.
    """

    def __init__(
        self,
        host: Host,
        sink: Path | Callable[[Sequence[Sample]], None],
        probes: Sequence[Probe] = (),
        *,
        processes: Mapping[str, int] | None = None,
        trees: Mapping[str, int] | None = None,
        labels: Mapping[str, str] | None = None,
        interval_s: float = 1.0,
        timeout_s: float = 5.0,
        editor_check: Callable[[], None] | None = None,
        editor_every_s: float = 5.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.host = host
        # a path (samples.jsonl) or a callable such as `RunStore.append_samples`
        self._sink = sink if callable(sink) else (lambda samples, _p=Path(sink): append_samples(_p, samples))
        self._sink_dir = None if callable(sink) else Path(sink).parent
        self.probes = list(probes)
        self.processes = dict(processes or {})  # n8n processes: each also gets its runner child sampled
        self.trees = dict(trees or {})  # summed with all children (Postgres and its backends)
        self.labels = {"host": host.name, "source": "telemetry", **(labels or {})}  # load samples say "load"
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.editor_check = editor_check
        self.editor_every_s = editor_every_s
        self.clock = clock
        self.ticks = 0
        self.errors = 0
        self._children: dict[str, int] = {}
        self._counters: list[Sample] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def _tick_probes(self) -> list[Probe]:
        probes = [p for p in self.probes if self.ticks % max(1, p.every) == 0]
        for name, pid in {**self.processes, **self._children}.items():
            probes.append(process_probe(name, pid))
        for name, pid in self.trees.items():
            probes.append(process_tree_probe(name, pid))
        for name, pid in self.processes.items():
            probes.append(Probe(f"children-{name}", f"cat /proc/{int(pid)}/task/*/children", lambda t, s, l: []))
        return probes

    def _update_children(self, outputs: Mapping[str, tuple[int | None, str]]) -> None:
        children: dict[str, int] = {}
        for name in self.processes:
            code, text = outputs.get(f"children-{name}", (None, ""))
            pids = parse_children(text) if code == 0 else []
            for pid in pids:
                children[f"{name}-runner" if len(pids) == 1 else f"{name}-child-{pid}"] = pid
        self._children = children

    def tick(self) -> list[Sample]:
        """Take one reading now, write it, and return what was written (rates need two ticks)."""
        probes = self._tick_probes()
        started = self.clock()
        try:
            result = self.host.run(batch_command(probes), timeout_s=self.timeout_s, check=False)
            at = (started + self.clock()) / 2
            outputs = {n: (o.exit_code, o.text) for n, o in split_batch(result.stdout).items()}
        except Exception as exc:  # a timeout or a lost connection: recorded, sampling goes on
            samples = [error_sample("batch", str(exc), self.clock(), self.labels)]
            self._write(samples)
            return samples
        self._update_children(outputs)
        parsed = read_tick(outputs, probes, at, self.labels)
        counters = [s for s in parsed if is_counter(s)]
        samples = [s for s in parsed if not is_counter(s)] + counters_to_rates(self._counters, parsed)
        self._counters = counters
        self.ticks += 1
        self._write(samples)
        return samples

    def _write(self, samples: Sequence[Sample]) -> None:
        with self._lock:
            self.errors += sum(1 for s in samples if s.metric == ERROR_METRIC)
            self._sink(samples)

    def check_editor(self) -> Sample:
        """Time one editor call (`editor_check`), write and return the sample (or the error sample)."""
        started = self.clock()
        try:
            self.editor_check()
        except Exception as exc:  # the editor failing under load is a finding, not a crash
            sample = error_sample("editor", f"{type(exc).__name__}: {exc}", started, self.labels)
        else:
            sample = Sample(
                metric=EDITOR_METRIC,
                value=(self.clock() - started) * 1000,
                unit="ms",
                labels=dict(self.labels),
                time_s=started,
            )
        self._write([sample])
        return sample

    def _loop(self, every_s: float, action: Callable[[], object]) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            try:
                action()
            except Exception as exc:  # never let one bad tick end the sampling thread; say what happened
                self._write([error_sample("sampler", f"{type(exc).__name__}: {exc}", self.clock(), self.labels)])
            next_at += every_s
            now = time.monotonic()
            if next_at < now:  # overran: skip the missed slots instead of bursting to catch up
                next_at = now + every_s - ((now - next_at) % every_s)
            self._stop.wait(next_at - now)

    def start(self) -> Sampler:
        if self._sink_dir is not None:
            self._sink_dir.mkdir(parents=True, exist_ok=True)
        loops = [(self.interval_s, self.tick)]
        if self.editor_check is not None:
            loops.append((self.editor_every_s, self.check_editor))
        for every, action in loops:
            t = threading.Thread(
                target=self._loop, args=(every, action), daemon=True, name=f"sampler-{action.__name__}"
            )
            t.start()
            self._threads.append(t)
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop both loops; waits for a tick in flight (bounded by the host command's timeout)."""
        self._stop.set()
        for t in self._threads:
            t.join(timeout_s)
        self._threads.clear()

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def http_editor_check(client, workflow_id: str) -> Callable[[], None]:
    """The editor's own call, `GET /rest/workflows/:id`, on a logged-in `N8nClient` (cookie auth)."""

    def check() -> None:
        client.get_workflow_editor(workflow_id)

    return check
