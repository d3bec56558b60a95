"""Token counting: a fast heuristic (heuristic.py), exact tiktoken counts loaded offline (exact.py), and
calibration against what the provider reported (calibration.py).

Importing this package is cheap: tiktoken loads only when an exact count is asked for.
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxcompact.errors import UsageError
from ctxcompact.model import Message
from ctxcompact.plugins import LOCAL_COUNTERS
from ctxcompact.tokens.heuristic import message_tokens, messages_tokens, text_tokens

EXACT_METHODS = LOCAL_COUNTERS

__all__ = ["EXACT_METHODS", "count_messages", "message_tokens", "messages_tokens", "text_tokens"]


def count_messages(
    messages: Sequence[Message],
    exact: str = "tiktoken",
    model: str | None = None,
    encoding: str | None = None,
) -> list[int]:
    """Tokens of each message with the counter ``exact``: ``tiktoken`` (``encoding``, else the one for
    ``model``, else o200k_base) or ``none`` (the chars/4 heuristic)."""
    if exact == "none":
        return messages_tokens(messages)
    if exact == "tiktoken":
        from ctxcompact.tokens import exact as _exact  # lazy: loads tiktoken

        return _exact.count_messages(messages, encoding or _exact.encoding_for_model(model))
    raise UsageError(f"unknown --exact {exact!r}; choose one of: {', '.join(EXACT_METHODS)}")
