"""One grammar for every URL the tool takes or writes: `--public-url`, an n8n base URL (a saved login, a
stack's), a provider's API base, `advise --from-n8n`, a load generator's target, and the URLs read back from
files (an existing `.env`'s `N8N_PUBLIC_URL`, a stack file's `public_url`).

A URL here is `http://` or `https://`, a host, an optional port and an optional path:

- the scheme is `http` or `https`, written in lowercase;
- no credentials: `https://user:pass@host/` would be written into every `.env` and `cloud-init.yaml`, and sent
  with every request;
- the host is a DNS name (RFC 1123 labels of at most 63 characters, 253 in all, ASCII: an IDN as its `xn--`
  form), an IPv4 address in dotted-quad form, or an IPv6 address in brackets; a name of digits and dots that is
  not a valid IPv4 address (`999.1.1.1`, `1.2.3`) is refused, since resolvers read such names differently;
- the port, when given, is a number in 1-65535 (`:0`, `:99999` and an empty `:` are refused);
- the path uses the characters RFC 3986 allows in a path, `%` only as `%XX`; no query, no fragment;
- no whitespace or control character anywhere (a newline would end a `.env` line and start another), none of
  `"'`$\\<>{}|^` (a `$` would be interpolated by Compose), at most 2,048 characters.

`url_parts` returns the parts; `check_url` the text. Both raise `ValueError` with one line that names `what`
(pydantic validators pass it on); `require_url` raises `InputError` for a flag. Nothing else in the package
parses a URL (`tests/unit/test_url_scan.py`).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from n8n_sizer.errors import InputError

MAX_URL_CHARS = 2048
SCHEMES = ("http", "https")
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_DNS = re.compile(rf"(?=.{{1,253}}\Z){_LABEL}(?:\.{_LABEL})*\.?")
_PORT = re.compile(r"[0-9]{1,5}")
# RFC 3986 pchar (unreserved, sub-delims but ' and $, ':' and '@') and '/', with %XX escapes
_PATH = re.compile(r"(?:/(?:[A-Za-z0-9\-._~!&()*+,;=:@]|%[0-9A-Fa-f]{2})*)*")
_FORBIDDEN = set("\"'`$\\<>{}|^")
EXAMPLE = "https://n8n.example.com/"


@dataclass(frozen=True)
class Url:
    """A URL the grammar accepted, in parts. `host` is the name or address as written (IPv6 without brackets)."""

    text: str
    scheme: str
    host: str
    port: int | None
    path: str

    @property
    def default_port(self) -> int:
        return self.port if self.port is not None else (443 if self.scheme == "https" else 80)

    @property
    def is_loopback(self) -> bool:
        """localhost (or a name under .localhost), 127.0.0.0/8, ::1, or the unspecified address."""
        host = self.host.lower().rstrip(".")
        if host == "localhost" or host.endswith(".localhost"):
            return True
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return address.is_loopback or address.is_unspecified

    def origin(self) -> str:
        """scheme://host[:port], without the path."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}" + (f":{self.port}" if self.port is not None else "")


def _fail(what: str, value: object, why: str, example: str = EXAMPLE) -> ValueError:
    from n8n_sizer.safety.text import printable

    shown = printable(repr(value), limit=80)
    return ValueError(f"{what} {shown} {why}; give an http:// or https:// URL such as {example}")


def _host(text: str, what: str, value: str) -> str:
    if text.startswith("["):
        if not text.endswith("]"):
            raise _fail(what, value, "has an unclosed [ in its host")
        try:
            ipaddress.IPv6Address(text[1:-1])
        except ValueError:
            raise _fail(what, value, "has a host in [ ] that is not an IPv6 address") from None
        if "%" in text:
            raise _fail(what, value, "has an IPv6 zone (%...) in its host; give a routable address")
        return text[1:-1]
    if not text:
        raise _fail(what, value, "has no host")
    if re.fullmatch(r"[0-9.]+", text):
        try:
            ipaddress.IPv4Address(text)
        except ValueError:
            raise _fail(what, value, f"has the host {text!r}, which is neither a name nor an IPv4 address") from None
        return text
    if not _DNS.fullmatch(text):
        raise _fail(what, value, f"has the host {text[:60]!r}, which is not a DNS name (letters, digits, - and .)")
    return text


def url_parts(value: object, what: str = "URL") -> Url:
    """`value` as a `Url` when the grammar above accepts it; `ValueError` (one line naming `what`) otherwise."""
    if not isinstance(value, str):
        raise _fail(what, value, "is not text")
    if not value:
        raise _fail(what, value, "is empty")
    if len(value) > MAX_URL_CHARS:
        raise _fail(what, value[:40] + "...", f"is {len(value):,} characters long, above {MAX_URL_CHARS:,}")
    if not value.isascii():
        raise _fail(what, value, "holds non-ASCII characters (write a non-ASCII host in its xn-- form)")
    if any(not c.isprintable() or c.isspace() for c in value):
        raise _fail(what, value, "holds whitespace or control characters")
    if quoted := sorted(_FORBIDDEN.intersection(value)):
        raise _fail(what, value, f"holds {' '.join(quoted)}, which a URL written into .env and YAML files may not")
    scheme, sep, rest = value.partition("://")
    if not sep or scheme not in SCHEMES:
        raise _fail(what, value, "does not start with http:// or https://")
    if "#" in rest or "?" in rest:
        raise _fail(what, value, "has a ?query or #fragment; give the base URL alone")
    authority, slash, path = rest.partition("/")
    path = slash + path
    if "@" in authority:
        raise _fail(what, value, "holds credentials (user:password@); they would be written into every file")
    host_text, port = authority, None
    if authority.startswith("["):
        close = authority.find("]")
        host_text, tail = (authority[: close + 1], authority[close + 1 :]) if close >= 0 else (authority, "")
        if tail:
            if not tail.startswith(":"):
                raise _fail(what, value, "has text after its [IPv6] host")
            port = tail[1:]
    elif ":" in authority:
        host_text, port = authority.rsplit(":", 1)
    number = None
    if port is not None:
        if not _PORT.fullmatch(port) or not 1 <= int(port) <= 65535:
            raise _fail(what, value, f"has the port {port[:12]!r}; a port is a number in 1-65535")
        number = int(port)
    host = _host(host_text, what, value)
    if not _PATH.fullmatch(path):
        raise _fail(what, value, "has a path with characters a URL path may not hold (or a % not followed by 2 hex)")
    return Url(text=value, scheme=scheme, host=host, port=number, path=path)


def check_url(value: object, what: str = "URL") -> str:
    """`value` unchanged when it is a URL of the grammar above; `ValueError` (one line naming `what`) otherwise."""
    return url_parts(value, what).text


def require_url(value: object, what: str) -> Url:
    """`url_parts` for a flag or a file field: the same check, as one `InputError` line."""
    try:
        return url_parts(value, what)
    except ValueError as exc:
        raise InputError(str(exc)) from None
