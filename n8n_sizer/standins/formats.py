"""What the OpenAI-compatible stand-in (openai.py) answers, as data: a value fitting a JSON Schema (a tool call's
arguments, an output parser's JSON), the schema a prompt asks for, a deterministic embedding, and the Responses
API's event stream for one output item."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any


def schema_value(schema: Any, depth: int = 0) -> Any:
    """A small value that fits a JSON schema (what a model would put in a tool call's arguments)."""
    if not isinstance(schema, dict) or depth > 6:
        return "1"
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if "enum" in schema and isinstance(schema["enum"], list) and schema["enum"]:
        return schema["enum"][0]
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {k: schema_value(v, depth + 1) for k, v in list(props.items())[:20]}
    if kind == "array":
        return [schema_value(schema.get("items"), depth + 1)]
    if kind in ("number", "integer"):
        return 1
    if kind == "boolean":
        return True
    return "1"


JSON_BLOCK = re.compile(r"```json\s*(\{.*?\})\s*```", re.S)


def texts(value: Any, depth: int = 0) -> list[str]:
    """Every string inside a request's messages or input (content may be a string or a list of parts)."""
    if depth > 8:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [t for v in value[:200] for t in texts(v, depth + 1)]
    if isinstance(value, dict):
        return [
            t for k, v in value.items() if k in ("content", "text", "input", "messages") for t in texts(v, depth + 1)
        ]
    return []


def schema_in(body: dict[str, Any]) -> dict | None:
    """The last JSON Schema a prompt asks the answer to fit (LangChain's structured output instructions)."""
    found = None
    for text in texts(body.get("messages") or body.get("input") or []):
        for block in JSON_BLOCK.findall(text[:200_000]):
            try:
                doc = json.loads(block)
            except ValueError:
                continue
            if isinstance(doc, dict) and ("properties" in doc or "type" in doc):
                found = doc
    return found


def vector(text: str, dims: int) -> list[float]:
    """A deterministic unit-free vector for `text` (the same text, the same vector)."""
    seed = hashlib.sha256(text.encode("utf-8", "replace")).digest()
    out = []
    while len(out) < dims:
        seed = hashlib.sha256(seed).digest()
        out += [(b - 127.5) / 127.5 for b in seed]
    return out[:dims]


def response_events(response: dict[str, Any], item: dict[str, Any]) -> list[tuple[str, Any]]:
    """The Responses API's Server-Sent Events for a response with one output `item` (a message or a function
    call), ending with `response.completed` carrying `response`."""
    started = response | {"status": "in_progress", "output": [], "usage": None}
    events: list[tuple[str, Any]] = [
        ("response.created", {"type": "response.created", "sequence_number": 0, "response": started}),
        (
            "response.output_item.added",
            {"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": item},
        ),
    ]
    seq = 2
    if item["type"] == "message":
        text = item["content"][0]["text"]
        part = {"type": "output_text", "text": "", "annotations": []}
        for name, extra in (
            ("response.content_part.added", {"part": part}),
            ("response.output_text.delta", {"delta": text}),
            ("response.output_text.done", {"text": text}),
            ("response.content_part.done", {"part": item["content"][0]}),
        ):
            events.append(
                (
                    name,
                    {
                        "type": name,
                        "sequence_number": seq,
                        "item_id": item["id"],
                        "output_index": 0,
                        "content_index": 0,
                    }
                    | extra,
                )
            )
            seq += 1
    else:
        events.append(
            (
                "response.function_call_arguments.done",
                {
                    "type": "response.function_call_arguments.done",
                    "sequence_number": seq,
                    "item_id": item["id"],
                    "output_index": 0,
                    "arguments": item["arguments"],
                },
            )
        )
        seq += 1
    events.append(
        (
            "response.output_item.done",
            {"type": "response.output_item.done", "sequence_number": seq, "output_index": 0, "item": item},
        )
    )
    events.append(
        ("response.completed", {"type": "response.completed", "sequence_number": seq + 1, "response": response})
    )
    return events
