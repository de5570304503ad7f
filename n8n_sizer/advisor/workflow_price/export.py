"""An n8n workflow export (the JSON the editor downloads), checked and reduced to what pricing needs.

Accepted: an object with `nodes` (a list of objects, each with a string `name` and `type` such as
`n8n-nodes-base.set`, optional `parameters` object and `disabled` flag) and `connections` (an object: for each
source node, per connection type (`main`, or an AI type such as `ai_languageModel`), per output, a list of
`{node, type, index}`). Anything else is one `InputError` line naming what is wrong and what to export instead.
Bounded: at most `MAX_NODES` nodes and `MAX_EDGES` connections, and the walk over a node's parameters (to count
expressions) stops at `MAX_DEPTH` levels and `MAX_VALUES` values.

Names come from the file and are echoed in answers: `printable` strips control and format characters (escape
sequences, bidirectional overrides) and bounds their length, the same way for node names and for the names
connections refer to, so the graph still matches. A node type is an identifier: one holding such characters is
refused.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from n8n_sizer.errors import InputError
from n8n_sizer.safety.frozen import Frozen

# Far above real workflows (n8n's editor grows slow past a few hundred nodes), far below what would hurt.
MAX_NODES = 2000
MAX_DEPTH = 40
MAX_VALUES = 20000
MAX_EDGES = 20000
MAX_OUTPUTS = 100  # outputs of one node (a Switch has one per rule)
MAX_NAME = 120
FIX = "export the workflow from n8n's editor (... menu > Download) and pass that file"


class ExportNode(Frozen):
    name: str
    type: str
    type_version: float | None = None
    parameters: dict[str, Any] = {}
    disabled: bool = False
    expressions: int = 0  # parameter values that are n8n expressions ("={{ ... }}")
    on_error: str = ""  # the node's "On Error" setting: continueErrorOutput adds an error output
    execute_once: bool = False  # "Execute Once": the node runs once, whatever the items


class Edge(Frozen):
    """One connection: `source`'s output `output` of connection type `kind` feeds `target`'s input `input`."""

    source: str
    kind: str  # "main", or an AI sub-node's type (ai_languageModel, ai_tool, ai_memory, ...)
    output: int
    target: str
    input: int = 0


class ParsedExport(Frozen):
    name: str
    nodes: tuple[ExportNode, ...]
    edges: tuple[Edge, ...] = ()
    dropped_edges: int = 0  # connections to or from a node the export does not have (n8n ignores them too)
    unnamed: int = 0  # nodes without a name: nothing can connect to them, so they never run (left out)
    skipped_outputs: int = 0  # a connection kind that is not a list of outputs (not n8n's shape): left out


def printable(text: str, limit: int = MAX_NAME) -> str:
    """`text` without control or format characters (Unicode Cc, Cf: escape sequences, bidirectional overrides,
    zero-width characters), at most `limit` characters: safe to echo to a terminal."""
    kept = "".join(ch for ch in text if unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Co"))
    return kept if len(kept) <= limit else kept[: limit - 3] + "..."


def _has_control(text: str) -> bool:
    return any(unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co") for ch in text)


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


_BARE_TYPE = re.compile(r"[a-z][A-Za-z0-9]{0,99}")


def parse_export(export: Any) -> ParsedExport:
    """The export's nodes, or `InputError` (one line) for anything that is not an n8n workflow export. n8n's CLI
    (`export:workflow`) writes a list: one workflow in a list is that workflow."""
    if isinstance(export, list) and len(export) == 1 and isinstance(export[0], dict):
        export = export[0]
    elif isinstance(export, list) and len(export) > 1 and all(isinstance(w, dict) and "nodes" in w for w in export):
        raise _refuse(f"the file holds {len(export)} workflows; give one workflow per file")
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
    unnamed = 0
    for i, item in enumerate(nodes):
        if not isinstance(item, dict):
            raise _refuse(f"nodes[{i}] is {type(item).__name__}, not an object")
        name, type_ = item.get("name"), item.get("type")
        if name is None or name == "":  # no connection can name it: it never runs (counted, said by the price)
            unnamed += 1
            continue
        if not isinstance(name, str):
            raise _refuse(f"nodes[{i}] has a `name` that is not a string")
        shown = printable(name, 80)
        if not isinstance(type_, str) or not type_ or len(type_) > 200:
            raise _refuse(f"node {shown!r} has no string `type` (like n8n-nodes-base.set)")
        if _has_control(type_) or any(ch.isspace() for ch in type_):
            raise _refuse(
                f"node {shown!r}: its `type` holds control or space characters; a node type is a name like n8n-nodes-base.set"
            )
        if _BARE_TYPE.fullmatch(type_):  # `httpRequest`: some collections strip n8n's own package from its types
            type_ = "n8n-nodes-base." + type_
        params = item.get("parameters", {})
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise _refuse(f"node {shown!r}: `parameters` is {type(params).__name__}, not an object")
        version = item.get("typeVersion")
        if version is not None and (
            isinstance(version, bool) or not isinstance(version, (int, float)) or not 0 <= version < 1000
        ):
            raise _refuse(f"node {shown!r}: `typeVersion` is not a version number")
        disabled = item.get("disabled", False)
        if disabled is None:
            disabled = False
        if not isinstance(disabled, bool):
            raise _refuse(f"node {shown!r}: `disabled` is not true or false")
        settings = {k: item.get(k) for k in ("onError", "executeOnce", "alwaysOutputData")}
        parsed.append(
            ExportNode(
                name=printable(name),
                type=type_,
                type_version=version,
                parameters=params,
                disabled=disabled,
                expressions=count_expressions(params),
                on_error=settings["onError"] if isinstance(settings["onError"], str) else "",
                execute_once=settings["executeOnce"] is True,
            )
        )
    if not parsed:
        raise _refuse("no node has a `name`")
    edges, dropped, skipped = parse_connections(export["connections"], {n.name for n in parsed})
    title = export.get("name")
    return ParsedExport(
        name=printable(title, 80) if isinstance(title, str) and printable(title, 80) else "workflow",
        nodes=tuple(parsed),
        edges=edges,
        dropped_edges=dropped,
        unnamed=unnamed,
        skipped_outputs=skipped,
    )


def _index(value: Any, what: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_OUTPUTS:
        raise _refuse(f"`connections`: {what} is not a whole number from 0 to {MAX_OUTPUTS}")
    return value


def parse_connections(connections: dict, names: set[str]) -> tuple[tuple[Edge, ...], int, int]:
    """(edges, how many name a node the export does not have, how many kinds were not a list of outputs and were
    left out). The shape is n8n's: {source: {kind: [[{node, type, index}, ...] per output]}}; an output may be null
    or empty. Anything else is one InputError line."""
    edges: list[Edge] = []
    dropped = skipped = 0
    for source, kinds in connections.items():
        src = printable(str(source))
        if kinds is None:
            continue
        if not isinstance(kinds, dict):
            raise _refuse(f"`connections` of {src!r} is {type(kinds).__name__}, not an object")
        for kind, outputs in kinds.items():
            if outputs is None:
                continue
            if isinstance(outputs, dict) and not outputs:  # `{}` where a list belongs: nothing it connects
                skipped += 1
                continue
            if not isinstance(outputs, list) or len(outputs) > MAX_OUTPUTS:
                raise _refuse(f"`connections` of {src!r}: {printable(str(kind), 40)!r} is not a list of outputs")
            for out_index, targets in enumerate(outputs):
                if targets is None:
                    continue
                if not isinstance(targets, list):
                    raise _refuse(f"`connections` of {src!r}: output {out_index} is not a list")
                for target in targets:
                    if target is None:
                        continue
                    if not isinstance(target, dict) or not isinstance(target.get("node"), str):
                        raise _refuse(f"`connections` of {src!r}: a connection without a target `node` name")
                    if len(edges) >= MAX_EDGES:
                        raise _refuse(f"more than {MAX_EDGES:,} connections")
                    dst = printable(target["node"])
                    if src not in names or dst not in names:
                        dropped += 1
                        continue
                    edges.append(
                        Edge(
                            source=src,
                            kind=printable(str(kind), 40),
                            output=out_index,
                            target=dst,
                            input=_index(target.get("index"), f"the input index of a connection of {src!r}"),
                        )
                    )
    return tuple(edges), dropped, skipped
