"""Token counting: the chars/4 heuristic and exact offline tiktoken counts."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from unittest import mock

import pytest

from ctxcompact.errors import UsageError
from ctxcompact.model import (
    IMAGE_TOKENS,
    ImageBlock,
    Message,
    OpaqueBlock,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResult,
)
from ctxcompact.tokens import count_messages as count_any
from ctxcompact.tokens import exact, heuristic


def msg(*blocks: object, role: Role = Role.USER) -> Message:
    return Message(role=role, blocks=list(blocks))  # type: ignore[arg-type]


# --- heuristic ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "expected"), [(0, 0), (1, 1), (3, 1), (4, 1), (5, 2), (8, 2), (9, 3)])
def test_text_tokens_is_ceil_of_quarter(n: int, expected: int) -> None:
    assert heuristic.text_tokens("x" * n) == expected
    assert heuristic.message_tokens(msg(TextBlock("x" * n))) == expected


def test_empty_message_is_zero() -> None:
    assert heuristic.message_tokens(msg()) == 0


def test_unicode_counts_characters_not_bytes() -> None:
    # 4 code points (12 UTF-8 bytes) → 1 token; 5 → 2.
    assert heuristic.message_tokens(msg(TextBlock("日本語字"))) == 1
    assert heuristic.message_tokens(msg(TextBlock("日本語字😀"))) == 2


def test_ceiling_is_taken_once_per_message() -> None:
    # Two 1-char blocks: 2 chars → 1 token (not 1 + 1).
    assert heuristic.message_tokens(msg(TextBlock("a"), TextBlock("b"))) == 1


def test_tool_call_name_arguments_results_and_thinking_all_count() -> None:
    call = ToolCall(id="call_1", name="read_file", arguments='{"path": "/etc/hosts"}')  # 9 + 22 chars
    thinking = ThinkingBlock(text="t" * 10)
    assistant = msg(thinking, TextBlock("ok"), call, role=Role.ASSISTANT)
    assert heuristic.message_tokens(assistant) == -(-(10 + 2 + 9 + 22) // 4)  # 43 chars → 11
    result = ToolResult(call_id="call_1", content=[TextBlock("r" * 17), TextBlock("s" * 3)])
    assert heuristic.message_tokens(msg(result, role=Role.TOOL)) == 5  # 20 chars


def test_image_costs_fixed_amount_not_base64_length() -> None:
    b64 = "A" * 4_000_000
    image = ImageBlock(media_type="image/png", raw={"type": "image", "source": {"data": b64}})
    assert heuristic.message_tokens(msg(image)) == IMAGE_TOKENS
    # An image inside a tool result counts the same way, next to its text.
    result = ToolResult(call_id="c", content=[TextBlock("abcd"), image])
    assert heuristic.message_tokens(msg(result, role=Role.TOOL)) == 1 + IMAGE_TOKENS


def test_opaque_block_counts_its_text_only() -> None:
    assert heuristic.message_tokens(msg(OpaqueBlock(kind="server_tool_use", text="12345678"))) == 2
    assert heuristic.message_tokens(msg(OpaqueBlock(kind="audio", text=""))) == 0


def test_huge_message() -> None:
    assert heuristic.message_tokens(msg(TextBlock("y" * 10_000_001))) == 2_500_001


# --- exact -------------------------------------------------------------------------------------------------


def test_hello_world_token_ids() -> None:
    # Well-known ids: cl100k "hello world" = [15339, 1917]; o200k = [24912, 2375].
    assert exact.get_encoding("cl100k_base").encode_ordinary("hello world") == [15339, 1917]
    assert exact.get_encoding("o200k_base").encode_ordinary("hello world") == [24912, 2375]


def test_encoding_is_cached_per_process() -> None:
    assert exact.get_encoding("o200k_base") is exact.get_encoding()


def test_unknown_encoding_is_usage_error() -> None:
    with pytest.raises(UsageError, match="o200k_base"):
        exact.get_encoding("p50k_base")


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_pattern_and_special_tokens_match_tiktoken_constructors(name: str) -> None:
    # tiktoken's own constructor, with the (downloading) rank loader stubbed out.
    import tiktoken_ext.openai_public as public

    with mock.patch.object(public, "load_tiktoken_bpe", lambda *a, **k: {}):
        spec = getattr(public, name)()
    enc = exact.get_encoding(name)
    assert enc.name == spec["name"]
    assert enc._pat_str == spec["pat_str"]
    assert enc._special_tokens == spec["special_tokens"]
    # Rank 0 of both encodings is the single byte "!" (the first printable byte).
    assert enc.decode_single_token_bytes(0) == b"!"


def test_hash_mismatch_is_clear_error() -> None:
    with pytest.raises(UsageError, match="SHA-256"):
        exact.verify_ranks("o200k_base", b"IQ== 0\n")


def test_tampered_rank_file_is_refused_without_network(monkeypatch: pytest.MonkeyPatch) -> None:
    import gzip

    class FakeFile:
        def __truediv__(self, _: str) -> FakeFile:
            return self

        def read_bytes(self) -> bytes:
            return gzip.compress(b"IQ== 0\n")

    import importlib.resources  # exact.py imports it where it reads the package's ranks

    monkeypatch.setattr(importlib.resources, "files", lambda _pkg: FakeFile())
    monkeypatch.setattr(exact, "_cache", {})
    with pytest.raises(UsageError, match="failed their SHA-256 check"):
        exact.get_encoding("cl100k_base")


def test_parse_ranks() -> None:
    assert exact.parse_ranks(b"IQ== 0\nIg== 1\n\n") == {b"!": 0, b'"': 1}


SAMPLES = [
    "",
    "hello world",
    "def f(x):\n    return {'a': [1, 2, 3]}\n",
    '{"path": "/tmp/x.py", "lines": [1, 2, 3], "ok": true}',
    "Grüße aus Köln — 日本語のテキスト 😀 emoji",
    "<|endoftext|> and <|fim_prefix|> and <|endofprompt|>",
    "  \n\n\t trailing spaces   \n",
    "a" * 5000,
]


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_count_texts_equals_tiktoken_encode(name: str) -> None:
    enc = exact.get_encoding(name)
    expected = [len(enc.encode(t, disallowed_special=())) for t in SAMPLES]
    assert exact.count_texts(SAMPLES, name) == expected
    assert [exact.count_text(t, name) for t in SAMPLES] == expected


def test_special_token_text_is_ordinary_and_never_raises() -> None:
    enc = exact.get_encoding()
    n = exact.count_text("<|endoftext|>")
    assert n == len(enc.encode("<|endoftext|>", disallowed_special=()))
    assert n > 1  # encoded as its characters, not as the one special token
    with pytest.raises(ValueError):  # what tiktoken's default encode would have done
        enc.encode("<|endoftext|>")


def test_lone_surrogate_does_not_raise() -> None:
    assert exact.count_text("a\ud800b") >= 2


def test_count_texts_of_many_texts_equals_encoding_each() -> None:
    texts = [f"line {i}: " + "lorem ipsum 日本 {" * (i % 50) for i in range(600)]
    texts.append("z" * 20_000)  # one long piece: the heap merge's
    enc = exact.get_encoding()
    assert exact.count_texts(texts) == [len(enc.encode_ordinary(t)) for t in texts]
    assert exact.count_texts([]) == []


def test_count_messages_joins_blocks_and_adds_binary_cost() -> None:
    enc = exact.get_encoding()
    call = ToolCall(id="c1", name="grep", arguments='{"pattern": "TODO"}')
    result = ToolResult(call_id="c1", content=[TextBlock("src/a.py:1: # TODO"), ImageBlock()])
    messages = [
        msg(TextBlock("You are helpful."), role=Role.SYSTEM),
        msg(ThinkingBlock("let me grep"), TextBlock("Searching."), call, role=Role.ASSISTANT),
        msg(result, role=Role.TOOL),
        msg(),
    ]
    expected = [
        len(enc.encode_ordinary("You are helpful.")),
        len(enc.encode_ordinary('let me grep\nSearching.\ngrep\n{"pattern": "TODO"}')),
        len(enc.encode_ordinary("src/a.py:1: # TODO")) + IMAGE_TOKENS,
        0,
    ]
    assert exact.count_messages(messages) == expected
    assert count_any(messages, "tiktoken") == expected
    assert count_any(messages, "none") == [heuristic.message_tokens(m) for m in messages]


def test_count_any_unknown_method() -> None:
    with pytest.raises(UsageError, match="tiktoken"):
        count_any([], "anthropic-typo")


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini-2024-07-18", "o200k_base"),
        ("gpt-4.1-nano", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("o1-preview", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("o4-mini", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-3.5-turbo-0125", "cl100k_base"),
        ("openai/gpt-4-0613", "cl100k_base"),
        ("claude-sonnet-4-5-20250929", "o200k_base"),
        ("gemini-2.5-pro", "o200k_base"),
        ("some-local-llama", "o200k_base"),
        (None, "o200k_base"),
        ("", "o200k_base"),
    ],
)
def test_encoding_for_model(model: str | None, encoding: str) -> None:
    assert exact.encoding_for_model(model) == encoding


def test_importing_tokens_package_does_not_load_tiktoken() -> None:
    code = "import sys, ctxcompact.tokens, ctxcompact.budget; print('tiktoken' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


OFFLINE_CHILD = textwrap.dedent(
    """
    import socket

    def refuse(*args, **kwargs):
        raise OSError("network disabled by test")

    socket.socket.connect = refuse
    socket.socket.connect_ex = refuse
    socket.create_connection = refuse
    socket.getaddrinfo = refuse

    from ctxcompact.tokens import exact
    print(exact.get_encoding("o200k_base").encode_ordinary("hello world"))
    print(exact.get_encoding("cl100k_base").encode_ordinary("hello world"))
    print(exact.count_texts(["hello world"], "o200k_base"), exact.count_texts(["hello world"], "cl100k_base"))
    """
)


def test_loads_offline_on_a_fresh_machine(tmp_path: os.PathLike[str]) -> None:
    cache = os.path.join(tmp_path, "tiktoken-cache")
    os.mkdir(cache)
    env = dict(os.environ)
    env.update(
        TIKTOKEN_CACHE_DIR=cache,
        DATA_GYM_CACHE_DIR=cache,
        HTTP_PROXY="http://127.0.0.1:9",
        HTTPS_PROXY="http://127.0.0.1:9",
        http_proxy="http://127.0.0.1:9",
        https_proxy="http://127.0.0.1:9",
    )
    out = subprocess.run(
        [sys.executable, "-c", OFFLINE_CHILD], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["[24912, 2375]", "[15339, 1917]", "[2] [2]"]
    assert os.listdir(cache) == []  # nothing fetched or cached
