"""A small local model with a small window (issue 26 item 18): with ``--summary-window`` 2048 to 4096 the
summarizer asks with the compact instructions and cuts the conversation into chunks that fit, against a fake
OpenAI-compatible server on 127.0.0.1 that counts every request (o200k tokens of the messages plus the reply's
room) and refuses one over its window, as llama.cpp and vLLM do."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxcompact.summarizers.check import SECTIONS
from ctxcompact.summarizers.prompt import SMALL_SYSTEM_PROMPT, SYSTEM_PROMPT, system_prompt
from ctxcompact.tokens.exact import count_text

RULE = "Never push to main without asking me first."
LATEST = "Now make the retry test pass and tell me what you changed."


class WindowServer:
    """Answers /v1/chat/completions with a summary holding every section, or a 400 when the request (its
    messages' tokens plus ``max_tokens``) exceeds ``window``."""

    def __init__(self, window: int) -> None:
        self.window = window
        self.sizes: list[int] = []  # tokens each request asked for
        self.refused = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._send(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                body = orjson.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                text = "".join(m["content"] for m in body["messages"])
                asked = count_text(text) + 4 * len(body["messages"]) + int(body.get("max_tokens") or 0)
                outer.sizes.append(asked)
                if asked > outer.window:
                    outer.refused += 1
                    self._send(400, {"error": {
                        "message": f"This model's maximum context length is {outer.window} tokens. However, "
                                   f"you requested {asked} tokens.",
                        "type": "invalid_request_error", "param": "messages",
                        "code": "context_length_exceeded"}})
                    return
                notes = "\n".join(f"## {s}\n- (none)" for s in SECTIONS).replace(
                    "## User goals and rules\n- (none)", f'## User goals and rules\n- "{RULE}"')
                self._send(200, {"id": "c1", "object": "chat.completion", "created": 0, "model": "tiny",
                                 "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                                              "message": {"role": "assistant", "content": notes}}],
                                 "usage": {"prompt_tokens": asked, "completion_tokens": 50,
                                           "total_tokens": asked + 50}})

            def _send(self, status: int, obj: Any) -> None:
                data = orjson.dumps(obj)
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server_for() -> Iterator[Any]:
    made: list[WindowServer] = []

    def make(window: int) -> WindowServer:
        made.append(WindowServer(window))
        return made[-1]

    yield make
    for s in made:
        s.stop()


def _session() -> bytes:
    lines: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."},
                                   {"role": "user", "content": f"Fix the retry logic. {RULE}"}]
    for i in range(24):
        args = orjson.dumps({"command": f"pytest -x tests/test_{i}.py"}).decode()
        output = "".join(f"collected item {j} of test_{i}\n" for j in range(60))
        lines += [{"role": "assistant", "content": None, "tool_calls": [
                      {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": args}}]},
                  {"role": "tool", "tool_call_id": f"c{i}",
                   "content": f"{output}FAILED tests/test_retry.py::test_{i} - AssertionError: {i}"}]
    lines.append({"role": "user", "content": LATEST})
    return b"".join(orjson.dumps(x) + b"\n" for x in lines)


def test_the_compact_instructions_ask_for_the_same_sections() -> None:
    for section in SECTIONS:
        assert f"## {section}" in SMALL_SYSTEM_PROMPT
    assert "WORD FOR WORD" in SMALL_SYSTEM_PROMPT and "DATA" in SMALL_SYSTEM_PROMPT
    assert count_text(SMALL_SYSTEM_PROMPT) * 4 < count_text(SYSTEM_PROMPT)
    assert system_prompt(2048) is SMALL_SYSTEM_PROMPT and system_prompt(128_000) is SYSTEM_PROMPT


@pytest.mark.parametrize("window", [2048, 3072, 4096])
def test_a_small_window_summarizes_in_chunks_that_fit(tmp_path: Path, server_for: Any, window: int) -> None:
    server = server_for(window)
    log = tmp_path / "s.jsonl"
    log.write_bytes(_session())
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXCOMPACT_")}
    env.update({"NO_PROXY": "127.0.0.1", "OPENAI_API_KEY": "", "HTTP_PROXY": "", "HTTPS_PROXY": ""})
    proc = subprocess.run(
        [sys.executable, "-m", "ctxcompact", "run", str(log), "--window", "20000", "--summarizer", "openai",
         "--summary-model", "tiny", "--base-url", server.url, "--summary-window", str(window),
         "--max-retries", "0", "--timeout", "60", "-o", str(tmp_path / "o.jsonl")],
        capture_output=True, env=env, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr.decode()
    summary = orjson.loads((tmp_path / "s.jsonl.ctxstate.json").read_bytes())["summary"]
    assert summary["summarizer"] == "openai", summary
    assert summary["fallback"] is False, summary["fallback_reason"]
    assert server.refused == 0 and max(server.sizes) <= window, server.sizes  # every request fitted
    assert summary["chunks"] == len(server.sizes) > 1  # the conversation did not fit one request
    out = (tmp_path / "o.jsonl").read_text()
    assert RULE in out and LATEST in out
