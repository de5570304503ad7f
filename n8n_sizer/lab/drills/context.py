"""Running a cluster drill on a deployed lab: the n8n session, a fresh workflow per drill, a bounded load from
this machine to the lab's load balancer, the ledger over the whole cluster, and the run record.

    with lab_drill_context(Path("lab.json")) as ctx:
        store = run_lab_drill("kill-webhook", ctx, Path("results"))    # lab_drills.run_lab_drill

The load is the built-in open-model driver (`bench.load.run_open`) from the root namespace, which reaches the
lab's addresses over its bridge: a fixed rate for a fixed time, each request recorded with its execution id,
so the ledger matches every accepted request to a stored execution. One run folder per drill
(`run.json` kind "drill", `requests.jsonl`), the same record `drill --local` writes.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from n8n_sizer.drills.common import OPEN_STATUSES, DrillOutcome, counts
from n8n_sizer.lab.cluster_handle import LabClusterHandle
from n8n_sizer.n8n.client import N8nSession
from n8n_sizer.runs.records import Ledger, RequestRecord

MAX_IN_FLIGHT = 100
REQUEST_TIMEOUT_S = 60.0
DRAIN_TIMEOUT_S = 90.0
FAILURES_KEPT = 5  # failed executions whose error a drill reads and records
AFTER_S = 8.0  # the load after a drill put things back: does the cluster answer everything again?


@dataclass
class LabDrillContext:
    lab: LabClusterHandle
    session: N8nSession
    request_sink: Callable[[RequestRecord], None] | None = None
    workflows: list[str] = field(default_factory=list)

    def new_workflow(self, tag: str) -> tuple[str, str]:
        """A fresh copy of the light workflow (it answers with its execution id) on its own path, so one
        drill's ledger counts only its own executions; (workflow id, webhook URL through the balancer)."""
        from n8n_sizer.n8n.workflows import deploy_workflow, read_workflow, with_webhook_path

        flow = with_webhook_path(read_workflow("light"), f"drill-{tag}-{secrets.token_hex(3)}", f"drill {tag}")
        with self.session.client() as client:
            wid, path = deploy_workflow(client, flow)
        self.workflows.append(wid)
        return wid, self.lab.url + path

    def load(self, url: str, rate_per_s: float, duration_s: float, step: str, seq_start: int = 0) -> BackgroundLoad:
        return BackgroundLoad.start(url, rate_per_s, duration_s, step, self.lab.name, self.request_sink, seq_start)

    def after_load(self, url: str, rate_per_s: float, before: list[RequestRecord]) -> list[RequestRecord]:
        """AFTER_S more at the same rate once the drill is over (step "after"), numbered on from `before`."""
        start = max((r.seq for r in before), default=-1) + 1
        return self.load(url, rate_per_s, AFTER_S, "after", seq_start=start).wait()

    def executions(self, workflow_id: str) -> dict[str, str]:
        """Every stored execution of the workflow, open ones included: id -> status."""
        found: dict[str, str] = {}
        with self.session.client() as client:
            for item in client.list_executions(workflow_id):
                found[str(item["id"])] = str(item.get("status"))
            for status in OPEN_STATUSES:
                for item in client.list_executions(workflow_id, status=status):
                    found[str(item["id"])] = str(item.get("status"))
        return found

    def settle(self, workflow_id: str, timeout_s: float = DRAIN_TIMEOUT_S) -> dict[str, str]:
        """The executions once none is open any more (or `timeout_s` passed: then as they are)."""
        deadline = time.monotonic() + timeout_s
        while True:
            found = self.executions(workflow_id)
            if not any(s in OPEN_STATUSES for s in found.values()) or time.monotonic() > deadline:
                return found
            time.sleep(1.0)

    def failures(self, found: dict[str, str], limit: int = FAILURES_KEPT) -> list[dict[str, Any]]:
        """The first `limit` executions of `found` that did not succeed, each with what n8n stored about why
        (`execution_failure`): read over the public API with their run data."""
        from n8n_sizer.drills.common import execution_failure

        bad = sorted((ex for ex, status in found.items() if status != "success"), key=int)[:limit]
        with self.session.client() as client:
            return [execution_failure(ex, client.get_execution(ex, include_data=True)) for ex in bad]

    def ledger(self, records: list[RequestRecord], workflow_id: str) -> tuple[Ledger, dict[str, str]]:
        from n8n_sizer.runs.ledger import build_ledger

        found = self.settle(workflow_id)
        success = {ex for ex, status in found.items() if status == "success"}
        return build_ledger(records, len(found), len(success), success), found


@dataclass
class BackgroundLoad:
    """The built-in open-model driver in a thread: `rate_per_s` for `duration_s`, every request recorded."""

    thread: threading.Thread
    records: list[RequestRecord]
    started_s: float

    @classmethod
    def start(
        cls,
        url: str,
        rate_per_s: float,
        duration_s: float,
        step: str,
        target: str,
        sink: Callable[[RequestRecord], None] | None,
        seq_start: int = 0,
    ) -> BackgroundLoad:
        from n8n_sizer.bench.http_post import HttpPost
        from n8n_sizer.bench.load import run_open

        records: list[RequestRecord] = []

        def collect(record: RequestRecord) -> None:
            records.append(record)
            if sink is not None:
                sink(record)

        async def offer() -> None:
            client = HttpPost(url, json.dumps({"number": 21}).encode(), timeout_s=REQUEST_TIMEOUT_S)
            try:
                await run_open(
                    client,
                    rate_per_s=rate_per_s,
                    duration_s=duration_s,
                    max_in_flight=MAX_IN_FLIGHT,
                    step=step,
                    target=target,
                    seq_start=seq_start,
                    sink=collect,
                )
            finally:
                client.close()

        thread = threading.Thread(target=lambda: asyncio.run(offer()), name="lab-drill-load", daemon=True)
        started = time.time()
        thread.start()
        return cls(thread, records, started)

    def wait(self) -> list[RequestRecord]:
        """Until every request was sent and answered (bounded: duration plus the client timeout)."""
        self.thread.join()
        return sorted(self.records, key=lambda r: r.seq)


@contextmanager
def lab_drill_context(inventory: Path) -> Iterator[LabDrillContext]:
    """The deployed lab of `inventory` with n8n set up (the saved owner login in the lab's folder, or n8n set up
    now and its login saved there, 0600)."""
    from pydantic import SecretStr

    from n8n_sizer.lab.deploy import lab_owner, owner_login
    from n8n_sizer.n8n.client import OwnerLogin
    from n8n_sizer.n8n.link import saved_or_new_session

    with LabClusterHandle.open(inventory) as lab:
        login = owner_login(lab.folder)
        made = lab_owner(login.parent)  # the owner main created from its environment at start
        session = saved_or_new_session(
            lab.url, login, lab.name, None if made is None else OwnerLogin(email=made[0], password=SecretStr(made[1]))
        )
        yield LabDrillContext(lab=lab, session=session)


def record_lab_drill(name: str, drill: Callable[..., DrillOutcome], ctx: LabDrillContext, out_dir: Path, **params: Any):
    """Run one cluster drill and record it (run.json kind "drill", requests.jsonl, the cluster's ledger); a
    drill that could not finish is recorded as "incomplete" and its error raised."""
    from n8n_sizer.drills import outcome_extra
    from n8n_sizer.runs.records import RunManifest
    from n8n_sizer.runs.store import RunStore, new_run_id
    from n8n_sizer.versions import N8N_VERSION

    hosts = {
        h: {"address": ctx.lab.address(h), "processes": [p.name for p in ps]}
        for h, ps in ctx.lab.cluster.processes.items()
    }
    manifest = RunManifest(
        run_id=new_run_id(),
        kind="drill",
        created_s=time.time(),
        spec={"drill": name, "params": params, "target": ctx.lab.name, "url": ctx.lab.url},
        setup={"topology": ctx.lab.state.topology},
        versions={"n8n": N8N_VERSION},
        hosts=hosts,
        extra={"drill": name, "verdict": "running"},
    )
    store = RunStore.create(out_dir, manifest)
    ctx.request_sink = store.append_request
    try:
        ctx.lab.restore()  # a drill cut short before may have left a process down
        outcome: DrillOutcome = drill(ctx, **params)
    except BaseException as exc:
        store.update_manifest(
            finished_s=time.time(),
            extra={
                "drill": name,
                "verdict": "incomplete",
                "error": f"{type(exc).__name__}: {exc}"[:1000],
                "checks": [
                    {
                        "observation": f"drill did not finish: {type(exc).__name__}: {str(exc)[:300]}",
                        "expected": "n/a",
                        "verdict": "incomplete",
                        "matches": False,
                    }
                ],
            },
        )
        store.close()
        raise
    finally:
        ctx.request_sink = None
    ledger = Ledger.model_validate(outcome.observed["ledger"])
    store.update_manifest(
        finished_s=time.time(),
        ledgers={ctx.lab.name: ledger},
        extra={**outcome_extra(outcome), "expected_heading": "what n8n promises"},
    )
    store.close()
    return store


def statuses(found: dict[str, str]) -> dict[str, int]:
    return counts(found)
