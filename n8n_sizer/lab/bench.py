"""`bench --inventory lab.json`: a lab's whole cluster as ONE target ("cluster"), loaded from its generators.

- Bring-up: the topology is deployed with `lab.deploy.deploy_lab` unless the lab's record
  (`<lab folder>/hosts/cluster.json`) says it already is; then every recorded process must still be alive, so a second
  bench reuses the cluster instead of deploying it twice.
- Load: a step's rate is split evenly over the generator hosts, each running its share (lab/generators.py).
- Telemetry: one sampler per cluster host over SSH, its processes tagged with their role (runs.stats.role_of).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from n8n_sizer.errors import InputError
from n8n_sizer.hosts.host import SshHost
from n8n_sizer.lab.cluster_record import recorded_pids, redis_password_file
from n8n_sizer.lab.generators import LAB_TARGET, LabTarget, run_lab_step
from n8n_sizer.runs.records import Sample
from n8n_sizer.runs.stats import role_of
from n8n_sizer.safety.files import read_user_text
from n8n_sizer.safety.write import write_atomic

LAB_SAMPLE_EVERY_S = 2.0  # one SSH round trip per host per tick, on a machine the cluster itself keeps busy
# With a CPU budget per host (lab.cpu) every sampler tick is charged to that host's budget: every 2 s it took
# 0.05-0.08 of a 0.21-core host (cpuacct, 2026-12-01). The kernel's counters give the per-role CPU of each step, so
# the per-process samples can be sparser.
LAB_BUDGET_SAMPLE_EVERY_S = 10.0


def is_lab_inventory(inventory) -> bool:
    """A lab's inventory (`lab up`): a `lab` section and hosts with roles rather than single-host targets."""
    return inventory.lab is not None and bool(inventory.cluster_hosts())


def check_lab_inventory(inventory, source: str) -> None:
    if not inventory.loadgens():
        raise InputError(f"{source}: the lab has no load generator; `lab up --generators 2` makes two")


def check_lab_request(plan, workflow: str, payloads: bool) -> None:
    """What a lab bench cannot run yet, refused before anything is deployed or loaded."""
    if any(getattr(step, "kind", None) != "rate" or step.shape is not None for step in plan.steps):
        raise InputError(
            "a lab bench runs constant-rate steps: drop --concurrency-sweep and --shape for "
            "--inventory lab.json (e.g. --rates 4,8)"
        )
    if payloads or workflow == "signed-webhook":
        raise InputError(
            "--payload-bytes, --malformed, --hmac-secret-file and signed-webhook are not split over a "
            "lab's generators yet; bench the lab with another --workflow and its fixed body"
        )


def lab_target(inventory, inventory_path: Path) -> LabTarget:
    from n8n_sizer.lab.state import read_lab_state

    state = read_lab_state(inventory_path)
    key = Path(state.client_key) if state.client_key else None

    def ssh(h) -> SshHost:
        return SshHost(h.name, h.private_ip or h.public_ip, h.ssh_user, key_file=key)

    return LabTarget(
        inventory_path=inventory_path,
        hosts={h.name: ssh(h) for h in inventory.cluster_hosts()},
        generators={h.name: ssh(h) for h in inventory.loadgens()},
    )


def bring_up(lab: LabTarget):
    """The lab's cluster: the recorded one when it runs (reused), else deployed now; taken over through the
    cluster's `StackHandle` (`lab.cluster_handle`), as the drills drive it. Returns its LabCluster."""
    from contextlib import ExitStack

    from n8n_sizer.lab.cluster_handle import LabClusterHandle
    from n8n_sizer.lab.deploy import deploy_lab, deployed_cluster

    lab.reused = deployed_cluster(lab.inventory_path) is not None
    if not lab.reused:
        deploy_lab(lab.inventory_path, python=lab.python)
    handle = LabClusterHandle(lab.inventory_path)
    with ExitStack() as checked:  # the handle's SSH connections close once every recorded process is seen
        handle.up(checked, attach=True)
    lab.cluster = handle.cluster
    lab.python = handle.python  # the generators' load agents run the deploy's code too
    return handle.cluster


def role_labelled(sink: Callable[[Sequence[Sample]], None]) -> Callable[[Sequence[Sample]], None]:
    """A sink that adds `role` (runs.stats.role_of) to every per-process sample before writing it."""

    def write(samples: Sequence[Sample]) -> None:
        out = []
        for s in samples:
            name = s.labels.get("process")
            if name is not None and "role" not in s.labels:
                s = s.model_copy(update={"labels": {**s.labels, "role": role_of(name) or "other"}})
            out.append(s)
        sink(out)

    return write


def lab_samplers(
    lab: LabTarget,
    sink: Callable[[Sequence[Sample]], None],
    labels: dict[str, str],
    n8n_metrics: bool = True,
    editor_check: Callable[[], None] | None = None,
    interval_s: float = LAB_SAMPLE_EVERY_S,
) -> list:
    """A Sampler per cluster host (not started): its processes by role, Redis and Bull on the data host,
    main's /metrics queue gauges on the ingest host (main listens on that host's loopback or address), and
    `editor_check` timed by the ingest host's sampler."""
    from n8n_sizer.telemetry.probes.host import host_probes
    from n8n_sizer.telemetry.probes.services import n8n_metrics_probe, redis_probes
    from n8n_sizer.telemetry.sampler import Sampler

    cluster = lab.cluster
    pids = recorded_pids(cluster)
    samplers = []
    for name, host in lab.hosts.items():
        probes = host_probes()
        mine = dict(pids.get(name, {}))
        trees = {k: mine.pop(k) for k in ("postgres", "redis") if k in mine}  # each with its children
        if name == cluster.data_host and cluster.data is not None:
            probes += redis_probes(cluster.data.redis_port, password_file=redis_password_file(cluster))
        main = next((p for p in cluster.processes.get(name, []) if p.role == "main"), None)
        if main is not None and n8n_metrics:
            probes.append(n8n_metrics_probe(main.ready_url.split("/healthz")[0]))
        samplers.append(
            Sampler(
                host,
                role_labelled(sink),
                probes,
                processes=mine,
                trees=trees,
                labels=labels,
                interval_s=interval_s,
                timeout_s=10.0,
                editor_check=editor_check if main is not None else None,
            )
        )
    return samplers


# --- the bench's stages for a lab target (bench.run._TargetRun calls these with itself) -----------------------


def lab_up(run) -> str:
    """A lab's cluster, deployed now or reused (its record in the lab's folder); the load balancer's URL."""
    lab = run.t.lab
    run.say("deploying or reusing the lab's cluster")
    cluster = bring_up(lab)
    _owner_login(cluster, run.store.folder / "secrets" / f"{run.t.name}.json")
    webhooks = sum(p.role == "webhook" for procs in cluster.processes.values() for p in procs)
    run.save_info(
        lab_url=cluster.url,
        lab_reused=lab.reused,
        lab_hosts=sorted(lab.hosts),
        generators=sorted(lab.generators),
        webhook_processors=webhooks,
    )
    return cluster.url


def _owner_login(cluster, run_secrets: Path) -> None:
    """n8n has one owner per cluster: the first bench sets it up and keeps its login next to the cluster's
    secrets (0600), and every bench on that cluster starts from a copy in its own secrets folder."""
    from pydantic import SecretStr

    from n8n_sizer.lab.deploy import OWNER_LOGIN, lab_owner
    from n8n_sizer.n8n.client import OwnerLogin
    from n8n_sizer.n8n.link import saved_or_new_session

    owner = Path(cluster.secrets_file).with_name(OWNER_LOGIN)  # the lab's hosts/ folder, where the drills look too
    made = lab_owner(owner.parent)  # the owner main created from its environment at start
    saved_or_new_session(
        cluster.url, owner, LAB_TARGET, None if made is None else OwnerLogin(email=made[0], password=SecretStr(made[1]))
    )
    if not run_secrets.exists():
        run_secrets.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_atomic(
            run_secrets,
            read_user_text(
                owner,
                "the lab's n8n login",
                private=True,
                max_bytes=1 << 16,
                fix="delete it; the next run sets n8n up again",
            ),
            private=True,
        )


def lab_telemetry(run, telemetry, main_url: str, workflow_id: str, secrets_path: Path) -> None:
    """One sampler per lab host over SSH (processes tagged with their role), and the editor's call timed from
    this machine through the load balancer, as a user's browser makes it."""
    from n8n_sizer.n8n import link as n8n_link
    from n8n_sizer.telemetry.sampler import http_editor_check

    editor = n8n_link.editor_client(main_url, secrets_path)
    telemetry.callback(editor.close)
    from n8n_sizer.lab.state import read_lab_state

    budget = read_lab_state(run.t.lab.inventory_path).cpu
    for sampler in lab_samplers(
        run.t.lab,
        run.store.append_samples,
        {"target": run.t.name},
        editor_check=http_editor_check(editor, workflow_id),
        interval_s=LAB_SAMPLE_EVERY_S if budget is None else LAB_BUDGET_SAMPLE_EVERY_S,
    ):
        sampler.start()
        telemetry.callback(sampler.stop)
    run.use_accounting(telemetry, _lab_accounting(run.t.lab))


def _lab_accounting(lab: LabTarget):
    """Per-role cpuacct groups under the lab's own top group (lab.cpu), Redis and Postgres counters."""
    from n8n_sizer.bench.accounting import lab_accounting
    from n8n_sizer.lab.state import read_lab_state

    cpu = read_lab_state(lab.inventory_path).cpu
    cluster = lab.cluster
    secret = redis_password_file(cluster) if cluster.data is not None else None
    return lab_accounting(recorded_pids(cluster), cluster.data, secret, top=cpu.group if cpu else None)


def lab_step(run, step, url: str, seq_start: int) -> None:
    """The step's rate split over the lab's generators, their records merged into the run's."""
    from n8n_sizer.bench.plan import RateStep
    from n8n_sizer.runs.store import summarize_step

    if not isinstance(step, RateStep) or step.shape is not None:
        raise InputError(
            f"{step.name}: a lab bench runs constant-rate steps (--rates); drop --concurrency-sweep "
            "and --shape for --inventory lab.json"
        )
    if run.job.payloads is not None:
        raise InputError(
            "--payload-bytes, --malformed and signed requests are not split over a lab's generators "
            "yet; bench the lab with the workflow's fixed body"
        )
    store, plan, name = run.store, run.job.plan, run.t.name
    scratch = store.folder / "generators"
    scratch.mkdir(exist_ok=True)
    records, outcome = run_lab_step(
        run.t.lab,
        url=url,
        body=run.job.workflow.body,
        rate_per_s=step.rate_per_s,
        duration_s=step.duration_s,
        step=step.name,
        seq_start=seq_start,
        timeout_s=plan.timeout_s,
        max_in_flight=plan.max_in_flight,
        run_id=store.run_id,
        scratch=scratch,
    )
    for record in records:
        store.append_request(record)
    store.append_samples(summarize_step(records, outcome, name, "rate", step.rate_per_s, step.duration_s))
    seq_end = max((r.seq for r in records), default=seq_start - 1) + 1
    store.mark_step(
        name, step.name, "done", seq_end=seq_end, started_s=outcome.started_s, finished_s=outcome.finished_s
    )
