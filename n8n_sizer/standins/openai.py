"""An OpenAI-compatible model API on 127.0.0.1 (or a lab namespace's address), answering after a set latency.

n8n's OpenAI credential takes a base URL (`url`, e.g. `http://127.0.0.1:PORT/v1`), so its AI nodes (the Agent, Basic
LLM Chain, the OpenAI Chat Model sub-node, OpenAI embeddings, the OpenAI node) run for real against this server
instead of api.openai.com. It speaks what n8n 2.41.1's nodes send (through LangChain and the openai SDK):

- `POST /v1/chat/completions`: with `tools`, the first answer calls a tool (the first one offered, its arguments
  filled from the tool's JSON schema) unless the conversation already holds a tool result, then it answers text;
  `stream: true` answers Server-Sent Events chunks (and the usage chunk when asked);
- `POST /v1/responses` (the Responses API, the OpenAI Chat Model's default from version 1.3): the same, with
  `function_call` output items and `function_call_output` inputs; `stream: true` answers its event stream;
- `POST /v1/embeddings`: one deterministic vector per input (`dimensions` as asked, else `StandInConfig.dims`),
  as floats or base64 (the openai SDK asks for base64);
- `GET /v1/models`: a short model list (n8n's credential test and model pickers).

Latency: `StandInConfig.latency_ms` for model calls, `embed_latency_ms` for embeddings, `other_latency_ms` for any
other path (answered `{"ok": true, "result": {...}}`: a delayed JSON service for app and HTTP calls). A path that
starts with `/lat/<ms>/` sets that request's latency (a credential's base URL can carry it, so each node of a
rewritten workflow waits its own time). Token counts in `usage` are `prompt_tokens` and `completion_tokens`; the
answer text is that many words. Counters (`counts`, `tool_calls`) let a test see what n8n asked.

The server runs in a thread of the calling process (`serve()`), or as `python -m n8n_sizer.standins.openai
--port N --latency-ms MS` (a benchmark's own process). It binds only the address it is given.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from n8n_sizer.safety.frozen import Frozen
from n8n_sizer.standins.formats import response_events, schema_in, schema_value, vector

MAX_BODY = 16 << 20
MAX_LATENCY_MS = 600_000
LAT = re.compile(r"^/lat/(\d{1,6})(/.*)?$")
MODELS = ("gpt-4o-mini", "gpt-4.1-mini", "gpt-5-mini", "text-embedding-3-small")


class StandInConfig(Frozen):
    latency_ms: float = 0.0  # a chat completion / response, before its first byte
    embed_latency_ms: float = 0.0
    other_latency_ms: float = 0.0  # any other path: the delayed JSON service
    prompt_tokens: int = 200
    completion_tokens: int = 50
    dims: int = 64
    tool_calls: bool = True  # answer a request that offers tools with a tool call first


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: StandInServer  # type: ignore[assignment]

    def log_message(self, *args: Any) -> None:
        pass

    # --- plumbing --------------------------------------------------------------------------------------
    def _route(self) -> tuple[str, float | None]:
        path = self.path.split("?", 1)[0]
        m = LAT.match(path)
        if m:
            return (m.group(2) or "/"), min(float(m.group(1)), MAX_LATENCY_MS)
        return path, None

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        if length <= 0 or length > MAX_BODY:
            return {}
        try:
            doc = json.loads(self.rfile.read(length))
        except ValueError:
            return {}
        return doc if isinstance(doc, dict) else {}

    def _json(self, doc: Any, status: int = 200) -> None:
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _sse(self, events: list[tuple[str | None, Any]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for name, data in events:
            chunk = (
                f"event: {name}\n" if name else ""
            ) + f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"
            self.wfile.write(chunk.encode())
            self.wfile.flush()
        self.close_connection = True

    def _wait(self, ms: float) -> None:
        if ms > 0:
            time.sleep(ms / 1000.0)

    # --- verbs -----------------------------------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        path, latency = self._route()
        self.server.count(f"GET {path}")
        if path.rstrip("/").endswith("/models"):
            self._json(
                {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "stand-in"} for m in MODELS]}
            )
            return
        self._wait(latency if latency is not None else self.server.config.other_latency_ms)
        self._json({"ok": True, "result": {"id": 1, "message_id": 1}, "data": []})

    def do_POST(self) -> None:  # noqa: N802
        path, latency = self._route()
        body = self._body()
        cfg = self.server.config
        endpoint = path.rstrip("/")
        if endpoint.endswith("/chat/completions"):
            self.server.count("chat")
            self._wait(latency if latency is not None else cfg.latency_ms)
            self._chat(body)
        elif endpoint.endswith("/responses"):
            self.server.count("responses")
            self._wait(latency if latency is not None else cfg.latency_ms)
            self._responses(body)
        elif endpoint.endswith("/embeddings"):
            self.server.count("embeddings")
            self._wait(latency if latency is not None else cfg.embed_latency_ms)
            self._embeddings(body)
        else:
            self.server.count(f"POST {endpoint}")
            self._wait(latency if latency is not None else cfg.other_latency_ms)
            self._json({"ok": True, "result": {"id": 1, "message_id": 1}, "id": "1", "data": []})

    do_PUT = do_PATCH = do_DELETE = do_POST

    # --- chat completions ------------------------------------------------------------------------------
    def _answer_text(self, body: dict[str, Any] | None = None) -> str:
        """`completion_tokens` words; or, when the prompt holds a JSON Schema in a ```json block (an output parser's
        format instructions), a value that fits it in such a block."""
        schema = schema_in(body or {})
        if schema is not None:
            return "```json\n" + json.dumps(schema_value(schema)) + "\n```"
        return " ".join(["ok"] * max(1, self.server.config.completion_tokens))

    def _tool_to_call(self, tools: Any, done: bool) -> tuple[str, dict] | None:
        if done or not self.server.config.tool_calls or not isinstance(tools, list) or not tools:
            return None
        first = tools[0] if isinstance(tools[0], dict) else {}
        fn = first.get("function") if isinstance(first.get("function"), dict) else first
        name = fn.get("name")
        if not isinstance(name, str):
            return None
        return name, schema_value(fn.get("parameters") or {"type": "object"})

    def _chat(self, body: dict[str, Any]) -> None:
        cfg = self.server.config
        messages = body.get("messages") if isinstance(body.get("messages"), list) else []
        done = any(isinstance(m, dict) and m.get("role") == "tool" for m in messages)
        call = self._tool_to_call(body.get("tools"), done)
        usage = {
            "prompt_tokens": cfg.prompt_tokens,
            "completion_tokens": cfg.completion_tokens,
            "total_tokens": cfg.prompt_tokens + cfg.completion_tokens,
        }
        rid, model, now = f"chatcmpl-{self.server.next_id()}", str(body.get("model") or MODELS[0]), int(time.time())
        if call is not None:
            self.server.count("tool_calls")
            tool_call = {
                "id": f"call_{self.server.next_id()}",
                "type": "function",
                "function": {"name": call[0], "arguments": json.dumps(call[1])},
            }
            message = {"role": "assistant", "content": None, "tool_calls": [tool_call]}
            finish = "tool_calls"
        else:
            message = {"role": "assistant", "content": self._answer_text(body)}
            finish = "stop"
        if body.get("stream"):
            base = {"id": rid, "object": "chat.completion.chunk", "created": now, "model": model}
            delta = dict(message)
            if call is not None:
                delta["tool_calls"] = [dict(message["tool_calls"][0], index=0)]
            events: list[tuple[str | None, Any]] = [
                (None, base | {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}),
                (None, base | {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}),
            ]
            if isinstance(body.get("stream_options"), dict) and body["stream_options"].get("include_usage"):
                events.append((None, base | {"choices": [], "usage": usage}))
            events.append((None, "[DONE]"))
            self._sse(events)
            return
        self._json(
            {
                "id": rid,
                "object": "chat.completion",
                "created": now,
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
                "usage": usage,
            }
        )

    # --- the Responses API -----------------------------------------------------------------------------
    def _responses(self, body: dict[str, Any]) -> None:
        cfg = self.server.config
        items = body.get("input") if isinstance(body.get("input"), list) else []
        done = any(isinstance(i, dict) and i.get("type") == "function_call_output" for i in items)
        call = self._tool_to_call(body.get("tools"), done)
        rid, model, now = f"resp_{self.server.next_id()}", str(body.get("model") or MODELS[0]), int(time.time())
        if call is not None:
            self.server.count("tool_calls")
            item = {
                "type": "function_call",
                "id": f"fc_{self.server.next_id()}",
                "call_id": f"call_{self.server.next_id()}",
                "name": call[0],
                "arguments": json.dumps(call[1]),
                "status": "completed",
            }
        else:
            item = {
                "type": "message",
                "id": f"msg_{self.server.next_id()}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": self._answer_text(body), "annotations": []}],
            }
        usage = {
            "input_tokens": cfg.prompt_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": cfg.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": cfg.prompt_tokens + cfg.completion_tokens,
        }
        response = {
            "id": rid,
            "object": "response",
            "created_at": now,
            "status": "completed",
            "model": model,
            "output": [item],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": body.get("tools") or [],
            "usage": usage,
            "error": None,
            "incomplete_details": None,
        }
        if not body.get("stream"):
            self._json(response)
            return
        events = response_events(response, item)
        self._sse(events)

    # --- embeddings ------------------------------------------------------------------------------------
    def _embeddings(self, body: dict[str, Any]) -> None:
        cfg = self.server.config
        given = body.get("input")
        texts = given if isinstance(given, list) else [given]
        dims = body.get("dimensions") if isinstance(body.get("dimensions"), int) else cfg.dims
        dims = max(1, min(int(dims), 4096))
        data = []
        for i, text in enumerate(texts[:2048]):
            vec = vector(json.dumps(text), dims)
            if body.get("encoding_format") == "base64":
                emb: Any = base64.b64encode(struct.pack(f"<{dims}f", *vec)).decode()
            else:
                emb = vec
            data.append({"object": "embedding", "index": i, "embedding": emb})
        tokens = cfg.prompt_tokens * max(1, len(data))
        self._json(
            {
                "object": "list",
                "data": data,
                "model": str(body.get("model") or MODELS[-1]),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )


class StandInServer(ThreadingHTTPServer):
    """The stand-in: `StandInServer(config).serve()`, its base URL in `url`, `close()` to stop it."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024

    def __init__(self, config: StandInConfig | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__((host, port), _Handler)
        self.config = config or StandInConfig()
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._ids = 0
        self._thread: threading.Thread | None = None

    def count(self, key: str) -> None:
        with self._lock:
            self.counts[key] = self.counts.get(key, 0) + 1

    def next_id(self) -> int:
        with self._lock:
            self._ids += 1
            return self._ids

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def base_url(self, latency_ms: float | None = None) -> str:
        """The OpenAI base URL to give n8n's credential (`.../v1`), with its own latency when given."""
        prefix = "" if latency_ms is None else f"/lat/{int(round(latency_ms))}"
        return f"{self.url}{prefix}/v1"

    def serve(self) -> StandInServer:
        self._thread = threading.Thread(target=self.serve_forever, name="openai-stand-in", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self.shutdown()
        self.server_close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--latency-ms", type=float, default=0.0)
    ap.add_argument("--embed-latency-ms", type=float, default=0.0)
    ap.add_argument("--other-latency-ms", type=float, default=0.0)
    ap.add_argument("--completion-tokens", type=int, default=50)
    args = ap.parse_args(argv)
    config = StandInConfig(
        latency_ms=args.latency_ms,
        embed_latency_ms=args.embed_latency_ms,
        other_latency_ms=args.other_latency_ms,
        completion_tokens=args.completion_tokens,
    )
    server = StandInServer(config, args.host, args.port)
    print(server.url, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
