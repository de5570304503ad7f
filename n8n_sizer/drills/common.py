"""What every drill shares: the recorded outcome, the context it acts on, and small probes.

A drill acts on a running queue stack (a `StackHandle`: processes on this machine, or containers on a host
reached over SSH) and an n8n instance set up over HTTP (`N8nSession`). It observes through n8n's public API
(execution statuses), the processes' own logs (new lines since a mark), Redis (Bull's lists) and HTTP
answers, and returns a `DrillOutcome`: one `DrillCheck` per claim of seed 000, with what was observed, what
the seed saw, and a verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from n8n_sizer.n8n.client import N8nClient, N8nSession
from n8n_sizer.n8n.workflows import deploy_workflow, read_workflow, webhook_path
from n8n_sizer.runs.records import RequestRecord
from n8n_sizer.safety.frozen import Frozen
from n8n_sizer.stack.handle import LOG_LINE_CHARS, LogMark, StackError, StackHandle, wait_until

# The public API leaves executions in these statuses out of an unfiltered listing (seen on 2.41.1:
# a running execution only shows with ?status=running), so they are asked for one by one.
OPEN_STATUSES = ("new", "running", "waiting")


class DrillCheck(Frozen):
    """One claim of seed 000, checked: what this machine showed next to what the seed saw."""

    observation: str
    expected: str  # seed 000's figure, quoted
    matches: bool
    verdict: str  # "matches", or "differs: <why>"


class DrillOutcome(Frozen):
    """A drill's result: checks for the report, raw numbers, timings and the log lines that show it."""

    drill: str
    checks: list[DrillCheck]
    observed: dict[str, Any]
    timings_s: dict[str, float | None]  # None: the moment never came (nothing to time)
    log_lines: dict[str, list[str]]
    settings: dict[str, str]  # what the drill set that differs from seed 000 (e.g. shorter Bull timings)

    @property
    def verdict(self) -> Literal["matches", "differs"]:
        return "matches" if all(c.matches for c in self.checks) else "differs"


def check(observation: str, expected: str, matches: bool, why: str = "") -> DrillCheck:
    verdict = "matches" if matches else f"differs: {why}" if why else "differs"
    return DrillCheck(observation=observation, expected=expected, matches=matches, verdict=verdict)


class DrillFailed(StackError):
    """The drill could not set its situation up or observe it (not a finding about n8n)."""


def wait_for(condition: Callable[[], Any], timeout_s: float, what: str, poll_s: float = 0.5) -> Any:
    """Poll until `condition()` is truthy; returns its value, or raises DrillFailed naming `what`."""
    try:
        return wait_until(condition, timeout_s, what, poll_s)
    except StackError as exc:
        raise DrillFailed(str(exc)) from None


@dataclass
class DrillContext:
    """The stack a drill acts on, the n8n instance on it, and the workflows created so far."""

    stack: StackHandle
    session: N8nSession
    bull_prefix: str = "bull"  # QUEUE_BULL_PREFIX (n8n's default)
    queue_name: str = "jobs"  # n8n's default queue, as the worker's banner prints it ("Queue: jobs")
    workflows: dict[str, str] = field(default_factory=dict)  # template -> workflow id
    redis_persistence: str = "aof"  # what Redis runs with now (redis-restart switches it, then back)
    request_sink: Callable[[RequestRecord], None] | None = None  # run_drill: the run's requests.jsonl

    def client(self, timeout_s: float = 30.0) -> N8nClient:
        return self.session.client(timeout_s)

    def workflow_id(self, template: str) -> str:
        """Create and activate a packaged workflow once per instance; its id."""
        if template not in self.workflows:
            with self.client() as client:
                self.workflows[template], _ = deploy_workflow(client, read_workflow(template))
        return self.workflows[template]

    def post(
        self,
        template: str,
        json_body: Any = None,
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
        timeout_s: float = 30.0,
    ) -> tuple[int | None, str]:
        """Call a template's webhook; (HTTP status or None, body or error text)."""
        self.workflow_id(template)
        url = self.stack.main_url + webhook_path(read_workflow(template))
        try:
            response = httpx.post(url, json=json_body, content=content, headers=headers, timeout=timeout_s)
        except httpx.HTTPError as exc:
            return None, f"{type(exc).__name__}: {exc}"
        return response.status_code, response.text[:LOG_LINE_CHARS]

    def execution_items(self, template: str) -> dict[str, dict[str, Any]]:
        """Every stored execution of a template's workflow as the public API lists it, open ones included."""
        wid = self.workflow_id(template)
        found: dict[str, dict[str, Any]] = {}
        with self.client() as client:
            for item in client.list_executions(wid):
                found[str(item["id"])] = item
            for status in OPEN_STATUSES:
                for item in client.list_executions(wid, status=status):
                    found[str(item["id"])] = item
        return found

    def executions(self, template: str) -> dict[str, str]:
        """Every stored execution of a template's workflow: id -> status."""
        return {ex_id: str(item.get("status")) for ex_id, item in self.execution_items(template).items()}

    def mark(self, name: str) -> LogMark:
        return self.stack.log_mark(name)

    def redis(self, *args: str) -> Any:
        return self.stack.redis(*args)

    def bull_count(self, state: str) -> int:
        """Jobs in one of Bull's lists: wait, active (LLEN) or delayed, failed, completed (ZCARD)."""
        key = f"{self.bull_prefix}:{self.queue_name}:{state}"
        if state in ("wait", "active", "paused"):
            return int(self.redis("LLEN", key))
        return int(self.redis("ZCARD", key))

    def restore(self) -> list[str]:
        """Start whatever of the stack is not running (Postgres, Redis, main, workers); what was started."""
        started = []
        for name in self.stack.process_names:
            if not self.stack.is_running(name):
                self.stack.stop_process(name, timeout_s=5)  # reap it and record it as stopped
                self.stack.start_process(name)
                started.append(name)
        return started


def iso_seconds(stamp: str | None) -> float | None:
    """Unix seconds of n8n's ISO timestamps ("2026-11-30T15:22:14.464Z"); None stays None."""
    if not stamp:
        return None
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def counts(statuses: dict[str, str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for status in statuses.values():
        out[status] = out.get(status, 0) + 1
    return dict(sorted(out.items()))


def execution_failure(execution_id: str, execution: dict[str, Any]) -> dict[str, Any]:
    """Why one execution did not succeed, from its record fetched with includeData: its status, the node that
    ran last, the workflow's error (message, description, the node it names) and each node run's error."""
    data = execution.get("data") if isinstance(execution.get("data"), dict) else {}
    result = data.get("resultData") if isinstance(data.get("resultData"), dict) else {}
    error = result.get("error") if isinstance(result.get("error"), dict) else {}
    node_errors = {
        str(name): str((run.get("error") or {}).get("message", ""))[:300]
        for name, runs in (result.get("runData") or {}).items()
        if isinstance(runs, list)
        for run in runs
        if isinstance(run, dict) and isinstance(run.get("error"), dict)
    }
    return {
        "id": execution_id,
        "status": str(execution.get("status")),
        "started": execution.get("startedAt"),
        "stopped": execution.get("stoppedAt"),
        "last_node": result.get("lastNodeExecuted"),
        "error": str(error.get("message", ""))[:300],
        "description": str(error.get("description") or "")[:300],
        "error_node": (error.get("node") or {}).get("name") if isinstance(error.get("node"), dict) else None,
        "node_errors": node_errors,
    }
