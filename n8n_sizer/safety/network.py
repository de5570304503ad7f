"""One grammar for network inputs: private subnets, SSH source ranges, host names and login users.

Every place that takes one of these (a topology's `subnet`, the lab, `bench --inventory`, the Pulumi
stack files) calls the function here, so a value refused in one place is refused in all of them. Each
returns the normalised value or raises `ValueError` with the message (pydantic validators pass it on);
`InputError` callers wrap it with the flag or file that held the value.
"""

from __future__ import annotations

import ipaddress
import re

# RFC 5737's documentation ranges: an example address copied into a stack file opens SSH to nobody
# the user knows (or to whoever holds it).
DOC_RANGES = tuple(ipaddress.ip_network(n) for n in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"))
WIDEST_SSH_PREFIX = 16  # wider than a /16 (65,536 addresses) is not "my office": --allow-wide-ssh says so
MAX_NAME_CHARS = 253  # DNS' own limit on a host name
# A DNS name (RFC 1123 labels) or an IPv4 address. No port, no user@, no scheme, no path, no whitespace.
HOST_RE = re.compile(
    r"(?=.{1,253}\Z)(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?"
)
# A POSIX login name as useradd accepts it (portable set), at most 32 characters.
USER_RE = re.compile(r"[a-z_][a-z0-9_-]{0,31}")


def check_private_subnet(value: object) -> str:
    """`value` as a private IPv4 network in its canonical form: RFC 1918 only, no host bits, not loopback,
    link-local, 0.0.0.0/8 or a documentation range; IPv6 refused (the private networks are IPv4)."""
    text = str(value) if isinstance(value, str) else None
    if text is None or len(text) > 43 or not text.strip():
        raise ValueError(f"subnet {str(value)[:60]!r} is not an IPv4 network; give one like 10.89.0.0/24")
    try:
        net = ipaddress.ip_network(text.strip(), strict=True)
    except ValueError as exc:
        why = "has host bits set" if "host bits" in str(exc) else "is not an IPv4 network"
        raise ValueError(f"subnet {text!r} {why}; give one like 10.89.0.0/24") from None
    if net.version != 4:
        raise ValueError(f"subnet {text!r} is IPv6; the private networks are IPv4: give one like 10.89.0.0/24")
    private = any(net.subnet_of(ipaddress.ip_network(n)) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))
    if not private:
        raise ValueError(
            f"subnet {text} is not inside a private range (10/8, 172.16/12, 192.168/16; not "
            "loopback, link-local or 0.0.0.0); give one like 10.89.0.0/24"
        )
    return str(net)


def check_ssh_cidr(value: object, *, allow_wide: bool = False, allow_example: bool = False) -> str:
    """An SSH source range (`operator_cidr`): an IPv4 or IPv6 network without host bits, no wider than a /16
    (IPv4) or /48 (IPv6) unless `allow_wide`, and not a documentation range unless `allow_example` (the
    shipped stack files carry 203.0.113.7/32 as the placeholder: `cost` may read it, `pulumi up` may not)."""
    text = value if isinstance(value, str) else None
    if text is None or len(text) > 43:
        raise ValueError(
            f"operator_cidr {str(value)[:60]!r} is not a CIDR; give your address as a /32, "
            "e.g. 198.18.7.9/32 (what `curl -4 ifconfig.me` prints, plus /32)"
        )
    try:
        net = ipaddress.ip_network(text.strip(), strict=True)
    except ValueError as exc:
        why = "has host bits set" if "host bits" in str(exc) else "is not a CIDR"
        raise ValueError(f"operator_cidr {text!r} {why}; give your address as a /32, e.g. 198.18.7.9/32") from None
    if not allow_example and net.version == 4 and any(net.overlaps(d) for d in DOC_RANGES):
        raise ValueError(
            f"operator_cidr {text} is a documentation example range (RFC 5737), not your "
            "address; put your own public address with /32"
        )
    widest = WIDEST_SSH_PREFIX if net.version == 4 else 48
    if net.prefixlen < widest and not allow_wide:
        raise ValueError(
            f"operator_cidr {text} opens SSH to {net.num_addresses:,} addresses (wider than a "
            f"/{widest}); give your own address as a /32, or set allow_wide_ssh: true "
            "(--allow-wide-ssh) if you mean it"
        )
    return str(net)


def check_host(value: object, what: str = "host") -> str:
    """A host name or IPv4 address, nothing else: no `host:port`, `user@host`, URL, whitespace or newline."""
    text = value if isinstance(value, str) else None
    shown = repr(str(value)[:60]) + ("..." if len(str(value)) > 60 else "")
    if text is None or len(text) > MAX_NAME_CHARS or not HOST_RE.fullmatch(text):
        hint = ""
        if text and len(text) <= MAX_NAME_CHARS:
            if "@" in text:
                hint = " (put the user in the user field, not in the host)"
            elif "://" in text or "/" in text:
                hint = " (a host, not a URL)"
            elif ":" in text:
                hint = " (give the port in the port field, not after ':')"
        raise ValueError(
            f"{what} {shown} is not a host name or IPv4 address{hint}; e.g. 10.89.0.10 or n8n-1.example.com"
        )
    return text


def check_user(value: object, what: str = "user") -> str:
    """A login name: lowercase letters, digits, `_` and `-`, at most 32 characters, starting with a letter or `_`."""
    text = value if isinstance(value, str) else None
    if text is None or not USER_RE.fullmatch(text):
        raise ValueError(
            f"{what} {str(value)[:40]!r} is not a login name; use lowercase letters, digits, _ and -, e.g. root"
        )
    return text
