"""YAML from users, with nesting and alias expansion bounded before anything is built or expanded.

A 527-byte "billion laughs" document (anchors that alias anchors) is cheap for PyYAML to load, because
aliases share one object, but every later walk over it (Compose interpolation, validation) expands it:
`check` ran for minutes and grew past 400 MB. 5,000 nested brackets made the composer recurse until
RecursionError. So the event stream is scanned first: it costs one pass, never recurses, and counts what
the document would be once every alias is expanded (scalar characters plus one per node). A document
deeper than `MAX_DEPTH`, larger than `MAX_EXPANDED` expanded, or with an alias inside its own anchor is
refused with one line; only then is it loaded.
"""

from __future__ import annotations

from typing import Any

import yaml

from n8n_sizer.errors import InputError

MAX_DEPTH = 64  # Compose files nest about 6 deep; stack files about 5
MAX_EXPANDED = 4_000_000  # about 4 MB of text once aliases are expanded: 100x a large compose file
MAX_YAML_BYTES = 2 * 1024 * 1024

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _where(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    where = f" at line {mark.line + 1}" if mark is not None else ""
    return where + (f" ({' '.join(str(problem).split())[:80]})" if problem else "")


def measure_yaml(text: str, what: str, fix: str) -> int:
    """The expanded size of `text` (characters of scalars + nodes); `InputError` when over a budget."""
    sizes: dict[str, int] = {}
    stack: list[list[Any]] = [[0, None]]  # [expanded size so far, anchor] per open collection
    depth = 0
    try:
        for event in yaml.parse(text, Loader=_Loader):
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise InputError(f"{what} nests deeper than {MAX_DEPTH} levels; {fix}")
                stack.append([1, event.anchor])
                continue
            if isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
                size, anchor = stack.pop()
            elif isinstance(event, yaml.ScalarEvent):
                size, anchor = 1 + len(event.value), event.anchor
            elif isinstance(event, yaml.AliasEvent):
                if event.anchor not in sizes:
                    raise InputError(
                        f"{what} has an alias *{event.anchor} that refers to itself or to no anchor; {fix}"
                    )
                size, anchor = sizes[event.anchor], None
            else:
                continue
            if anchor is not None:
                sizes[anchor] = size
            stack[-1][0] += size
            if stack[-1][0] > MAX_EXPANDED:
                raise InputError(
                    f"{what} expands to more than {MAX_EXPANDED:,} characters through its "
                    f"aliases (&anchor/*alias); refusing to expand it; {fix}"
                )
    except yaml.YAMLError as exc:
        raise InputError(f"{what} is not valid YAML{_where(exc)}; {fix}") from None
    return stack[0][0]


def load_yaml(text: str, what: str, *, fix: str) -> Any:
    """The document in `text`, after `measure_yaml` accepted it; `InputError` for invalid YAML."""
    if len(text) > MAX_YAML_BYTES:
        raise InputError(f"{what} is {len(text):,} characters, above the {MAX_YAML_BYTES:,} limit; {fix}")
    measure_yaml(text, what, fix)
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a safe loader (C or pure SafeLoader)
    except yaml.YAMLError as exc:
        raise InputError(f"{what} is not valid YAML{_where(exc)}; {fix}") from None
    except RecursionError:  # measure_yaml bounds the depth; kept for a composer that recurses anyway
        raise InputError(f"{what} nests too deeply; {fix}") from None
    except (ValueError, OverflowError, TypeError) as exc:  # e.g. a 5,000-digit integer Python will not convert
        raise InputError(f"{what} has a value that cannot be read ({str(exc)[:80]}); {fix}") from None
