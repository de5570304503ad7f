"""The one Redis client of the package: RESP over TCP, AUTH then one command, for the Redis a stack runs.

Small on purpose (no dependency): the stack, its health check and the drills only need single commands
(PING, LLEN, ZCARD, CONFIG GET, ...). Replies come back as Python values: an int, a str, a list or None (nil).
"""

from __future__ import annotations

import socket
from typing import Any, BinaryIO

from n8n_sizer.errors import RemoteError


class RedisError(RemoteError):
    """Redis refused the password or the command, or answered something that is not RESP."""


def _encode(parts: tuple[str, ...]) -> bytes:
    out = f"*{len(parts)}\r\n".encode()
    for part in parts:
        data = part.encode()
        out += f"${len(data)}\r\n".encode() + data + b"\r\n"
    return out


def redis_command(
    port: int, password: str, *args: str, host: str = "127.0.0.1", timeout_s: float = 3.0, user: str | None = None
) -> Any:
    """One Redis command after AUTH (as the default user, or as ACL `user`); its reply as a Python value.
    RedisError on an error reply, OSError when nothing listens."""
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        reader = sock.makefile("rb")
        sock.sendall(_encode(("AUTH", *([user] if user else []), password)) + _encode(args))
        auth = reader.readline()
        if not auth.startswith(b"+OK"):
            raise RedisError(f"Redis AUTH failed: {auth[:80]!r}")
        return read_reply(reader)


def redis_ping(port: int, password: str, host: str = "127.0.0.1") -> bool:
    """True when Redis answers PONG after AUTH; False when it refuses, errs or is not there yet."""
    try:
        return redis_command(port, password, "PING", host=host, timeout_s=2.0) == "PONG"
    except (RedisError, OSError):
        return False


def read_reply(reader: BinaryIO) -> Any:
    """One RESP2 reply from `reader`."""
    line = reader.readline().rstrip(b"\r\n")
    kind, rest = line[:1], line[1:]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise RedisError(f"Redis error: {rest.decode()}")
    if kind == b":":
        return int(rest)
    if kind == b"$":
        size = int(rest)
        return None if size < 0 else reader.read(size + 2)[:-2].decode("utf-8", "replace")
    if kind == b"*":
        size = int(rest)
        return None if size < 0 else [read_reply(reader) for _ in range(size)]
    raise RedisError(f"Redis answered something unexpected: {line[:80]!r}")
