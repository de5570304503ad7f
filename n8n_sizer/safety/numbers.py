"""One validator for numeric flags: finite, inside a stated range, with the range in the message.

Typer parses `inf`, `nan` and `1e308` as floats without a word; every command passes its numbers through
`check_number` so a non-finite or absurd value is refused before it reaches arithmetic (an `inf` rate made
`advise` print a verdict about `null`, a `1e308` hour made `cost` print a 300-digit total).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from n8n_sizer.errors import InputError


@dataclass(frozen=True)
class Range:
    """An allowed interval. `low_open` excludes `low` itself (for "> 0")."""

    low: float
    high: float
    low_open: bool = False
    example: str = ""

    def text(self) -> str:
        return f"{'(' if self.low_open else '['}{_plain(self.low)}, {_plain(self.high)}]"

    def holds(self, value: float) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        return above and value <= self.high


def _plain(bound: float) -> str:
    return f"{int(bound):,}" if float(bound).is_integer() else f"{bound:g}"


def _shown(value: float) -> str:
    if isinstance(value, float) and math.isfinite(value):
        return f"{value:.6g}"
    return str(value)


def check_number(flag: str, value: float | int | None, allowed: Range) -> float | int | None:
    """`value` unchanged when it is None or finite and inside `allowed`; else `InputError` naming `flag`."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{flag} {value!r} is not a number; give one in {allowed.text()}")
    if isinstance(value, float) and not math.isfinite(value):
        hint = f", e.g. {flag} {allowed.example}" if allowed.example else ""
        raise InputError(f"{flag} {value} is not a finite number; give one in {allowed.text()}{hint}")
    if not allowed.holds(value):
        hint = f", e.g. {flag} {allowed.example}" if allowed.example else ""
        raise InputError(f"{flag} {_shown(value)} is outside the allowed range {allowed.text()}{hint}")
    return value


def check_numbers(checks: dict[str, tuple[float | int | None, Range]]) -> None:
    """`check_number` over {flag: (value, range)}, in order: the first bad one is reported."""
    for flag, (value, allowed) in checks.items():
        check_number(flag, value, allowed)


# Ranges shared by several commands. Upper bounds are far above any real use and far below overflow.
RATE_PER_S = Range(0, 100_000, low_open=True, example="40")
VCPU = Range(1, 1024, example="4")
LATENCY_MS = Range(0, 3_600_000, low_open=True, example="2000")
CPU_MS = Range(0, 600_000, example="50")
WAIT_MS = Range(0, 3_600_000, example="500")
HOURS = Range(0, 8760, low_open=True, example="3")  # a year: beyond it a "fleet estimate" is a typo
EUR = Range(0, 1_000_000, example="5")
SECONDS = Range(0, 86_400, low_open=True, example="60")
SECONDS_OR_ZERO = Range(0, 86_400, example="60")
LONGEST_EXECUTION_S = Range(1, 86_400, example="30")
COUNT = Range(0, 1_000_000, example="200")
IN_FLIGHT = Range(1, 100_000, example="1000")
FRACTION = Range(0, 1, example="0.01")
PORT = Range(1, 65_535, example="22")
WORKERS = Range(0, 64, example="2")
CONCURRENCY = Range(1, 100_000, example="10")  # advisor/setup.py: long waits ask for more than 1,000 slots
POOL = Range(1, 500, example="2")
PRODUCTION_LIMIT = Range(1, 100_000, example="20")
# Postgres accepts max_connections in 1..262143 (its GUC limit, MAX_BACKENDS).
POSTGRES_MAX_CONNECTIONS = Range(1, 262_143, example="100")
