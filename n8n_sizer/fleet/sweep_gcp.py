"""Find and delete the fleet's GCP resources through the Compute Engine REST API (v1).

Token: `GOOGLE_OAUTH_ACCESS_TOKEN` (e.g. `$(gcloud auth print-access-token)`; pulumi-gcp reads the
same variable). Project: `GOOGLE_PROJECT` / `GOOGLE_CLOUD_PROJECT`, or `gcp:project` in the stack file.

Endpoints: `GET projects/P/aggregated/instances?filter=labels.K="V"` (pages through `nextPageToken`),
`DELETE projects/P/zones/Z/instances/N`; `GET projects/P/global/firewalls`, `.../aggregated/subnetworks`,
`.../global/networks` and their DELETEs. Deletes return an Operation; the sweep waits on it
(`POST .../operations/OP/wait`) because a subnetwork cannot go while an instance uses it, nor a network
while it has subnetworks or firewall rules. Firewalls, subnetworks and networks take no labels: the
fleet names them `n8n-sizer-<stack>-*` and writes the labels into their description.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from typing import Any

from n8n_sizer.errors import InputError
from n8n_sizer.fleet.api import CloudResource, Outcome, ProviderApiError, bearer_client, check_token, env_token
from n8n_sizer.fleet.labels import PROJECT_LABEL, resource_expired

URL_ENV = "N8N_SIZER_GCP_COMPUTE_URL"
DEFAULT_URL = "https://compute.googleapis.com/compute/v1"
TOKEN_ENV = "GOOGLE_OAUTH_ACCESS_TOKEN"
PROJECT_ENVS = ("GOOGLE_PROJECT", "GOOGLE_CLOUD_PROJECT")
NAME_PREFIX = "n8n-sizer-"
_DESCRIPTION_LABEL = re.compile(r"([a-z][a-z0-9_-]*)=([a-z0-9_-]+)")
OPERATION_WAITS = 10  # each `wait` call returns after at most 2 minutes


MAX_PAGES = 1000


def _checked(kind: str, item: Any) -> dict[str, Any]:
    """A listed item with the name the sweep deletes it by; the API answered something else: one line."""
    if (
        not isinstance(item, dict)
        or not isinstance(item.get("name"), str)
        or not re.fullmatch(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?", item["name"])
    ):
        raise ProviderApiError(
            f"GCP Compute API listed one of the {kind} without a valid name; nothing was "
            f"deleted for it; check the API URL ({URL_ENV}) and try again"
        )
    return item


def description_labels(description: str | None) -> dict[str, str]:
    """Labels written as `key=value` words into a description (see fleet/gcp.py)."""
    # The fleet writes five short labels; a longer description is not ours (and would make findall slow).
    text = description[:2048] if isinstance(description, str) else ""
    return dict(_DESCRIPTION_LABEL.findall(text))


class GcpSweeper:
    """List and delete the fleet's instances, firewall rules, subnetworks and networks in one project."""

    provider = "gcp"

    def __init__(
        self,
        project: str | None = None,
        token: str | None = None,
        base_url: str | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        backoff_s: float = 0.5,
        attempts: int = 6,
    ) -> None:
        token = env_token(token, TOKEN_ENV, "$(gcloud auth print-access-token)")
        project = project or next((os.environ[e] for e in PROJECT_ENVS if os.environ.get(e)), None)
        if not project:
            raise InputError("no GCP project: set gcp:project in the stack file or export GOOGLE_PROJECT=<project id>")
        check_token(token, TOKEN_ENV)
        if not re.fullmatch(r"[a-z][a-z0-9-]{4,61}[a-z0-9]", project):
            raise InputError(
                f"GCP project {project!r} is not a project id (6-63 lowercase letters, digits, "
                "dashes); set gcp:project or GOOGLE_PROJECT to the project id"
            )
        self.project = project
        self.client = bearer_client(
            token,
            base_url,
            URL_ENV,
            DEFAULT_URL,
            name="GCP Compute API",
            hint=f"check {TOKEN_ENV} (it expires after an hour) and the project",
            sleep=sleep,
            backoff_s=backoff_s,
            attempts=attempts,
        )

    def close(self) -> None:
        self.client.close()

    def _pages(self, path: str, params: dict[str, str]) -> list[dict[str, Any]]:
        bodies, token = [], None
        for _ in range(MAX_PAGES):
            query = dict(params, **({"pageToken": token} if token else {}))
            body = self.client.request("GET", f"/projects/{self.project}/{path}", params=query) or {}
            bodies.append(body)
            token = body.get("nextPageToken")
            if not token:
                return bodies
        raise ProviderApiError(f"GCP Compute API GET {path} kept paging past {MAX_PAGES} pages; check the API URL")

    def _aggregated(self, kind: str, params: dict[str, str]) -> list[tuple[str, dict[str, Any]]]:
        out = []
        for body in self._pages(f"aggregated/{kind}", params):
            groups = body.get("items") or {}
            if not isinstance(groups, dict):
                raise ProviderApiError(f"GCP Compute API aggregated/{kind} answered without an items map")
            for scope, group in groups.items():
                items = group.get(kind, []) if isinstance(group, dict) else None
                out += [(str(scope), _checked(kind, item)) for item in (items if isinstance(items, list) else [])]
        return out

    def _listed(self, path: str, kind: str, params: dict[str, str]) -> list[dict[str, Any]]:
        items = [i for body in self._pages(path, params) for i in (body.get("items") or [])]
        return [_checked(kind, i) for i in items]

    def instances(self, labels: dict[str, str]) -> list[CloudResource]:
        """Instances whose labels include `labels` (filtered by the API, checked again here)."""
        clauses = [f'(labels.{k} = "{v}")' for k, v in labels.items()]
        found = []
        for scope, item in self._aggregated("instances", {"filter": " AND ".join(clauses)}):
            raw = item.get("labels")
            item_labels = {str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {}
            if all(item_labels.get(k) == v for k, v in labels.items()):
                found.append(
                    CloudResource(
                        provider="gcp",
                        kind="instances",
                        id=str(item.get("id", item["name"])),
                        name=item["name"],
                        labels=item_labels,
                        scope=scope,
                    )
                )
        return found

    def named(self, prefix: str) -> list[CloudResource]:
        """Firewalls, subnetworks and networks named `prefix*`, in deletion order."""
        name_filter = {"filter": f'name eq "{prefix}.*"'}  # names are [a-z0-9-]: no regex escaping needed
        found = [
            CloudResource(
                provider="gcp",
                kind="firewalls",
                id=str(i.get("id", i["name"])),
                name=i["name"],
                labels=description_labels(i.get("description")),
                scope="global",
            )
            for i in self._listed("global/firewalls", "firewalls", name_filter)
        ]
        found += [
            CloudResource(
                provider="gcp",
                kind="subnetworks",
                id=str(i.get("id", i["name"])),
                name=i["name"],
                labels=description_labels(i.get("description")),
                scope=scope,
            )
            for scope, i in self._aggregated("subnetworks", name_filter)
        ]
        found += [
            CloudResource(
                provider="gcp",
                kind="networks",
                id=str(i.get("id", i["name"])),
                name=i["name"],
                labels=description_labels(i.get("description")),
                scope="global",
            )
            for i in self._listed("global/networks", "networks", name_filter)
        ]
        return [r for r in found if r.name.startswith(prefix)]

    def _wait(self, operation: dict[str, Any], scope: str) -> str | None:
        """Wait for a delete's Operation; its error message, or None when it succeeded."""
        for _ in range(OPERATION_WAITS):
            if operation.get("status") == "DONE":
                errors = (operation.get("error") or {}).get("errors") or []
                return "; ".join(str(e.get("message", e) if isinstance(e, dict) else e) for e in errors) or None
            if not isinstance(operation.get("name"), str):
                return "the API answered with an operation without a name"
            path = f"/projects/{self.project}/{scope}/operations/{operation['name']}/wait"
            operation = self.client.request("POST", path) or {}
        return f"operation {operation.get('name')} did not finish"

    def _delete(self, res: CloudResource) -> Outcome:
        path = f"/projects/{self.project}/{res.scope}/{res.kind}/{res.name}"
        try:
            operation = self.client.request("DELETE", path, ok_missing=True)
        except ProviderApiError as exc:
            return Outcome(resource=res, action="failed", detail=str(exc))
        if operation is None:
            return Outcome(resource=res, action="already-gone")
        try:
            error = self._wait(operation, res.scope or "global")
        except ProviderApiError as exc:
            error = str(exc)
        if error:
            return Outcome(resource=res, action="failed", detail=f"GCP DELETE {res.kind}/{res.name}: {error}")
        return Outcome(resource=res, action="deleted")

    def delete_all(self, resources: list[CloudResource], label_selector: str = "") -> list[Outcome]:
        """Delete in dependency order: instances, firewalls, subnetworks, networks."""
        order = {"instances": 0, "firewalls": 1, "subnetworks": 2, "networks": 3}
        return [self._delete(r) for r in sorted(resources, key=lambda r: order[r.kind])]

    # --- the Sweeper protocol (fleet/reaper.py) ------------------------------------------------------------

    def stack_candidates(self, stack: str, owner: str | None) -> tuple[list[CloudResource], str]:
        """The stack's instances by label, and its network, subnetwork and rules by name (they carry the labels
        in their description); names share a prefix with longer stack names (`single` vs `single-2`), so the
        labels decide."""
        wanted = {"project": PROJECT_LABEL, "stack": stack, **({"owner": owner} if owner else {})}
        found = self.instances(wanted) + [
            r for r in self.named(f"n8n-sizer-{stack}-") if all(r.labels.get(k) == v for k, v in wanted.items())
        ]
        return found, ""

    def expiry_candidates(self, owner: str | None, now) -> tuple[list[CloudResource], str]:
        """Instances of the project (and owner), and the named resources of stacks none of whose instances is
        still unexpired: a network's description keeps the first `up`'s expiry, and a stack whose instances a
        later `up` extended keeps its network too."""
        mine = {"project": PROJECT_LABEL, **({"owner": owner} if owner else {})}
        instances = [r for r in self.instances(mine) if owner is None or r.labels.get("owner") == owner]
        live = {r.labels.get("stack") for r in instances if resource_expired(r.labels, now) is False}
        named = [
            r
            for r in self.named("n8n-sizer-")
            if r.labels.get("project") == PROJECT_LABEL and (owner is None or r.labels.get("owner") == owner)
        ]
        return instances + [r for r in named if r.labels.get("stack") not in live], ""
