"""A recording fake provider on 127.0.0.1 for the real clients (docs/guides/claude-code-codex.md).

It speaks just enough of two wire protocols for a client to finish a turn:

- the Anthropic Messages API, ``POST /v1/messages`` (Claude Code through ``ANTHROPIC_BASE_URL``), streamed as
  server-sent events (``message_start``, ``content_block_start``/``_delta``/``_stop``, ``message_delta``,
  ``message_stop``) or as one JSON message when the request does not ask for a stream, and
  ``POST /v1/messages/count_tokens``;
- the OpenAI Responses API, ``POST /v1/responses`` (Codex's built-in ``openai`` provider through
  ``OPENAI_BASE_URL``), streamed as ``response.created``, ``response.output_item.added``/``.done``,
  ``response.output_text.delta`` and ``response.completed`` events.

Every request is recorded (method, path, parsed JSON body) in :attr:`FakeProvider.received`. A request whose
tool calls and results do not pair (:func:`orphans`) is refused with a 400 and its reason kept in
:attr:`FakeProvider.rejected`, as both real APIs refuse it. Each answer is
one short text; the usage it reports is a plain estimate of the request's own size (its JSON bytes / 4), so
a client's meter, which reads the last usage in its log, shows the size of what it actually sent.
Codex's WebSocket handshake (``GET /v1/responses``) gets a 426 (Upgrade Required), on which Codex 0.169 falls
back to HTTPS at once: to a 404 it retried five times with a backoff first (about 6.5 s of every Codex run;
``[features] responses_websockets = false`` does not stop it). Anything else gets a 404 (recorded too), so a
client never waits on a route the fake does not know.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson

REPLY_TEXT = "Done: the fake provider's answer."
COMPACTION_BLOB = "fake-remote-compaction-summary"


@dataclass
class Request:
    method: str
    path: str
    body: Any  # parsed JSON (None when the body is not JSON)
    size: int  # bytes of the body


def orphans(path: str, body: Any) -> list[str]:
    """What a real API refuses in a request's tool calls and results, as the Messages and Responses APIs
    say it: a ``tool_use`` not answered by a ``tool_result`` in the next message, a ``tool_result`` whose
    ``tool_use_id`` is not a call of the message before it (Messages); a call without its output, an output
    whose ``call_id`` no call before it has (Responses). Empty when they pair."""
    if not isinstance(body, dict):
        return []
    found: list[str] = []
    if path.endswith("/messages") and isinstance(body.get("messages"), list):
        msgs = [m if isinstance(m, dict) else {} for m in body["messages"]]
        calls = [_block_ids(m, "tool_use", "id") for m in msgs]
        results = [_block_ids(m, "tool_result", "tool_use_id") for m in msgs]
        for i in range(len(msgs)):
            unanswered = calls[i] - (results[i + 1] if i + 1 < len(msgs) else set())
            found += [f"messages.{i}: tool_use {c}, no tool_result after it" for c in sorted(unanswered)]
            stray = results[i] - (calls[i - 1] if i else set())
            found += [f"messages.{i}: tool_result for {c}, no tool_use before it" for c in sorted(stray)]
    elif path.endswith("/responses") and isinstance(body.get("input"), list):
        called: set[Any] = set()
        answered: set[Any] = set()
        for n, item in enumerate(i for i in body["input"] if isinstance(i, dict)):
            kind = item.get("type")
            if kind in ("function_call", "custom_tool_call", "local_shell_call"):
                called.add(item.get("call_id"))
            elif kind in ("function_call_output", "custom_tool_call_output"):
                if item.get("call_id") not in called:
                    found.append(f"input.{n}: {kind} for {item.get('call_id')}, no call before it")
                answered.add(item.get("call_id"))
        found += [f"no tool output found for function call {c}" for c in sorted(called - answered, key=str)]
    return found


def _block_ids(message: dict[str, Any], kind: str, key: str) -> set[str]:
    content = message.get("content")
    if not isinstance(content, list):
        return set()
    return {str(b.get(key)) for b in content if isinstance(b, dict) and b.get("type") == kind}


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return b"event: " + event.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


class FakeProvider:
    """Start with ``with FakeProvider() as fp:``; ``fp.url`` is ``http://127.0.0.1:<port>``."""

    def __init__(self, reply: str = REPLY_TEXT) -> None:
        self.reply = reply
        self.received: list[Request] = []
        self.rejected: list[str] = []  # the reasons of the requests refused with a 400 (:func:`orphans`)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                return

            def _record(self) -> Request:
                n = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(n) if n else b""
                try:
                    body = orjson.loads(raw) if raw else None
                except orjson.JSONDecodeError:
                    body = None
                req = Request(self.command, self.path, body, len(raw))
                with fake._lock:
                    fake.received.append(req)
                return req

            def do_GET(self) -> None:
                self._record()
                if self.path.split("?")[0].endswith("/responses"):  # Codex's WebSocket: use HTTPS
                    self._send(426, b'{"error":{"message":"upgrade required: use HTTPS"}}')
                    return
                self._send(404, b'{"error":{"message":"not here"}}')

            def do_HEAD(self) -> None:
                self._send(200, b"")

            def do_POST(self) -> None:
                req = self._record()
                path = self.path.split("?")[0]
                refused = orphans(path, req.body)
                if refused:
                    with fake._lock:
                        fake.rejected += refused
                    error = {"type": "invalid_request_error", "message": "; ".join(refused)}
                    self._send(400, orjson.dumps({"type": "error", "error": error}))
                elif path.endswith("/messages/count_tokens"):
                    self._send(200, orjson.dumps({"input_tokens": max(1, req.size // 4)}))
                elif path.endswith("/messages"):
                    fake._anthropic(self, req)
                elif path.endswith("/responses"):
                    fake._responses(self, req)
                else:
                    self._send(404, b'{"error":{"message":"not here"}}')

            def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FakeProvider:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    def posts(self, suffix: str) -> list[Request]:
        with self._lock:
            return [r for r in self.received if r.method == "POST" and r.path.split("?")[0].endswith(suffix)]

    # --- Anthropic Messages ------------------------------------------------------------------------------

    def _anthropic(self, h: BaseHTTPRequestHandler, req: Request) -> None:
        body = req.body if isinstance(req.body, dict) else {}
        n = next(self._ids)
        usage = {
            "input_tokens": max(1, req.size // 4),
            "output_tokens": 8,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }
        message = {
            "id": f"msg_fake{n:06d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "claude-fake"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        }
        if not body.get("stream"):
            done = {**message, "content": [{"type": "text", "text": self.reply}], "stop_reason": "end_turn"}
            self._write(h, orjson.dumps(done), "application/json")
            return
        chunks = [
            _sse("message_start", {"type": "message_start", "message": message}),
            _sse(
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            ),
            _sse(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": self.reply},
                },
            ),
            _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
            _sse(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": 8},
                },
            ),
            _sse("message_stop", {"type": "message_stop"}),
        ]
        self._write(h, b"".join(chunks), "text/event-stream")

    # --- OpenAI Responses --------------------------------------------------------------------------------

    def _responses(self, h: BaseHTTPRequestHandler, req: Request) -> None:
        n = next(self._ids)
        rid, mid = f"resp_fake{n:06d}", f"msg_fake{n:06d}"
        tokens = max(1, req.size // 4)
        body = req.body if isinstance(req.body, dict) else {}
        items = body.get("input") if isinstance(body.get("input"), list) else []
        item: dict[str, Any]
        if items and isinstance(items[-1], dict) and items[-1].get("type") == "compaction_trigger":
            # Codex's remote compaction (the built-in openai provider): one opaque compaction item answers
            item = {"type": "compaction", "id": f"cmp_fake{n:06d}", "encrypted_content": COMPACTION_BLOB}
        else:
            item = {
                "type": "message",
                "role": "assistant",
                "id": mid,
                "status": "completed",
                "content": [{"type": "output_text", "text": self.reply, "annotations": []}],
            }
        usage = {
            "input_tokens": tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 8,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": tokens + 8,
        }
        response = {"id": rid, "object": "response", "status": "in_progress", "output": []}
        chunks = [
            _sse("response.created", {"type": "response.created", "response": response}),
            _sse(
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": 0, "item": item},
            ),
            _sse(
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": 0, "item": item},
            ),
            _sse(
                "response.completed",
                {
                    "type": "response.completed",
                    "response": {**response, "status": "completed", "output": [item], "usage": usage},
                },
            ),
        ]
        self._write(h, b"".join(chunks), "text/event-stream")

    @staticmethod
    def _write(h: BaseHTTPRequestHandler, body: bytes, ctype: str) -> None:
        h.send_response(200)
        h.send_header("content-type", ctype)
        h.send_header("content-length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)
