"""What a `check` rule returns, and the small helpers every rule uses."""

from __future__ import annotations

import re
from typing import Literal

from n8n_sizer.bundle.composefile import Service
from n8n_sizer.safety.frozen import Frozen

Status = Literal["pass", "fail", "n/a"]


class RuleResult(Frozen):
    """One checklist rule's verdict; `fix` is set for a failure."""

    rule: str
    status: Status
    message: str
    fix: str | None = None


class CheckContext(Frozen):
    """What the user told `check` about the host and the workflows."""

    vcpu: int | None
    longest_execution_s: int | None
    ram_mib: int | None = None  # the server's RAM (`check --ram`, or a topology host's size)


def ok(rule: str, message: str) -> RuleResult:
    return RuleResult(rule=rule, status="pass", message=message)


def na(rule: str, message: str) -> RuleResult:
    return RuleResult(rule=rule, status="n/a", message=message)


def fail(rule: str, message: str, fix: str) -> RuleResult:
    return RuleResult(rule=rule, status="fail", message=message, fix=fix)


def names(services: list[Service]) -> str:
    return ", ".join(s.name for s in services)


def as_int(text: str | None) -> int | None:
    """The integer `text` spells, or None; more than 18 digits is not a setting but noise (and Python
    refuses to convert thousands of digits), so it is None too."""
    return int(text) if text is not None and re.fullmatch(r"-?\d{1,18}", text.strip()) else None
