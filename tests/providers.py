"""Loopback HTTP servers that speak the real wire formats of the provider APIs, for tests.

One :class:`ProviderServer` listens on 127.0.0.1 (a free port) in a background thread and answers
``POST /v1/messages``, ``POST /v1/messages/count_tokens`` (Anthropic) and ``POST /v1/chat/completions``
(OpenAI and compatible servers). Each test scripts it with a queue of :class:`Reply` objects (status, JSON or
raw body, headers, delay) and afterwards inspects :attr:`ProviderServer.received`: every POST request with
its path, headers and parsed JSON body. GET routes (``/v1/models``, ``/props``) answer from
:attr:`ProviderServer.get_routes` (404 otherwise) and are listed in :attr:`ProviderServer.gets`. With an
empty queue the server answers a plausible success for the path.

Use it as a context manager or through the ``provider_server`` fixture; either way it stops at the end,
and a reply that is still sleeping (a slow-response test) is woken so teardown never hangs.

Body shapes follow the public API references:
- Anthropic message: {id, type:"message", role:"assistant", model, content:[{type:"text", text}],
  stop_reason, stop_sequence, usage:{input_tokens, output_tokens, cache_creation_input_tokens,
  cache_read_input_tokens}}; errors {"type":"error", "error":{"type", "message"}} (+ request-id header).
- count_tokens: {"input_tokens": N}.
- OpenAI chat.completion: {id, object:"chat.completion", created, model, choices:[{index, message:{role,
  content, refusal}, finish_reason, logprobs}], usage:{prompt_tokens, completion_tokens, total_tokens}};
  errors {"error":{"message", "type", "param", "code"}}.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson
import pytest

MESSAGES = "/v1/messages"
COUNT_TOKENS = "/v1/messages/count_tokens"
CHAT = "/v1/chat/completions"


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict/list → JSON; bytes/str → sent as is (for malformed bodies); a callable is
    # given the Received request and returns the body (a server that echoes what it was sent)
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to wait before answering (timeouts)


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    raw: bytes
    body: Any  # parsed JSON, or None when the body was not JSON


# --- Anthropic bodies ------------------------------------------------------------------------------------

_ids = iter(range(1, 1 << 30))


def anthropic_message(
    text: str | None = "## User goals and rules\n- summarize\n",
    *,
    model: str = "claude-test",
    input_tokens: int = 1234,
    output_tokens: int = 56,
    cache_creation_input_tokens: int = 0,
    cache_read_input_tokens: int = 0,
    stop_reason: str | None = "end_turn",
    content: list[dict[str, Any]] | None = None,
    delay: float = 0.0,
) -> Reply:
    default = [{"type": "text", "text": text}] if text is not None else []
    blocks = content if content is not None else default
    return Reply(200, {
        "id": f"msg_{next(_ids):024d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": cache_creation_input_tokens,
            "cache_read_input_tokens": cache_read_input_tokens,
        },
    }, {"request-id": f"req_{next(_ids):020d}"}, delay)


_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def anthropic_error(status: int, message: str = "error", *, retry_after: str | None = None,
                    delay: float = 0.0) -> Reply:
    headers = {"request-id": f"req_{next(_ids):020d}"}
    if retry_after is not None:
        headers["retry-after"] = retry_after
    body = {"type": "error", "error": {"type": _ANTHROPIC_ERROR_TYPES.get(status, "api_error"),
                                       "message": message}}
    return Reply(status, body, headers, delay)


def count_tokens_reply(input_tokens: int) -> Reply:
    return Reply(200, {"input_tokens": input_tokens}, {"request-id": f"req_{next(_ids):020d}"})


# --- OpenAI bodies ---------------------------------------------------------------------------------------

def openai_completion(
    content: str | None = "## User goals and rules\n- summarize\n",
    *,
    model: str = "gpt-test",
    prompt_tokens: int = 2345,
    completion_tokens: int = 67,
    finish_reason: str = "stop",
    refusal: str | None = None,
    choices: list[dict[str, Any]] | None = None,
    delay: float = 0.0,
) -> Reply:
    if choices is None:
        choices = [{
            "index": 0,
            "message": {"role": "assistant", "content": content, "refusal": refusal, "annotations": []},
            "finish_reason": finish_reason,
            "logprobs": None,
        }]
    return Reply(200, {
        "id": f"chatcmpl-{next(_ids):020d}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
        "system_fingerprint": None,
    }, {"x-request-id": f"req_{next(_ids):020d}"}, delay)


_OPENAI_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    503: ("server_error", None),
}


def openai_error(status: int, message: str = "error", *, retry_after: str | None = None,
                 delay: float = 0.0) -> Reply:
    etype, code = _OPENAI_ERROR_TYPES.get(status, ("server_error", None))
    headers = {"x-request-id": f"req_{next(_ids):020d}"}
    if retry_after is not None:
        headers["retry-after"] = retry_after
    return Reply(status, {"error": {"message": message, "type": etype, "param": None, "code": code}},
                 headers, delay)


def openai_context_error(window: int | None, requested: int = 30_000) -> Reply:
    """A 400 for a request over the model's window: llama-cpp-python's and vLLM's wording (no number when
    ``window`` is None, as some gateways say it)."""
    if window:
        message = (f"This model's maximum context length is {window} tokens. However, you requested "
                   f"{requested} tokens ({requested - 800} in the messages, 800 in the completion). Please "
                   "reduce the length of the messages or completion.")
    else:
        message = "The input is too long for the model's context window."
    return Reply(400, {"error": {"message": message, "type": "invalid_request_error", "param": "messages",
                                 "code": "context_length_exceeded" if window else None}})


_DEFAULTS = {
    MESSAGES: anthropic_message,
    COUNT_TOKENS: lambda: count_tokens_reply(42),
    CHAT: openai_completion,
}


# --- the server ------------------------------------------------------------------------------------------

class ProviderServer:
    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.received: list[Received] = []  # POST requests
        self.get_routes: dict[str, Reply] = {}  # GET path → its reply (/v1/models); others 404
        self.gets: list[str] = []  # GET paths asked for
        #: the POST requests answered whole: a timeout test asserts its call returned before a slow reply
        #: was sent (not a bound on the time it took, which a loaded machine breaks)
        self.answered = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # scripting
    def push(self, *replies: Reply) -> ProviderServer:
        with self._lock:
            self.replies.extend(replies)
        return self

    def requests_to(self, path: str) -> list[Received]:
        return [r for r in self.received if r.path == path]

    @property
    def url(self) -> str:
        """Base URL for the Anthropic SDK (it appends /v1/messages)."""
        assert self._httpd is not None
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def openai_url(self) -> str:
        """Base URL for the OpenAI SDK (it appends /chat/completions)."""
        return self.url + "/v1"

    # lifecycle
    def start(self) -> ProviderServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                with server._lock:
                    server.gets.append(path)
                    reply = server.get_routes.get(path)
                self._answer(reply or Reply(404, {"error": {
                    "message": "not found", "type": "invalid_request_error", "param": None, "code": None}}))

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = orjson.loads(raw) if raw else None
                except orjson.JSONDecodeError:
                    body = None
                path = self.path.split("?", 1)[0]
                with server._lock:
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    request = Received("POST", path, headers, raw, body)
                    server.received.append(request)
                    reply = server.replies.popleft() if server.replies else None
                if reply is None:
                    make = _DEFAULTS.get(path)
                    reply = make() if make else Reply(404, {"type": "error", "error": {
                        "type": "not_found_error", "message": f"no route {path}"}})
                if callable(reply.body):
                    reply = dataclasses.replace(reply, body=reply.body(request))
                if reply.delay and server._stop.wait(reply.delay):
                    return  # shutting down: drop the connection instead of answering
                if self._answer(reply):
                    with server._lock:
                        server.answered += 1

            def _answer(self, reply: Reply) -> bool:
                if isinstance(reply.body, (bytes, str)):
                    data = reply.body.encode() if isinstance(reply.body, str) else reply.body
                else:
                    data = orjson.dumps(reply.body)
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    return False  # the client gave up (timeout test)
                return True

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ProviderServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture
def provider_server() -> Iterator[ProviderServer]:
    with ProviderServer() as server:
        yield server


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No provider variables or proxies from the developer's shell leak into a test."""
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_CUSTOM_HEADERS",
                "ANTHROPIC_PROFILE", "ANTHROPIC_CONFIG_DIR", "OPENAI_API_KEY", "OPENAI_BASE_URL",
                "OPENAI_ADMIN_KEY", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "CTXCOMPACT_API_KEY",
                "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    return monkeypatch
