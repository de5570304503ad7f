"""An n8n workflow export (the JSON the editor downloads), checked and reduced to what pricing needs.

Accepted: an object with `nodes` (a list of objects, each with a string `name` and `type` such as
`n8n-nodes-base.set`, optional `parameters` object and `disabled` flag) and `connections` (an object). Anything
else is one `InputError` line naming what is wrong and what to export instead. Bounded: at most `MAX_NODES` nodes,
and the walk over a node's parameters (to count expressions) stops at `MAX_DEPTH` levels and `MAX_VALUES` values.
"""

from __future__ import annotations

from typing import Any

from n8n_sizer.errors import InputError
from n8n_sizer.safety.frozen import Frozen

# Far above real workflows (n8n's editor grows slow past a few hundred nodes), far below what would hurt.
MAX_NODES = 2000
MAX_DEPTH = 40
MAX_VALUES = 20000
FIX = "export the workflow from n8n's editor (... menu > Download) and pass that file"


class ExportNode(Frozen):
    name: str
    type: str
    type_version: float | None = None
    parameters: dict[str, Any] = {}
    disabled: bool = False
    expressions: int = 0  # parameter values that are n8n expressions ("={{ ... }}")


class ParsedExport(Frozen):
    name: str
    nodes: tuple[ExportNode, ...]


def _refuse(what: str) -> InputError:
    return InputError(f"workflow export: {what}; {FIX}")


def count_expressions(parameters: Any) -> int:
    """How many parameter values are expressions (a string starting with `=` that holds `{{`), bounded."""
    found, seen = 0, 0
    stack: list[tuple[Any, int]] = [(parameters, 0)]
    while stack:
        value, depth = stack.pop()
        seen += 1
        if seen > MAX_VALUES or depth > MAX_DEPTH:
            raise _refuse(
                f"a node's parameters are nested deeper than {MAX_DEPTH} levels or hold more than {MAX_VALUES:,} values"
            )
        if isinstance(value, str):
            found += value.startswith("=") and "{{" in value
        elif isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
    return found


def parse_export(export: Any) -> ParsedExport:
    """The export's nodes, or `InputError` (one line) for anything that is not an n8n workflow export."""
    if not isinstance(export, dict):
        raise _refuse(f"expected a JSON object with nodes[] and connections{{}}, got {type(export).__name__}")
    nodes = export.get("nodes")
    if not isinstance(nodes, list):
        raise _refuse("no `nodes` list")
    if not nodes:
        raise _refuse("`nodes` is empty")
    if len(nodes) > MAX_NODES:
        raise _refuse(f"{len(nodes):,} nodes, above the {MAX_NODES:,}-node limit")
    if not isinstance(export.get("connections"), dict):
        raise _refuse("no `connections` object")
    parsed = []
    for i, item in enumerate(nodes):
        if not isinstance(item, dict):
            raise _refuse(f"nodes[{i}] is {type(item).__name__}, not an object")
        name, type_ = item.get("name"), item.get("type")
        if not isinstance(name, str) or not name:
            raise _refuse(f"nodes[{i}] has no string `name`")
        if not isinstance(type_, str) or not type_ or len(type_) > 200:
            raise _refuse(f"node {name[:80]!r} has no string `type` (like n8n-nodes-base.set)")
        params = item.get("parameters", {})
        if not isinstance(params, dict):
            raise _refuse(f"node {name[:80]!r}: `parameters` is {type(params).__name__}, not an object")
        version = item.get("typeVersion")
        if version is not None and (isinstance(version, bool) or not isinstance(version, (int, float))):
            raise _refuse(f"node {name[:80]!r}: `typeVersion` is not a number")
        disabled = item.get("disabled", False)
        if not isinstance(disabled, bool):
            raise _refuse(f"node {name[:80]!r}: `disabled` is not true or false")
        parsed.append(
            ExportNode(
                name=name,
                type=type_,
                type_version=version,
                parameters=params,
                disabled=disabled,
                expressions=count_expressions(params),
            )
        )
    title = export.get("name")
    return ParsedExport(name=title if isinstance(title, str) and title else "workflow", nodes=tuple(parsed))
