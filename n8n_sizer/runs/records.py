"""Records a bench run writes, one JSON object per line, shared by the driver, telemetry, drills and reports.

Layout of a run folder, `results/<run-id>/`:
  run.json        RunManifest (spec, setup, versions, host facts, times), rewritten as the run goes
  requests.jsonl  one RequestRecord per request, appended as each finishes
  samples.jsonl   one Sample per measurement (load and telemetry alike), appended as taken

A missing value stays None; it never becomes 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from n8n_sizer.safety.frozen import Frozen
from n8n_sizer.safety.text import is_printable, printable

# Physical bounds of what a run records (issue 40): far above any real run, far below nonsense. A record outside
# them is refused where it is read, with the file, the line and the field, instead of turning into a report.
MAX_UNIX_S = 10_000_000_000.0  # unix seconds: the year 2286 (a time is also never negative)
MAX_LATENCY_MS = 86_400_000.0  # a day: bench's longest --timeout is an hour, and a request is due when scheduled
MAX_COUNT = 10**12  # requests, executions, commands: a million a second for 11 days
MAX_VALUE = 1e15  # any sample's value (cores, MiB, ms, counts, rates): every one is a non-negative quantity
CLOCK_SLACK_S = 1.0  # how much earlier than scheduled a send may be recorded (another host's clock, rounding)
# The largest value a unit holds (the units telemetry and the load summaries write); other units: MAX_VALUE.
UNIT_BOUNDS = {
    "cores": 1024.0,  # safety.numbers.VCPU's top: no host has more
    "%": 1000.0,  # a share of the interval (disk busy can read a little above 100 on a late sample)
    "bool": 1.0,
    "ms": MAX_LATENCY_MS,
    "s": MAX_UNIX_S,
    "MiB": 2.0**30,  # a petabyte
    "MiB/s": 2.0**30,
}  # rates (req/s, req/min) are bounded against the step's offered rate instead (runs.plausible)
UnixS = Annotated[float, Field(ge=0, le=MAX_UNIX_S)]
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]


def _printable(value: str) -> str:
    if not is_printable(value):
        raise ValueError(f"{printable(repr(value), limit=60)} holds control characters or escape sequences")
    return value


# a step, target, host, role or metric name: echoed in reports and on terminals, so plain text (safety.text)
Name = Annotated[str, Field(min_length=1, max_length=200), AfterValidator(_printable)]
Text = Annotated[str, Field(max_length=100_000)]  # an error or a body snippet

# "dropped": not sent because the in-flight cap was reached (k6's dropped iterations); its sent_s is the
# scheduled time and its status None.
ErrorClass = Literal["timeout", "reset", "refused", "non-2xx", "dropped", "other"]
# A request deliberately malformed (bench.payloads, `--malformed`); None on a record = a valid request.
PayloadClass = Literal["bad-signature", "invalid-json", "schema", "oversize"]
# The answers that refuse each class as a webhook receiver should. n8n itself refuses a body that does not parse as
# the JSON its Content-Type says with 422 "Failed to parse request body" before any workflow runs (seen on 2.41.1),
# so for invalid JSON either answer is the right refusal.
REFUSAL_STATUS: dict[str, tuple[int, ...]] = {
    "bad-signature": (401,),
    "invalid-json": (400, 422),
    "schema": (422,),
    "oversize": (413,),
}


class Sample(BaseModel):
    """One measurement, PerfKitBenchmarker style: metric, value, unit, labels, time (unix seconds)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)  # NaN/inf: a broken record

    metric: Name
    value: float  # every metric is a non-negative quantity (counts, cores, MiB, ms): see _within_its_unit
    unit: Annotated[str, Field(max_length=40)]
    labels: dict[Name, Annotated[str, Field(max_length=2000)]] = Field(default_factory=dict, max_length=64)
    time_s: UnixS

    @model_validator(mode="after")
    def _within_its_unit(self) -> Sample:
        """A value its unit cannot hold (500 cores, a percentage of 10^9, a "bool" of 7) is not a measurement."""
        high = UNIT_BOUNDS.get(self.unit, MAX_VALUE)
        if self.value < 0:
            raise ValueError(f"{self.metric} {self.value:g} is negative; every metric is a count, a size or a time")
        if self.value > high:
            raise ValueError(f"{self.metric} {self.value:g} {self.unit} is above {high:g}, what the unit can hold")
        if self.unit == "bool" and self.value not in (0.0, 1.0):
            raise ValueError(f"{self.metric} {self.value:g} is a bool, neither 0 nor 1")
        return self


class RequestRecord(BaseModel):
    """One request of the open-model (or closed) load: when it was due, when it went, what came back."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)  # NaN/inf: a broken record

    seq: Count
    step: Name  # e.g. "rate-20" or "c-10"; warm-up requests are not recorded
    target: Name  # host name from the inventory, or "local"
    scheduled_s: UnixS  # unix seconds the schedule wanted it sent
    sent_s: UnixS  # unix seconds it was sent
    status: int | None = Field(ge=100, le=599)  # HTTP status, None when no response arrived
    # from scheduled time to response (no coordinated omission); None without response
    latency_ms: float | None = Field(ge=0, le=MAX_LATENCY_MS)
    error_class: ErrorClass | None = None
    error: Text | None = None  # the full error string for a failure
    body_snippet: Text | None = None  # first bytes of a non-2xx body
    # The execution n8n answered for (the bench workflows return `executionId`), to match every accepted
    # request to a stored execution one by one; None when the workflow does not return it.
    execution_id: Name | None = None
    payload_class: PayloadClass | None = None  # what was deliberately wrong with it (--malformed); None = valid
    # The load-generator host that sent it when the load was split over several (a lab's gen-1 .. gen-N);
    # None when the bench itself or the target's one load generator sent everything (and in older runs).
    generator: Name | None = None

    @model_validator(mode="after")
    def _in_order(self) -> RequestRecord:
        """Scheduled, then sent, then answered: a request is never sent before it was due, nor answered before it
        was sent (within CLOCK_SLACK_S)."""
        if self.sent_s < self.scheduled_s - CLOCK_SLACK_S:
            raise ValueError(f"sent_s {self.sent_s} is before scheduled_s {self.scheduled_s}")
        if self.latency_ms is not None and self.latency_ms / 1000.0 < self.sent_s - self.scheduled_s - CLOCK_SLACK_S:
            raise ValueError(f"latency_ms {self.latency_ms:g} ends before the request was sent")
        return self


class ClassTally(Frozen):
    """One payload class in the ledger: what was fired, refused as it should be, accepted, or failed otherwise."""

    fired: Count
    refused_as_expected: Count  # answered with the class's refusal status (REFUSAL_STATUS): not lost
    accepted: Count  # 2xx: for a malformed class, the receiver let it through
    other: Count  # another status, a timeout or a reset

    @model_validator(mode="after")
    def _adds_up(self) -> ClassTally:
        if self.refused_as_expected + self.accepted + self.other != self.fired:
            raise ValueError("refused_as_expected + accepted + other must add up to fired")
        return self


class Ledger(Frozen):
    """Seed 004's table: what was fired, accepted, refused, and accepted-then-lost (no stored execution)."""

    fired: Count
    accepted: Count
    refused: Count
    # None when executions could not be counted; raw (may be negative: see runs.ledger)
    accepted_then_lost: int | None = Field(ge=-MAX_COUNT, le=MAX_COUNT)
    executions_stored: Count | None
    executions_succeeded: Count | None = None  # stored executions with status success (accepted is matched to these)
    not_sent: Count = 0  # kept back by the in-flight cap (error class "dropped"), not in `fired`
    # Accepted requests whose execution is not among the stored successful ones, matched by execution id;
    # None when not every accepted answer carried its execution id (then only the counts above are known).
    lost_seqs: list[Count] | None = None
    # Per payload class ("valid" and bench.payloads' classes) when the run sent malformed requests (--malformed).
    by_class: dict[Name, ClassTally] | None = Field(None, max_length=16)
    # Refusals answered from inside the workflow (their answer names an execution): those executions are stored
    # too, so they are expected among the successful ones and do not hide a lost accepted request.
    refusals_with_execution: Count = 0

    @model_validator(mode="after")
    def _adds_up(self) -> Ledger:
        """The ledger's own arithmetic (runs.ledger.build_ledger): a hand-edited ledger that breaks it is refused."""
        problems = [
            (self.accepted + self.refused != self.fired, "accepted + refused must equal fired"),
            (self.refusals_with_execution > self.refused, "refusals_with_execution cannot exceed refused"),
            (
                self.executions_succeeded is not None
                and self.executions_stored is not None
                and self.executions_succeeded > self.executions_stored,
                "executions_succeeded cannot exceed executions_stored",
            ),
            (
                self.accepted_then_lost is not None
                and not -(self.executions_succeeded or 0) <= self.accepted_then_lost <= self.fired,
                "accepted_then_lost must lie between -executions_succeeded and fired",
            ),
            (self.lost_seqs is not None and len(self.lost_seqs) > self.accepted, "more lost_seqs than accepted"),
            (
                self.by_class is not None and sum(t.fired for t in self.by_class.values()) != self.fired,
                "by_class's fired must add up to fired",
            ),
            (
                self.by_class is not None and sum(t.accepted for t in self.by_class.values()) != self.accepted,
                "by_class's accepted must add up to accepted",
            ),
        ]
        for broken, why in problems:
            if broken:
                raise ValueError(why)
        return self


class RunManifest(BaseModel):
    """run.json: what ran where, with which versions, and when. `extra` holds kind-specific details."""

    model_config = ConfigDict(extra="forbid")

    run_id: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:+-]{0,127}$")]  # it names files and folders
    kind: Literal["bench", "drill", "soak", "find-max"] = "bench"
    created_s: UnixS
    finished_s: UnixS | None = None
    # The free-form parts below are typed where they are read: runs.run_file (RunFile) checks every field any
    # reader uses, at the boundary, before a manifest is built from a file.
    spec: dict[str, Any] = Field(default_factory=dict)
    setup: dict[str, Any] = Field(default_factory=dict)
    workflow: Annotated[str, Field(max_length=500), AfterValidator(_printable)] | None = None
    versions: dict[Name, Annotated[str, Field(max_length=500)]] = Field(default_factory=dict)
    hosts: dict[Name, dict[str, Any]] = Field(default_factory=dict)
    ledgers: dict[Name, Ledger] = Field(default_factory=dict)
    extra: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _finished_after_created(self) -> RunManifest:
        if self.finished_s is not None and self.finished_s < self.created_s:
            raise ValueError(f"finished_s {self.finished_s} is before created_s {self.created_s}")
        return self

    def setup_of(self, target: str) -> dict[str, Any] | None:
        """The setup a target ran: its own (hosts.<t>.setup), else the run's (a setup, or one per target)."""
        own = (self.hosts.get(target) or {}).get("setup")
        if own:
            return own
        if "mode" in self.setup:
            return self.setup
        mine = self.setup.get(target)
        return mine if isinstance(mine, dict) and "mode" in mine else None

    def facts_of(self, target: str) -> dict[str, Any]:
        """The target's host facts (hosts.<t>.facts), {} when none were recorded."""
        return (self.hosts.get(target) or {}).get("facts") or {}


@dataclass
class StepTally:
    """What a step did, for its summary: counts, the step's start and end (unix seconds)."""

    step: str
    started_s: float
    finished_s: float
    scheduled: int = 0
    sent: int = 0
    last_sent_s: float | None = None


class StepCounters(Frozen):
    """What a step cost, counted at its two ends (run.json `extra.steps[target][step]`, beside started_s and
    finished_s). CPU from the kernel's accounting: one cgroup v1 `cpuacct` group per role and host
    (`hosts.cgroups`), so it covers exactly those processes and their children, nothing sampled. Operations from
    the data stores' own counters (`telemetry.probes.ops`). Each field is None when it could not be read (not
    root, no cgroup v1, no Redis in regular mode); a step of a run without accounting has none of them."""

    cpu_source: Literal["cpuacct"] = "cpuacct"
    role_cpu_ms: dict[str, float] | None = None  # role -> CPU milliseconds over the step, summed over hosts
    host_role_cpu_ms: dict[str, dict[str, float]] | None = None  # host -> role -> ms (a lab's several hosts)
    # host -> ms of everything in a lab host's budget (its roles, the sampler's commands, sshd): a lab only
    host_cpu_ms: dict[str, float] | None = None
    redis_commands: int | None = Field(None, ge=0)  # INFO commandstats calls over the step, `info` itself left out
    postgres_transactions: int | None = Field(None, ge=0)  # pg_stat_database xact_commit + xact_rollback, n8n's db
    counted_s: float | None = Field(None, ge=0)  # the span between the two readings
