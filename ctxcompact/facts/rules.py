"""The user's rules and constraints, quoted verbatim (losing them is the top complaint about compaction)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ..model import Record
from .text import user_requests

_RULE_WORDS = re.compile(
    r"\b(?:never|don['’]t|do not|dont|must|mustn['’]t|must not|always|only|avoid|make sure|ensure|"
    r"should not|shouldn['’]t|no need to|stop|keep)\b",
    re.I,
)
_LIST_MARKER = re.compile(r"^(?:[-*+•]|\d+[.)])\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")
_MAX_RULE_CHARS = 600  # longer "sentences" are pasted text (logs, code), not rules


def rules_in_text(text: str) -> list[str]:
    """Sentences of a user message that state a rule or constraint, verbatim (outer whitespace stripped),
    split at sentence ends and line breaks. Fenced code blocks are skipped: a "must" in pasted code is no
    instruction."""
    out: list[str] = []
    if not _RULE_WORDS.search(text):  # a line's match is a match in the whole text: one scan for most texts
        return out
    seen: set[str] = set()  # membership in ``out`` would be O(n) per sentence: O(n²) on many rules
    in_fence = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence or not _RULE_WORDS.search(line):
            continue
        pieces = _SENTENCE_END.split(line.strip())
        for piece in pieces:
            # a list marker is layout, not part of the rule
            piece = _LIST_MARKER.sub("", piece.strip(), count=1).strip()
            if piece and len(piece) <= _MAX_RULE_CHARS and _RULE_WORDS.search(piece) and piece not in seen:
                seen.add(piece)
                out.append(piece)
    return out


def user_rules(records: Sequence[Record]) -> list[str]:
    """Every rule or constraint the user typed, verbatim, deduplicated, oldest first."""
    return rules_of(text for _, text in user_requests(records))


def rules_of(typed: Iterable[str]) -> list[str]:
    """:func:`user_rules` of the texts :func:`~.text.user_requests` gave (a caller that has them already)."""
    return list(dict.fromkeys(rule for text in typed for rule in rules_in_text(text)))

