"""Records a bench run writes, one JSON object per line, shared by the driver, telemetry, drills and reports.

Layout of a run folder, `results/<run-id>/`:
  run.json        RunManifest (spec, setup, versions, host facts, times), rewritten as the run goes
  requests.jsonl  one RequestRecord per request, appended as each finishes
  samples.jsonl   one Sample per measurement (load and telemetry alike), appended as taken

A missing value stays None; it never becomes 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from n8n_sizer.safety.frozen import Frozen

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

    metric: str
    value: float
    unit: str
    labels: dict[str, str] = Field(default_factory=dict)
    time_s: float


class RequestRecord(BaseModel):
    """One request of the open-model (or closed) load: when it was due, when it went, what came back."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)  # NaN/inf: a broken record

    seq: int = Field(ge=0)
    step: str  # e.g. "rate-20" or "c-10"; warm-up requests are not recorded
    target: str  # host name from the inventory, or "local"
    scheduled_s: float  # unix seconds the schedule wanted it sent
    sent_s: float  # unix seconds it was sent
    status: int | None  # HTTP status, None when no response arrived
    latency_ms: float | None  # from scheduled time to response (no coordinated omission); None without response
    error_class: ErrorClass | None = None
    error: str | None = None  # the full error string for a failure
    body_snippet: str | None = None  # first bytes of a non-2xx body
    # The execution n8n answered for (the bench workflows return `executionId`), to match every accepted
    # request to a stored execution one by one; None when the workflow does not return it.
    execution_id: str | None = None
    payload_class: PayloadClass | None = None  # what was deliberately wrong with it (--malformed); None = valid
    # The load-generator host that sent it when the load was split over several (a lab's gen-1 .. gen-N);
    # None when the bench itself or the target's one load generator sent everything (and in older runs).
    generator: str | None = None


class ClassTally(Frozen):
    """One payload class in the ledger: what was fired, refused as it should be, accepted, or failed otherwise."""

    fired: int = Field(ge=0)
    refused_as_expected: int = Field(ge=0)  # answered with the class's refusal status (REFUSAL_STATUS): not lost
    accepted: int = Field(ge=0)  # 2xx: for a malformed class, the receiver let it through
    other: int = Field(ge=0)  # another status, a timeout or a reset


class Ledger(Frozen):
    """Seed 004's table: what was fired, accepted, refused, and accepted-then-lost (no stored execution)."""

    fired: int = Field(ge=0)
    accepted: int = Field(ge=0)
    refused: int = Field(ge=0)
    accepted_then_lost: int | None  # None when executions could not be counted; raw (may be negative)
    executions_stored: int | None
    executions_succeeded: int | None = None  # stored executions with status success (accepted is matched to these)
    not_sent: int = Field(0, ge=0)  # kept back by the in-flight cap (error class "dropped"), not in `fired`
    # Accepted requests whose execution is not among the stored successful ones, matched by execution id;
    # None when not every accepted answer carried its execution id (then only the counts above are known).
    lost_seqs: list[int] | None = None
    # Per payload class ("valid" and bench.payloads' classes) when the run sent malformed requests (--malformed).
    by_class: dict[str, ClassTally] | None = None
    # Refusals answered from inside the workflow (their answer names an execution): those executions are stored
    # too, so they are expected among the successful ones and do not hide a lost accepted request.
    refusals_with_execution: int = Field(0, ge=0)


class RunManifest(BaseModel):
    """run.json: what ran where, with which versions, and when. `extra` holds kind-specific details."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    kind: Literal["bench", "drill", "soak", "find-max"] = "bench"
    created_s: float
    finished_s: float | None = None
    spec: dict[str, Any] = Field(default_factory=dict)
    setup: dict[str, Any] = Field(default_factory=dict)
    workflow: str | None = None
    versions: dict[str, str] = Field(default_factory=dict)
    hosts: dict[str, dict[str, Any]] = Field(default_factory=dict)
    ledgers: dict[str, Ledger] = Field(default_factory=dict)
    extra: dict[str, Any] = Field(default_factory=dict)


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
