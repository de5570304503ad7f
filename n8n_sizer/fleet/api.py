"""HTTP to the provider APIs for teardown and reap: retries with backoff on 429/5xx, clean errors.

Base URLs are parameters with environment overrides, so tests point them at a local server:
`N8N_SIZER_HCLOUD_URL` (default https://api.hetzner.cloud/v1) and `N8N_SIZER_GCP_COMPUTE_URL`
(default https://compute.googleapis.com/compute/v1).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any, Literal

import httpx

from n8n_sizer.errors import InputError, RemoteError
from n8n_sizer.safety.frozen import Frozen

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


def check_token(token: str, env_name: str) -> str:
    """An API token as HTTP can carry it (printable ASCII, no spaces); `InputError` naming the variable."""
    if not token.isascii() or not token.isprintable() or any(c.isspace() for c in token) or len(token) > 4096:
        raise InputError(
            f"{env_name} is not a usable API token (it must be printable ASCII without spaces); "
            f"copy the token again from the provider's console and export {env_name}"
        )
    return token


def check_base_url(url: str, env_name: str) -> str:
    """An API base URL: http(s)://host[:port]/path (the one URL grammar, safety/urls.py); `InputError` naming the
    variable that set it."""
    from n8n_sizer.safety.urls import url_parts

    try:
        return url_parts(url, env_name).text
    except ValueError as exc:
        raise InputError(
            f"{exc}; unset {env_name} to use the provider's API, or set it to e.g. http://127.0.0.1:8080/v1"
        ) from None


def env_token(token: str | None, env_name: str, how: str) -> str:
    """The API token given, else `$env_name`; `InputError` saying how to get one when neither is set."""
    token = token or os.environ.get(env_name)
    if not token:
        raise InputError(f"{env_name} is not set; export {env_name}={how}")
    return token


class RetryingClient:
    """An httpx client that retries 429 and 5xx (and transport errors) with exponential backoff."""

    def __init__(
        self,
        base_url: str,
        headers: dict[str, str],
        *,
        name: str,
        hint: str,
        attempts: int = DEFAULT_ATTEMPTS,
        backoff_s: float = DEFAULT_BACKOFF_S,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.name, self.hint = name, hint
        self.attempts, self.backoff_s, self.sleep = attempts, backoff_s, sleep
        self.retries = 0  # how many retries happened, for the report
        self._client = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=TIMEOUT_S)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> RetryingClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _wait(self, attempt: int, response: httpx.Response | None) -> None:
        delay = self.backoff_s * (2**attempt)
        if response is not None and response.headers.get("retry-after", "").isdigit():
            delay = float(response.headers["retry-after"])
        self.retries += 1
        self.sleep(min(delay, MAX_BACKOFF_S))

    def request(
        self, method: str, path: str, *, params: dict[str, Any] | None = None, ok_missing: bool = False
    ) -> dict[str, Any] | None:
        """JSON body of a successful call; None for 404 when `ok_missing` (already deleted)."""
        what = f"{self.name} {method} {path}"
        for attempt in range(self.attempts):
            try:
                response = self._client.request(method, path, params=params)
            except (httpx.InvalidURL, httpx.UnsupportedProtocol, UnicodeError) as exc:
                raise ProviderApiError(
                    f"{what} cannot be sent ({type(exc).__name__}); check the API base URL and the token"
                ) from None
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
                raise ProviderApiError(
                    f"{what} still failed after {self.attempts} attempts: HTTP "
                    f"{response.status_code} {message}; try again later",
                    response.status_code,
                    code,
                )
            if response.status_code >= 400:
                message, code = _error_text(response)
                hint = f"; {self.hint}" if response.status_code in (401, 403) else ""
                raise ProviderApiError(
                    f"{what} failed: HTTP {response.status_code} {message}{hint}", response.status_code, code
                )
            if not response.content:
                return {}
            try:
                body = response.json()
            except (ValueError, RecursionError):
                body = None
            if not isinstance(body, dict):
                raise ProviderApiError(
                    f"{what} answered HTTP {response.status_code} with a body that is "
                    "not a JSON object; check the API base URL"
                ) from None
            return body
        raise AssertionError("unreachable")  # the loop returns or raises


class CloudResource(Frozen):
    """One billable or policy-bearing thing a sweep found: what it is, where, and its labels."""

    provider: Literal["hetzner", "gcp"]
    kind: str  # servers, firewalls, ssh_keys; instances, firewalls, subnetworks, networks
    id: str
    name: str
    labels: dict[str, str]
    scope: str | None = None  # GCP: zones/<zone>, regions/<region> or global

    def describe(self) -> str:
        return f"{self.provider} {self.kind[:-1] if self.kind.endswith('s') else self.kind} {self.name} (id {self.id})"


class Outcome(Frozen):
    """What a sweep did to one resource."""

    resource: CloudResource
    action: Literal["deleted", "already-gone", "would-delete", "kept", "failed"]
    detail: str = ""


def bearer_client(
    token: str,
    base_url: str | None,
    url_env: str,
    default_url: str,
    *,
    name: str,
    hint: str,
    sleep: Callable[[float], None],
    backoff_s: float,
    attempts: int,
) -> RetryingClient:
    """A RetryingClient sending `Authorization: Bearer <token>` to `base_url`, else `$url_env` (tests point it at a
    local server), else the provider's own API."""
    url = check_base_url(base_url or os.environ.get(url_env) or default_url, url_env)
    return RetryingClient(
        url,
        {"Authorization": f"Bearer {token}"},
        name=name,
        hint=hint,
        sleep=sleep,
        backoff_s=backoff_s,
        attempts=attempts,
    )
