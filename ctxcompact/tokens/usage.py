"""What a provider billed for a prompt, from the usage it returned
(docs/concepts/calibration.md#observeusage).

The one rule for every usage shape, used by ``Session.observe`` and ``ctxcompact calibrate --usage-json``
(the Anthropic sum is ``model.anthropic_prompt_tokens``, which the formats reading a log line use too):

- Anthropic (``input_tokens`` with ``cache_creation_input_tokens`` / ``cache_read_input_tokens``): the prompt
  is the sum of the three. With prompt caching ``input_tokens`` alone is only the uncached tail, often a
  tiny part of what the model read.
- OpenAI Chat Completions ``prompt_tokens`` (cached tokens are part of it).
- OpenAI Responses ``input_tokens`` (``input_tokens_details.cached_tokens`` is part of it).
- Gemini ``usageMetadata.promptTokenCount`` / ``usage_metadata.prompt_token_count``
  (``cached_content_token_count`` is part of it; ``tool_use_prompt_token_count``, what Gemini's own tools
  read during the turn, and ``thoughts_token_count`` are not the request sent, so they are not added).
- LangChain ``usage_metadata.input_tokens`` (LangChain folds cache reads and writes into it).

A whole response (a dict or an SDK object with ``usage``, ``usage_metadata`` or ``usageMetadata``) is read
through to its usage. SDK objects (pydantic models) are read with ``model_dump``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from ..model import ANTHROPIC_PROMPT_KEYS, anthropic_prompt_tokens

_WRAPPERS = ("usage", "usage_metadata", "usageMetadata")


@dataclass(frozen=True, slots=True)
class PromptUsage:
    """The prompt tokens billed, and which fields said so (for messages and the state's source)."""

    tokens: int
    source: str


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def as_plain(obj: Any) -> Any:
    """An SDK object (pydantic ``model_dump``, else ``to_dict``) as plain JSON data; the rest as is."""
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True)
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict) and not isinstance(obj, Mapping):
        return to_dict()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):  # e.g. the OpenAI Agents SDK's Usage
        return dataclasses.asdict(obj)
    return obj


def prompt_tokens(usage: Any) -> PromptUsage:
    """The prompt tokens a provider billed, from its usage object or dict (or a whole response holding one).

    Raises UsageError naming the keys it looked for when the shape is not one of the documented ones."""
    obj = as_plain(usage)
    for _ in range(3):  # a response → its usage (LangChain message → usage_metadata; Gemini → usageMetadata)
        if not isinstance(obj, Mapping):
            break
        inner = next((obj[k] for k in _WRAPPERS if k in obj and obj[k] is not None), None)
        if inner is None:
            break
        obj = as_plain(inner)
    if not isinstance(obj, Mapping):
        raise UsageError(f"usage: expected a usage object or dict, got {type(usage).__name__}")
    if any(k in obj for k in ANTHROPIC_PROMPT_KEYS[1:]):
        total = anthropic_prompt_tokens(obj)
        if total is not None:
            return PromptUsage(total, "anthropic input_tokens + cache_creation + cache_read")
    for key, source in (("prompt_tokens", "openai chat prompt_tokens"),
                        ("promptTokenCount", "gemini promptTokenCount"),
                        ("prompt_token_count", "gemini prompt_token_count"),
                        ("input_tokens", "input_tokens")):
        if key in obj:
            value = _int(obj[key])
            if value is None:
                raise UsageError(f"usage: {key} must be a whole number >= 0, got {obj[key]!r}")
            return PromptUsage(value, source)
    keys = ", ".join(sorted(map(str, obj))) or "none"
    raise UsageError("usage: no prompt token count (looked for input_tokens with the cache_* counts, "
                     f"prompt_tokens, promptTokenCount, prompt_token_count; the object has: {keys})")


#: a usage object is small: ``load_usage_json`` never reads more than this
MAX_USAGE_JSON = 1 << 20


def load_usage_json(value: str) -> Any:
    """``--usage-json``: JSON text, ``@file`` or ``-`` (stdin), read bounded and decoded (else UsageError)."""
    import sys

    import orjson

    if value == "-":
        text = sys.stdin.buffer.read(MAX_USAGE_JSON)
    elif value.startswith("@"):
        try:
            with open(value[1:], "rb") as f:
                text = f.read(MAX_USAGE_JSON)
        except OSError as exc:
            raise UsageError(f"--usage-json: cannot read {value[1:]}: {exc.strerror or exc}") from None
    else:
        text = value.encode()
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"--usage-json: not JSON ({exc})") from None
