"""`--since` and `--until`: a time ago (`7d`, `36h`, `90m`, `600s`) or an ISO 8601 time (`2026-12-01T08:00:00Z`).
Pure: `now_s` is passed in. Refusals are one line naming the flag."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from n8n_sizer.errors import InputError

DEFAULT_SINCE = "7d"
UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
AGO = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
MAX_AGO_S = 400 * 86400.0  # n8n prunes at 14 days by default; a year and more is a typo


def parse_time(flag: str, text: str, now_s: float) -> float:
    """Unix seconds for `text`: an ISO time, or that long before `now_s`."""
    raw = text.strip()
    m = AGO.fullmatch(raw.lower())
    if m:
        ago = float(m.group(1)) * UNITS[m.group(2)]
        if ago > MAX_AGO_S:
            raise InputError(f"{flag} {text!r} reaches back more than 400 days; try {flag} 7d")
        return now_s - ago
    try:
        when = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(
            f"{flag} {text!r} is neither a time ago (7d, 36h, 90m) nor an ISO time (2026-12-01T08:00:00Z); "
            f"try {flag} 7d"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def window_from(since: str | None, until: str | None, now_s: float) -> tuple[float, float]:
    """(since, until) in unix seconds: `--since` defaults to 7 days before `--until`, `--until` to now."""
    until_s = now_s if until is None else parse_time("--until", until, now_s)
    since_s = parse_time("--since", since or DEFAULT_SINCE, until_s if since is None else now_s)
    if until_s > now_s + 60:
        raise InputError(f"--until {until!r} is in the future; leave it out to read up to now")
    if since_s >= until_s:
        raise InputError(f"--since {since!r} is not before --until {until or 'now'!r}; give an earlier --since")
    return since_s, until_s


def span_text(seconds: float) -> str:
    """A window's length as people say it: 90 s, 42 min, 36 h, 7 days."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"
