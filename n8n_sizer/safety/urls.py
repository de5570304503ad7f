"""One grammar for a URL the user gives (an n8n instance to read, `--from-n8n URL`): `check_url(flag, text)`.

A minimal version written for issue 38 while the shared URL grammar is being written in its own branch; the two
are to be merged into one function. Accepted: `http` or `https`, a host (a DNS name, an IPv4 address or a bracketed
IPv6 address), an optional port 1-65535, an optional path; no user or password in the URL (`user:pass@host` would
put a secret on the command line and in the shell's history), no control characters or whitespace, no query or
fragment (the tool adds its own paths), at most 2,048 characters. Returns the URL normalised: scheme and host in
lowercase, no trailing slash. Refusals are one `InputError` line naming the flag, what is wrong and an example.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from n8n_sizer.errors import InputError
from n8n_sizer.safety.network import HOST_RE

MAX_URL_CHARS = 2048
EXAMPLE = "https://n8n.example.com or http://127.0.0.1:5678"
_CONTROL = re.compile(r"[\x00-\x20\x7f-\x9f]")


def _refuse(flag: str, text: str, why: str) -> InputError:
    shown = text[:80] + ("..." if len(text) > 80 else "")
    shown = _CONTROL.sub("?", shown)
    return InputError(f"{flag} {shown!r} {why}; give the instance's base URL, e.g. {EXAMPLE}")


def check_url(flag: str, text: object) -> str:
    """`text` as a normalised http(s) base URL, or `InputError` (one line) naming `flag`."""
    if not isinstance(text, str) or not text:
        raise _refuse(flag, str(text or ""), "is empty")
    if len(text) > MAX_URL_CHARS:
        raise _refuse(flag, text, f"is {len(text):,} characters long, above {MAX_URL_CHARS:,}")
    if _CONTROL.search(text):
        raise _refuse(flag, text, "holds whitespace or control characters")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:  # a port that is not a number or outside 0-65535, an unclosed [ ...
        raise _refuse(flag, text, f"is not a URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        why = "has no scheme" if not scheme else f"uses {scheme}://, not http:// or https://"
        raise _refuse(flag, text, why)
    if "@" in parts.netloc:
        raise _refuse(flag, text, "carries a user or password; the API key comes from N8N_API_KEY or --api-key-file")
    if parts.query or parts.fragment or text.endswith(("?", "#")):
        raise _refuse(flag, text, "has a query or fragment")
    host = parts.hostname or ""
    if not host:
        raise _refuse(flag, text, "has no host")
    if parts.netloc.startswith("["):
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise _refuse(flag, text, "has a bracketed host that is not an IPv6 address") from None
        shown_host = f"[{host}]"
    elif not HOST_RE.fullmatch(host):
        raise _refuse(flag, text, "has a host that is not a DNS name or IPv4 address")
    else:
        shown_host = host.lower()
    if port is not None and not 1 <= port <= 65535:
        raise _refuse(flag, text, f"has port {port}, outside 1-65535")
    if parts.netloc.endswith(":"):
        raise _refuse(flag, text, "has an empty port")
    path = parts.path.rstrip("/")
    return f"{scheme}://{shown_host}{f':{port}' if port is not None else ''}{path}"
