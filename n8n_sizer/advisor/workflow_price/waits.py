"""Waiting: what a node that calls out holds an execution (and its slot, and its memory) for, per call.

Every calling family has a default with its source; `--wait NODE=MS` (a node's name, its type, or the type's last
part, e.g. `httpRequest`) sets one node's or one type's wait per call, and `--wait-ms MS` every call out that
`--wait` does not name. A Wait node waits its configured time; n8n parks a wait of 65 s or more in the database:
the execution is saved as waiting and leaves memory until the wait tracker resumes it, so it holds no slot while
parked (n8n 2.41.1, packages/nodes-base/nodes/Wait/Wait.node.ts, `if (waitValue < 65000)` keeps shorter waits in
the running process, dist/nodes/Wait/Wait.node.js:506; packages/cli/src/wait-tracker.ts polls the database for
waiting executions every 60 s and resumes each at its time, dist/wait-tracker.js:52-56). A Wait that resumes on a
webhook or a form, a Form page and an app's "send and wait" operation park until someone answers.
"""

from __future__ import annotations

import math
from typing import Any

from n8n_sizer.advisor.workflow_price.export import ExportNode, printable
from n8n_sizer.errors import InputError
from n8n_sizer.safety.frozen import Frozen

PARK_THRESHOLD_MS = 65_000.0  # Wait.node.ts: waits of 65 s or more are parked in the database
MAX_WAIT_MS = 3_600_000.0  # --wait / --wait-ms bound: the same as --wait-ms without --workflow (safety/numbers.py)
# A date n8n can hold (JavaScript's Date ends 8.64e15 ms after 1970): a Wait beyond it is not a wait.
MAX_CONFIGURED_MS = 8.64e15
UNIT_MS = {"seconds": 1e3, "minutes": 6e4, "hours": 3.6e6, "days": 8.64e7}

SMALL_MODEL = (
    "the mean answer time of a small chat model, 4.47 s (gpt-4.1-mini and gpt-5-mini at minimal reasoning, 32 calls "
    "each, published 2025-12-08 at rewards-assistant-docs.fetchrewards.com, landing-page-latency-optimization)"
)
SLOW_API = "seed 000's stand-in for a slow API call, a 0.5 s Wait"


class WaitDefault(Frozen):
    ms: float
    source: str


DEFAULTS: dict[str, WaitDefault] = {
    "model": WaitDefault(ms=4500.0, source=SMALL_MODEL),
    "embedding": WaitDefault(ms=300.0, source="assumed: one round trip to a hosted embeddings API"),
    "vector": WaitDefault(ms=200.0, source="assumed: one query to a hosted vector store"),
    "app": WaitDefault(ms=500.0, source=SLOW_API),
    "http": WaitDefault(ms=500.0, source=SLOW_API),
    "database": WaitDefault(ms=20.0, source="assumed: one query over a private network"),
    "subworkflow": WaitDefault(
        ms=0.0, source="not in this export: the sub-workflow's own waiting (price it apart, give --wait NODE=MS)"
    ),
}


class WaitPlan(Frozen):
    """The waits the user gave: per node name or type (`--wait`), and for every other call (`--wait-ms`)."""

    by_key: dict[str, float] = {}
    every_call_ms: float | None = None

    def lookup(self, node: ExportNode) -> float | None:
        short = node.type.rsplit(".", 1)[-1]
        for key in (node.name, node.type, short):
            if key in self.by_key:
                return self.by_key[key]
        return None


def _bounded(flag: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"{flag}: {printable(repr(value), 40)} is not a number of milliseconds")
    if not 0 <= value <= MAX_WAIT_MS:
        raise InputError(f"{flag} {value:.6g} is outside the allowed range [0, {MAX_WAIT_MS:,.0f}] ms")
    return float(value)


def parse_waits(pairs: list[str] | tuple[str, ...], every_call_ms: float | None) -> WaitPlan:
    """`--wait NODE=MS` (repeatable) and `--wait-ms MS`, checked: one InputError line for anything else."""
    by_key: dict[str, float] = {}
    for pair in pairs:
        key, sep, value = pair.rpartition("=")
        if not sep or not key.strip():
            raise InputError(
                f"--wait {printable(pair, 60)!r}: give NODE=MS, a node's name or type and its wait per call in ms, "
                'e.g. --wait "OpenAI Chat Model=2000"'
            )
        try:
            number = float(value)
        except ValueError:
            raise InputError(
                f"--wait {printable(pair, 60)!r}: {printable(value, 30)!r} is not a number of ms"
            ) from None
        by_key[key.strip()] = _bounded(f"--wait {printable(key, 60)}", number)
    if every_call_ms is not None:
        every_call_ms = _bounded("--wait-ms", every_call_ms)
    return WaitPlan(by_key=by_key, every_call_ms=every_call_ms)


class NodeWait(Frozen):
    ms: float  # per run of the node, held while running (0 when parked)
    parked_ms: float = 0.0  # per run, parked in the database (holds no slot)
    source: str = ""  # "given", "--wait-ms", the family default's source, "configured", "event"
    event: bool = False  # parked until an event (a webhook, a form, a reply)
    per_call_ms: float = 0.0  # one call's wait (a stand-in answering for the node waits this long)


def configured_wait_ms(node: ExportNode) -> tuple[float | None, str]:
    """A Wait node's time (ms) and how it resumes: (ms, "time"), (None, "event") for a webhook or form resume,
    (None, "unknown") for an expression or a date; an absurd value is one InputError line."""
    p = node.parameters
    resume = p.get("resume", "timeInterval")
    if resume in ("webhook", "form"):
        return None, "event"
    if resume != "timeInterval":
        return None, "unknown"  # specificTime: a date, not a duration
    first = node.type_version is not None and node.type_version < 1.1
    amount = p.get("amount", 1 if first else 5)
    unit = p.get("unit", "hours" if first else "seconds")
    if isinstance(amount, str) and amount.startswith("="):
        return None, "unknown"
    if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not math.isfinite(amount) or amount < 0:
        raise InputError(
            f"Wait node {node.name!r}: `amount` {printable(repr(amount), 30)} is not a number of {printable(str(unit), 20)}"
        )
    if not isinstance(unit, str) or unit not in UNIT_MS:
        raise InputError(
            f"Wait node {node.name!r}: `unit` {printable(repr(unit), 30)} is not one of seconds, minutes, hours, days"
        )
    ms = float(amount) * UNIT_MS[unit]
    if ms > MAX_CONFIGURED_MS:
        raise InputError(f"Wait node {node.name!r}: {amount:.3g} {unit} is past any date n8n can wait until")
    return ms, "time"


def wait_node(node: ExportNode, plan: WaitPlan) -> NodeWait:
    """A Wait (or Form) node: its time if it is known, parked at 65 s or more or when it waits on an event."""
    given = plan.lookup(node)
    if node.type.endswith(".form"):
        return NodeWait(ms=0.0, source="event", event=True)
    ms, how = configured_wait_ms(node)
    if given is not None:
        ms, how = given, "given"
    if how == "event":
        return NodeWait(ms=0.0, source="event", event=True)
    if ms is None:
        return NodeWait(ms=0.0, source="unknown")
    if ms >= PARK_THRESHOLD_MS:
        return NodeWait(ms=0.0, parked_ms=ms, source=how)
    return NodeWait(ms=ms, source=how)


def sends_and_waits(node: ExportNode) -> bool:
    """An app node's "send and wait for a response" operation: it parks the execution until someone answers."""
    return node.parameters.get("operation") == "sendAndWait"


def call_wait(node: ExportNode, calls: str, plan: WaitPlan, override_from: list[ExportNode] = ()) -> NodeWait:
    """One call of a calling family: `--wait` on the node (or on the nodes in `override_from`, e.g. the model
    sub-node of an agent), else `--wait-ms`, else the family's default."""
    for candidate in (*override_from, node):
        given = plan.lookup(candidate)
        if given is not None:
            return NodeWait(ms=given, source="--wait", per_call_ms=given)
    if plan.every_call_ms is not None:
        return NodeWait(ms=plan.every_call_ms, source="--wait-ms", per_call_ms=plan.every_call_ms)
    default = DEFAULTS.get(calls)
    if default is None:
        return NodeWait(ms=0.0, source="")
    return NodeWait(ms=default.ms, source=default.source, per_call_ms=default.ms)
