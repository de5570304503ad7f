"""`n8n-sizer bench` as a library call: parse the request into targets, a plan and a run folder, run it,
and resume it. The CLI only parses flags, calls `start_bench` / `resume_bench` and formats the summary.

Everything a resume needs is in run.json's `spec` (the inventory, the plan, the workflow and its body,
the SSH key path, never a key or a password), so `--resume RUN` takes no other flag.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Literal

from pydantic import Field

from n8n_sizer import versions
from n8n_sizer.advisor.setup import Setup
from n8n_sizer.bench.plan import FindMax, LoadPlan
from n8n_sizer.bench.run import BenchJob, Progress, Target, run_bench
from n8n_sizer.errors import InputError, RemoteError
from n8n_sizer.hosts.host import HostError, LocalHost, SshHost
from n8n_sizer.n8n.workflows import BenchWorkflow, load_bench_workflow
from n8n_sizer.runs.records import Ledger, RunManifest
from n8n_sizer.runs.store import RunStore, new_run_id
from n8n_sizer.safety.frozen import Frozen
from n8n_sizer.stack.bringup import stack_kind_for


class BenchRequest(Frozen):
    """What the user asked for, as stored in run.json's `spec`."""

    source: Literal["local", "inventory", "stack"]
    stack: str | None = Field(None, max_length=200)
    inventory: dict | None = None  # the inventory JSON (addresses and setups; no secrets)
    inventory_path: str | None = Field(None, max_length=4096)  # --inventory FILE, resolved: a lab's deploys from it
    local_setup: Setup | None = None
    pin_cpus: int | None = Field(None, ge=1, le=1024)
    plan: LoadPlan
    workflow: str = Field(max_length=4096)
    ssh_key: str | None = Field(None, max_length=4096)
    ssh_port: int = Field(22, ge=1, le=65_535)
    find_max: FindMax | None = None  # --find-max: search instead of the plan's steps
    soak: bool = False  # --soak: the plan is one long step; the summary adds seed 004's 30-minute buckets
    # Payloads (bench.payloads): None/0 = the workflow's fixed body, as before. The secret file's path is kept
    # (for --resume), never the secret.
    payload_bytes: int | None = Field(None, ge=0, le=1 << 20)  # cli.args.PAYLOAD_BYTES
    malformed: float = Field(0.0, ge=0, le=1)
    hmac_secret_file: str | None = Field(None, max_length=4096)
    respond: Literal["last-node", "immediately", "received"] | None = None  # signed-webhook's response mode
    webhook_processors: int = Field(0, ge=0, le=9)  # --local queue mode: `n8n webhook` processes behind Caddy


def check_bench_spec(manifest: RunManifest, path: Path) -> None:
    """A bench run's `spec`, read back, is the `BenchRequest` bench wrote: checked whole and strictly, with the
    CLI's bounds, so no field of run.json is read back unchecked (runs.run_file types the fields every reader
    uses; the rest of a bench spec is the bench's to type). `report` and `advise --results` call it."""
    if manifest.kind not in ("bench", "find-max", "soak") or "plan" not in manifest.spec:
        return
    from pydantic import ValidationError

    from n8n_sizer.runs.run_file import FIX, validation_line

    spec = {k: v for k, v in manifest.spec.items() if k not in ("workflow_resolved", "body")}
    try:
        BenchRequest.model_validate_json(json.dumps(spec), strict=True)
    except ValidationError as exc:
        raise validation_line(exc, f"{path}: spec", FIX) from None


class BenchSummary(Frozen):
    run_id: str
    folder: str
    ledgers: dict[str, Ledger]


def read_stack_inventory(stack: str) -> dict:
    """`pulumi stack output --json inventory --stack NAME`, parsed; one-line errors when it cannot be read."""
    if shutil.which("pulumi") is None:
        raise InputError(
            f"--stack {stack}: the pulumi CLI is not installed here; install it "
            f"(https://www.pulumi.com/docs/install/) or pass --inventory FILE"
        )
    try:
        res = subprocess.run(
            ["pulumi", "stack", "output", "--json", "inventory", "--stack", stack],
            capture_output=True,
            text=True,
            timeout=120,
        )
    except subprocess.TimeoutExpired:
        raise InputError(
            f"--stack {stack}: `pulumi stack output` did not answer within 120 s; try again or pass --inventory FILE"
        ) from None
    if res.returncode != 0:
        tail = " ".join(res.stderr.split())[-300:]
        raise InputError(
            f"--stack {stack}: `pulumi stack output --json inventory` failed ({tail}); "
            f"check the stack name with `pulumi stack ls` and that `pulumi up` finished"
        )
    return _inventory_dict(res.stdout, f"--stack {stack}")


def read_inventory_file(path: Path) -> dict:
    from n8n_sizer.safety.files import read_user_text

    text = read_user_text(
        path, "--inventory", max_bytes=1 << 20, fix=f"save one with `pulumi stack output --json inventory > {path}`"
    )
    return _inventory_dict(text, f"--inventory {path}")


def _inventory_dict(text: str, source: str) -> dict:
    from n8n_sizer.fleet.inventory import load_inventory

    try:
        inventory = load_inventory(text)
    except InputError as exc:
        raise InputError(f"{source}: {exc}") from None
    if inventory.cluster_hosts():  # `lab up` or a cluster stack: hosts with roles, not targets with a setup
        from n8n_sizer.lab.bench import check_lab_inventory, is_lab_inventory

        if is_lab_inventory(inventory):
            check_lab_inventory(inventory, source)
            from n8n_sizer.safety.jsondoc import load_json

            return load_json(text, source, "pass the inventory `lab up` wrote")
        raise InputError(
            f"{source}: this is a cluster stack's inventory (hosts with roles); bench drives a "
            "cluster on a lab (`lab up --out lab.json`, then `bench --inventory lab.json`) and "
            "single-host targets, see docs/lab.md"
        )
    if not inventory.targets():
        raise InputError(f"{source}: the inventory lists no target host; add targets to the stack and `pulumi up`")
    return json.loads(text)


def build_targets(req: BenchRequest) -> list[Target]:
    if req.source == "local":
        setup = req.local_setup or Setup(mode="regular")
        options = {"pin_cpus": req.pin_cpus} if req.pin_cpus else {}
        if req.webhook_processors:
            options["webhook_processors"] = req.webhook_processors
        return [Target(name="local", setup=setup, kind="local", host=LocalHost(), stack_options=options)]
    from n8n_sizer.fleet.inventory import Inventory

    inventory = Inventory.model_validate(req.inventory)
    if inventory.lab is not None and inventory.cluster_hosts():
        return [_lab_target(inventory, req)]
    key = Path(req.ssh_key) if req.ssh_key else None
    lg = inventory.loadgen()
    loadgen = SshHost(lg.name, lg.public_ip, lg.ssh_user, key_file=key, port=req.ssh_port)
    targets = []
    for host in inventory.targets():
        targets.append(
            Target(
                name=host.name,
                setup=host.setup,
                kind=stack_kind_for(host.public_ip),
                host=SshHost(host.name, host.public_ip, host.ssh_user, key_file=key, port=req.ssh_port),
                loadgen=loadgen,
                load_address=host.private_ip or host.public_ip,
            )
        )
    return targets


def _lab_target(inventory, req: BenchRequest) -> Target:
    """A lab's whole cluster as one target named "cluster", reached over SSH with the lab's own client key."""
    from n8n_sizer.bundle.topology import parse_topology
    from n8n_sizer.lab.bench import check_lab_request, lab_target
    from n8n_sizer.lab.generators import LAB_TARGET
    from n8n_sizer.lab.state import read_lab_state

    check_lab_request(req.plan, req.workflow, bool(req.payload_bytes or req.malformed or req.hmac_secret_file))
    if req.inventory_path is None:
        raise InputError("a lab bench needs its inventory file: pass --inventory lab.json")
    path = Path(req.inventory_path)
    state = read_lab_state(path)
    if state.topology is None:
        raise InputError(
            f"--inventory {path} records no topology; it was written by an older `lab up`: lab down and up again"
        )
    topology = parse_topology(state.topology, f"--inventory {path}: lab.topology")
    lab = lab_target(inventory, path)
    ingest = next(h.name for h in topology.hosts() if h.roles.main)
    return Target(name=LAB_TARGET, setup=topology.setup(), kind="lab", host=lab.hosts[ingest], lab=lab)


def _check_targets_reachable(targets: list[Target]) -> None:
    """Fail fast, before a run folder exists, when a host cannot be reached or refuses the key."""
    for t in targets:
        t.host.run("true", timeout_s=30)


def start_bench(
    req: BenchRequest,
    out_dir: Path,
    progress: Progress | None = None,
    workflow_body: Path | None = None,
    swap_calls: bool = False,
) -> BenchSummary:
    run_id = new_run_id()
    flow = load_bench_workflow(req.workflow, workflow_body, run_tag=run_id.rsplit("-", 1)[-1])
    flow = _shaped_workflow(req, flow)
    standin, flow = _stand_ins(req, flow, swap_calls, progress)
    try:
        targets = build_targets(req)
        _check_targets_reachable(targets)
    except BaseException:
        if standin is not None:
            standin.close()
        raise
    kind = "find-max" if req.find_max is not None else ("soak" if req.soak else "bench")
    manifest = RunManifest(
        run_id=run_id,
        kind=kind,
        created_s=time.time(),
        spec=_spec(req, flow),
        setup={t.name: t.setup.model_dump(mode="json") for t in targets},
        workflow=flow.name,
        versions=_versions(),
    )
    store = RunStore.create(out_dir, manifest)
    try:
        return _run(store, req, flow, targets, progress)
    finally:
        if standin is not None:
            standin.close()


def _stand_ins(req: BenchRequest, flow: BenchWorkflow, swap: bool, progress: Progress | None):
    """(the stand-in server or None, the workflow with its calls out pointed at it). A benchmark never calls the
    real services: HTTP, OpenAI and Telegram calls go to a local stand-in (n8n_sizer/standins/) waiting what the
    pricer assumes for each; calls it cannot redirect are refused unless `swap` (--swap-calls). The stand-in runs
    in this process on 127.0.0.1, so only a --local stack reaches it."""
    from n8n_sizer.bench.calibrate import stand_in_plan
    from n8n_sizer.standins.rewrite import apply_rewrite

    plan = stand_in_plan(flow.definition, swap)
    if not plan.changes:
        return None, flow
    if req.source != "local":
        raise InputError(
            f"--workflow {flow.name} calls out ({plan.summary()}); its calls go to local stand-ins, which a --local "
            "stack reaches on 127.0.0.1: bench it with --local (a benchmark never calls the real services)"
        )
    from n8n_sizer.standins.openai import StandInServer

    standin = StandInServer().serve()
    plan = stand_in_plan(flow.definition, swap, standin.url)
    refs = {key: {"id": f"standin:{key}", "name": f"standin:{key}"} for key in plan.credentials}
    definition = apply_rewrite(flow.definition, plan, standin.url, refs)
    if progress is not None:
        progress(
            "local",
            f"calls out redirected to a local stand-in ({plan.summary()}), each waiting its assumed time; "
            "none reaches a real service",
            0.0,
        )
    return standin, flow.model_copy(update={"definition": definition, "credentials": plan.credentials})


def resume_bench(run: str, out_dir: Path, progress: Progress | None = None) -> BenchSummary:
    store = RunStore.open(run, out_dir)
    if store.manifest.finished_s is not None:
        raise InputError(
            f"--resume {run}: that run finished at {time.ctime(store.manifest.finished_s)}; "
            f"nothing left to run (start a new one)"
        )
    if store.manifest.kind == "find-max":
        raise InputError(
            f"--resume {run}: a --find-max search cannot be resumed (its next rate depends on "
            f"every step before); start the search again"
        )
    if store.manifest.spec.get("source") == "local":
        raise InputError(
            f"--resume {run}: a --local run stops its stack when it ends (n8n and its database go "
            f"with it), so it cannot be resumed; start a new run"
        )
    spec = dict(store.manifest.spec)
    from pydantic import ValidationError

    from n8n_sizer.runs.run_file import validation_line

    try:  # run.json's spec is typed where it was read (runs.run_file); what resume rebuilds from it, here
        resolved, body = spec.pop("workflow_resolved", None), spec.pop("body", None)
        if not isinstance(resolved, dict) or not isinstance(body, str):
            raise InputError(f"--resume {run}: run.json's spec lacks the workflow or its body; start a new run")
        flow = BenchWorkflow.model_validate({**resolved, "body": body.encode()})
        req = BenchRequest.model_validate(spec)
    except ValidationError as exc:
        raise validation_line(exc, f"--resume {run}: run.json spec", "start a new run") from None
    return _run(store, req, flow, build_targets(req), progress)


def _run(
    store: RunStore, req: BenchRequest, flow: BenchWorkflow, targets: list[Target], progress: Progress | None
) -> BenchSummary:
    try:
        payloads, secret = _payloads(req, flow, store)
        if payloads is not None and any(t.kind == "compose" for t in targets):
            from n8n_sizer.bench.k6 import check_payloads_budget  # k6 holds each step's requests in memory

            check_payloads_budget(req.plan.steps, payloads)
        ledgers = run_bench(
            BenchJob(
                store=store,
                plan=req.plan,
                workflow=flow,
                targets=targets,
                progress=progress,
                find_max=req.find_max,
                payloads=payloads,
                hmac_secret=secret,
            )
        )
        if req.soak:
            _soak_tables(store)
    except (InputError, RemoteError) as exc:
        msg = str(exc).replace("--resume RUN", f"--resume {store.run_id}")
        if f"--resume {store.run_id}" not in msg:
            msg += f" (results so far kept in {store.folder})"
        raise type(exc)(msg) from None
    finally:
        for t in targets:
            t.host.close()
            if t.loadgen is not None:
                t.loadgen.close()
            if t.lab is not None:
                t.lab.close()
    return BenchSummary(run_id=store.run_id, folder=str(store.folder), ledgers=ledgers)


def _shaped_workflow(req: BenchRequest, flow: BenchWorkflow) -> BenchWorkflow:
    """signed-webhook wired for its response mode, with a valid signed-sized body as its fixed one (warm-up)."""
    from n8n_sizer.bench.payloads import DEFAULT_PAYLOAD_BYTES, body_of

    if req.respond is not None and req.workflow != "signed-webhook":
        raise InputError(
            f"--respond {req.respond} sets the response mode of --workflow signed-webhook; "
            f"drop it or use --workflow signed-webhook"
        )
    if req.workflow != "signed-webhook":
        return flow
    from n8n_sizer.n8n.signed import with_respond_mode

    return flow.model_copy(
        update={
            "definition": with_respond_mode(flow.definition, req.respond or "last-node"),
            "body": body_of(0, req.payload_bytes or DEFAULT_PAYLOAD_BYTES),
        }
    )


def _payloads(req: BenchRequest, flow: BenchWorkflow, store: RunStore):
    """(Payloads, secret) for the driver, or (None, None) when every request sends the workflow's fixed body.
    signed-webhook without --hmac-secret-file gets a secret generated in the run's secrets folder (0600)."""
    from n8n_sizer.bench.payloads import DEFAULT_PAYLOAD_BYTES, Payloads, load_secret

    signed = req.workflow == "signed-webhook"
    if not (signed or req.payload_bytes or req.malformed or req.hmac_secret_file):
        return None, None
    path = (
        Path(req.hmac_secret_file)
        if req.hmac_secret_file
        else (store.folder / "secrets" / "hmac-secret" if signed else None)
    )
    if path is not None and not req.hmac_secret_file:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # the run's own secrets folder
    secret = load_secret(path) if path is not None else None
    return Payloads(
        payload_bytes=req.payload_bytes or DEFAULT_PAYLOAD_BYTES, malformed=req.malformed, secret=secret
    ), secret


def _soak_tables(store: RunStore) -> None:
    """Seed 004's 30-minute buckets per target (`soak.soak_table`), kept in run.json `extra.soak`."""
    from n8n_sizer.bench.soak import soak_table

    requests, samples = store.read_requests(), store.read_samples()
    for target in store.manifest.hosts:
        mine = [s for s in samples if s.labels.get("target") == target]
        buckets = soak_table([r for r in requests if r.target == target], mine)
        store.put_extra("soak", target, [b.model_dump(mode="json") for b in buckets])


def _spec(req: BenchRequest, flow: BenchWorkflow) -> dict:
    spec = req.model_dump(mode="json")
    spec["workflow_resolved"] = flow.model_dump(mode="json", exclude={"body"})
    spec["body"] = flow.body.decode("utf-8")
    return spec


def _versions() -> dict[str, str]:
    return {name.lower(): value for name, value in vars(versions).items() if name.isupper() and isinstance(value, str)}


__all__ = [
    "BenchRequest",
    "BenchSummary",
    "HostError",
    "read_inventory_file",
    "read_stack_inventory",
    "resume_bench",
    "start_bench",
]
