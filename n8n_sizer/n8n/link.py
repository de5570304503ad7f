"""The bench's use of the n8n API client: set a target's n8n up once, count its executions later.

The owner login and API key are written to `<run>/secrets/<target>.json` (mode 0600, never printed), so a
resumed run, a new process, can count executions on the same instance.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import SecretStr

from n8n_sizer.errors import InputError
from n8n_sizer.hosts.host import HostError
from n8n_sizer.n8n.client import FINAL_STATUSES, N8nApiError, N8nClient, N8nSession, OwnerLogin, set_up_instance
from n8n_sizer.n8n.workflows import BenchWorkflow, deploy_workflow
from n8n_sizer.safety.frozen import Frozen


class TargetLink(Frozen):
    n8n_version: str | None
    workflow_id: str
    warmup_workflow_id: str
    webhook_path: str
    warmup_webhook_path: str


class Counts(Frozen):
    stored: int
    succeeded: int
    finished: int
    by_status: dict[str, int]
    success_ids: tuple[str, ...] = ()


def _save_session(path: Path, session: N8nSession) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(
        path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600
    )  # 0600 from the first byte, never overwritten
    with os.fdopen(fd, "w") as f:
        json.dump(
            {
                "base_url": session.base_url,
                "email": session.owner.email,
                "password": session.owner.password.get_secret_value(),
                "api_key": session.api_key.get_secret_value(),
            },
            f,
        )


def _load_session(path: Path, base_url: str) -> N8nSession:
    from n8n_sizer.safety.files import read_user_text
    from n8n_sizer.safety.jsondoc import load_json

    fix = "delete it; the next run sets n8n up again"
    data = load_json(
        read_user_text(path, "the saved n8n login", private=True, max_bytes=1 << 16, fix=fix),
        f"the saved n8n login {path}",
        fix,
    )
    saved = data if isinstance(data, dict) else {}
    fields = {k: saved.get(k) for k in ("email", "password", "api_key")}
    bad = next((k for k, v in fields.items() if not isinstance(v, str) or not v or len(v) > 4096), None)
    if bad is not None:
        raise InputError(f"the saved n8n login {path}: {bad} is missing or not text; {fix}")
    owner = OwnerLogin(email=fields["email"], password=SecretStr(fields["password"]))
    return N8nSession(base_url=base_url, owner=owner, api_key=SecretStr(fields["api_key"]))


def _version(session: N8nSession) -> str | None:
    """n8n's own version (`versionCli`), which 2.x shows only in the logged-in settings."""
    try:
        with session.client(timeout_s=10) as client:
            client.login(session.owner)
            return client.version()
    except N8nApiError:
        return None  # recorded as unknown, never guessed


def saved_or_new_session(
    base_url: str, login_file: Path | None, target: str = "target", owner: OwnerLogin | None = None
) -> N8nSession:
    """The owner login saved in `login_file`, or (no such file yet) the instance set up now and its login saved
    there (mode 0600). An instance that already has an owner and no saved login is the user's to point at.
    `owner`: the owner n8n created at start from its environment (the lab's), logged in, never set up."""
    if login_file is not None and os.path.lexists(login_file):
        return _load_session(login_file, base_url)
    try:
        session = set_up_instance(base_url, owner, owner_exists=owner is not None)
    except N8nApiError as exc:
        where = f" {login_file} does not exist;" if login_file is not None else ""
        raise HostError(
            f"{target}: n8n is set up already and{where} no saved login to use ({exc}); pass "
            f"--n8n-login results/<run>/secrets/{target}.json from the bench run that set it up".replace("\n", " ")
        ) from None
    if login_file is not None:
        _save_session(login_file, session)
    return session


def with_credentials(definition: dict, made: dict[str, dict]) -> dict:
    """`definition` with every credential reference "standin:<key>" replaced by the credential created for it."""
    if not made:
        return definition
    import copy

    out = copy.deepcopy(definition)
    for node in out.get("nodes", []):
        for ref in (node.get("credentials") or {}).values() if isinstance(node, dict) else ():
            key = str(ref.get("id", "")).removeprefix("standin:") if isinstance(ref, dict) else ""
            if key in made:
                ref["id"], ref["name"] = str(made[key]["id"]), str(made[key]["name"])
    return out


def setup_target(base_url: str, workflow: BenchWorkflow, secrets_path: Path, target: str = "target") -> TargetLink:
    """Owner, login, API key (or the saved ones), then the measured workflow and its warm-up copy, active."""
    try:
        if secrets_path.is_file():
            session = _load_session(secrets_path, base_url)
        else:
            session = set_up_instance(base_url)
            _save_session(secrets_path, session)
        warm = workflow.copy_for("warmup")
        ids = {}
        with session.client() as client:
            made = {
                key: client.create_credential(f"n8n-sizer {key}", spec["type"], spec["data"])
                for key, spec in workflow.credentials.items()
            }
            for key, flow in (("measured", workflow), ("warmup", warm)):
                ids[key], _ = deploy_workflow(client, with_credentials(flow.definition, made))
    except N8nApiError as exc:
        raise HostError(f"{target}: setting n8n up failed: {exc}".replace("\n", " ")) from None
    return TargetLink(
        n8n_version=_version(session),
        workflow_id=ids["measured"],
        warmup_workflow_id=ids["warmup"],
        webhook_path=workflow.webhook_path,
        warmup_webhook_path=warm.webhook_path,
    )


def count_executions(base_url: str, workflow_id: str, secrets_path: Path, target: str = "target") -> Counts:
    session = _load_session(secrets_path, base_url)
    try:
        with session.client(timeout_s=60) as client:
            counts = client.count_executions(workflow_id)
    except N8nApiError as exc:
        raise HostError(f"{target}: counting executions failed: {exc}".replace("\n", " ")) from None
    by = counts.by_status
    return Counts(
        stored=counts.total,
        succeeded=by.get("success", 0),
        finished=sum(by.get(s, 0) for s in FINAL_STATUSES),
        by_status=by,
        success_ids=counts.success_ids,
    )


def editor_client(base_url: str, secrets_path: Path) -> N8nClient:
    """A client logged in as the owner (cookie), for the editor-responsiveness probe; the caller closes it."""
    session = _load_session(secrets_path, base_url)
    client = session.client(timeout_s=60)
    try:
        client.login(session.owner)
    except N8nApiError as exc:
        client.close()
        raise HostError(f"logging in to {base_url} for the editor probe failed: {exc}") from None
    return client
