"""A bench run: every target in its own thread, each through the same stages.

Per target: bring up or wait for the stack (cloud-init marker + health on fleet hosts; the local stack's
`native` over SSH on a loopback test host; in-process for `--local`); record host facts; set n8n up
over its REST API (owner, login, API key, the measured workflow and a warm-up copy on its own webhook path);
warm up (not recorded); run each step not yet finished; wait for the drain window; count the executions
n8n stored for the measured workflow and write the ledger.

What a run learns is written as it goes (records, samples, run.json), so a failure keeps everything so far.
A dropped SSH connection stops that target's step (the load already sent completes and is recorded), keeps
the stack running, and `--resume` picks up at the first unfinished step. Secrets (owner password, API key)
go to `<run>/secrets/<target>.json`, mode 0600, never into run.json.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.bench.http_post import HttpPost
from n8n_sizer.bench.load import closed_count
from n8n_sizer.bench.payloads import Payloads, deployed_workflow, signature_headers
from n8n_sizer.bench.plan import FindMax, LoadPlan, RateStep
from n8n_sizer.bench.steps import StepRunner
from n8n_sizer.errors import InputError
from n8n_sizer.hosts.facts import host_facts
from n8n_sizer.hosts.host import ConnectionLost, Host, HostError
from n8n_sizer.lab import bench as lab_run
from n8n_sizer.n8n import link as n8n_link
from n8n_sizer.n8n.workflows import BenchWorkflow
from n8n_sizer.runs.ledger import build_ledger
from n8n_sizer.runs.records import Ledger
from n8n_sizer.runs.store import RunStore
from n8n_sizer.stack import open_stack
from n8n_sizer.stack.bringup import StackKind
from n8n_sizer.stack.handle import StackError, StackHandle

WARMUP_CONCURRENCY = 4

Progress = Callable[[str, str, float], None]  # (target, what it is doing, fraction of the plan done)


@dataclass
class Target:
    name: str
    setup: Setup
    kind: StackKind
    host: Host
    loadgen: Host | None = None  # where k6 runs (compose targets)
    load_address: str | None = None  # the target's address as the load generator sees it
    stack_options: dict = field(default_factory=dict)  # LocalStack options for local kinds
    lab: object | None = (
        None  # lab.bench.LabTarget: a lab's whole cluster, deployed or reused, loaded by its generators
    )


@dataclass
class BenchJob:
    store: RunStore
    plan: LoadPlan
    workflow: BenchWorkflow
    targets: list[Target]
    progress: Progress | None = None
    find_max: FindMax | None = None  # instead of the plan's steps: search the highest sustainable rate
    stop: threading.Event = field(default_factory=threading.Event)  # set on Ctrl-C: every target winds down
    payloads: Payloads | None = None  # per-request bodies, signatures and malformed classes (bench.payloads)
    hmac_secret: str | None = field(default=None, repr=False)  # written into signed-webhook when it is deployed


def run_bench(job: BenchJob) -> dict[str, Ledger]:
    """Run every target in parallel; raise the first target's error after all have stopped."""
    errors: dict[str, BaseException] = {}
    lock, remaining, all_done = threading.Lock(), [len(job.targets)], threading.Event()
    if not job.targets:
        all_done.set()

    def one(target: Target) -> None:
        try:
            _TargetRun(job, target).run()
        except BaseException as exc:  # re-raised below, after every thread stopped
            errors[target.name] = exc
        finally:
            with lock:
                remaining[0] -= 1
                if remaining[0] == 0:
                    all_done.set()

    threads = [threading.Thread(target=one, args=(t,), name=f"bench-{t.name}") for t in job.targets]
    for t in threads:
        t.start()
    # Wait on an Event, not Thread.join: a join interrupted by Ctrl-C can mark a live thread as stopped
    # (CPython 3.11), and the run would exit under its targets' feet.
    try:
        with _sigterm_as_interrupt():
            while not all_done.wait(0.5):
                pass
    except KeyboardInterrupt:
        job.stop.set()  # steps end, requests in flight get a short grace, stacks this run started stop
        while not all_done.wait(0.5):
            pass
        job.store.close()
        other = [f"{name}: {exc}" for name, exc in errors.items() if "stopped by Ctrl-C" not in str(exc)]
        raise InputError(
            "interrupted (Ctrl-C or SIGTERM); the stacks this run started were stopped"
            + (f"; also: {other[0]}" if other else "")
        ) from None
    for t in threads:
        t.join()
    job.store.close()
    if errors:
        name, exc = next(iter(errors.items()))
        if isinstance(exc, InputError):
            more = f" ({len(errors) - 1} more target(s) failed)" if len(errors) > 1 else ""
            raise type(exc)(f"{exc}{more}") from None
        raise exc
    job.store.update_manifest(finished_s=time.time())
    return dict(job.store.manifest.ledgers)


@contextmanager
def _sigterm_as_interrupt():
    """SIGTERM (a CI timeout, `kill`) winds the run down like Ctrl-C, so the stacks it started are stopped."""
    import signal

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class _TargetRun(StepRunner):
    def __init__(self, job: BenchJob, target: Target) -> None:
        self.job, self.t, self.store = job, target, job.store
        self.lost = threading.Event()
        self._lost_error: ConnectionLost | None = None
        self._step_done = threading.Event()
        self.handle: StackHandle | None = None  # the target's stack, once `start_stack` opened it
        self.accounting = None  # bench.accounting.Accounting when the kernel's per-role CPU can be read here

    def info(self) -> dict:
        return dict(self.store.manifest.hosts.get(self.t.name, {}))

    def save_info(self, **changes) -> None:
        hosts = dict(self.store.manifest.hosts)
        hosts[self.t.name] = {**hosts.get(self.t.name, {}), **changes}
        self.store.update_manifest(hosts=hosts)

    def say(self, what: str, done_s: float = 0.0) -> None:
        if self.job.progress is not None:
            self.job.progress(self.t.name, what, min(1.0, done_s / max(self.job.plan.duration_s, 1e-9)))

    def run(self) -> None:
        if self.info().get("done"):  # --resume: this target had finished (and stopped its stack)
            return
        with ExitStack() as stack:
            try:
                main_url = self.start_stack(stack)
                self.work(main_url)
            except ConnectionLost:
                stack.pop_all()  # keep the stack running for --resume
                raise
        self.save_info(done=True)
        self.t.host.close()

    def start_stack(self, stack: ExitStack) -> str:
        info, t = self.info(), self.t
        if "facts" not in info:
            self.say("host facts")
            self.save_info(
                kind=t.kind, setup=t.setup.model_dump(mode="json"), facts=host_facts(t.host).model_dump(mode="json")
            )
        if t.lab is not None:
            return lab_run.lab_up(self)
        # --resume: a stack that kept running while the connection was down is attached to, not started again
        state_dir = info.get("stack_dir") or f"/tmp/n8n-sizer-{self.store.run_id}-{t.name}"
        attach = t.kind == "native-ssh" and "stack_dir" in info
        self.handle = open_stack(t.kind, t.name, t.host, t.setup, state_dir=state_dir, stack_options=t.stack_options)
        if t.kind == "native-ssh":
            self.save_info(stack_dir=state_dir)  # before `up`: an interrupted start is found and stopped on resume
        self.say(
            {"local": "starting n8n", "compose": "waiting for cloud-init"}.get(
                t.kind, "attaching to n8n" if attach else "starting n8n over SSH"
            )
        )
        try:
            main_url = self.handle.up(stack, attach=attach)
        except StackError as exc:  # the local stack quotes its service's log: one line, not a traceback
            raise HostError(str(exc)) from None
        self.save_info(**self.handle.bookkeeping())
        if t.kind == "local" and "speed_probe_ms" not in self.info():
            self._probe_speed()
        return main_url

    def _probe_speed(self) -> None:
        """This machine's speed as the lab's sittings record it (lab/speed.py): the fit relates the run's host to
        the embedded hosts by it (advisor/fit.py, probe rows). A probe that fails leaves the figure out."""
        from n8n_sizer.lab.speed import probe
        from n8n_sizer.native.install import find_installed

        install = find_installed()
        if install is None:
            return
        self.say("speed probe")
        try:
            self.save_info(speed_probe_ms=round(probe(install.node_bin)["ms"], 2))
        except InputError:
            return

    # --- n8n, load, ledger ------------------------------------------------------------------------------

    def work(self, main_url: str) -> None:
        info = self.info()
        secrets_path = self.store.folder / "secrets" / f"{self.t.name}.json"
        if "workflow_id" not in info:
            self.say("setting n8n up")
            link = n8n_link.setup_target(main_url, self._deployed_workflow(), secrets_path, self.t.name)
            self.save_info(
                n8n_version=link.n8n_version,
                workflow_id=link.workflow_id,
                warmup_workflow_id=link.warmup_workflow_id,
                webhook_path=link.webhook_path,
                warmup_webhook_path=link.warmup_webhook_path,
            )
            info = self.info()
        wf_url = f"{main_url}/webhook/{info['webhook_path']}"
        warm_url = f"{main_url}/webhook/{info['warmup_webhook_path']}"
        plan = self.job.plan
        with ExitStack() as telemetry:  # sampled from warm-up to the ledger, stopped on any exit
            self._telemetry(telemetry, main_url, info, secrets_path)
            if plan.warmup_requests:
                self.say("warm-up")
                self._warmup(warm_url)
            if plan.rest_s and "rest" not in self.info():
                self.say("rest (no load)")
                self._rest(plan.rest_s)
            if self.job.find_max is not None:
                self._find_max(self.job.find_max, wf_url)
            finished = set(self.store.finished_steps(self.t.name))
            elapsed = sum(s.duration_s for s in plan.steps if s.name in finished)
            for step in plan.steps if self.job.find_max is None else ():
                if step.name in finished:
                    continue
                self.say(step.name, elapsed)
                self._step(step, wf_url, elapsed)
                elapsed += step.duration_s
            self.say("drain", plan.duration_s)
            self._ledger(main_url, info["workflow_id"], secrets_path)
        self.say("done", plan.duration_s)

    def _deployed_workflow(self) -> BenchWorkflow:
        return deployed_workflow(self.job.workflow, self.job.hmac_secret, self.job.payloads)

    def _client(self, url: str) -> HttpPost:
        """The workflow's fixed body, signed when there is a secret (warm-up, the valid requests)."""
        body = self.job.workflow.body
        return HttpPost(url, body, self.job.plan.timeout_s, headers=signature_headers(self.job.hmac_secret, body))

    def _find_max(self, spec: FindMax, url: str) -> None:
        """The bisection (`search.find_max_rate`), each measurement a full recorded rate step."""
        from n8n_sizer.bench.find_max import find_max_rate, step_outcome

        name, done = self.t.name, []

        def measure(rate: float):
            rounded = round(rate, 3)
            # "rate-<r>-max<n>": the reports read the offered rate from the name (runstats.step_rate)
            step = RateStep(rate_per_s=rounded, duration_s=spec.step_s, label=f"rate-{rounded:g}-max{len(done) + 1}")
            self.say(step.name, 0.0)
            self._step(step, url, 0.0)
            done.append(step.name)
            records = [r for r in self.store.read_requests() if r.target == name and r.step == step.name]
            return step_outcome(step.rate_per_s, records)

        result = find_max_rate(
            measure,
            spec.low_per_s,
            spec.high_per_s,
            p95_ms=spec.p95_ms,
            error_budget=spec.error_budget,
            tolerance=spec.tolerance_per_s,
        )
        self.store.put_extra("find_max", name, result.model_dump(mode="json"))

    def _telemetry(self, telemetry: ExitStack, main_url: str, info: dict, secrets_path) -> None:
        """The telemetry sampler every second: host, processes or containers, Redis and Bull, Postgres, n8n's
        /metrics (compose stacks), and the editor's own call timed every 5 s."""
        from n8n_sizer.telemetry.sampler import Sampler, http_editor_check

        if self.t.lab is not None:
            return lab_run.lab_telemetry(self, telemetry, main_url, info["workflow_id"], secrets_path)
        what = self.handle.sampler_args(n8n_metrics=self.t.setup.mode == "queue")
        if what is None:
            from n8n_sizer.telemetry.probes.host import host_probes

            what = {"probes": host_probes()}  # a host whose stack this run cannot see: the host's own figures
        editor = n8n_link.editor_client(main_url, secrets_path)
        telemetry.callback(editor.close)
        sampler = Sampler(
            self.t.host,
            self.store.append_samples,
            labels={"target": self.t.name},
            editor_check=http_editor_check(editor, info["workflow_id"]),
            **what,
        )
        sampler.start()
        telemetry.callback(sampler.stop)
        if self.t.kind == "local":
            from n8n_sizer.bench.accounting import local_accounting

            self.use_accounting(telemetry, local_accounting(self.handle.stack))

    def use_accounting(self, telemetry: ExitStack, accounting) -> None:
        """Count every step's per-role CPU and data-store operations from now on (None: not on this host)."""
        if accounting is not None:
            self.accounting = accounting
            telemetry.callback(accounting.close)
            self.save_info(cpu_accounting="cpuacct")

    def _warmup(self, url: str) -> None:
        """Warm-up requests are not results, but what happened to them is kept in run.json (`warmups`)."""
        plan = self.job.plan
        client = self._client(url)
        per_user = -(-plan.warmup_requests // WARMUP_CONCURRENCY)
        summary = asyncio.run(closed_count(client, WARMUP_CONCURRENCY, per_user))
        self.save_info(warmups=[*self.info().get("warmups", []), summary])
        if summary["ok"] == 0:
            raise HostError(
                f"{self.t.name}: no warm-up request to {url} was answered 2xx (first failure: "
                f"{summary['first_error']}); check that the workflow runs in n8n (its log)"
            )

    def _ledger(self, main_url: str, workflow_id: str, secrets_path) -> None:
        name = self.t.name
        records = [r for r in self.store.read_requests() if r.target == name]
        accepted = sum(1 for r in records if r.status is not None and 200 <= r.status < 300)
        deadline = time.monotonic() + self.job.plan.drain_s
        while True:
            counts = n8n_link.count_executions(main_url, workflow_id, secrets_path, name)
            if counts.finished >= accepted or time.monotonic() >= deadline or self.job.stop.is_set():
                break
            time.sleep(min(2.0, max(0.1, deadline - time.monotonic())))
        self.save_info(executions_by_status=counts.by_status)
        ledger = build_ledger(records, counts.stored, counts.succeeded, counts.success_ids)
        ledgers = dict(self.store.manifest.ledgers)
        ledgers[name] = ledger
        self.store.update_manifest(ledgers=ledgers)
