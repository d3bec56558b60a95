"""``estimate --exact anthropic``: the transcript as an Anthropic Messages payload, counted by the
``messages.count_tokens`` endpoint of a loopback server that speaks its wire format."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from providers import COUNT_TOKENS, ProviderServer, anthropic_error, count_tokens_reply

from ctxcompact.errors import UsageError
from ctxcompact.model import (
    ImageBlock,
    Message,
    OpaqueBlock,
    Record,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResult,
    Transcript,
)
from ctxcompact.tokens.provider import (
    ProviderCountError,
    anthropic_count_tokens,
    anthropic_payload,
    count_transcript_tokens,
    unsupported_provider,
)

SECRET = "sk-ant-api03-COUNT-SECRET-fedcba9876543210"
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "CTXCOMPACT_API_KEY",
                "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    return monkeypatch


@pytest.fixture
def server() -> Iterator[ProviderServer]:
    with ProviderServer() as s:
        yield s


def rec(i: int, role: Role, *blocks: object) -> Record:
    return Record(index=i, line=i + 1, raw=None, data=None,
                  message=Message(role=role, blocks=list(blocks)))  # type: ignore[arg-type]


def transcript() -> Transcript:
    return Transcript("anthropic", [
        rec(0, Role.SYSTEM, TextBlock("You are terse.")),
        rec(1, Role.USER, TextBlock("List files"), ImageBlock("image/png", IMAGE)),
        rec(2, Role.ASSISTANT, ThinkingBlock("secret reasoning", signature="s"),
            ToolCall("toolu_01", "ls", '{"dir": "."}', {"dir": "."})),
        rec(3, Role.USER, ToolResult("toolu_01", [TextBlock("a.py\nb.py")], is_error=False)),
        rec(4, Role.ASSISTANT, TextBlock("Two files.")),
        Record(index=5, line=6, raw=b"{}", data={"type": "progress"}, message=None),
    ])


def test_payload_from_model_blocks() -> None:
    messages, system = anthropic_payload(transcript())
    assert system == "You are terse."
    assert messages == [
        {"role": "user", "content": [{"type": "text", "text": "List files"}, IMAGE]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01", "name": "ls",
                                           "input": {"dir": "."}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01",
                                      "content": [{"type": "text", "text": "a.py\nb.py"}]}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Two files."}]},
    ]


def test_payload_from_openai_shaped_records() -> None:
    # OpenAI: tool messages, ids with dots, an image_url data URL, consecutive tool messages
    records = [
        rec(0, Role.ASSISTANT, TextBlock("I'll look."),
            ToolCall("call.1", "read", '{"p": 1}', {"p": 1}), ToolCall("", "noid", "not json", None)),
        rec(1, Role.TOOL, ToolResult("call.1", [TextBlock("one")])),
        rec(2, Role.TOOL, ToolResult("", [TextBlock("two")], is_error=True)),
        rec(3, Role.USER, TextBlock("and this"),
            ImageBlock("image/jpeg", {"type": "image_url",
                                      "image_url": {"url": "data:image/jpeg;base64,AAAA"}})),
        rec(4, Role.USER, ImageBlock(None, {"type": "input_audio"})),
        rec(5, Role.ASSISTANT, OpaqueBlock("citation", '{"cited": "x"}'), TextBlock("")),
    ]
    messages, system = anthropic_payload(records)
    assert system is None
    # the first message must be the user's: a minimal one is put in front
    assert messages[0] == {"role": "user", "content": [{"type": "text", "text": "."}]}
    calls = messages[1]["content"]
    assert calls[1] == {"type": "tool_use", "id": "call_1", "name": "read", "input": {"p": 1}}
    assert calls[2]["type"] == "tool_use" and calls[2]["id"].startswith("toolu_ctx_")
    assert calls[2]["input"] == {"arguments": "not json"}
    # both tool messages and the following user messages merged into one user turn, results first
    user = messages[2]
    assert user["role"] == "user"
    kinds = [b["type"] for b in user["content"]]
    assert kinds[:2] == ["tool_result", "tool_result"]
    assert user["content"][0]["tool_use_id"] == "call_1"  # still tied to its call
    assert user["content"][1]["is_error"] is True
    assert {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "AAAA"}} in \
        user["content"]
    assert {"type": "text", "text": "[image]"} in user["content"]  # unconvertible binary part
    assert messages[3] == {"role": "assistant", "content": [{"type": "text", "text": '{"cited": "x"}'}]}
    # strict alternation holds
    roles = [m["role"] for m in messages]
    assert all(a != b for a, b in itertools.pairwise(roles))


def test_empty_transcript_still_makes_a_valid_payload() -> None:
    messages, system = anthropic_payload(Transcript("openai", []))
    assert messages == [{"role": "user", "content": [{"type": "text", "text": "."}]}]
    assert system is None


def test_count_returns_server_figure_and_sends_the_payload(env: pytest.MonkeyPatch,
                                                           server: ProviderServer) -> None:
    server.push(count_tokens_reply(5_321))
    n = count_transcript_tokens(transcript(), "anthropic", "claude-test", api_key="k", base_url=server.url,
                                max_retries=0)
    assert n == 5_321
    [got] = server.requests_to(COUNT_TOKENS)
    messages, system = anthropic_payload(transcript())
    assert got.body == {"model": "claude-test", "messages": messages, "system": system}
    assert b"secret reasoning" not in got.raw  # thinking is not sent


def test_count_reads_key_and_base_url_from_environment(env: pytest.MonkeyPatch,
                                                       server: ProviderServer) -> None:
    env.setenv("ANTHROPIC_API_KEY", "env-key")
    env.setenv("ANTHROPIC_BASE_URL", server.url)
    server.push(count_tokens_reply(7))
    assert anthropic_count_tokens([{"role": "user", "content": "hi"}], None, "m", max_retries=0) == 7
    got = server.received[0]
    assert "system" not in got.body
    auth = got.headers.get("x-api-key") or got.headers.get("authorization", "").removeprefix("Bearer ")
    assert auth == "env-key"


def test_missing_key_fails_before_any_request(env: pytest.MonkeyPatch, server: ProviderServer) -> None:
    with pytest.raises(UsageError, match="--exact anthropic needs an API key"):
        count_transcript_tokens(transcript(), "anthropic", "m", base_url=server.url)
    with pytest.raises(UsageError, match="--exact anthropic needs --model"):
        count_transcript_tokens(transcript(), "anthropic", None, api_key="k", base_url=server.url)
    assert server.received == []


@pytest.mark.parametrize("provider, match", [
    ("openai", "OpenAI has no token-counting endpoint"),
    ("genai", "has no token-counting endpoint"),
])
def test_providers_without_count_endpoint(provider: str, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        count_transcript_tokens(transcript(), provider, "m", api_key="k")
    assert "--exact tiktoken" in str(unsupported_provider(provider))


def test_count_failure_is_clear_and_secret_free(env: pytest.MonkeyPatch, server: ProviderServer) -> None:
    env.setenv("CTXCOMPACT_API_KEY", SECRET)
    server.push(anthropic_error(401, f"bad key {SECRET}"))
    with pytest.raises(ProviderCountError, match="token count failed: HTTP 401") as info:
        count_transcript_tokens(transcript(), "anthropic", "m", base_url=server.url, max_retries=0)
    assert SECRET not in str(info.value) and info.value.__context__ is None
    assert len(server.received) == 1


def test_count_reply_without_input_tokens(env: pytest.MonkeyPatch, server: ProviderServer) -> None:
    from providers import Reply

    server.push(Reply(200, orjson.dumps({"tokens": 3})))
    with pytest.raises(ProviderCountError, match="no input_tokens"):
        count_transcript_tokens(transcript(), "anthropic", "m", api_key="k", base_url=server.url,
                                max_retries=0)


def test_estimate_calibrates_to_the_providers_count(env: pytest.MonkeyPatch, server: ProviderServer,
                                                    tmp_path: Path) -> None:
    """The pipeline asks the provider ``--exact`` names (plugins.PROVIDER_COUNTERS) for the whole context and
    takes its count as the real figure; the file is read held (the count needs the context)."""
    from helpers import SAMPLES

    from ctxcompact import api

    log = tmp_path / "t.jsonl"
    log.write_bytes((SAMPLES / "anthropic-session.jsonl").read_bytes())
    opts = api.Options(exact="anthropic", model="m", window=8000, api_key="k", base_url=server.url,
                       timeout=5.0)
    server.push(count_tokens_reply(99), count_tokens_reply(98))
    report = api.estimate(log, opts)
    assert report.calibrated.source == "anthropic count_tokens" and report.calibrated.real == 99
    assert server.received[0].body["model"] == "m"
    ran = api.run(log, opts, output=tmp_path / "out.jsonl")  # (run of a file streams when it may)
    assert ran.estimate.calibrated.source == "anthropic count_tokens" and ran.estimate.calibrated.real == 98


@pytest.mark.parametrize("retries", [0, 1])
def test_run_asks_the_provider_as_often_as_max_retries_says(env: pytest.MonkeyPatch, server: ProviderServer,
                                                             tmp_path: Path, retries: int) -> None:
    """``run --exact anthropic --max-retries N``: the count is asked once and retried N times (it was
    always retried twice, whatever the option said)."""
    from helpers import SAMPLES

    from ctxcompact import api

    log = tmp_path / "t.jsonl"
    log.write_bytes((SAMPLES / "anthropic-session.jsonl").read_bytes())
    opts = api.Options(exact="anthropic", model="m", window=8000, api_key="k", base_url=server.url,
                       timeout=10.0, max_retries=retries)
    server.push(*[anthropic_error(529, "overloaded", retry_after="0") for _ in range(4)])
    with pytest.raises(ProviderCountError, match=r"token count failed.*overloaded") as err:
        api.run(log, opts, output=tmp_path / "out.jsonl")
    assert len(server.requests_to(COUNT_TOKENS)) == retries + 1
    assert (f"after {retries} retr" in str(err.value)) == (retries > 0)  # (the error says how often)
    assert not (tmp_path / "out.jsonl").exists()
