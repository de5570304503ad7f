"""Workflow profiles: what one execution costs, apart from n8n's own overhead (which the model fits).

- `light` is seed 002's workflow: Webhook -> Code (doubles a number) -> respond. Its Code node's JavaScript is
  trivial; what the runner still spends per execution (its round trip) is the fitted `runner_round_trip_ms`, the
  rest is n8n's per-execution overhead, fitted.
- `code-heavy` is seed 000's: Webhook -> Code (fixed integer loop, 187 ms CPU warm, seed 000 "How we
  tested") -> Wait 0.5 s -> Set. The Code node's CPU runs in the task runner; the wait holds a
  concurrency slot but no CPU.
- `custom` takes the user's `--cpu-ms` (CPU in Code nodes) and `--wait-ms` (time waiting on I/O) and
  borrows the light profile's n8n overhead, so it is always flagged as extrapolated.
"""

from __future__ import annotations

from pydantic import Field

from n8n_sizer.errors import InputError
from n8n_sizer.safety.frozen import Frozen

CODE_HEAVY_CPU_MS = 187.0  # seed 000, "How we tested": Code node, 187 ms warm
CODE_HEAVY_WAIT_MS = 500.0  # seed 000: Wait 0.5 s ("a slow API call")


class WorkflowProfile(Frozen):
    name: str
    code_cpu_ms: float = Field(ge=0)  # CPU per execution inside Code nodes (the task runner)
    wait_ms: float = Field(ge=0)  # time per execution spent waiting, holding a slot but no CPU
    overhead_key: str  # which fitted n8n-overhead parameter this profile uses
    measured: bool  # False when no embedded measurement ran this workflow
    code_nodes: int = Field(1, ge=0, le=10_000)  # Code nodes per execution: each costs its runner a round trip
    # A workflow priced from its nodes (advisor/workflow_price): its n8n overhead relative to overhead_key's fitted
    # one, and that ratio's uncertainty (log sd), which widens every interval of an answer about it.
    overhead_ratio: float = Field(1.0, gt=0, le=1000)
    ratio_sd_log: float = Field(0.0, ge=0, le=5)
    # Memory one execution holds while it is in flight (MB, in the process that runs it), where it is known to differ
    # from the light workflow's measured figure (ram.py's held_mb_per_execution): None means that figure.
    held_mb: float | None = Field(None, gt=0, le=100_000)
    # The advise options that ask about this profile again where `--workload NAME` cannot (a workflow priced from
    # its export: `--workflow FILE` and its options); empty: `--workload NAME` (or --cpu-ms/--wait-ms for custom).
    advise_args: tuple[str, ...] = ()
    # The host class `code_cpu_ms` was measured on (seed 000's server for code-heavy), None for the reference host.
    code_cpu_class: str | None = None

    @property
    def code_cpu_s(self) -> float:
        return self.code_cpu_ms / 1000.0

    @property
    def wait_s(self) -> float:
        return self.wait_ms / 1000.0


LIGHT = WorkflowProfile(name="light", code_cpu_ms=0.0, wait_ms=0.0, overhead_key="light", measured=True)
CODE_HEAVY = WorkflowProfile(
    name="code-heavy",
    code_cpu_ms=CODE_HEAVY_CPU_MS,
    wait_ms=CODE_HEAVY_WAIT_MS,
    overhead_key="code-heavy",
    measured=True,
    code_cpu_class="seed-000",
)
BUILTIN: dict[str, WorkflowProfile] = {p.name: p for p in (LIGHT, CODE_HEAVY)}
WORKLOADS = ("light", "code-heavy")


def profile_for(workload: str, cpu_ms: float | None = None, wait_ms: float | None = None) -> WorkflowProfile:
    """The profile for `--workload`, or a custom one when `--cpu-ms`/`--wait-ms` are given."""
    if cpu_ms is not None or wait_ms is not None:
        if cpu_ms is not None and cpu_ms < 0:
            raise InputError(f"--cpu-ms must be >= 0 (got {cpu_ms:g}); it is the CPU your Code nodes use per execution")
        if wait_ms is not None and wait_ms < 0:
            raise InputError(f"--wait-ms must be >= 0 (got {wait_ms:g}); it is the time each execution waits on I/O")
        return WorkflowProfile(
            name="custom",
            code_cpu_ms=cpu_ms or 0.0,
            wait_ms=wait_ms or 0.0,
            overhead_key="light",
            measured=False,
            code_nodes=1,
        )
    if workload not in BUILTIN:
        raise InputError(
            f"unknown --workload {workload!r}; accepted: {', '.join(WORKLOADS)} "
            "(or give --cpu-ms/--wait-ms for a custom profile)"
        )
    return BUILTIN[workload]


def user_profile(name: str) -> WorkflowProfile:
    """A profile for a workflow measured only in the user's own bench results (its own fitted overhead)."""
    if name in BUILTIN:
        return BUILTIN[name]
    return WorkflowProfile(name=name, code_cpu_ms=0.0, wait_ms=0.0, overhead_key=name, measured=True)
