"""One check for the names a user gives (host groups, hosts, stacks, owners): the whole value must match the
name's pattern, else one line that names the value and the rule. The names become resource names, labels and
DNS-like host names, so each pattern is the strictest of the places it lands in.

Plain functions: a pydantic model wraps one in `AfterValidator`, so the message reaches the user as written.
"""

from __future__ import annotations

import re
from collections.abc import Callable


def matching(pattern: re.Pattern[str], message: str) -> Callable[[str], str]:
    """A check that returns a value `pattern` matches whole, and raises ValueError(message) otherwise;
    `message` is a format string whose `{value!r}` is the rejected value."""

    def check(value: str) -> str:
        if not pattern.fullmatch(value):
            raise ValueError(message.format(value=value))
        return value

    return check
