"""The one JSON loader for user files (topologies, inventories, workflows, bodies, run records).

`json.loads` alone turns 100,000 nested brackets into a RecursionError, a 5,000-digit integer into a
ValueError, `1e999` into infinity and `NaN` into a float that poisons arithmetic, and keeps the last of two equal keys. `load_json` measures the
nesting first (one pass, no recursion), then parses with every number checked, and reports any of these as
one `InputError` line naming the input and the fix.
"""

from __future__ import annotations

import json
import math
from typing import Any

from n8n_sizer.errors import InputError

MAX_DEPTH = 64  # far above any file the tool reads (a workflow export nests about 10 deep)
MAX_NUMBER_CHARS = 40  # a float or int longer than this is not a size, a rate or a count


def json_depth(text: str) -> int:
    """The deepest bracket nesting of `text`, ignoring brackets inside strings; one pass, no recursion."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def _number(kind: type):
    def parse(text: str):
        if len(text) > MAX_NUMBER_CHARS:
            raise ValueError(f"a number of {len(text):,} characters")
        value = kind(text)
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{text[:20]} is not a finite number")
        return value

    return parse


def _constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are each given once: `json` keeps the last of two equal keys, other readers the
    first, so a key twice is refused as in YAML (safety.yamldoc)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"the key {twice[:60]!r} appears twice in one object")
    return out


def _object_last(seen_twice: list[str]):
    """JavaScript's `JSON.parse`: of two equal keys the last wins; each such key noted in `seen_twice`."""

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(pairs)
        if len(out) != len(pairs):
            seen: set[str] = set()
            seen_twice.extend(k for k, _ in pairs if k in seen or seen.add(k))
        return out

    return hook


def load_json(
    text: str, what: str, fix: str, *, max_depth: int = MAX_DEPTH, seen_twice: list[str] | None = None
) -> Any:
    """Parse `text` as JSON; `InputError` (one line: `what`, the reason, `fix`) for anything unusable. A key twice in
    one object is refused, unless `seen_twice` is given: then the file is read as n8n (JavaScript's `JSON.parse`)
    reads it, the last of the two winning, and each such key is appended to `seen_twice` for the caller to say."""
    depth = json_depth(text)
    if depth > max_depth:
        raise InputError(f"{what} nests {depth:,} levels deep, above the {max_depth} this tool reads; {fix}")
    try:
        return json.loads(
            text,
            parse_constant=_constant,
            parse_int=_number(int),
            parse_float=_number(float),
            object_pairs_hook=_object if seen_twice is None else _object_last(seen_twice),
        )
    except json.JSONDecodeError as exc:
        raise InputError(f"{what} is not JSON (not valid JSON: {exc.msg} at line {exc.lineno}); {fix}") from None
    except (ValueError, RecursionError) as exc:
        reason = str(exc)[:80] if isinstance(exc, ValueError) else "nested too deeply"
        raise InputError(f"{what} is not usable JSON ({reason}); {fix}") from None
