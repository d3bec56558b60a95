"""`run` with an LLM summarizer as a user sees it: the real CLI in a subprocess, the official SDKs, and a
loopback server speaking the provider's wire format. Fallback, --no-fallback (exit 4), a missing key,
and no secret ever written anywhere."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import coding_session, ctxcompact, jsonl, sys_msg, user
from providers import ProviderServer, anthropic_error, anthropic_message, openai_completion

KEY = "sk-ant-PLANTED-never-write-me-0123456789"


@pytest.fixture()
def log(tmp_path: Path) -> Path:
    path = tmp_path / "session.jsonl"
    path.write_bytes(jsonl([sys_msg("You are a coding agent."), *coding_session(12), user("Carry on.")]))
    return path


def env(server: ProviderServer, **extra: str) -> dict[str, str]:
    base = {"ANTHROPIC_API_KEY": KEY, "NO_PROXY": "127.0.0.1,localhost", "HTTP_PROXY": "", "HTTPS_PROXY": ""}
    base.update(extra)
    return base


def everything_written(tmp_path: Path, proc: object) -> bytes:
    blobs = [p.read_bytes() for p in tmp_path.iterdir() if p.is_file()]
    return b"".join(blobs) + proc.stdout + proc.stderr  # type: ignore[attr-defined]


def test_anthropic_summary_is_placed_and_recorded(log: Path, tmp_path: Path) -> None:
    with ProviderServer() as server:
        server.push(
            anthropic_message(
                "## User goals and rules\n- keep handle_11 stable\n",
                model="claude-x",
                input_tokens=4000,
                output_tokens=120,
            )
        )
        proc = ctxcompact(
            "run",
            str(log),
            "--window",
            "8000",
            "--summarizer",
            "anthropic",
            "--summary-model",
            "claude-x",
            "--base-url",
            server.url,
            "-o",
            str(tmp_path / "o.jsonl"),
            env=env(server),
        )
        assert proc.returncode == 0, proc.stderr
        sent = server.requests_to("/v1/messages")
    assert len(sent) == 1
    assert sent[0].body["model"] == "claude-x"
    assert sent[0].body["max_tokens"] == 800  # the summary budget of an 8k window
    out = [orjson.loads(x) for x in (tmp_path / "o.jsonl").read_bytes().splitlines()]
    assert "keep handle_11 stable" in out[1]["content"]
    assert "Carry on." in out[2]["content"]
    state = orjson.loads(Path(str(log) + ".ctxstate.json").read_bytes())
    summary = state["summary"]
    assert (summary["summarizer"], summary["model"], summary["fallback"]) == ("anthropic", "claude-x", False)
    assert (summary["input_tokens"], summary["output_tokens"]) == (4000, 120)
    assert KEY.encode() not in everything_written(tmp_path, proc)


def test_provider_failure_falls_back_to_extractive(log: Path, tmp_path: Path) -> None:
    with ProviderServer() as server:
        server.push(anthropic_error(529, "Overloaded"), anthropic_error(529, "Overloaded"))
        proc = ctxcompact(
            "run",
            str(log),
            "--window",
            "8000",
            "--summarizer",
            "anthropic",
            "--summary-model",
            "claude-x",
            "--base-url",
            server.url,
            "--max-retries",
            "1",
            "-o",
            str(tmp_path / "o.jsonl"),
            env=env(server),
        )
    assert proc.returncode == 0, proc.stderr
    assert b"extractive" in proc.stderr and b"529" in proc.stderr
    state = orjson.loads(Path(str(log) + ".ctxstate.json").read_bytes())
    assert state["summary"]["fallback"] is True
    assert "529" in state["summary"]["fallback_reason"]
    assert state["summary"]["summarizer"] == "extractive"
    assert KEY.encode() not in everything_written(tmp_path, proc)


def test_no_fallback_exits_4_and_writes_nothing(log: Path, tmp_path: Path) -> None:
    before = sorted(p.name for p in tmp_path.iterdir())
    with ProviderServer() as server:
        server.push(anthropic_error(500, "boom"), anthropic_error(500, "boom"))
        proc = ctxcompact(
            "run",
            str(log),
            "--window",
            "8000",
            "--summarizer",
            "anthropic",
            "--summary-model",
            "claude-x",
            "--base-url",
            server.url,
            "--max-retries",
            "1",
            "--no-fallback",
            "-o",
            str(tmp_path / "o.jsonl"),
            env=env(server),
        )
    assert proc.returncode == 4, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")) == before


def test_missing_key_is_an_error_before_any_request(log: Path, tmp_path: Path) -> None:
    with ProviderServer() as server:
        proc = ctxcompact(
            "run",
            str(log),
            "--window",
            "8000",
            "--summarizer",
            "anthropic",
            "--summary-model",
            "claude-x",
            "--base-url",
            server.url,
            "-o",
            str(tmp_path / "o.jsonl"),
            env=env(server, ANTHROPIC_API_KEY=""),
        )
        assert server.received == []
    assert proc.returncode == 2
    assert b"ANTHROPIC_API_KEY" in proc.stderr
    assert not (tmp_path / "o.jsonl").exists()


def test_openai_compatible_local_server(log: Path, tmp_path: Path) -> None:
    with ProviderServer() as server:
        server.push(openai_completion("## User goals and rules\n- local model summary of handle_11\n"))
        proc = ctxcompact(
            "run",
            str(log),
            "--window",
            "8000",
            "--summarizer",
            "openai",
            "--summary-model",
            "llama3.1",
            "--base-url",
            server.openai_url,
            "-o",
            str(tmp_path / "o.jsonl"),
            env=env(server, ANTHROPIC_API_KEY="", OPENAI_API_KEY=""),
        )
        sent = server.requests_to("/v1/chat/completions")
    assert proc.returncode == 0, proc.stderr
    assert len(sent) == 1 and sent[0].body["model"] == "llama3.1"
    assert "local model summary" in (tmp_path / "o.jsonl").read_text()


def _echo_headers(make_body: Any) -> Any:
    """A body that quotes every request header back inside the summary text (and the model name)."""

    def body(request: Any) -> Any:
        headers = "\n".join(f"{k}: {v}" for k, v in sorted(request.headers.items()))
        return make_body(f"## User goals and rules\n- echo of the request about handle_11:\n{headers}\n",
                         headers)

    return body


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_summary_echoing_the_request_headers_never_writes_the_key(log: Path, tmp_path: Path,
                                                                     provider: str) -> None:
    """A server answering 200 with the request's headers inside the summary: the key is redacted from the
    output, the state and everything printed (issue 19 class 7)."""
    with ProviderServer() as server:
        if provider == "anthropic":
            reply = anthropic_message("x", model="claude-x")
            reply.body = _echo_headers(lambda text, headers: {**anthropic_message(text).body,
                                                              "model": "claude-x " + headers})
            base_url, extra = server.url, {}
        else:
            reply = openai_completion("x")
            reply.body = _echo_headers(lambda text, headers: {**openai_completion(text).body,
                                                              "model": "gpt-x " + headers})
            base_url, extra = server.openai_url, {"OPENAI_API_KEY": KEY}
        server.push(reply)
        out = tmp_path / "o.jsonl"
        proc = ctxcompact("run", str(log), "--window", "8000", "--summarizer", provider,
                          "--summary-model", "m", "--base-url", base_url, "--json", "-o", str(out),
                          env=env(server, **extra))
        assert proc.returncode == 0, proc.stderr
        sent = server.received
    # the key really went out in a header, and the server really echoed it into the summary
    assert any(KEY in v for r in sent for v in r.headers.values())
    written = out.read_text()
    assert "echo of the request" in written and "***" in written
    state = Path(str(log) + ".ctxstate.json").read_bytes()
    assert b"***" in state
    assert KEY.encode() not in everything_written(tmp_path, proc)
    assert KEY.encode() not in state
