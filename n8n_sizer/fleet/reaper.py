"""Teardown (one stack) and reap (everything expired): leave no billable resource behind.

`teardown_stack` runs `pulumi destroy --yes --stack NAME`, then asks the provider APIs for anything
still labelled with the stack and deletes it: after a clean destroy it finds 0. `reap` deletes every
fleet resource whose `expires-at` has passed, the safety net for a run that was killed before any
`finally` could tear it down. Both are idempotent: a resource already gone counts as gone, not failed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from n8n_sizer.errors import InputError
from n8n_sizer.fleet.api import CloudResource, Outcome
from n8n_sizer.fleet.labels import PROJECT_LABEL, resource_expired
from n8n_sizer.fleet.spec import NAMESPACE, OWNER_RE, read_stack_config, stack_file
from n8n_sizer.fleet.sweep_gcp import TOKEN_ENV as GCP_TOKEN_ENV
from n8n_sizer.fleet.sweep_gcp import GcpSweeper
from n8n_sizer.fleet.sweep_hetzner import TOKEN_ENV as HCLOUD_TOKEN_ENV
from n8n_sizer.fleet.sweep_hetzner import HetznerSweeper
from n8n_sizer.safety.frozen import Frozen

DESTROY_TIMEOUT_S = 1800


class Sweeper(Protocol):
    """A provider's sweep: what carries a stack's labels, what may have expired, and their deletion (which
    re-checks every resource's labels against the selector it was found with)."""

    provider: str

    def stack_candidates(self, stack: str, owner: str | None) -> tuple[list[CloudResource], str]: ...

    def expiry_candidates(self, owner: str | None, now: datetime) -> tuple[list[CloudResource], str]: ...

    def delete_all(self, resources: list[CloudResource], label_selector: str) -> list[Outcome]: ...

    def close(self) -> None: ...


class DestroyResult(Frozen):
    ran: bool
    ok: bool
    message: str


class SweepReport(Frozen):
    """What one teardown or reap found and did, per resource."""

    what: str
    destroy: DestroyResult | None = None
    outcomes: tuple[Outcome, ...] = ()

    @property
    def found(self) -> int:
        return len(self.outcomes)

    def count(self, action: str) -> int:
        return sum(1 for o in self.outcomes if o.action == action)

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.action == "failed"]


PULUMI_PROJECT = "n8n-sizer"  # `name:` in this repository's Pulumi.yaml


def check_pulumi_project(stack: str, stacks_dir: Path) -> Path:
    """The project folder `pulumi destroy` may run in: its Pulumi.yaml names THIS project and the stack has
    its `stacks/Pulumi.<stack>.yaml`. Anything else is refused: `pulumi destroy --yes` in a folder that
    holds another project (a shop, a teammate's fleet) would destroy that project's stack of this name."""
    from n8n_sizer.safety.files import read_user_text
    from n8n_sizer.safety.yamldoc import load_yaml

    project_dir = Path(stacks_dir).resolve().parent
    manifest = project_dir / "Pulumi.yaml"
    fix = "run teardown from the n8n-sizer folder, or pass --stacks-dir <n8n-sizer folder>/stacks"
    # Pulumi reads Pulumi.json (and Pulumi.yml) too, the .json first: another project's file there would be
    # the project `pulumi destroy` acts on, whatever Pulumi.yaml says.
    for other in ("Pulumi.json", "Pulumi.yml"):
        if os.path.lexists(project_dir / other):
            raise InputError(
                f"refusing pulumi destroy: {project_dir / other} sits beside Pulumi.yaml, and Pulumi "
                f"may read it instead; remove or rename it, or {fix}"
            )
    text = read_user_text(manifest, "refusing pulumi destroy: the project file", fix=fix, max_bytes=1 << 20)
    doc = load_yaml(text, f"refusing pulumi destroy: {manifest}", fix=fix)
    name = doc.get("name") if isinstance(doc, dict) else None
    if name != PULUMI_PROJECT:
        raise InputError(f"refusing pulumi destroy: {manifest} is project {name!r}, not {PULUMI_PROJECT!r}; {fix}")
    path = stack_file(stack, stacks_dir)
    if not path.is_file():
        raise InputError(
            f"refusing pulumi destroy: {path} does not exist, so stack {stack!r} is not one of this "
            f"project's fleets; check --stack, or {fix}"
        )
    return project_dir


def stack_owner(stack: str, stacks_dir: Path) -> str:
    """`n8n-sizer:owner` of a stack file: whose resources a teardown may sweep."""
    owner = read_stack_config(stack_file(stack, stacks_dir)).get(f"{NAMESPACE}:owner")
    if not isinstance(owner, str) or not OWNER_RE.fullmatch(owner):
        raise InputError(
            f"{stack_file(stack, stacks_dir)} has no valid {NAMESPACE}:owner, so the sweep cannot "
            "tell your resources from a teammate's; set it (pulumi config set n8n-sizer:owner "
            "<your-name>) or pass --all-owners"
        )
    return owner


def run_pulumi_destroy(stack: str, project_dir: Path, pulumi_bin: str = "pulumi") -> DestroyResult:
    """`pulumi destroy --yes --stack NAME` in the project folder; its output goes to the terminal.

    Refused (`InputError`) unless the folder is this project with that stack's file (`check_pulumi_project`)."""
    check_pulumi_project(stack, Path(project_dir) / "stacks")
    exe = shutil.which(pulumi_bin)
    if exe is None:
        return DestroyResult(
            ran=False,
            ok=False,
            message=f"the pulumi CLI ({pulumi_bin}) is not on PATH; install "
            "it (https://www.pulumi.com/docs/install/) and run teardown again; sweeping the "
            "provider APIs anyway",
        )
    try:
        proc = subprocess.run(
            [exe, "destroy", "--yes", "--stack", stack], cwd=project_dir, timeout=DESTROY_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        return DestroyResult(ran=True, ok=False, message=f"pulumi destroy did not finish in {DESTROY_TIMEOUT_S} s")
    if proc.returncode != 0:
        return DestroyResult(ran=True, ok=False, message=f"pulumi destroy --stack {stack} exited {proc.returncode}")
    return DestroyResult(ran=True, ok=True, message=f"pulumi destroy --stack {stack}: done")


def _stack_provider_and_project(stack: str, stacks_dir: Path) -> tuple[str | None, str | None]:
    path = stack_file(stack, stacks_dir)
    if not path.exists():
        return None, None
    config = read_stack_config(path)
    provider = config.get(f"{NAMESPACE}:provider")
    project = config.get("gcp:project")
    return (provider if isinstance(provider, str) else None, project if isinstance(project, str) else None)


def open_sweepers(providers: list[str] | None, gcp_project: str | None = None) -> list[Sweeper]:
    """Sweepers for `providers`; None: every provider whose credentials are in the environment."""
    import os

    if providers is None:
        providers = [p for p, env in (("hetzner", HCLOUD_TOKEN_ENV), ("gcp", GCP_TOKEN_ENV)) if os.environ.get(env)]
        if not providers:
            raise InputError(
                f"no provider credentials: export {HCLOUD_TOKEN_ENV} (Hetzner) and/or "
                f"{GCP_TOKEN_ENV} (GCP) so the sweep can ask the provider APIs"
            )
    return [HetznerSweeper() if p == "hetzner" else GcpSweeper(project=gcp_project) for p in providers]


def _owned(res: CloudResource, owner: str | None) -> bool:
    return owner is None or res.labels.get("owner") == owner


def sweep_stack(
    stack: str, sweepers: list[Sweeper], *, owner: str | None = None, dry_run: bool = False
) -> tuple[Outcome, ...]:
    """Delete (or, dry run, list) everything labelled with `stack` (and `owner`, unless None: every owner)
    on every provider; the outcomes, one per resource."""
    outcomes: list[Outcome] = []
    for sweeper in sweepers:
        found, selector = sweeper.stack_candidates(stack, owner)
        if dry_run:
            outcomes += [Outcome(resource=r, action="would-delete") for r in found]
        else:
            outcomes += sweeper.delete_all(found, selector)
    return tuple(outcomes)


def teardown_stack(
    stack: str,
    *,
    stacks_dir: Path = Path("stacks"),
    destroy: Callable[[str, Path], DestroyResult] = run_pulumi_destroy,
    sweepers: list | None = None,
    owner: str | None = None,
    dry_run: bool = False,
) -> SweepReport:
    """Destroy the stack with Pulumi, then sweep the provider APIs for anything left with its labels (and
    `owner`'s; None sweeps every owner's). A dry run destroys nothing and lists what the sweep finds."""
    provider, gcp_project = _stack_provider_and_project(stack, stacks_dir)
    if dry_run:
        result = DestroyResult(ran=False, ok=True, message=f"dry run: would run pulumi destroy --yes --stack {stack}")
    else:
        result = destroy(stack, stacks_dir.resolve().parent)
    own = sweepers is None
    if own:
        sweepers = open_sweepers([provider] if provider else None, gcp_project)
    try:
        outcomes = sweep_stack(stack, sweepers, owner=owner, dry_run=dry_run)
    finally:
        if own:
            for s in sweepers:
                s.close()
    return SweepReport(what=f"stack {stack}", destroy=result, outcomes=outcomes)


def _expired(res: CloudResource, now: datetime) -> bool | None:
    return resource_expired(res.labels, now)


def reap(
    *, now: datetime | None = None, dry_run: bool = False, sweepers: list, owner: str | None = None
) -> SweepReport:
    """Delete (or, dry run, list) every fleet resource of `owner` (None: of every owner) whose `expires-at`
    has passed. Every candidate's labels are checked here, whatever the API's filter did."""
    now = now or datetime.now(UTC)
    outcomes: list[Outcome] = []
    for sweeper in sweepers:
        candidates, selector = sweeper.expiry_candidates(owner, now)
        doomed = []
        for res in candidates:
            if res.labels.get("project") != PROJECT_LABEL or not _owned(res, owner):
                outcomes.append(Outcome(resource=res, action="kept", detail="not this project's or owner's"))
                continue
            state = _expired(res, now)
            if state is None:
                outcomes.append(Outcome(resource=res, action="kept", detail="expires-at missing or unreadable"))
            elif state:
                doomed.append(res)
        if dry_run:
            outcomes += [Outcome(resource=r, action="would-delete") for r in doomed]
        else:
            outcomes += sweeper.delete_all(doomed, selector)
    return SweepReport(what="expired resources", outcomes=tuple(outcomes))


def report_json(report: SweepReport) -> dict:
    """The report as one JSON object: every resource with what was done to it, and the counts."""
    return {
        "what": report.what,
        "found": report.found,
        "failed": len(report.failed),
        "counts": {a: report.count(a) for a in ("deleted", "already-gone", "would-delete", "kept")},
        "resources": [
            {"action": o.action, "resource": o.resource.describe(), "detail": o.detail} for o in report.outcomes
        ],
    }


def format_report(report: SweepReport) -> list[str]:
    """Lines for the terminal: one per resource, then a summary."""
    lines = [f"{o.action:13} {o.resource.describe()}" + (f": {o.detail}" if o.detail else "") for o in report.outcomes]
    lines.append(
        f"{report.what}: found {report.found} "
        f"({report.count('deleted')} deleted, {report.count('already-gone')} already gone, "
        f"{report.count('would-delete')} would be deleted, {report.count('kept')} kept, "
        f"{len(report.failed)} failed)"
    )
    return lines
