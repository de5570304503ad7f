"""The run folder: `results/<run-id>/{run.json, requests.jsonl, samples.jsonl}`.

A new run gets a new folder, created exclusively: an existing folder is never written over. The two
jsonl files are only ever appended to, one line per record, flushed as written, so a crash or a dropped
SSH connection loses nothing measured so far. `run.json` is the manifest, replaced atomically (write a
temp file, rename) as the run goes; it records which steps finished per target so `--resume` can skip
them. Appends are thread-safe: targets run in parallel threads.
"""

from __future__ import annotations

import json
import os
import secrets
import statistics
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from pydantic import ValidationError

from n8n_sizer.errors import InputError
from n8n_sizer.runs.plausible import check_requests, check_samples
from n8n_sizer.runs.records import RequestRecord, RunManifest, Sample, StepTally
from n8n_sizer.runs.run_file import read_manifest, validation_line
from n8n_sizer.runs.stats import step_throughput
from n8n_sizer.safety.files import read_user_text
from n8n_sizer.safety.write import write_atomic

# A run's requests.jsonl at 100 req/s for an hour is about 70 MB; four times that is still a file this
# process can parse, and far below what a link to /dev/zero or a runaway file would ask of memory.
MAX_RECORDS_BYTES = 256 * 1024 * 1024

RUN_JSON, REQUESTS, SAMPLES = "run.json", "requests.jsonl", "samples.jsonl"


def new_run_id(now_s: float | None = None) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now_s if now_s is not None else time.time()))
    return f"{stamp}-{secrets.token_hex(3)}"


class RunStore:
    """One run folder. Create with `RunStore.create`, reopen with `RunStore.open` (for --resume, reports)."""

    def __init__(self, folder: Path, manifest: RunManifest) -> None:
        self.folder = folder
        self.manifest = manifest
        self._lock = threading.Lock()
        self._files: dict[str, object] = {}

    @property
    def run_id(self) -> str:
        return self.manifest.run_id

    @classmethod
    def create(cls, out_dir: Path, manifest: RunManifest) -> RunStore:
        out_dir.mkdir(parents=True, exist_ok=True)
        folder = out_dir / manifest.run_id
        try:
            folder.mkdir()  # exclusive: never reuse an existing run folder
        except FileExistsError:
            raise InputError(
                f"run folder {folder} already exists and is never overwritten; "
                f"try another --out or `--resume {manifest.run_id}`"
            ) from None
        store = cls(folder, manifest)
        store.save_manifest()
        for name in (REQUESTS, SAMPLES):
            (folder / name).touch(exist_ok=False)
        return store

    @classmethod
    def open(cls, run: str | Path, out_dir: Path | None = None) -> RunStore:
        """`run` is a folder, or a run id under `out_dir`."""
        folder = Path(run)
        if not (folder / RUN_JSON).is_file() and out_dir is not None:
            folder = out_dir / str(run)
        path = folder / RUN_JSON
        if not path.is_file():
            raise InputError(
                f"run {run}: no {RUN_JSON} in {folder}; try a folder from `ls {out_dir or 'results'}` (or pass --out)"
            )
        text = read_user_text(path, f"run {run}:", fix="restore it from a copy, or start a new run")
        return cls(folder, read_manifest(text, path))  # typed and bounded, field by field (runs.run_file)

    def save_manifest(self) -> None:
        with self._lock:  # the one atomic writer: never through a link, never half-written (safety/write.py)
            write_atomic(self.folder / RUN_JSON, self.manifest.model_dump_json(indent=2) + "\n", private=False)

    def update_manifest(self, **changes) -> None:
        with self._lock:
            self.manifest = self.manifest.model_copy(update=changes)
        self.save_manifest()

    def _append(self, name: str, line: str) -> None:
        with self._lock:
            f = self._files.get(name)
            if f is None:
                path = self.folder / name
                _drop_partial_line(path)
                fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
                f = self._files[name] = os.fdopen(fd, "a", encoding="utf-8")
            f.write(line + "\n")
            f.flush()

    def append_request(self, record: RequestRecord) -> None:
        self._append(REQUESTS, record.model_dump_json())

    def append_samples(self, samples: Iterable[Sample]) -> None:
        for s in samples:
            self._append(SAMPLES, s.model_dump_json())

    # The file is read under the lock (appends are flushed inside it, so no half line from another target's
    # thread) and parsed outside it (so a long parse never holds up a load driver's appends).
    def _snapshot(self, name: str) -> str | None:
        with self._lock:
            path = self.folder / name
            if not os.path.lexists(path):
                return None
            # The one reader: a FIFO, a device or a link loop here is one line; non-UTF-8 bytes too.
            return read_user_text(
                path,
                "run file",
                max_bytes=MAX_RECORDS_BYTES,
                fix="the file was edited or damaged: restore it, or re-run the step with `n8n-sizer bench --resume`",
            )

    def read_requests(self) -> list[RequestRecord]:
        """Every request record, each typed and bounded, and together a schedule the run could send."""
        records = parse_jsonl(self._snapshot(REQUESTS), self.folder / REQUESTS, RequestRecord)
        check_requests(records, self.folder / REQUESTS)
        return records

    def read_samples(self) -> list[Sample]:
        """Every sample, each typed and bounded, and together load summaries that add up (runs.plausible)."""
        samples = parse_jsonl(self._snapshot(SAMPLES), self.folder / SAMPLES, Sample)
        vcpu = {t: float(f["vcpu"]) for t in self.manifest.hosts if (f := self.manifest.facts_of(t)).get("vcpu")}
        check_samples(samples, self.folder / SAMPLES, vcpu)
        return samples

    def close(self) -> None:
        with self._lock:
            for f in self._files.values():
                f.close()
            self._files.clear()

    # step bookkeeping, kept in run.json's `extra.steps[target][step]`
    def finished_steps(self, target: str) -> list[str]:
        steps = self.manifest.extra.get("steps", {}).get(target, {})
        return [name for name, info in steps.items() if info.get("status") == "done"]

    def mark_step(self, target: str, step: str, status: str, **info) -> None:
        with self._lock:
            extra = json.loads(json.dumps(self.manifest.extra))
            entry = extra.setdefault("steps", {}).setdefault(target, {}).setdefault(step, {})
            attempts = entry.get("attempts", 0) + (1 if status == "running" else 0)
            entry.update(info, status=status, attempts=attempts)
            self.manifest = self.manifest.model_copy(update={"extra": extra})
        self.save_manifest()

    def put_extra(self, section: str, target: str, value) -> None:
        """run.json `extra[section][target] = value` (e.g. a find-max result), under the store's lock."""
        with self._lock:
            extra = json.loads(json.dumps(self.manifest.extra))
            extra.setdefault(section, {})[target] = value
            self.manifest = self.manifest.model_copy(update={"extra": extra})
        self.save_manifest()

    def next_seq(self, target: str) -> int:
        seqs = [r.seq for r in self.read_requests() if r.target == target]
        return max(seqs) + 1 if seqs else 0


def _drop_partial_line(path: Path) -> None:
    """A crash mid-write can leave a last line without its newline (a record cut short, unreadable): drop it before
    appending, so a cut line can only ever be the file's last one and one in the middle means damage."""
    if not path.exists() or path.stat().st_size == 0:
        return
    fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
    try:
        size = os.fstat(fd).st_size
        tail = os.pread(fd, min(size, 1 << 20), max(0, size - (1 << 20)))
        if tail.endswith(b"\n"):
            return
        cut = tail.rfind(b"\n")
        os.ftruncate(fd, max(0, size - len(tail)) + cut + 1 if cut >= 0 else max(0, size - len(tail)))
    finally:
        os.close(fd)


def parse_jsonl(text: str | None, path: Path, model):
    """Every record in the file, each validated strictly (no "5" read as 5). The last line may be cut short by a
    crash mid-write (no newline after it): it is skipped. Any other bad line, a cut one in the middle included, is
    damage: an error naming the file, the line and the field."""
    if text is None:
        return []
    out = []
    lines = text.split("\n")  # the last element is "" when the file ends with a newline
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append(model.model_validate_json(line, strict=True))
        except ValidationError as exc:
            if number == len(lines) and not line.rstrip().endswith("}"):  # the run stopped mid-write
                continue
            raise validation_line(
                exc,
                f"{path}:{number} is not a {model.__name__}",
                "the file was edited or damaged: restore it, or re-run the step with `n8n-sizer bench --resume`",
            ) from None
    return out


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def summarize_step(
    records: list[RequestRecord],
    outcome: StepTally,
    target: str,
    offered: str,
    offered_value: float,
    step_s: float | None = None,
) -> list[Sample]:
    """Load samples for one step: achieved rate, answered per minute, p50/p95/p99 of 2xx, errors by class.

    Answered per minute: for a rate step, what was answered over the span the answers needed (the step's length
    when it kept up, longer when it fell behind); for a closed step, per minute of load, as seed 000 counts it.
    Achieved rate is requests sent over the step's sending window (first scheduled to last sent), so a
    driver that fell behind its schedule shows it. Latencies are of answered (2xx) requests, from their
    scheduled time; failures are counted per class, never folded into latency.
    """
    labels = {"target": target, "step": outcome.step, "source": "load"}
    t = outcome.finished_s
    ok = [r.latency_ms for r in records if r.status is not None and 200 <= r.status < 300]
    sent = [r for r in records if r.error_class != "dropped"]
    duration = max(outcome.finished_s - outcome.started_s, 1e-9)
    load_s = step_s if step_s is not None else duration  # seed 000: answered per minute *of load*
    window = None
    if sent and outcome.last_sent_s is not None:
        first = min(r.scheduled_s for r in records)
        window = outcome.last_sent_s - first + (1.0 / offered_value if offered == "rate" else 0.0)
    # A rate step's throughput is what it answered over the span the answers needed (runs.stats.step_throughput):
    # a step that fell behind its schedule is not read as "answered = offered".
    carried = step_throughput(records, offered_value) if offered == "rate" else None
    per_min = carried.throughput_per_s * 60.0 if carried is not None else len(ok) * 60.0 / load_s
    samples = [
        Sample(
            metric="offered_rate" if offered == "rate" else "concurrency",
            value=offered_value,
            unit="req/s" if offered == "rate" else "users",
            labels=labels,
            time_s=t,
        ),
        Sample(metric="requests", value=len(records), unit="count", labels=labels, time_s=t),
        Sample(metric="answered", value=len(ok), unit="count", labels=labels, time_s=t),
        Sample(metric="answered_per_min", value=per_min, unit="req/min", labels=labels, time_s=t),
        Sample(
            metric="step_duration",
            value=carried.span_s if carried is not None else duration,
            unit="s",
            labels=labels,
            time_s=t,
        ),
    ]
    if carried is not None:
        samples += [
            Sample(metric="answered_in_window", value=carried.in_window, unit="count", labels=labels, time_s=t),
            Sample(
                metric="saturated",
                value=1.0 if carried.saturated else 0.0,
                unit="bool",
                labels={**labels, "why": carried.why},
                time_s=t,
            ),
        ]
    if window and window > 0:
        samples.append(Sample(metric="achieved_rate", value=len(sent) / window, unit="req/s", labels=labels, time_s=t))
    for q in (50, 95, 99):
        value = _pct(ok, q)
        if value is not None:
            samples.append(Sample(metric=f"latency_p{q}", value=value, unit="ms", labels=labels, time_s=t))
    lag = _pct([max(0.0, r.sent_s - r.scheduled_s) * 1000.0 for r in sent], 99)  # a clock's rounding: never < 0
    if lag is not None:
        samples.append(Sample(metric="send_lag_p99", value=lag, unit="ms", labels=labels, time_s=t))
    classes: dict[str, int] = {}
    for r in records:
        if r.error_class is not None:
            classes[r.error_class] = classes.get(r.error_class, 0) + 1
    for cls in ("timeout", "reset", "refused", "non-2xx", "dropped", "other"):
        samples.append(
            Sample(metric="errors", value=classes.get(cls, 0), unit="count", labels={**labels, "class": cls}, time_s=t)
        )
    return samples
