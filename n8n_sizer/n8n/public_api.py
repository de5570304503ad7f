"""n8n's public REST API (`/api/v1`), read with bounds: a reader for an instance the user runs, which may be far
away, slow, busy, misconfigured or hostile.

Checked against n8n 2.41.1 (its `ExecutionsPublicController`, `pagination.service`, `ListExecutionsQueryDto`):
- `GET /api/v1/executions` answers `{data: [...], nextCursor}` newest first (ordered by id, descending), at most 250
  a page (`limit`), leaving out the executions running right now; it filters by `workflowId`, `status`,
  `startedAfter`/`startedBefore` (ISO 8601), and with `includeData=true` each item carries `data` (its run data,
  payloads included) and `workflowData` (the workflow as it ran). The cursor is base64 JSON `{lastId, limit}`;
- `GET /api/v1/workflows` pages the same way (its cursor is `{limit, offset}`);
- a wrong or missing key answers 401 `{"message": "Unauthorized"}`, and so does every key when the public API is
  off (`N8N_PUBLIC_API_DISABLED=true`, seen on 2.41.1); an unknown path under /api/v1 answers 404, a bad cursor or
  a malformed date 400; a path outside /api/v1 (`/api/v2/...`) answers the editor's HTML with 200.

Every request carries the key in `X-N8N-API-KEY` (never in a URL, never logged, never in an error message), times
out, is retried with backoff on 429 and 5xx (honouring `Retry-After`, never past the read's deadline), and is read
as a stream under a byte cap, so a huge or endless answer stops at the cap. Redirects are not followed: the key is
never sent to another address. `ReadBounds` caps the pages, the bytes of one page and of the whole read, and the
wall-clock time. Every failure is one line (`PublicApiError`, exit 1) that says what was asked, what came back
and what to check.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
from pydantic import Field, SecretStr

from n8n_sizer.errors import InputError, RemoteError
from n8n_sizer.safety.frozen import Frozen

API = "/api/v1"
PAGE_LIMIT = 250  # n8n's MAX_ITEMS_PER_PAGE (api-types, pagination.dto)
RETRY_STATUSES = (429, 500, 502, 503, 504)
MAX_RETRY_AFTER_S = 30.0
SCOPES_NEEDED = "workflow:list, workflow:read, execution:list, execution:read"

Progress = Callable[[str, int, int], None]  # (what, requests so far, bytes so far)


class ReadBounds(Frozen):
    """How much one read may take: requests, bytes (one answer, all answers), seconds, and each request's timeout."""

    max_pages: int = Field(2000, ge=1, le=1_000_000)
    max_page_bytes: int = Field(32 << 20, ge=1024, le=4 << 30)
    max_total_bytes: int = Field(1 << 30, ge=1024, le=64 << 30)
    max_seconds: float = Field(900.0, gt=0, le=7 * 86400)
    timeout_s: float = Field(30.0, gt=0, le=3600)
    retries: int = Field(5, ge=0, le=20)


class PublicApiError(RemoteError):
    """The instance could not be read: one line, exit 1."""


class PageTooLarge(PublicApiError):
    """One answer was larger than the page byte cap (the caller may ask again for fewer items)."""


class BudgetSpent(PublicApiError):
    """The read reached one of its bounds (pages, bytes, seconds): what was read so far stands, the rest does not."""


class PublicApi:
    """One instance's public API under one `ReadBounds` budget, shared by every request of the read."""

    def __init__(
        self,
        base_url: str,
        api_key: SecretStr,
        bounds: ReadBounds | None = None,
        progress: Progress | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.bounds = bounds or ReadBounds()
        self._key = api_key
        self._progress = progress
        self._http = httpx.Client(
            base_url=self.base_url,
            follow_redirects=False,
            timeout=self.bounds.timeout_s,
            transport=transport,
            headers={"Accept": "application/json", "User-Agent": "n8n-sizer history reader"},
        )
        self.requests = 0
        self.bytes = 0
        self.started = time.monotonic()
        self.deadline = self.started + self.bounds.max_seconds

    def __enter__(self) -> PublicApi:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    # --- one request -------------------------------------------------------------------------------

    def _where(self, path: str) -> str:
        return f"GET {self.base_url}{path}"

    def _spend(self, path: str) -> None:
        if self.requests >= self.bounds.max_pages:
            raise BudgetSpent(
                f"{self._where(path)}: stopped at the read's cap of {self.bounds.max_pages:,} requests (--max-pages)"
            )
        if time.monotonic() >= self.deadline:
            raise BudgetSpent(
                f"{self._where(path)}: stopped at the read's cap of {self.bounds.max_seconds:g} s (--max-seconds)"
            )
        if self.bytes >= self.bounds.max_total_bytes:
            raise BudgetSpent(
                f"{self._where(path)}: stopped at the read's cap of {self.bounds.max_total_bytes >> 20:,} MiB "
                "in all (--max-mb)"
            )
        self.requests += 1

    def get_json(self, path: str, params: dict[str, Any] | None = None, page_bytes: int | None = None) -> Any:
        """One GET under the bounds, retried on 429/5xx and dropped connections; its JSON, or one-line errors."""
        attempt = 0
        while True:
            self._spend(path)
            try:
                return self._get_once(path, params or {}, page_bytes or self.bounds.max_page_bytes)
            except _Retry as exc:
                attempt += 1
                if attempt > self.bounds.retries:
                    raise PublicApiError(
                        f"{self._where(path)}: {exc.what} after {attempt} tries over {self.elapsed_s:.0f} s; {exc.fix}"
                    ) from None
                pause = exc.retry_after_s
                if pause is None:
                    pause = min(8.0, 0.5 * 2 ** (attempt - 1)) * (0.75 + 0.5 * random.random())
                if time.monotonic() + pause >= self.deadline:
                    raise BudgetSpent(
                        f"{self._where(path)}: {exc.what}, and waiting {pause:.0f} s more would pass the read's "
                        f"cap of {self.bounds.max_seconds:g} s (--max-seconds); {exc.fix}"
                    ) from None
                time.sleep(pause)

    def _timeout(self) -> httpx.Timeout:
        left = max(0.5, min(self.bounds.timeout_s, self.deadline - time.monotonic()))
        return httpx.Timeout(left, connect=min(left, 10.0))

    def _get_once(self, path: str, params: dict[str, Any], cap: int) -> Any:
        headers = {"X-N8N-API-KEY": self._key.get_secret_value()}
        try:
            with self._http.stream("GET", path, params=params, headers=headers, timeout=self._timeout()) as answer:
                body = self._read_capped(path, answer, cap)
        except (httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout) as exc:
            raise _Retry(f"no answer within {self.bounds.timeout_s:g} s ({type(exc).__name__})") from None
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            raise _Retry(f"the connection broke ({_short(exc)})") from None
        except httpx.ConnectTimeout:
            raise PublicApiError(
                f"{self._where(path)}: no connection within 10 s; check the URL, the port and any firewall"
            ) from None
        except httpx.ConnectError as exc:
            raise PublicApiError(f"{self._where(path)}: {_connect_reason(exc)}") from None
        except httpx.HTTPError as exc:
            raise PublicApiError(f"{self._where(path)}: {type(exc).__name__}: {_short(exc)}") from None
        status, ctype, text = body
        if status in RETRY_STATUSES:
            raise _Retry(
                f"HTTP {status}" + (" (too many requests)" if status == 429 else " (the instance failed)"),
                retry_after_s=self._retry_after,
                fix="try again later, or read less at once (--since, --sample)"
                if status == 429
                else "check the instance's log",
            )
        if 300 <= status < 400:
            raise PublicApiError(
                f"{self._where(path)}: HTTP {status}, a redirect to {self._location[:200]!r}; give that address "
                "as the URL (the API key is never sent to a redirected address)"
            )
        if status == 401:
            raise PublicApiError(
                f"{self._where(path)}: HTTP 401, the API key was refused; check N8N_API_KEY or --api-key-file "
                "(a key made in n8n under Settings > n8n API, not expired), and that the public API is on (with "
                "N8N_PUBLIC_API_DISABLED=true n8n 2.41.1 answers 401 to every key)"
            )
        if status == 403:
            raise PublicApiError(
                f"{self._where(path)}: HTTP 403, the API key may not read this; give it the scopes {SCOPES_NEEDED}"
            )
        if status == 404:
            raise PublicApiError(
                f"{self._where(path)}: HTTP 404, no n8n public API there; check that the URL is the instance's "
                "base (not /webhook/...), that a proxy in front passes /api/, and that the instance is n8n 1.0 or "
                "newer with its public API on"
            )
        if status == 400:
            raise BadRequest(f"{self._where(path)}: HTTP 400: {_snippet(text)}")
        if status != 200:
            raise PublicApiError(f"{self._where(path)}: HTTP {status}: {_snippet(text)}")
        if "json" not in ctype:
            what = "an HTML page" if "html" in ctype or text.lstrip().startswith("<") else f"'{ctype[:60]}'"
            raise PublicApiError(
                f"{self._where(path)}: answered {what}, not JSON: this is not n8n's public API at this URL (with "
                "N8N_PUBLIC_API_DISABLED=true, or behind a proxy, n8n's editor page answers instead)"
            )
        from n8n_sizer.safety.jsondoc import load_json

        try:
            return load_json(text, f"{self._where(path)}: the answer", "check that the URL is an n8n instance")
        except InputError as exc:
            raise PublicApiError(str(exc)) from None

    def _read_capped(self, path: str, answer: httpx.Response, cap: int) -> tuple[int, str, str]:
        self._retry_after = _retry_after(answer.headers.get("retry-after"))
        self._location = answer.headers.get("location", "")
        declared = answer.headers.get("content-length")
        if answer.status_code == 200 and declared and declared.isdigit() and int(declared) > cap:
            raise PageTooLarge(
                f"{self._where(path)}: the answer is {int(declared):,} bytes, above the page cap {cap:,}"
            )
        chunks, total = [], 0
        for chunk in answer.iter_bytes():
            if time.monotonic() >= self.deadline:  # an answer that drips in under every read timeout
                raise BudgetSpent(
                    f"{self._where(path)}: the answer was still arriving at the read's cap of "
                    f"{self.bounds.max_seconds:g} s (--max-seconds)"
                )
            total += len(chunk)
            self.bytes += len(chunk)
            if total > cap:
                raise PageTooLarge(f"{self._where(path)}: the answer passed the page cap of {cap:,} bytes")
            if self.bytes > self.bounds.max_total_bytes:
                raise BudgetSpent(
                    f"{self._where(path)}: stopped at the read's cap of {self.bounds.max_total_bytes >> 20:,} MiB in "
                    "all (--max-mb)"
                )
            chunks.append(chunk)
        if self._progress is not None:
            self._progress(path, self.requests, self.bytes)
        raw = b"".join(chunks)
        return answer.status_code, answer.headers.get("content-type", "").lower(), raw.decode("utf-8", "replace")

    # --- pages -------------------------------------------------------------------------------------

    def pages(self, path: str, params: dict[str, Any], page_bytes: int | None = None) -> Iterator[list[dict]]:
        """Every page of a cursor-paged list (`{data: [...], nextCursor}`), as lists of objects. Stops when the
        cursor ends, repeats or a page is empty; the read's bounds stop it otherwise (`BudgetSpent`)."""
        query = dict(params)
        seen: set[str] = set()
        while True:
            page = self.get_json(path, query, page_bytes)
            items, cursor = list_page(page, self._where(path))
            yield items
            if not cursor or not items:
                return
            if cursor in seen:
                raise PublicApiError(
                    f"{self._where(path)}: the instance sent the same page cursor twice; its paging is broken "
                    "(nothing after this page was read)"
                )
            seen.add(cursor)
            query = {**params, "cursor": cursor}


class _Retry(Exception):
    def __init__(self, what: str, retry_after_s: float | None = None, fix: str = "try again later") -> None:
        super().__init__(what)
        self.what, self.retry_after_s, self.fix = what, retry_after_s, fix


class BadRequest(PublicApiError):
    """HTTP 400: the instance refused a parameter (an older n8n without `startedAfter`, a bad cursor)."""


def list_page(page: Any, where: str) -> tuple[list[dict], str | None]:
    """`{data: [objects], nextCursor: str | null}` checked: anything else is one line."""
    if not isinstance(page, dict) or not isinstance(page.get("data"), list):
        shape = type(page).__name__ if not isinstance(page, dict) else f"an object with {sorted(page)[:6]}"
        raise PublicApiError(f"{where}: expected {{data: [...], nextCursor}}, got {shape}: not n8n's list format")
    items = page["data"]
    bad = next((i for i, item in enumerate(items) if not isinstance(item, dict)), None)
    if bad is not None:
        raise PublicApiError(f"{where}: data[{bad}] is {type(items[bad]).__name__}, not an object")
    cursor = page.get("nextCursor")
    if cursor is not None and (not isinstance(cursor, str) or len(cursor) > 4096):
        raise PublicApiError(f"{where}: nextCursor is not a short string")
    return items, cursor or None


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None  # an HTTP date: use our own backoff
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S) if seconds == seconds else None


def _short(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or type(exc).__name__


def _snippet(text: str) -> str:
    return " ".join(text.split())[:200] or "(empty body)"


def _connect_reason(exc: httpx.ConnectError) -> str:
    text = _short(exc)
    low = text.lower()
    if "ssl" in low or "certificate" in low or "tls" in low:
        return (
            f"the TLS handshake failed ({text}); if the instance uses a private CA, point SSL_CERT_FILE at its "
            "certificate; if it speaks plain HTTP, use http://"
        )
    if "refused" in low:
        return "connection refused: nothing listens there; check that n8n runs and the port (n8n's default is 5678)"
    if "name or service not known" in low or "nodename nor servname" in low or "temporary failure in name" in low:
        return f"the host name does not resolve ({text}); check the URL"
    return f"cannot connect ({text}); check the URL and that the instance is reachable from here"
