"""The load driver's HTTP client: a lean asyncio HTTP/1.1 keep-alive client (plain http only, POST of a fixed body).

httpx's async client spends several times more CPU per request, which on 2 cores is the difference between holding
2,000 req/s and not (`benchmarks/load_driver.py` measures it). A failure is raised as `RequestFailed` with its class
and the full error string; `execution_id_of` reads n8n's answer for the execution id the ledger follows.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field

from n8n_sizer.errors import InputError
from n8n_sizer.safety.urls import require_url

BODY_SNIPPET_BYTES = 300


EXECUTION_ID_MAX_BODY = 65536  # larger answers are not parsed for their execution id


def execution_id_of(body: bytes) -> str | None:
    """`executionId` from a JSON answer (object, or a list whose first item has it), else None."""
    if b'"executionId"' not in body or len(body) > EXECUTION_ID_MAX_BODY:
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if isinstance(data, list) and data:
        data = data[0]
    value = data.get("executionId") if isinstance(data, dict) else None
    return None if value is None else str(value)


# Node's http server closes idle keep-alive sockets after 5 s (server.keepAliveTimeout); reusing one just
# before that races the server's close, so idle connections are retired earlier.
IDLE_RETIRE_S = 4.0


class RequestFailed(Exception):
    def __init__(self, error_class: str, error: str, sent: float):
        super().__init__(error)
        self.error_class, self.error, self.sent = error_class, error, sent


@dataclass
class _Conn:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    idle_since: float = 0.0


@dataclass
class HttpPost:
    """POST `body` to `url` over pooled keep-alive connections."""

    url: str
    body: bytes
    timeout_s: float = 120.0
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)  # sent with every request (e.g. a signature)
    _idle: list[_Conn] = field(default_factory=list)

    def __post_init__(self) -> None:
        parts = require_url(self.url, "load URL")  # the one grammar: no CR/LF can reach the request line
        if parts.scheme != "http":
            raise InputError(
                f"load URL {self.url!r} is not plain http://host[:port]/path; the built-in driver "
                f"speaks HTTP/1.1 without TLS (use k6 for https)"
            )
        self.host, self.port = parts.host, parts.default_port
        self._path = parts.path or "/"
        self._netloc = parts.origin().removeprefix("http://")
        self._head = self.request_bytes(self.body, self.headers)

    def request_bytes(self, body: bytes, headers: dict[str, str]) -> bytes:
        extra = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        return (
            f"POST {self._path} HTTP/1.1\r\nHost: {self._netloc}\r\nContent-Type: {self.content_type}\r\n"
            f"{extra}Content-Length: {len(body)}\r\nConnection: keep-alive\r\n\r\n"
        ).encode() + body

    async def _connection(self) -> _Conn:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if now - conn.idle_since < IDLE_RETIRE_S and not conn.reader.at_eof() and not conn.writer.is_closing():
                return conn
            conn.writer.close()
        reader, writer = await asyncio.open_connection(self.host, self.port)
        return _Conn(reader, writer)

    async def post(self, raw: bytes | None = None) -> tuple[int, bytes, float]:
        """POST the fixed body, or `raw` (a whole request from `request_bytes`). Returns (status, body, monotonic
        time the request was written). Raises `RequestFailed`."""
        conn = None
        sent = time.monotonic()
        try:
            async with asyncio.timeout(self.timeout_s):
                conn = await self._connection()
                sent = time.monotonic()
                conn.writer.write(self._head if raw is None else raw)
                status, body, keep = await _read_response(conn.reader)
        except TimeoutError:
            _close(conn)
            raise RequestFailed("timeout", f"no response within {self.timeout_s:g} s (client timeout)", sent) from None
        except ConnectionRefusedError as exc:
            raise RequestFailed("refused", f"{type(exc).__name__}: {exc}", sent) from None
        except (ConnectionResetError, BrokenPipeError, asyncio.IncompleteReadError) as exc:
            _close(conn)
            what = str(exc) or "connection closed before a complete response"
            raise RequestFailed("reset", f"{type(exc).__name__}: {what}", sent) from None
        except (OSError, ValueError, asyncio.LimitOverrunError) as exc:
            _close(conn)
            raise RequestFailed("other", f"{type(exc).__name__}: {exc}", sent) from None
        if keep:
            conn.idle_since = time.monotonic()
            self._idle.append(conn)
        else:
            _close(conn)
        return status, body, sent

    def close(self) -> None:
        while self._idle:
            self._idle.pop().writer.close()


def _close(conn: _Conn | None) -> None:
    if conn is not None:
        conn.writer.close()


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
        raise ValueError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
    status = int(parts[1])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    keep = headers.get("connection", "").lower() != "close" and parts[0] == "HTTP/1.1"
    if "chunked" in headers.get("transfer-encoding", "").lower():
        chunks = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                    pass
                break
            chunks.append((await reader.readexactly(size + 2))[:-2])
        return status, b"".join(chunks), keep
    if "content-length" in headers:
        return status, await reader.readexactly(int(headers["content-length"])), keep
    if status in (204, 304) or 100 <= status < 200:
        return status, b"", keep
    return status, await reader.read(), False  # body until the server closes
