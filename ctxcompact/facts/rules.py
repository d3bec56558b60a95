"""The user's rules and constraints, quoted verbatim (losing them is the top complaint about compaction), and
the rules of the project's instruction files (AGENTS.md, CLAUDE.md) a client put into the conversation
(docs/concepts/summary.md#rules)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ..model import Record, Role, TextBlock
from .seen import Kind, Seen, scan
from .text import may_hold, user_requests

# the look-ahead holds the words' first letters: most words fail it at once instead of being tried against
# each rule word (the same matches, twice as fast on long texts)
_RULE_WORDS = re.compile(
    r"\b(?=[ndmaoeskp])(?:never|don['’]t|do not|dont|must|mustn['’]t|must not|always|only|avoid|make sure|"
    r"ensure|should not|shouldn['’]t|no need to|stop|keep|prefer)\b",
    re.I,
)
# Every match of _RULE_WORDS holds one of these, lowercased (text.may_hold)
_RULE_HINTS = ("never", "don", "do not", "must", "always", "only", "avoid", "make sure", "ensure", "should",
               "no need to", "stop", "keep", "prefer")
_LIST_MARKER = re.compile(r"^(?:[-*+•]|\d+[.)])\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")
_MAX_RULE_CHARS = 600  # longer "sentences" are pasted text (logs, code), not rules
# A short message of the user's states standing facts about the work even without a rule word: "performance
# is crucial", "it's not a jsonl file", "a bare date means midnight café time, not UTC". A statement says
# what is (or is not) so; a question or a one-off command ("show tools", "did you push?") does not.
SHORT_MESSAGE_CHARS = 600
_MAX_STATEMENT_CHARS = 240
_STATEMENT = re.compile(
    r"\b(?:is|are|was|were|isn['’]t|aren['’]t|wasn['’]t|weren['’]t|means|mean|not|(?:it|that|this|there|here|what)"
    r"['’]s|[a-z]+(?:ed|ing) \w+ (?:is|are))\b", re.I)


# Every match of _STATEMENT holds one of these, lowercased (text.may_hold)
_STATEMENT_HINTS = ("is", "are", "was", "were", "mean", "not", "'s", "’s")


def _is_statement(piece: str) -> bool:
    return (len(piece) <= _MAX_STATEMENT_CHARS and "?" not in piece and may_hold(piece, _STATEMENT_HINTS)
            and _STATEMENT.search(piece) is not None)


def rules_in_text(text: str, statements: bool | None = None) -> list[str]:
    """Sentences of a user message that state a rule or constraint, verbatim (outer whitespace stripped),
    split at sentence ends and line breaks: those with a rule word ("never", "must", "don't", "always"…),
    and, in a short message (``statements``; default: at most :data:`SHORT_MESSAGE_CHARS` characters), the
    statements of what is or is not so ("performance is crucial"). Fenced code blocks are skipped: a "must" in
    pasted code is no instruction."""
    if statements is None:
        statements = len(text.strip()) <= SHORT_MESSAGE_CHARS
    out: list[str] = []
    # a line's (a piece's) match is a match in the whole text: most texts hold none, which C-fast scans of
    # the whole text say (may_hold), then one regex scan
    worded = may_hold(text, _RULE_HINTS) and _RULE_WORDS.search(text) is not None
    if not statements and not worded:
        return out
    seen: set[str] = set()  # membership in ``out`` would be O(n) per sentence: O(n²) on many rules
    in_fence = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence or not (statements or (worded and _RULE_WORDS.search(line))):
            continue
        pieces = _SENTENCE_END.split(line.strip())
        for piece in pieces:
            # a list marker is layout, not part of the rule
            piece = _LIST_MARKER.sub("", piece.strip(), count=1).strip()
            ruled = (worded and _RULE_WORDS.search(piece)) or (statements and _is_statement(piece))
            if piece and len(piece) <= _MAX_RULE_CHARS and ruled and piece not in seen:
                seen.add(piece)
                out.append(piece)
    return out


def user_rules(records: Sequence[Record]) -> list[str]:
    """Every rule or constraint the user typed, verbatim, deduplicated, oldest first."""
    return rules_of(text for _, text in user_requests(records))


def rules_of(typed: Iterable[str]) -> list[str]:
    """:func:`user_rules` of the texts :func:`~.text.user_requests` gave (a caller that has them already)."""
    return list(dict.fromkeys(rule for text in typed for rule in rules_in_text(text)))



# The first line of an instruction file a client puts into the conversation as user text: Codex's
# ``# AGENTS.md instructions for <dir>``, Claude Code's ``Contents of <path>/CLAUDE.md (project
# instructions…``.
_PROJECT_FILE = re.compile(r"^(?:# (AGENTS\.md) instructions for (\S.*)"
                           r"|Contents of (\S+?\.md) \((?:project|user)(?:'s private)? instructions)", re.M)
#: the most rules read from one instruction file (its first ones: a file states its main rules first)
MAX_PROJECT_RULES = 40


_PROJECT_RULES = re.compile(r"\ARules of (\S+?)(?: for \S.*)? \(a project instruction file\):")


def sent_by_client(text: str, files: Sequence[str]) -> bool:
    """Whether ``text`` is the rules of a project instruction file (:func:`project_rules`) named in ``files``,
    the files the client that resumes the output sends the model itself (``Format.client_files``): the
    client gives their rules verbatim, a summary's quote of them would reach the model twice."""
    m = _PROJECT_RULES.match(text) if files else None
    return m is not None and m.group(1).rsplit("/", 1)[-1] in files


def client_file_records(records: Sequence[Record], files: Sequence[str]) -> list[Record]:
    """The latest record of each project instruction file named in ``files`` (``Format.client_files``): what
    the client sends the model of them itself, as the records put it (eval's view of the next call)."""
    latest: dict[str, Record] = {}
    for rec in records:
        msg = rec.message
        if msg is None or msg.role is not Role.USER or not files:
            continue
        for block in msg.blocks:
            m = _PROJECT_FILE.search(block.text) if isinstance(block, TextBlock) else None
            name = (m.group(1) or m.group(3)).rsplit("/", 1)[-1] if m is not None else None
            if name is not None and name in files:
                latest.pop(name, None)
                latest[name] = rec
    return list(latest.values())


def project_rules(records: Sequence[Record]) -> list[str]:
    """The rules of each project instruction file in ``records`` (Codex's AGENTS.md block, Claude Code's
    CLAUDE.md contents): one text per file, ``Rules of AGENTS.md (…)`` then its sentences with a rule word,
    verbatim, at most :data:`MAX_PROJECT_RULES`. Not typed by the user: they stand with the instructions in
    force, not with the user's rules."""
    return scan(ProjectRuleScan(), records)


class ProjectRuleScan:
    """:func:`project_rules` read record by record."""

    def __init__(self) -> None:
        self.out: list[str] = []

    @staticmethod
    def reads(kind: Kind) -> bool:
        return kind.role is Role.USER and kind.input

    def feed(self, rec: Seen) -> None:
        msg = rec.msg
        if msg is None or rec.role is not Role.USER or not rec.input:
            return
        for block in msg.blocks:
            if not isinstance(block, TextBlock) or "instructions" not in block.text:
                continue
            m = _PROJECT_FILE.search(block.text)
            if m is None:
                continue
            where = f"{m.group(1)} for {m.group(2).strip()}" if m.group(1) else m.group(3)
            rules = rules_in_text(block.text[m.end():], statements=False)[:MAX_PROJECT_RULES]
            if rules:
                listed = "\n".join(f"- {r}" for r in rules)
                text = f"Rules of {where} (a project instruction file):\n{listed}"
                if text not in self.out:
                    self.out.append(text)

    def result(self) -> list[str]:
        return self.out
