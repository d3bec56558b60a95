"""The fast token estimate: ``ceil(chars / 4)`` over everything in a message that costs tokens.

Characters are Python ``str`` characters (code points), summed over :func:`ctxcompact.model.token_text` of the
message (text, thinking, tool names and arguments, tool results, token-bearing opaque blocks); each image or
other binary part adds the fixed :data:`ctxcompact.model.IMAGE_TOKENS`, never its base64 length. The ceiling
is taken once per message. This underestimates structured content (JSON, code, non-English text) by 1.5-3x,
which is why the result goes through calibration (tokens/calibration.py) before any decision.
"""

from __future__ import annotations

from collections.abc import Iterable

from ctxcompact.model import Message, token_text


def text_tokens(text: str) -> int:
    """``ceil(len(text) / 4)``: 0 for an empty text, 1 for 1-4 characters, 2 for 5-8…"""
    return (len(text) + 3) // 4


def chars_tokens(chars: int) -> int:
    """``ceil(chars / 4)`` for a character count."""
    return (chars + 3) // 4


def message_tokens(message: Message) -> int:
    """Heuristic tokens of one message: ``ceil(chars / 4)`` + the fixed cost of its binary parts."""
    return texts_tokens(*token_text(message))


def texts_tokens(texts: list[str], fixed: int) -> int:
    """:func:`message_tokens` of a message whose :func:`~ctxcompact.model.token_text` is ``(texts, fixed)``
    (a caller that needs those texts for more than this works them out once)."""
    return (sum(map(len, texts)) + 3) // 4 + fixed


def messages_tokens(messages: Iterable[Message]) -> list[int]:
    """:func:`message_tokens` of each message."""
    return [message_tokens(m) for m in messages]
