"""HTTP to the provider APIs for teardown and reap: retries with backoff on 429/5xx, clean errors.

Base URLs are parameters with environment overrides, so tests point them at a local server:
`N8N_SIZER_HCLOUD_URL` (default https://api.hetzner.cloud/v1) and `N8N_SIZER_GCP_COMPUTE_URL`
(default https://compute.googleapis.com/compute/v1).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Literal

import httpx
from pydantic import BaseModel, ConfigDict

from n8n_sizer.errors import RemoteError

DEFAULT_ATTEMPTS = 6
DEFAULT_BACKOFF_S = 0.5
MAX_BACKOFF_S = 30.0
TIMEOUT_S = 30.0


class ProviderApiError(RemoteError):
    """A provider API call failed for good (after retries, or with a 4xx that retrying cannot fix)."""

    def __init__(self, message: str, status: int | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


def _error_text(response: httpx.Response) -> tuple[str, str | None]:
    """(message, code) from Hetzner's `{"error": {"code", "message"}}` or GCP's `{"error": {"message", "status"}}`."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:200].replace("\n", " "), None
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):
        code = err.get("code") if isinstance(err.get("code"), str) else err.get("status")
        return str(err.get("message", ""))[:200], code
    return str(body)[:200], None


class RetryingClient:
    """An httpx client that retries 429 and 5xx (and transport errors) with exponential backoff."""

    def __init__(self, base_url: str, headers: dict[str, str], *, name: str, hint: str,
                 attempts: int = DEFAULT_ATTEMPTS, backoff_s: float = DEFAULT_BACKOFF_S,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.name, self.hint = name, hint
        self.attempts, self.backoff_s, self.sleep = attempts, backoff_s, sleep
        self.retries = 0  # how many retries happened, for the report
        self._client = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=TIMEOUT_S)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> "RetryingClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _wait(self, attempt: int, response: httpx.Response | None) -> None:
        delay = self.backoff_s * (2 ** attempt)
        if response is not None and response.headers.get("retry-after", "").isdigit():
            delay = float(response.headers["retry-after"])
        self.retries += 1
        self.sleep(min(delay, MAX_BACKOFF_S))

    def request(self, method: str, path: str, *, params: dict[str, Any] | None = None,
                ok_missing: bool = False) -> dict[str, Any] | None:
        """JSON body of a successful call; None for 404 when `ok_missing` (already deleted)."""
        what = f"{self.name} {method} {path}"
        for attempt in range(self.attempts):
            try:
                response = self._client.request(method, path, params=params)
            except httpx.TransportError as exc:
                if attempt == self.attempts - 1:
                    raise ProviderApiError(f"{what} failed: {type(exc).__name__}: {exc}; {self.hint}") from None
                self._wait(attempt, None)
                continue
            if response.status_code == 404 and ok_missing:
                return None
            if response.status_code == 429 or response.status_code >= 500:
                if attempt < self.attempts - 1:
                    self._wait(attempt, response)
                    continue
                message, code = _error_text(response)
                raise ProviderApiError(f"{what} still failed after {self.attempts} attempts: HTTP "
                                       f"{response.status_code} {message}; try again later", response.status_code, code)
            if response.status_code >= 400:
                message, code = _error_text(response)
                hint = f"; {self.hint}" if response.status_code in (401, 403) else ""
                raise ProviderApiError(f"{what} failed: HTTP {response.status_code} {message}{hint}",
                                       response.status_code, code)
            if not response.content:
                return {}
            try:
                return response.json()
            except ValueError:
                raise ProviderApiError(f"{what} answered HTTP {response.status_code} with a body that is "
                                       "not JSON; check the API base URL") from None
        raise AssertionError("unreachable")  # the loop returns or raises


class CloudResource(BaseModel):
    """One billable or policy-bearing thing a sweep found: what it is, where, and its labels."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: Literal["hetzner", "gcp"]
    kind: str  # servers, firewalls, ssh_keys; instances, firewalls, subnetworks, networks
    id: str
    name: str
    labels: dict[str, str]
    scope: str | None = None  # GCP: zones/<zone>, regions/<region> or global

    def describe(self) -> str:
        return f"{self.provider} {self.kind[:-1] if self.kind.endswith('s') else self.kind} {self.name} (id {self.id})"


class Outcome(BaseModel):
    """What a sweep did to one resource."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    resource: CloudResource
    action: Literal["deleted", "already-gone", "would-delete", "kept", "failed"]
    detail: str = ""
