"""Provider token counts for ``estimate --exact anthropic``
(docs/concepts/calibration.md#provider-token-counts, "LLM summarizers").

Anthropic offers ``POST /v1/messages/count_tokens``: the exact input tokens a Messages request would cost,
free of charge. We turn the transcript's message records into a Messages payload (from the model blocks, so
it works for every input format) and ask it. OpenAI and Gemini-style formats have no such endpoint here
(OpenAI has none at all), so asking for them is a clear usage error instead of a silent guess.

The ``anthropic`` SDK is imported inside :func:`anthropic_count_tokens` only.
"""

from __future__ import annotations

import re
from typing import Any

from .. import sdk
from ..errors import UsageError
from ..formats.anthropic import binary_block
from ..model import (
    Block,
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
from ..plugins import PROVIDER_COUNTERS

PROVIDERS_WITH_COUNT = tuple(p for p, endpoint in PROVIDER_COUNTERS.items() if endpoint)

_ID_OK = re.compile(r"[^A-Za-z0-9_-]")


class ProviderCountError(UsageError):
    """The provider's count could not be obtained (no key, no model, or the request failed).

    A UsageError because the user asked for a count this setup cannot give; callers may catch it and fall
    back to tiktoken with a warning."""


def unsupported_provider(provider: str) -> UsageError:
    """The error for ``--exact <provider>`` when that provider has no token-counting endpoint."""
    if provider == "openai":
        why = "OpenAI has no token-counting endpoint"
    else:
        why = f"provider {provider!r} has no token-counting endpoint that ctxcompact supports"
    return UsageError(f"--exact {provider}: {why}; use --exact tiktoken (exact local count, the default) "
                      f"or --exact anthropic --model MODEL")


class _Ids:
    """Tool ids the API accepts (non-empty ``[A-Za-z0-9_-]+``), keeping each result tied to its call."""

    def __init__(self) -> None:
        self.n = 0
        self.seen: dict[str, str] = {}

    def _new(self) -> str:
        self.n += 1
        return f"toolu_ctx_{self.n}"

    def call(self, raw: str) -> str:
        new = _ID_OK.sub("_", raw or "") or self._new()
        if raw:
            self.seen[raw] = new
        return new

    def result(self, call_id: str) -> str:
        return self.seen.get(call_id) or _ID_OK.sub("_", call_id or "") or self._new()


def _content(blocks: list[Block], ids: _Ids, in_result: bool = False) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for b in blocks:
        if isinstance(b, TextBlock):
            if b.text:
                out.append({"type": "text", "text": b.text})
        elif isinstance(b, ThinkingBlock):
            continue  # prior-turn thinking is not billed as input by the API; signatures would not verify
        elif isinstance(b, ImageBlock):
            img = binary_block(b)
            if img is not None:
                out.append(img)
            else:
                out.append({"type": "text", "text": "[image]"})  # unconvertible: count a token or two
        elif isinstance(b, ToolCall) and not in_result:
            value = b.input
            if not isinstance(value, dict):
                value = {} if not b.arguments else ({"value": value} if value is not None
                                                    else {"arguments": b.arguments})
            out.append({"type": "tool_use", "id": ids.call(b.id), "name": b.name or "tool",
                        "input": value})
        elif isinstance(b, ToolResult) and not in_result:
            inner = _content(b.content, ids, in_result=True)
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": ids.result(b.call_id)}
            if inner:
                block["content"] = inner
            if b.is_error:
                block["is_error"] = True
            out.append(block)
        elif isinstance(b, OpaqueBlock):
            if b.text:
                out.append({"type": "text", "text": b.text})
        elif isinstance(b, (ToolCall, ToolResult)):
            # a call or result nested in a result (not expressible): count its text
            out.append({"type": "text", "text": b.arguments if isinstance(b, ToolCall) else b.text()})
    return out


def anthropic_payload(transcript: Transcript | list[Record]) -> tuple[list[dict[str, Any]], str | None]:
    """The transcript's messages as an Anthropic Messages payload: ``(messages, system)``.

    System messages become ``system``; tool messages become user messages with ``tool_result`` blocks;
    consecutive messages of one role are merged (the API wants alternation); thinking is dropped; images are
    sent as they are when they are Anthropic blocks or convertible OpenAI ``image_url`` parts. Tool-call ids
    are kept when valid, so results still point at their calls.
    """
    records = transcript.records if isinstance(transcript, Transcript) else transcript
    system_parts: list[str] = []
    messages: list[dict[str, Any]] = []
    ids = _Ids()
    for rec in records:
        msg: Message | None = rec.message
        if msg is None:
            continue
        if msg.role is Role.SYSTEM:
            text = msg.text()
            if text:
                system_parts.append(text)
            continue
        role = "assistant" if msg.role is Role.ASSISTANT else "user"
        content = _content(msg.blocks, ids)
        if not content:
            continue
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(content)
        else:
            messages.append({"role": role, "content": content})
    for m in messages:
        if m["role"] == "user":  # the API wants a user turn's tool_result blocks before its other blocks
            m["content"].sort(key=lambda blk: blk["type"] != "tool_result")
    if messages and messages[0]["role"] != "user":
        # the API requires the first message to be the user's; this costs a token or two
        messages.insert(0, {"role": "user", "content": [{"type": "text", "text": "."}]})
    if not messages:
        messages = [{"role": "user", "content": [{"type": "text", "text": "."}]}]
    system = "\n\n".join(system_parts) or None
    return messages, system


def anthropic_count_tokens(
    messages_payload: list[dict[str, Any]],
    system: str | None,
    model: str,
    api_key: str | None = None,
    base_url: str | None = None,
    timeout: float = 30.0,
    max_retries: int = 2,
) -> int:
    """Input tokens of a Messages request, as Anthropic's ``messages.count_tokens`` reports them.

    Key: ``api_key``, else CTXCOMPACT_API_KEY, else ANTHROPIC_API_KEY. Base URL: ``base_url``, else
    ANTHROPIC_BASE_URL (read by the SDK). Raises :class:`ProviderCountError` with a secret-free reason.
    """
    if not model or not model.strip():
        raise ProviderCountError("--exact anthropic needs --model MODEL (an Anthropic model name)")
    key = sdk.resolve_api_key(api_key, "ANTHROPIC_API_KEY")
    if key is None:
        raise ProviderCountError("--exact anthropic needs an API key: set ANTHROPIC_API_KEY or "
                                 "CTXCOMPACT_API_KEY")

    import anthropic

    def send() -> Any:
        client = anthropic.Anthropic(api_key=key, base_url=base_url, timeout=timeout, max_retries=max_retries)
        kwargs: dict[str, Any] = {"model": model, "messages": messages_payload}
        if system:
            kwargs["system"] = system
        return getattr(client.messages.count_tokens(**kwargs), "input_tokens", None)

    tokens = sdk.call("anthropic", send, key=key, prefix="--exact anthropic: token count failed",
                      error=ProviderCountError, timeout=timeout, max_retries=max_retries, base_url=base_url,
                      deadline=timeout)
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
        raise ProviderCountError("--exact anthropic: token count failed: the reply has no input_tokens")
    return tokens


def count_transcript_tokens(
    transcript: Transcript | list[Record],
    provider: str,
    model: str | None,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    timeout: float = 30.0,
    max_retries: int = 2,
) -> int:
    """The provider's own input-token count for the whole transcript (the ``real`` figure of estimate)."""
    if provider not in PROVIDERS_WITH_COUNT:
        raise unsupported_provider(provider)
    messages, system = anthropic_payload(transcript)
    return anthropic_count_tokens(messages, system, model or "", api_key=api_key, base_url=base_url,
                                  timeout=timeout, max_retries=max_retries)
