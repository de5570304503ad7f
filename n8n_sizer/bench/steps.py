"""One load step of a bench run against its target: by the built-in driver (open or closed model), by k6 on a
load generator, or over a lab's generators; each with its counters and a watch on the target's SSH connection. A
part of bench/run.py's `_TargetRun`, which holds the job, the target, the store and the stop flags."""

from __future__ import annotations

import asyncio
import threading
import time

from n8n_sizer.bench.load import run_closed, run_open
from n8n_sizer.bench.plan import RateStep
from n8n_sizer.bench.shapes import arrival_times
from n8n_sizer.errors import InputError
from n8n_sizer.hosts.host import ConnectionLost, HostError
from n8n_sizer.lab import bench as lab_run
from n8n_sizer.runs.records import Sample
from n8n_sizer.runs.store import summarize_step
from n8n_sizer.stack.bringup import N8N_PORT

PING_EVERY_S = 2.0  # how often a step checks that the SSH connection to its target is still there


class StepRunner:
    def _step(self, step, url: str, elapsed: float) -> None:
        """One step, with its counters (bench.accounting) added to its record when this run can read them."""
        from n8n_sizer.bench.accounting import step_counters

        before = self.accounting.read() if self.accounting is not None else None
        self._load_step(step, url, elapsed)
        if before is not None:
            counted = step_counters(before, self.accounting.read())
            self.store.mark_step(self.t.name, step.name, "done", **counted.model_dump(mode="json", exclude_none=True))

    def _rest(self, seconds: float) -> None:
        """`--rest-seconds`: the counters over a window with no load, kept as the target's `rest` in run.json; each
        role's CPU there is its processes' idle CPU (docs/bench.md). Where the kernel's per-role counts cannot be
        read, the window is skipped and says why."""
        from n8n_sizer.bench.accounting import step_counters

        if self.accounting is None:
            self.save_info(rest={"skipped": "no per-role CPU accounting on this target (cgroup v1 cpuacct)"})
            return
        before = self.accounting.read()
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if self._should_stop():
                raise InputError(f"{self.t.name}: stopped during the rest window")
            time.sleep(min(1.0, left))
        counted = step_counters(before, self.accounting.read())
        self.save_info(rest=counted.model_dump(mode="json", exclude_none=True))

    def _load_step(self, step, url: str, elapsed: float) -> None:
        plan, name = self.job.plan, self.t.name
        seq_start = self.store.next_seq(name)
        self.store.mark_step(name, step.name, "running", seq_start=seq_start)
        if self.t.kind == "compose" and self.t.loadgen is not None:
            return self._k6_step(step, seq_start)
        if self.t.lab is not None:
            return lab_run.lab_step(self, step, url, seq_start)
        client = self._client(url)
        watcher = threading.Thread(target=self._watch, args=(step,), daemon=True)
        self._step_done = threading.Event()
        watcher.start()
        try:
            if isinstance(step, RateStep):
                times = None if step.shape is None else arrival_times(step.shape, step.duration_s)
                outcome = asyncio.run(
                    run_open(
                        client,
                        rate_per_s=step.rate_per_s,
                        duration_s=step.duration_s,
                        max_in_flight=plan.max_in_flight,
                        step=step.name,
                        target=name,
                        seq_start=seq_start,
                        sink=self.store.append_request,
                        should_stop=self._should_stop,
                        abort=self.job.stop.is_set,
                        times=times,
                        payloads=self.job.payloads,
                    )
                )
            else:
                outcome = asyncio.run(
                    run_closed(
                        client,
                        concurrency=step.users,
                        duration_s=step.duration_s,
                        step=step.name,
                        target=name,
                        seq_start=seq_start,
                        sink=self.store.append_request,
                        should_stop=self._should_stop,
                        abort=self.job.stop.is_set,
                    )
                )
        finally:
            self._step_done.set()
            watcher.join()
        seq_end = seq_start + outcome.scheduled
        if self.lost.is_set() or self.job.stop.is_set():
            self.store.mark_step(name, step.name, "interrupted", seq_end=seq_end)
            if self.lost.is_set():
                raise self._lost_error
            raise InputError(f"{name}: stopped by Ctrl-C during {step.name}")
        records = [r for r in self.store.read_requests() if r.target == name and seq_start <= r.seq < seq_end]
        kind, value = ("rate", step.rate_per_s) if isinstance(step, RateStep) else ("concurrency", float(step.users))
        self.store.append_samples(summarize_step(records, outcome, name, kind, value, step.duration_s))
        self.store.mark_step(
            name, step.name, "done", seq_end=seq_end, started_s=outcome.started_s, finished_s=outcome.finished_s
        )

    def _should_stop(self) -> bool:
        return self.lost.is_set() or self.job.stop.is_set()

    def _k6_step(self, step, seq_start: int) -> None:
        from n8n_sizer.bench.k6 import run_k6_step

        name, info = self.t.name, self.info()
        url = f"http://{self.t.load_address}:{N8N_PORT}/webhook/{info['webhook_path']}"
        records, outcome = run_k6_step(
            self.t.loadgen,
            step,
            url,
            self.job.workflow.body,
            self.job.plan,
            name,
            self.store.run_id,
            seq_start,
            payloads=self.job.payloads,
        )
        for record in records:
            self.store.append_request(record)
        kind, value = ("rate", step.rate_per_s) if isinstance(step, RateStep) else ("concurrency", float(step.users))
        self.store.append_samples(summarize_step(records, outcome, name, kind, value, step.duration_s))
        seq_end = max((r.seq for r in records), default=seq_start - 1) + 1
        self.store.mark_step(
            name, step.name, "done", seq_end=seq_end, started_s=outcome.started_s, finished_s=outcome.finished_s
        )

    def _watch(self, step) -> None:
        started = time.monotonic()
        while not self._step_done.wait(PING_EVERY_S):
            try:
                self.t.host.ping(timeout_s=10)
            except ConnectionLost as exc:
                self._lost_error = exc
                self.lost.set()
                return
            except HostError as exc:  # a slow answer (the host is busy) is kept as a sample, not fatal
                self.store.append_samples(
                    [
                        Sample(
                            metric="ssh_ping_error",
                            value=1.0,
                            unit="count",
                            time_s=time.time(),
                            labels={"target": self.t.name, "step": step.name, "error": str(exc)[-300:]},
                        )
                    ]
                )
            done = min(time.monotonic() - started, step.duration_s)
            finished = sum(
                s.duration_s for s in self.job.plan.steps if s.name in self.store.finished_steps(self.t.name)
            )
            self.say(step.name, finished + done)
