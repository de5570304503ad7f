"""run.json as it is read back: every field any reader uses, typed and bounded, checked at the boundary.

`RunManifest` keeps its free-form parts (`spec`, `setup`, `hosts`, `extra`) as mappings, because many writers add
to them as a run goes (bench, the drills, the lab). What readers take out of them (`report`, `advise --results`,
`bench --resume`, the workflow price refit) is typed here, strictly (no "5" read as 5, no 1 read as true), with
physical bounds: `RunFile` is validated first, and only a file that passes becomes a `RunManifest`. A wrong type
or an impossible value is one line naming the file and the field (`hosts.local.setup.workers`), exit 2; before,
`spec.workflow_resolved` as a string or `extra.steps` as a list ended in a traceback.

Where writers add keys of their own (a host's bookkeeping, a drill's outcome), the mapping allows keys it does not
type (`extra="allow"`); every key a reader reads is typed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.errors import InputError
from n8n_sizer.runs.records import MAX_COUNT, Count, Ledger, Name, RunManifest, StepCounters, UnixS
from n8n_sizer.safety.jsondoc import load_json
from n8n_sizer.safety.text import is_printable, printable

MAX_CPU_MS = 1e12  # CPU milliseconds counted over one window: 31 years of one core
CpuMs = Annotated[float, Field(ge=0, le=MAX_CPU_MS)]
Short = Annotated[str, Field(max_length=500)]


def _plain(value: str) -> str:
    if not is_printable(value):
        raise ValueError("holds control characters or escape sequences")
    return value


# what a host's own tools printed (lscpu, uname, os-release): plain text, never an escape sequence to echo
Plain = Annotated[str, Field(max_length=500), AfterValidator(_plain)]
FIX = "the file was edited or damaged: restore it from a copy, or start a new run"


class _Open(BaseModel):
    """A part of run.json that writers extend: the keys readers use are typed, other keys are kept as they are."""

    model_config = ConfigDict(extra="allow", frozen=True, allow_inf_nan=False)


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class RunSetup(Setup):
    """A setup as runs recorded it: `advisor.setup.Setup`, whose production limit may also be -1 (n8n's "off",
    as older runs and the seeds wrote it)."""

    production_limit: int | None = Field(None, ge=-1, le=100_000)

    @model_validator(mode="after")
    def _limit(self) -> RunSetup:
        if self.production_limit == 0:
            raise ValueError("production_limit 0 is neither off (-1 or null) nor a limit (>= 1)")
        return self


class RecordedFacts(_Closed):
    """hosts.<t>.facts: what `hosts.facts` read on the target (vCPUs, RAM, CPU model); None = not read."""

    vcpu: Annotated[float, Field(gt=0, le=1024)] | None = None
    cpu_model: Plain | None = None
    ram_mib: Annotated[float, Field(ge=0, le=2**30)] | None = None  # up to a petabyte
    kernel: Plain | None = None
    arch: Plain | None = None
    disk_root_gib: Annotated[float, Field(ge=0, le=2**30)] | None = None
    disk_root_free_gib: Annotated[float, Field(ge=0, le=2**30)] | None = None
    os: Plain | None = None


class Counted(StepCounters):
    """hosts.<t>.rest (a --rest-seconds window) or one step's counters: the kernel's CPU per role, bounded."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    role_cpu_ms: dict[Name, CpuMs] | None = None
    host_role_cpu_ms: dict[Name, dict[Name, CpuMs]] | None = None
    host_cpu_ms: dict[Name, CpuMs] | None = None
    redis_commands: Count | None = None
    postgres_transactions: Count | None = None
    counted_s: Annotated[float, Field(gt=0, le=30 * 86_400)] | None = None
    skipped: Short | None = None  # why the window was not counted (no cgroup v1 accounting)


class StepEntry(Counted):
    """extra.steps.<t>.<step>: the step's bookkeeping (runs.store.mark_step) and its counters."""

    status: Literal["running", "done", "interrupted"] = "done"  # present: never null (see HostEntry)
    attempts: Annotated[int, Field(ge=0, le=1000)] = 0
    seq_start: Count | None = None
    seq_end: Count | None = None
    started_s: UnixS | None = None
    finished_s: UnixS | None = None

    @model_validator(mode="after")
    def _ordered(self) -> StepEntry:
        if self.started_s is not None and self.finished_s is not None and self.finished_s < self.started_s:
            raise ValueError(f"finished_s {self.finished_s} is before started_s {self.started_s}")
        if self.seq_start is not None and self.seq_end is not None and self.seq_end < self.seq_start:
            raise ValueError(f"seq_end {self.seq_end} is below seq_start {self.seq_start}")
        return self


class HostEntry(_Open):
    """hosts.<t>: what the run recorded about one target (bench.run saves it as it goes). A field may be absent;
    present, it is never null (readers test `"workflow_id" in info`, then use it): the defaults below stand only
    for "absent" and are not validated. `n8n_version`, `provider` and `size` may be null (not known)."""

    kind: Short = ""
    setup: RunSetup = None  # type: ignore[assignment]
    facts: RecordedFacts = None  # type: ignore[assignment]
    rest: Counted = None  # type: ignore[assignment]
    webhook_processors: Annotated[int, Field(ge=0, le=64)] = 0
    n8n_version: Short | None = None
    provider: Short | None = None
    size: Short | None = None
    done: bool = False
    stack_dir: Annotated[str, Field(max_length=4096)] = ""
    workflow_id: Name = None  # type: ignore[assignment]
    warmup_workflow_id: Name = None  # type: ignore[assignment]
    # the webhook paths become URLs the bench posts to on --resume: the characters of a path, nothing else
    webhook_path: Annotated[str, Field(pattern=r"^[A-Za-z0-9._~/-]{1,200}$")] = None  # type: ignore[assignment]
    warmup_webhook_path: Annotated[str, Field(pattern=r"^[A-Za-z0-9._~/-]{1,200}$")] = None  # type: ignore[assignment]
    pids: dict[Name, Annotated[int, Field(ge=1, le=2**22)]] = {}
    # the machine's speed when the run began (lab/speed.py: CPU ms of a fixed JavaScript workload)
    speed_probe_ms: Annotated[float, Field(gt=0, le=100_000)] = None  # type: ignore[assignment]


class ResolvedWorkflow(_Open):
    """spec.workflow_resolved: the workflow the run deployed (`bench --resume` deploys it again)."""

    name: Name
    definition: dict[str, Any] | None = None
    webhook_path: Annotated[str, Field(pattern=r"^[A-Za-z0-9._~/-]{1,200}$")] | None = None
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"] | None = None


class RunSpec(_Open):
    """spec: what was asked for (a bench request, or a drill's name and parameters)."""

    source: Short | None = None
    target: Name | None = None
    workflow_resolved: ResolvedWorkflow | None = None
    body: Annotated[str, Field(max_length=16 << 20)] | None = None


Scalar = str | int | float | bool | None


class RecordedCheck(_Open):
    """extra.checks[i]: one observation of a drill against what was expected."""

    observation: Scalar = None
    expected: Scalar = None
    verdict: Scalar = None


class RunExtra(_Open):
    """extra: the steps' bookkeeping, find-max results, a drill's outcome."""

    # never null when present: readers take `.get("steps", {})` as a mapping
    steps: dict[Name, dict[Name, StepEntry]] = {}
    find_max: dict[Name, dict[str, Any]] = {}  # bench.find_max.SearchResult each; the report checks it
    search: dict[str, Any] = {}
    soak: dict[Name, list[dict[str, Any]]] = {}
    checks: list[RecordedCheck] | None = None
    outcome: dict[Name, Any] | None = None
    expected: dict[Name, Any] | Scalar = None
    verdict: Short | None = None
    drill: Short | None = None
    expected_heading: Short | None = None


def _setup(value: Any) -> Any:
    """The run's `setup`: one Setup, or one per target, or a lab drill's {topology: ...}."""
    if not isinstance(value, dict):
        raise ValueError("must be a mapping")
    if "mode" in value:
        return RunSetup.model_validate(value, strict=True)
    for name, item in value.items():
        if not isinstance(item, dict):
            raise ValueError(f"{str(name)[:40]} must be a mapping (a setup)")
        if name != "topology":
            RunSetup.model_validate(item, strict=True)
    return value


class RunFile(_Closed):
    """run.json as read: `RunManifest`'s fields, with the free-form parts typed (see the module docstring)."""

    run_id: Any
    kind: Any = "bench"
    created_s: Any
    finished_s: Any = None
    spec: RunSpec = RunSpec()
    setup: dict[str, Any] = {}
    workflow: Any = None
    versions: Any = {}
    hosts: dict[Name, HostEntry] = {}
    ledgers: dict[Name, Ledger] = {}
    extra: RunExtra = RunExtra()

    @model_validator(mode="after")
    def _setup_shape(self) -> RunFile:
        try:
            _setup(self.setup)
        except ValidationError as exc:
            raise ValueError(f"setup: {_first(exc)}") from None
        except ValueError as exc:
            raise ValueError(f"setup: {exc}") from None
        return self


def _first(exc: ValidationError) -> str:
    """The first error of `exc` as `field.path: what is wrong (the value)`, on one line."""
    first = exc.errors()[0]
    loc = ".".join(str(p) for p in first.get("loc", ()))
    msg = str(first.get("msg", "")).removeprefix("Value error, ")
    value = first.get("input")
    scalar = value is not None and not isinstance(value, (dict, list, BaseModel))
    shown = f" (got {printable(repr(value), limit=40)})" if scalar and first.get("type") != "value_error" else ""
    return printable(f"{loc + ': ' if loc else ''}{msg}{shown}", limit=400)


def read_manifest(text: str, path: Path | str) -> RunManifest:
    """The manifest in run.json's `text`: bounded JSON (safety.jsondoc), then `RunFile`, then `RunManifest`, each
    strict; `InputError` naming `path` and the first field that is wrong."""
    doc = load_json(text, f"{path}", FIX)
    if not isinstance(doc, dict):
        raise InputError(f"{path} is not a run manifest (a JSON object); {FIX}")
    for model in (RunFile, RunManifest):
        try:
            model.model_validate(doc, strict=True)
        except ValidationError as exc:
            raise InputError(f"{path}: {_first(exc)}; {FIX}") from None
    return RunManifest.model_validate(doc)


def validation_line(exc: ValidationError, source: str, fix: str) -> InputError:
    """Any reader's ValidationError as one `InputError` line: the source, the field path, what is wrong, the fix."""
    return InputError(f"{source}: {_first(exc)}; {fix}")


__all__ = ["MAX_COUNT", "RunFile", "read_manifest", "validation_line"]
