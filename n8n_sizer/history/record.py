"""The history file (`n8n-sizer history export --out history.json`): what an instance's executions say about its
load, and nothing more: no payload, no parameter, no credential, no URL a workflow calls.

Per workflow: its id and name (both hashed with `--anonymise`), its trigger (kind, and a schedule's rule), its
nodes' types and names with the count of expressions in each (for pricing; the expressions themselves are not
kept), its executions counted by status and by mode, their start times reduced to what rates need (`RateSummary`:
how many seconds saw k executions, and executions per minute as runs), their durations, each node's time (from the
executions read with their data) split into CPU and waiting, and the waits parked in the database. Times are unix
seconds for the window and offsets from the window's start for the minutes, so the workflows' minutes add up.

The format is versioned (`format`): a reader refuses another version in one line instead of guessing.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from n8n_sizer.safety.frozen import Frozen

FORMAT = "n8n-sizer-history/1"

TriggerKind = Literal[
    "webhook", "form", "chat", "schedule", "app", "manual", "sub-workflow", "error", "mcp", "other", "none"
]
Family = Literal["trigger", "code", "call", "model", "wait", "sub-workflow", "cpu", "none"]


class RateSummary(Frozen):
    """Executions started in a window, reduced to what rates need.

    `per_second_counts`: {k: seconds of the window in which exactly k executions started}, k >= 1 (the other
    seconds saw none). `minutes`: runs of equal per-minute counts, (first minute from the window's start, executions
    in each of those minutes, how many minutes in a row); minutes with none are left out."""

    window_s: float = Field(ge=0)
    executions: int = Field(ge=0)
    per_s_mean: float = Field(ge=0)
    busiest_minute_per_s: float = Field(ge=0)
    busiest_minute_offset_s: float | None = None
    p99_second_per_s: float = Field(ge=0)
    per_second_counts: dict[int, int] = {}
    minutes: tuple[tuple[int, int, int], ...] = ()


class DurationSummary(Frozen):
    """How long finished executions took (stopped - started), waits parked in the database left out."""

    executions: int = Field(ge=0)
    mean_ms: float | None = None
    p50_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None
    max_ms: float | None = None


class SeenTrigger(Frozen):
    kind: TriggerKind
    node_type: str | None = None
    rule: str | None = None  # a schedule's rule in words ("every 5 seconds", "cron 0 * * * *")


class NodeInfo(Frozen):
    name: str
    type: str
    type_version: float | None = None
    disabled: bool = False
    expressions: int = Field(0, ge=0)  # parameter values that are n8n expressions (counted, not kept)


class NodeTime(Frozen):
    """One node's time per execution, from the executions read with their data. `cpu_ms` + `wait_ms` is
    `per_execution_ms` (history/split.py splits it by the node's family)."""

    name: str
    type: str
    family: Family
    runs_per_execution: float = Field(ge=0)
    per_run_p50_ms: float | None = None
    per_run_p95_ms: float | None = None
    per_execution_ms: float = Field(ge=0)
    cpu_ms: float = Field(ge=0)
    wait_ms: float = Field(ge=0)
    parked_runs: int = Field(0, ge=0)  # runs that ended parked in the database (a long Wait)
    inside: str | None = None  # the node whose run holds this one's (an AI agent's model): counted there, not twice


class WorkflowHistory(Frozen):
    id: str
    name: str
    active: bool | None = None
    trigger: SeenTrigger
    nodes: tuple[NodeInfo, ...] = ()
    # main and AI connections as (source, kind, output, target, input) between `nodes` names: what runs after what
    # (the price walks them from the trigger); empty in a history written before they were kept
    edges: tuple[tuple[str, str, int, str, int], ...] = ()
    rates: RateSummary
    by_status: dict[str, int] = {}
    by_mode: dict[str, int] = {}
    retries: int = Field(0, ge=0)  # executions in mode "retry"
    errors: int = Field(0, ge=0)  # status error or crashed
    waiting_now: int = Field(0, ge=0)  # parked in the database when read (status waiting)
    durations: DurationSummary
    sampled: int = Field(0, ge=0)  # executions read with their data (node timings)
    node_timings: tuple[NodeTime, ...] = ()
    running_ms: float | None = None  # mean time in flight per execution (parked waits left out)
    parked_ms: float | None = None  # mean time parked in the database per execution (not running)
    notes: tuple[str, ...] = ()


class ReadInfo(Frozen):
    """Where the history came from and what bounded it."""

    instance: str | None  # the base URL; None when anonymised
    read_at_s: float
    since_s: float
    until_s: float
    window_start_s: float  # since, or later when older executions were pruned (or the instance is younger)
    window_end_s: float
    requests: int = 0
    bytes_read: int = 0
    seconds: float = 0.0
    sample_per_workflow: int = 0
    truncated: str | None = None  # the bound that stopped the read early (then the window starts later)
    pruned: str | None = None  # what the window lacks, and the settings that explain it


class History(Frozen):
    format: Literal["n8n-sizer-history/1"] = FORMAT
    anonymised: bool = False
    read: ReadInfo
    total: RateSummary  # every workflow's executions together (the instance's burst)
    workflows: tuple[WorkflowHistory, ...]
    notes: tuple[str, ...] = ()
