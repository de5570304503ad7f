"""YAML from users, with nesting and alias expansion bounded before anything is built or expanded.

A 527-byte "billion laughs" document (anchors that alias anchors) is cheap for PyYAML to load, because
aliases share one object, but every later walk over it (Compose interpolation, validation) expands it:
`check` ran for minutes and grew past 400 MB. 5,000 nested brackets made the composer recurse until
RecursionError. So the event stream is scanned first: it costs one pass, never recurses, and counts what
the document would be once every alias is expanded (scalar characters plus one per node). A document
deeper than `MAX_DEPTH`, larger than `MAX_EXPANDED` expanded, or with an alias inside its own anchor is
refused with one line; only then is it loaded.

The same scan refuses what another YAML reader would read differently, so `check` never judges another file
than Docker Compose runs (and `cost` another stack than Pulumi creates): a key twice in one mapping (PyYAML
keeps the last, Compose refuses the file: `image:` twice let an `evil/evil:latest` pass as the pinned image), two
mappings merged with `<<` that set one key, a key that is a mapping or list, a second document, and a tag other
than YAML's own (`!reset`, `!override`). Plain values are resolved as YAML 1.2 reads them, as Compose's and
Pulumi's Go parser (yaml.v3) does: `yes`, `no`, `on` and `off` stay text, and `22:22` stays the text of a port
mapping (PyYAML's YAML 1.1 read it as the base-60 number 1342).
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from n8n_sizer.errors import InputError

MAX_DEPTH = 64  # Compose files nest about 6 deep; stack files about 5
MAX_EXPANDED = 4_000_000  # about 4 MB of text once aliases are expanded: 100x a large compose file
MAX_YAML_BYTES = 2 * 1024 * 1024

_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_Base):  # type: ignore[misc,valid-type]
    """The safe loader with YAML 1.2's plain scalars (see the module docstring)."""


_YAML_1_2 = [
    ("bool", r"true|True|TRUE|false|False|FALSE", "tTfF"),
    ("int", r"[-+]?0b[0-1_]+|[-+]?0o?[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+", "-+0123456789"),
    (
        "float",
        r"[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)",
        "-+0123456789.",
    ),
]
_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag.rsplit(":", 1)[-1] not in ("bool", "int", "float", "timestamp")]
    for first, resolvers in _Base.yaml_implicit_resolvers.items()
}
for _name, _pattern, _first in _YAML_1_2:
    _Loader.add_implicit_resolver(f"tag:yaml.org,2002:{_name}", re.compile(f"^(?:{_pattern})$"), list(_first))


def _where(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    where = f" at line {mark.line + 1}" if mark is not None else ""
    return where + (f" ({' '.join(str(problem).split())[:80]})" if problem else "")


# The tags YAML's own types use (PyYAML's SafeLoader knows exactly these); any other tag means something only
# another tool knows: Compose's `!reset` and `!override` change how files merge, `!!python/...` runs code.
_STANDARD_TAGS = {
    f"tag:yaml.org,2002:{name}"
    for name in ("str", "int", "float", "bool", "null", "map", "seq", "binary", "timestamp", "merge", "value")
} | {"!"}


class _Frame:
    """One open mapping or sequence of the event stream: its expanded size so far, its anchor, where it sits
    (`path`), and for a mapping the keys seen (key -> line), whether the next node is a key, and the keys a
    merge (`<<`) brought in; for a sequence that is the value of `<<`, the mappings it merges."""

    __slots__ = ("size", "anchor", "path", "mapping", "keys", "expect_key", "key", "merged", "merging", "index")

    def __init__(self, anchor: str | None, path: str, mapping: bool, merging: bool = False) -> None:
        self.size, self.anchor, self.path, self.mapping = 1, anchor, path, mapping
        self.keys: dict[str, int] = {}
        self.expect_key, self.key, self.index = True, "", 0
        self.merged: list[set[str]] = []  # key sets of the mappings merged in (`<<: *a` or `<<: [*a, *b]`)
        self.merging = merging


def _refuse(what: str, where: str, why: str, fix: str) -> InputError:
    from n8n_sizer.safety.text import printable

    return InputError(printable(f"{what}: {where}{why}; {fix}", limit=600))


def _at(frame: _Frame, line: int) -> str:
    return f"{frame.path + ': ' if frame.path else ''}line {line}: "


def measure_yaml(text: str, what: str, fix: str) -> int:
    """The expanded size of `text` (characters of scalars + nodes); `InputError` when over a budget, and for a
    document another YAML tool (Docker Compose, Pulumi) would read differently: a key twice in one mapping, two
    mappings merged with `<<` that set one key, a key that is itself a mapping or list, more than one document,
    or a tag other than YAML's own."""
    sizes: dict[str, int] = {}
    scalars: dict[str, str] = {}  # anchor -> the scalar it names (an alias used as a key)
    key_sets: dict[str, set[str]] = {}  # anchor -> the keys of the mapping it names (for merges)
    stack: list[_Frame] = [_Frame(None, "", mapping=False)]
    documents = 0
    try:
        for event in yaml.parse(text, Loader=_Loader):
            if isinstance(event, yaml.DocumentStartEvent):
                documents += 1
                if documents > 1:
                    raise _refuse(
                        what,
                        f"line {event.start_mark.line + 1}: ",
                        "holds a second YAML document (after ---); Compose and Pulumi would read it too",
                        f"keep one document per file; {fix}",
                    )
                continue
            if not isinstance(event, yaml.NodeEvent):
                if isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                    frame = stack.pop()
                    parent, line = stack[-1], event.start_mark.line + 1
                    if frame.mapping:
                        keys = set(frame.keys).union(*frame.merged)
                        if frame.anchor is not None:
                            key_sets[frame.anchor] = keys
                        if parent.merging or (parent.mapping and parent.key == "<<" and not parent.expect_key):
                            parent.merged.append(keys)  # an inline mapping merged: `<<: {a: 1}`
                    if frame.merging:  # `<<: [*a, *b]`: the merged mappings must not disagree on a key
                        _check_merge(frame.merged, frame, line, what, fix)
                        parent.merged.extend(frame.merged)
                    _finish(stack, frame.size, frame.anchor, sizes, what, fix)
                continue
            line = event.start_mark.line + 1
            tag = getattr(event, "tag", None)
            if tag is not None and tag not in _STANDARD_TAGS:
                raise _refuse(
                    what,
                    _at(stack[-1], line),
                    f"uses the tag {tag}, which only some tools understand (Compose's !reset and !override "
                    "change what runs)",
                    f"remove the tag; {fix}",
                )
            parent = stack[-1]
            is_key = parent.mapping and parent.expect_key
            merge_value = parent.mapping and not parent.expect_key and parent.key == "<<"
            if is_key:
                _take_key(parent, event, line, scalars, what, fix)
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                if len(stack) > MAX_DEPTH:
                    raise InputError(f"{what} nests deeper than {MAX_DEPTH} levels; {fix}")
                if parent.mapping:
                    path = f"{parent.path}.{parent.key}" if parent.path else parent.key
                else:
                    path = f"{parent.path}[{parent.index}]" if parent.path else ""
                mapping = isinstance(event, yaml.MappingStartEvent)
                stack.append(_Frame(event.anchor, path, mapping, merging=merge_value and not mapping))
                continue
            if isinstance(event, yaml.ScalarEvent):
                size, anchor = 1 + len(event.value), event.anchor
                if anchor is not None:
                    scalars[anchor] = event.value
            else:  # an alias
                if event.anchor not in sizes:
                    raise InputError(
                        f"{what} has an alias *{event.anchor} that refers to itself or to no anchor; {fix}"
                    )
                size, anchor = sizes[event.anchor], None
                if merge_value or parent.merging:
                    parent.merged.append(key_sets.get(event.anchor, set()))
                    if merge_value:
                        _check_merge(parent.merged, parent, line, what, fix)
            _finish(stack, size, anchor, sizes, what, fix)
    except yaml.YAMLError as exc:
        raise InputError(f"{what} is not valid YAML{_where(exc)}; {fix}") from None
    return stack[0].size - 1


def _take_key(parent: _Frame, event: yaml.NodeEvent, line: int, scalars: dict[str, str], what: str, fix: str) -> None:
    """Record the key `event` in its mapping; a key seen before there, or a key that is not a plain value, is
    refused: PyYAML keeps the last of two equal keys, Docker Compose refuses the file."""
    if isinstance(event, yaml.ScalarEvent):
        key = event.value
    elif isinstance(event, yaml.AliasEvent) and event.anchor in scalars:
        key = scalars[event.anchor]
    else:
        raise _refuse(what, _at(parent, line), "has a key that is a mapping or a list", f"keys are plain names; {fix}")
    if key in parent.keys:
        raise _refuse(
            what,
            _at(parent, line),
            f"the key {key[:80]!r} appears twice in one mapping (line {parent.keys[key]} and line {line}); "
            "YAML forbids that and Docker Compose refuses the file, while other readers silently keep one of them",
            f"keep one of them; {fix}",
        )
    parent.keys[key] = line
    parent.key = key


def _check_merge(merged: list[set[str]], frame: _Frame, line: int, what: str, fix: str) -> None:
    """Two mappings merged into one (`<<: [*a, *b]`, or `<<` repeated through nesting) must not set one key: YAML
    tools disagree on which of them wins. A key written in the mapping itself wins over every merge, everywhere."""
    seen: set[str] = set()
    for keys in merged:
        clash = seen & keys
        if clash:
            raise _refuse(
                what,
                _at(frame, line),
                f"merges (<<) two mappings that both set {sorted(clash)[0][:80]!r}; YAML tools disagree on "
                "which one wins",
                f"set that key in the mapping itself, or in one of the merged mappings; {fix}",
            )
        seen |= keys


def _finish(stack: list[_Frame], size: int, anchor: str | None, sizes: dict[str, int], what: str, fix: str) -> None:
    """A node is complete: its size goes to its anchor and its parent, and a mapping parent expects its next key."""
    if anchor is not None:
        sizes[anchor] = size
    parent = stack[-1]
    parent.size += size
    if parent.mapping:
        parent.expect_key = not parent.expect_key
    else:
        parent.index += 1
    if parent.size > MAX_EXPANDED:
        raise InputError(
            f"{what} expands to more than {MAX_EXPANDED:,} characters through its "
            f"aliases (&anchor/*alias); refusing to expand it; {fix}"
        )


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
