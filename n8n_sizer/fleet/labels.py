"""Labels every fleet resource carries, and the `expires-at` encoding shared by Hetzner and GCP.

Hetzner label values allow `[a-zA-Z0-9._-]` (63 chars, alphanumeric at both ends); GCP label values
allow lowercase letters, digits, `_` and `-` (63 chars). An ISO timestamp has `:` and uppercase `T`/`Z`,
which both refuse, so `expires-at` is written as `YYYY-MM-DDtHH-MMz` in UTC, e.g. `2026-12-01t10-00z`:
valid on both providers, readable, and it sorts like the time it encodes.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

PROJECT_LABEL = "n8n-sizer"
EXPIRES_FORMAT = "%Y-%m-%dt%H-%Mz"
# The intersection of Hetzner's and GCP's label value rules, lowercase only.
LABEL_VALUE_RE = re.compile(r"^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$")


def encode_expires_at(moment: datetime) -> str:
    """`2026-12-01t10-00z` for 2026-12-01 10:00 UTC (seconds dropped; rounds up to the next minute)."""
    if moment.tzinfo is None:
        raise ValueError("expires-at needs a timezone-aware datetime")
    utc = moment.astimezone(UTC)
    if utc.second or utc.microsecond:
        utc = utc.replace(second=0, microsecond=0) + timedelta(minutes=1)
    return utc.strftime(EXPIRES_FORMAT)


def decode_expires_at(value: str) -> datetime | None:
    """The UTC time an `expires-at` label encodes, or None when the value is not in that format."""
    try:
        return datetime.strptime(value, EXPIRES_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None


def expires_at(now: datetime, ttl_hours: float) -> str:
    return encode_expires_at(now + timedelta(hours=ttl_hours))


def fleet_labels(*, stack: str, owner: str, role: str, expires: str) -> dict[str, str]:
    """The five labels on every labelled resource: project, stack, owner, role, expires-at."""
    labels = {"project": PROJECT_LABEL, "stack": stack, "owner": owner, "role": role, "expires-at": expires}
    for key, value in labels.items():
        if not LABEL_VALUE_RE.fullmatch(value):
            raise ValueError(f"label {key}={value!r} is not a valid Hetzner/GCP label value")
    return labels


def stack_selector(stack: str, owner: str | None = None) -> str:
    """Hetzner `label_selector` for everything a stack created (of one owner, when given)."""
    return f"project={PROJECT_LABEL},stack={stack}{owner_selector(owner)}"


def expiring_selector(owner: str | None = None) -> str:
    """Hetzner `label_selector` for everything that carries an expiry (value checked by the reaper)."""
    return f"project={PROJECT_LABEL}{owner_selector(owner)},expires-at"


def owner_selector(owner: str | None) -> str:
    """`,owner=NAME` to narrow a selector to one owner's resources; '' for every owner."""
    return f",owner={owner}" if owner else ""


def selector_matches(selector: str, labels: dict[str, str]) -> bool:
    """Whether `labels` satisfy a Hetzner `label_selector` of `k=v` and bare `k` terms, as the API would.

    The sweep applies it again to everything an API lists: an API (or a proxy, or a bug) that ignores
    the selector must not turn a teardown into a delete of whatever the project holds."""
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "=" in term:
            key, value = term.split("=", 1)
            if labels.get(key) != value:
                return False
        elif term not in labels:
            return False
    return True


def resource_expired(labels: dict[str, str], now) -> bool | None:
    """True/False when the `expires-at` label parses; None when it is missing or malformed (never deleted)."""
    moment = decode_expires_at(labels.get("expires-at", ""))
    return None if moment is None else moment <= now
