"""Memory of a compaction with an LLM summarizer: peak RSS of `run --summarizer openai` against a loopback
OpenAI-compatible server (in this process: it keeps nothing per request), one source tree beside another
(e.g. main and a branch), alternated A B A B.

  run   ctxcompact run FILE --no-state -o OUT --summarizer openai --summary-model m --base-url URL

The server answers every request with notes naming the prompt's last words (so the check of the summary
passes); it says how many requests each run sent. Every tree is run with ``PYTHONPATH=TREE``.

    python bench/memory_llm.py FILE [FILE ...] --tree main=/work/main --tree branch=. [--runs 2]
"""

from __future__ import annotations

import argparse
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
from common import PY, Case, child_env, header, measure, table

SECTIONS = ("User goals and rules", "Timeline", "Technical context", "Files and code", "Active work",
            "Unresolved issues", "Next step")


class _Server:
    """POST /v1/chat/completions: a chat.completion whose notes name the prompt's last words."""

    def __init__(self) -> None:
        self.requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._send(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

            def do_POST(self) -> None:
                body = orjson.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
                server.requests += 1
                words = re.findall(r"[A-Za-z_][\w./-]{5,}", body["messages"][-1]["content"])[-60:]
                notes = "\n".join(f"## {s}\n- {' '.join(words[i * 8:(i + 1) * 8]) or '(none)'}"
                                  for i, s in enumerate(SECTIONS))
                self._send(200, {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                                 "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                                              "message": {"role": "assistant", "content": notes}}],
                                 "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

            def _send(self, status: int, obj: Any) -> None:
                data = orjson.dumps(obj)
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--tree", action="append", required=True, help="NAME=PATH: a source tree to run")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--window", default="200000")
    args = ap.parse_args()
    server = _Server()
    header("run --summarizer openai, peak RSS")
    rows = []
    for path in args.files:
        cases = []
        for given in args.tree:
            name, tree = given.split("=", 1)
            out = Path(f"/tmp/memory_llm_{name}.jsonl")
            argv = [PY, "-m", "ctxcompact", "run", str(path), "--no-state", "-o", str(out), "--window",
                    args.window, "--summarizer", "openai", "--summary-model", "m", "--base-url", server.url,
                    "--max-retries", "0"]
            env = child_env(PYTHONPATH=str(Path(tree).resolve()), OPENAI_API_KEY="", NO_PROXY="127.0.0.1")
            cases.append(Case(name, argv, env=env))
        before = server.requests
        measure(cases, args.runs, warmup=0)
        per_run = (server.requests - before) // (args.runs * len(cases))
        for case in cases:
            size = path.stat().st_size / 1e6
            rows.append([f"{path.name} ({size:.0f} MB)", case.name, f"{case.rss:.0f}", f"{case.wall:.1f}",
                         f"{case.cpu:.1f}", str(per_run), case.error() or "ok"])
    table(rows, ["input", "tree", "peak RSS MiB", "wall s", "cpu s", "requests/run", "exit"])


if __name__ == "__main__":
    main()
