"""Set n8n up and read it back over HTTP (httpx): owner, login, API key, workflows, executions.

Checked against n8n 2.41.1 started by `LocalStack`:
- `POST /rest/owner/setup` {email, firstName, lastName, password} answers the user and sets the cookie;
- `POST /rest/login` {emailOrLdapLoginId, password} sets the `n8n-auth` cookie (needs N8N_SECURE_COOKIE=false
  over plain HTTP);
- `GET /rest/api-keys/scopes` lists the owner role's scopes; `POST /rest/api-keys` {label, scopes,
  expiresAt: null} answers `data.rawApiKey`, sent as header `X-N8N-API-KEY` to `/api/v1/...`;
- `GET /api/v1/executions?workflowId=ID&limit=N&cursor=C` pages with `nextCursor`.
Every failure names the method, URL, status and the start of the body.
"""

from __future__ import annotations

import secrets
import time
from collections import Counter
from typing import Any

import httpx
from pydantic import SecretStr

from n8n_sizer.errors import RemoteError
from n8n_sizer.safety.frozen import Frozen

# The public API's largest page (n8n caps `limit` at 250).
PAGE_LIMIT = 250
# Fields the public API accepts on create; an exported workflow carries more (id, active, meta, ...).
WORKFLOW_CREATE_FIELDS = ("name", "nodes", "connections", "settings", "staticData")
# Statuses after which n8n no longer touches an execution.
FINAL_STATUSES = ("success", "error", "crashed", "canceled")


def create_body(definition: dict[str, Any]) -> dict[str, Any]:
    """What `POST /api/v1/workflows` accepts: name, nodes, connections, settings, staticData (others refused)."""
    body = {key: definition[key] for key in WORKFLOW_CREATE_FIELDS if key in definition}
    body.setdefault("name", "n8n-sizer workflow")
    body.setdefault("connections", {})
    if not body.get("settings"):
        body["settings"] = {}
    return body


class N8nApiError(RemoteError):
    """An n8n HTTP call failed: the message says method, URL, status and a body snippet."""

    def __init__(self, method: str, url: str, status: int | None, body: str) -> None:
        self.method, self.url, self.status, self.body = method, url, status, body
        shown = "no answer" if status is None else f"HTTP {status}"
        super().__init__(f"{method} {url}: {shown}: {body[:300]}")


class OwnerLogin(Frozen):
    """The owner account the bench creates; the password never leaves this object in clear."""

    email: str
    password: SecretStr
    first_name: str = "Bench"
    last_name: str = "Owner"

    @classmethod
    def generate(cls, email: str = "bench-owner@n8n-sizer.invalid") -> OwnerLogin:
        # n8n's rule: 8+ characters with a number and an uppercase letter.
        return cls(email=email, password=SecretStr(f"Nz9-{secrets.token_urlsafe(18)}"))


class ExecutionCounts(Frozen):
    """Executions n8n stored for one workflow, by status (success, error, crashed, running, waiting, ...)."""

    workflow_id: str
    total: int
    by_status: dict[str, int]
    success_ids: tuple[str, ...] = ()  # ids of the successful executions, to match requests one by one


class N8nClient:
    """One n8n instance: a cookie session for /rest and an API key for /api/v1."""

    def __init__(self, base_url: str, api_key: str | None = None, timeout_s: float = 30.0) -> None:
        from n8n_sizer.safety.urls import require_url

        self.base_url = require_url(base_url, "n8n's base URL").text.rstrip("/")  # the one URL grammar
        self._api_key = api_key
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout_s)

    def __enter__(self) -> N8nClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    @property
    def api_key(self) -> str:
        if self._api_key is None:
            raise N8nApiError("GET", f"{self.base_url}/api/v1", None, "no API key yet; call create_api_key first")
        return self._api_key

    # --- plumbing ------------------------------------------------------------------------------

    def _call(
        self, method: str, path: str, *, public: bool = False, expect: tuple[int, ...] = (200,), **kwargs: Any
    ) -> httpx.Response:
        headers = kwargs.pop("headers", {})
        if public:
            headers["X-N8N-API-KEY"] = self.api_key
        url = f"{self.base_url}{path}"
        try:
            response = self._http.request(method, path, headers=headers, **kwargs)
        except httpx.HTTPError as exc:
            raise N8nApiError(method, url, None, f"{type(exc).__name__}: {exc}") from exc
        if response.status_code not in expect:
            raise N8nApiError(method, url, response.status_code, response.text)
        return response

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._call(method, path, **kwargs)
        try:
            return response.json()
        except ValueError as exc:
            raise N8nApiError(
                method, f"{self.base_url}{path}", response.status_code, f"not JSON: {response.text}"
            ) from exc

    # --- readiness and accounts ----------------------------------------------------------------

    def wait_ready(self, timeout_s: float = 120.0) -> float:
        """Poll `/healthz/readiness` until 200 (database connected and migrated); seconds waited."""
        started = time.monotonic()
        last = "no answer yet"
        while time.monotonic() - started < timeout_s:
            try:
                response = self._http.get("/healthz/readiness", timeout=5)
                if response.status_code == 200:
                    return time.monotonic() - started
                last = f"HTTP {response.status_code}: {response.text[:200]}"
            except httpx.HTTPError as exc:
                last = f"{type(exc).__name__}: {exc}"
            time.sleep(0.25)
        raise N8nApiError(
            "GET", f"{self.base_url}/healthz/readiness", None, f"not ready after {timeout_s:.0f} s; last: {last}"
        )

    def setup_owner(self, owner: OwnerLogin) -> dict[str, Any]:
        """Create the instance owner (only possible once per instance)."""
        body = {
            "email": owner.email,
            "firstName": owner.first_name,
            "lastName": owner.last_name,
            "password": owner.password.get_secret_value(),
        }
        return self._json("POST", "/rest/owner/setup", json=body)["data"]

    def login(self, owner: OwnerLogin) -> None:
        """Log in; the `n8n-auth` cookie is kept for /rest calls."""
        self._call(
            "POST",
            "/rest/login",
            json={"emailOrLdapLoginId": owner.email, "password": owner.password.get_secret_value()},
        )
        if "n8n-auth" not in self._http.cookies:
            raise N8nApiError(
                "POST",
                f"{self.base_url}/rest/login",
                200,
                "no n8n-auth cookie in the answer; over plain HTTP n8n needs N8N_SECURE_COOKIE=false",
            )

    def api_key_scopes(self) -> list[str]:
        return list(self._json("GET", "/rest/api-keys/scopes")["data"])

    def create_api_key(self, label: str | None = None, scopes: list[str] | None = None) -> str:
        """An API key with `scopes` (default: every scope the logged-in role may grant); kept for /api/v1.

        Labels are unique per user in 2.41.1 (a second "n8n-sizer" answers HTTP 500), so the default
        label carries a random suffix.
        """
        label = label or f"n8n-sizer-{secrets.token_hex(4)}"
        chosen = scopes if scopes is not None else self.api_key_scopes()
        data = self._json("POST", "/rest/api-keys", json={"label": label, "scopes": chosen, "expiresAt": None})["data"]
        self._api_key = data["rawApiKey"]
        return self._api_key

    # --- workflows -----------------------------------------------------------------------------

    def create_workflow(self, workflow: dict[str, Any]) -> dict[str, Any]:
        """Create through the public API; only the fields it accepts are sent. Returns n8n's workflow."""
        return self._json("POST", "/api/v1/workflows", public=True, json=create_body(workflow))

    def create_credential(self, name: str, type_: str, data: dict[str, Any]) -> dict[str, Any]:
        """Create a credential through the public API (e.g. an `openAiApi` whose `url` is a local stand-in);
        n8n's answer (`id`, `name`, `type`) is what a node's `credentials` refers to."""
        return self._json("POST", "/api/v1/credentials", public=True, json={"name": name, "type": type_, "data": data})

    def activate_workflow(self, workflow_id: str) -> dict[str, Any]:
        """Activate (2.x also calls it publish): its production webhooks start answering."""
        return self._json("POST", f"/api/v1/workflows/{workflow_id}/activate", public=True)

    def deactivate_workflow(self, workflow_id: str) -> dict[str, Any]:
        """Deactivate (unpublish): its triggers stop, e.g. a schedule a test made."""
        return self._json("POST", f"/api/v1/workflows/{workflow_id}/deactivate", public=True)

    def wait_webhook_registered(self, path: str, http_method: str = "POST", timeout_s: float = 30.0) -> float:
        """Wait until main routes `path` (activation registers webhooks shortly after it answers).

        Probes with another HTTP method, so nothing executes: 2.41.1 answers 404 "This webhook is not
        registered for GET requests" once the path exists, and "The requested webhook ... is not
        registered" before. Returns seconds waited.
        """
        probe = "GET" if http_method.upper() != "GET" else "PATCH"
        url = f"{self.base_url}/{path.lstrip('/')}"
        started = time.monotonic()
        last = ""
        while time.monotonic() - started < timeout_s:
            try:
                response = self._http.request(probe, url, timeout=5)
                last = response.text
                if "is not registered for" in last or response.status_code not in (404, 500):
                    return time.monotonic() - started
            except httpx.HTTPError as exc:
                last = f"{type(exc).__name__}: {exc}"
            time.sleep(0.1)
        raise N8nApiError(probe, url, 404, f"webhook still not registered after {timeout_s:.0f} s: {last}")

    def version(self) -> str | None:
        """n8n's own version (`versionCli`), which 2.x shows only in the logged-in settings; None if not shown."""
        try:
            return str(self._json("GET", "/rest/settings")["data"]["versionCli"])
        except (N8nApiError, KeyError, TypeError):
            return None  # recorded as unknown, never guessed

    def get_workflow_editor(self, workflow_id: str) -> float:
        """What the editor loads when a user opens the workflow (`GET /rest/workflows/:id`, cookie); ms taken."""
        started = time.perf_counter()
        self._call("GET", f"/rest/workflows/{workflow_id}")
        return (time.perf_counter() - started) * 1000.0

    # --- executions ----------------------------------------------------------------------------

    def list_executions(
        self, workflow_id: str, status: str | None = None, page_size: int = PAGE_LIMIT
    ) -> list[dict[str, Any]]:
        """Every execution stored for the workflow (without their data), following `nextCursor`."""
        params: dict[str, Any] = {"workflowId": workflow_id, "limit": page_size}
        if status is not None:
            params["status"] = status
        found: list[dict[str, Any]] = []
        while True:
            page = self._json("GET", "/api/v1/executions", public=True, params=params)
            found.extend(page["data"])
            cursor = page.get("nextCursor")
            if not cursor or not page["data"]:
                return found
            params["cursor"] = cursor

    def count_executions(self, workflow_id: str, page_size: int = PAGE_LIMIT) -> ExecutionCounts:
        """Every stored execution of the workflow by status, running ones included.

        Without a status filter 2.41.1 leaves out the executions main is running right now
        (`excludeRunning`), so running ones are asked for separately; the later answer wins for an
        execution that finished in between.
        """
        running = self.list_executions(workflow_id, "running", page_size)
        status_by_id = {str(item["id"]): str(item.get("status")) for item in running}
        finished = self.list_executions(workflow_id, None, page_size)
        status_by_id.update({str(item["id"]): str(item.get("status")) for item in finished})
        by_status = Counter(status_by_id.values())
        success = tuple(sorted(i for i, status in status_by_id.items() if status == "success"))
        return ExecutionCounts(
            workflow_id=workflow_id,
            total=len(status_by_id),
            by_status=dict(sorted(by_status.items())),
            success_ids=success,
        )

    def get_execution(self, execution_id: str, include_data: bool = False) -> dict[str, Any]:
        """One execution; with `include_data` also its run data (each node's output and `executionTime`)."""
        params = {"includeData": "true"} if include_data else {}
        return self._json("GET", f"/api/v1/executions/{execution_id}", public=True, params=params)

    def execution_status(self, execution_id: str) -> str:
        """One execution's status: new, running, waiting, success, error, crashed, canceled, unknown."""
        return str(self._json("GET", f"/api/v1/executions/{execution_id}", public=True)["status"])


class N8nSession(Frozen):
    """An instance that is set up: where it is, its owner and the API key (both secret)."""

    base_url: str
    owner: OwnerLogin
    api_key: SecretStr

    def client(self, timeout_s: float = 30.0) -> N8nClient:
        """A client with the API key; call `login` on it for /rest calls that need the cookie."""
        return N8nClient(self.base_url, self.api_key.get_secret_value(), timeout_s)


def set_up_instance(
    base_url: str, owner: OwnerLogin | None = None, ready_timeout_s: float = 120.0, owner_exists: bool = False
) -> N8nSession:
    """Wait for readiness, create the owner (unless `owner_exists`: n8n made it at start from
    N8N_INSTANCE_OWNER_* variables, as the lab does), log in and create an API key with the role's scopes."""
    owner = owner or OwnerLogin.generate()
    with N8nClient(base_url) as client:
        client.wait_ready(ready_timeout_s)
        if not owner_exists:
            client.setup_owner(owner)
        client.login(owner)
        key = client.create_api_key()
    return N8nSession(base_url=base_url, owner=owner, api_key=SecretStr(key))
