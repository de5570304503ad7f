"""Find and delete labelled Hetzner Cloud resources through its REST API (token: `HCLOUD_TOKEN`).

Endpoints (docs.hetzner.cloud): `GET /servers|/firewalls|/ssh_keys?label_selector=...&page=N&per_page=50`
(pages followed through `meta.pagination.next_page`), `DELETE /<kind>/<id>`. A firewall still applied
to a server refuses deletion (422 `resource_in_use`), so servers go first and the sweep waits until
they are gone before it deletes firewalls and SSH keys.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from n8n_sizer.fleet.api import CloudResource, Outcome, ProviderApiError, bearer_client, check_token, env_token
from n8n_sizer.fleet.labels import expiring_selector, selector_matches, stack_selector

URL_ENV = "N8N_SIZER_HCLOUD_URL"
DEFAULT_URL = "https://api.hetzner.cloud/v1"
TOKEN_ENV = "HCLOUD_TOKEN"
KINDS = ("servers", "firewalls", "ssh_keys", "networks")  # deletion order (a cluster stack has a network)
PER_PAGE = 50
MAX_PAGES = 1000  # 50,000 resources: an API whose next_page never ends is broken, not big
SERVER_GONE_TIMEOUT_S = 180.0  # a Hetzner server delete action takes seconds; give it minutes


def _next_page(body: dict) -> int | None:
    page = ((body.get("meta") or {}).get("pagination") or {}).get("next_page")
    return page if isinstance(page, int) and not isinstance(page, bool) and page > 0 else None


class HetznerSweeper:
    """List and delete labelled servers, firewalls and SSH keys of one Hetzner project."""

    provider = "hetzner"

    def __init__(
        self,
        token: str | None = None,
        base_url: str | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        backoff_s: float = 0.5,
        attempts: int = 6,
        gone_timeout_s: float = SERVER_GONE_TIMEOUT_S,
    ) -> None:
        token = env_token(
            token, TOKEN_ENV, "<API token of the Hetzner project> (Console > Security > API tokens, read & write)"
        )
        check_token(token, TOKEN_ENV)
        self.sleep, self.gone_timeout_s = sleep, gone_timeout_s
        self.client = bearer_client(
            token,
            base_url,
            URL_ENV,
            DEFAULT_URL,
            name="Hetzner API",
            hint=f"check {TOKEN_ENV} (a read & write token of the right project)",
            sleep=sleep,
            backoff_s=backoff_s,
            attempts=attempts,
        )

    def close(self) -> None:
        self.client.close()

    def list(self, kind: str, label_selector: str) -> list[CloudResource]:
        """Every `kind` matching the selector, all pages: filtered by the API and checked again here, so
        an API that ignores the selector cannot hand the sweep another project's resources."""
        found: list[CloudResource] = []
        page: int | None = 1
        for _ in range(MAX_PAGES):
            body = (
                self.client.request(
                    "GET", f"/{kind}", params={"label_selector": label_selector, "page": page, "per_page": PER_PAGE}
                )
                or {}
            )
            items = body.get(kind, []) if isinstance(body, dict) else None
            if not isinstance(items, list):
                raise ProviderApiError(
                    f"Hetzner API GET /{kind} answered without a list of {kind}; check the API base URL ({URL_ENV})"
                )
            for item in items:
                res = self._resource(kind, item)
                if selector_matches(label_selector, res.labels):
                    found.append(res)
            page = _next_page(body)
            if page is None:
                return found
        raise ProviderApiError(f"Hetzner API GET /{kind} kept paging past {MAX_PAGES} pages; check the API base URL")

    @staticmethod
    def _resource(kind: str, item: object) -> CloudResource:
        rid = item.get("id") if isinstance(item, dict) else None
        if isinstance(rid, bool) or not isinstance(rid, (int, str)) or not str(rid).isdigit():
            raise ProviderApiError(
                f"Hetzner API listed one of the {kind} without a numeric id; nothing was "
                f"deleted for it; check the API base URL ({URL_ENV}) and try again"
            )
        labels = item.get("labels")
        labels = {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}
        return CloudResource(
            provider="hetzner", kind=kind, id=str(rid), name=str(item.get("name") or rid), labels=labels
        )

    def find(self, label_selector: str) -> list[CloudResource]:
        """Everything the selector matches, in deletion order (servers first)."""
        return [r for kind in KINDS for r in self.list(kind, label_selector)]

    def _delete(self, res: CloudResource) -> Outcome:
        for attempt in range(self.client.attempts):
            try:
                gone = self.client.request("DELETE", f"/{res.kind}/{res.id}", ok_missing=True) is None
            except ProviderApiError as exc:
                if exc.code == "resource_in_use" and attempt < self.client.attempts - 1:
                    self.sleep(min(self.client.backoff_s * 2**attempt, 30.0))
                    continue
                return Outcome(resource=res, action="failed", detail=str(exc))
            return Outcome(resource=res, action="already-gone" if gone else "deleted")
        raise AssertionError("unreachable")

    def _wait_gone(self, servers: list[CloudResource], label_selector: str) -> None:
        """Servers are deleted by an asynchronous action: wait until the list no longer has them."""
        ids = {s.id for s in servers}
        deadline = time.monotonic() + self.gone_timeout_s
        delay = self.client.backoff_s
        while ids & {s.id for s in self.list("servers", label_selector)}:
            if time.monotonic() > deadline:
                return  # firewall deletes then fail with resource_in_use and are reported as such
            self.sleep(delay)
            delay = min(delay * 2, 10.0)

    def delete_all(self, resources: list[CloudResource], label_selector: str) -> list[Outcome]:
        """Delete `resources` (from `find`), servers first; one failure does not stop the others. A resource
        whose labels do not satisfy `label_selector` is kept, whoever handed it over."""
        outcomes = [
            Outcome(resource=r, action="kept", detail=f"labels do not match {label_selector}")
            for r in resources
            if not selector_matches(label_selector, r.labels)
        ]
        resources = [r for r in resources if selector_matches(label_selector, r.labels)]
        servers = [r for r in resources if r.kind == "servers"]
        deleted = [self._delete(r) for r in servers]
        if any(o.action == "deleted" for o in deleted):
            self._wait_gone([o.resource for o in deleted if o.action == "deleted"], label_selector)
        return outcomes + deleted + [self._delete(r) for r in resources if r.kind != "servers"]

    # --- the Sweeper protocol (fleet/reaper.py) ------------------------------------------------------------

    def stack_candidates(self, stack: str, owner: str | None) -> tuple[list[CloudResource], str]:
        """What carries the stack's (and owner's) labels, and the selector `delete_all` re-checks them against."""
        selector = stack_selector(stack, owner)
        return self.find(selector), selector

    def expiry_candidates(self, owner: str | None, now) -> tuple[list[CloudResource], str]:
        selector = expiring_selector(owner)
        return self.find(selector), selector
