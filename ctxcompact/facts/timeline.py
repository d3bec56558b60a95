"""The conversation as a short timeline, and the last thing the assistant did."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..model import Message, Record, Role, ToolCall
from .calls import call_index, command_of, decode_args
from .files import paths_of_call
from .outcomes import FailureCheck, error_text, judge, result_is_error
from .seen import Kind, Seen, scan
from .text import shorten
from .todos import is_open, todo_list_from_call


def describe_call(call: ToolCall, limit: int = 80) -> str:
    """``name(main argument)``: the command, the path, the todo count, or the first string argument."""
    todos = todo_list_from_call(call)
    if todos is not None:
        return f"{call.name}({sum(1 for t in todos if is_open(t))} open of {len(todos)})"
    cmd = command_of(call)
    if cmd is not None:
        return f"{call.name}({shorten(cmd, limit)})"
    paths = paths_of_call(call)
    if paths:
        more = f" +{len(paths) - 1}" if len(paths) > 1 else ""
        return f"{call.name}({shorten(paths[0], limit)}{more})"
    args = decode_args(call)
    if isinstance(args, dict):
        for v in args.values():
            if isinstance(v, str) and v.strip():
                return f"{call.name}({shorten(v, limit // 2)})"
    return f"{call.name}()"


@dataclass(slots=True)
class LastAction:
    text: str | None  # the last assistant text (shortened)
    calls: list[str]  # descriptions of the tool calls of the last assistant message that made calls

    def render(self) -> str:
        parts = []
        if self.text:
            parts.append(f'Said: "{self.text}"')
        if self.calls:
            parts.append("Called: " + ", ".join(self.calls))
        return " — ".join(parts)


def last_assistant_action(records: Sequence[Record], text_limit: int = 500) -> LastAction | None:
    """The last thing the assistant did, as it happened: its last message (from input records; a reply no
    model wrote, such as Claude Code's "No response requested.", is not an action) with the assistant
    records right before it that belong to the same step (a format that writes a message's text and its
    calls as separate lines: nothing else between them). Text and calls are never stitched together from
    messages further apart."""
    return scan(ActionScan(text_limit), records)


class ActionScan:
    """:func:`last_assistant_action` read record by record: the assistant's messages since the last record
    that ends a step (a result, a user message, a reply no model wrote), and the step before, in case
    nothing the assistant did follows that record. Only those messages are held."""

    def __init__(self, text_limit: int = 500) -> None:
        self.text_limit = text_limit
        self.step: list[Message] = []  # messages with text or calls since the last record that ends a step
        self.before: list[Message] = []  # the last step that record ended

    @staticmethod
    def reads(kind: Kind) -> bool:
        return kind.role is not None and kind.input

    def feed(self, rec: Seen) -> None:
        msg = rec.msg
        if msg is None or not rec.input:
            return
        if rec.role is Role.ASSISTANT and not rec.machine:
            if rec.calls or rec.said:  # an empty message adds nothing to a step
                self.step.append(msg)
        elif self.step:
            self.before, self.step = self.step, []

    def result(self) -> LastAction | None:
        step = self.step or self.before
        text = " ".join(m.text().strip() for m in step if m.text().strip())
        calls = [describe_call(c) for m in step for c in m.tool_calls()]
        if not text and not calls:
            return None
        return LastAction(shorten(text, self.text_limit) if text else None, calls)


def answers(records: Sequence[Record]) -> list[tuple[int, str]]:
    """The assistant's answers, as (input position, text): its last text before each request a person typed,
    and its last text at the end unless it made tool calls with it or after it (the turn is still going: that
    text is said along the way, :func:`conclusions`). What it concluded, decided or delivered, whole (the
    caller caps the length)."""
    return scan(StatementScan(), records).answers


@dataclass(slots=True)
class Statements:
    answers: list[tuple[int, str]]  # :func:`answers`
    conclusions: list[tuple[int, str]]  # :func:`conclusions`


class StatementScan:
    """:func:`answers` and :func:`conclusions` read record by record: each assistant text waits as the
    pending answer until a request a person typed makes it one, or a later text shows it was said along the
    way (then it is a conclusion if it states something)."""

    def __init__(self) -> None:
        self.answers: list[tuple[int, str]] = []
        self.along: list[tuple[int, str]] = []  # texts said along the way that state something
        self.pending: tuple[int, str] | None = None
        self.working = False  # the assistant made calls with or after the pending text

    @staticmethod
    def reads(kind: Kind) -> bool:
        return kind.input and (kind.role is Role.ASSISTANT or kind.role is Role.USER)

    def feed(self, rec: Seen) -> None:
        if rec.msg is None or not rec.input:
            return
        if rec.role is Role.ASSISTANT and not rec.machine:
            said = rec.said
            if said:
                if self.pending is not None:
                    self._said_along(self.pending)
                self.pending, self.working = (rec.rec.index, said), False
            self.working = self.working or bool(rec.calls)
        elif rec.role is Role.USER and self.pending is not None and rec.typed is not None:
            self.answers.append(self.pending)
            self.pending = None

    def keep_last(self, answers: int, along: int) -> bool:
        """Drop the oldest answers and texts said along the way that ``store.merge`` drops in any case (the
        last ``answers`` and ``along`` positions are what it keeps of findings and decisions): each list cut
        between two positions, keeping twice that many entries and more positions than that (a text said
        along the way at the pending text's position goes if that becomes an answer). For records in input
        order. Whether any was dropped."""
        dropped = _cut_oldest(self.answers, answers)
        if dropped:  # (their texts said along the way at their positions go with them, as in result)
            self.along = [e for e in self.along if e[0] not in dropped]
        return bool(dropped) | bool(_cut_oldest(self.along, along + 1))

    def _said_along(self, said: tuple[int, str]) -> None:
        if states_something(said[1]):
            self.along.append(said)

    def result(self) -> Statements:
        answers, along = list(self.answers), list(self.along)
        if self.pending is not None:
            if self.working:
                if states_something(self.pending[1]):
                    along.append(self.pending)
            else:
                answers.append(self.pending)
        final = {at for at, _ in answers}  # (records that share a position share its fate)
        return Statements(answers, [(at, t) for at, t in along if at not in final])


def _cut_oldest(entries: list[tuple[int, str]], positions: int) -> set[int]:
    """Drop the oldest of ``entries`` (in input order) but the last ``2 * positions``, cut between two
    positions, if at least ``positions`` distinct positions are kept; the positions dropped."""
    c = len(entries) - 2 * positions
    while c > 0 and entries[c - 1][0] == entries[c][0]:
        c -= 1
    if c <= 0 or len({at for at, _ in entries[c:]}) < positions:
        return set()
    dropped = {at for at, _ in entries[:c]}
    del entries[:c]
    return dropped


# A sentence that only says what the assistant is about to do ("Let me read the file.", "Now I'll run the
# tests", "I'm running the focused test now"), after any opening word such as "Now," or "Next".
_ANNOUNCEMENT = re.compile(
    r"^(?:(?:now|next|first|then|finally|ok|okay|so|and|alright|great|good|perfect)\b[,!.:]?\s+)*"
    r"(?:let me|let's|let us|i(?:'|’)ll|i will|we(?:'|’)ll|we will|i(?:'|’)m going to|i am going to|"
    r"i(?:'|’)m (?:now )?\w+ing\b|i am (?:now )?\w+ing\b|i need to|i want to|i can now|now i can|time to)",
    re.I)
# "Checking what /menu returns.", "Now running the tests": a sentence that opens with a verb in -ing (after
# any opening word) says what is being done; these nouns in -ing open statements
_GERUND = re.compile(
    r"^(?:(?:now|next|first|then|finally|ok|okay|so|and|alright)\b[,!.:]?\s+)*([a-z]{2,}ing)\b", re.I)
_NOT_GERUNDS = frozenset({"nothing", "something", "everything", "anything", "during", "string", "thing",
                          "things", "king", "morning", "evening", "spring", "ceiling", "ring", "sibling"})
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)
#: a sentence of fewer words is an exclamation ("Perfect!", "You're absolutely right!"), not a statement
_STATEMENT_WORDS = 4


def states_something(text: str) -> bool:
    """Whether an assistant text states something (a finding, a decision, a conclusion) rather than only
    announce its next step: some sentence of it, outside code blocks, headings and the lines that introduce a
    list (ending in ":"), has at least four words and is no announcement (:data:`_ANNOUNCEMENT`, or a
    sentence that opens with a verb in -ing: "Checking what /menu returns")."""
    for sentence in _SENTENCE_END.split(_FENCE.sub(" ", text)):
        line = sentence.strip().lstrip("-*•>").strip()
        if not line or line.startswith(("#", "|", "---")) or line.endswith(":"):
            continue
        plain = line.replace("*", "")
        if len(line.split()) < _STATEMENT_WORDS or _ANNOUNCEMENT.match(plain):
            continue
        gerund = _GERUND.match(plain)
        if gerund is None or gerund.group(1).lower() in _NOT_GERUNDS:
            return True
    return False


def conclusions(records: Sequence[Record]) -> list[tuple[int, str]]:
    """What the assistant stated in the middle of its work, as (input position, text): its texts that are not
    an answer (:func:`answers`: the last text before a request and at the end) and that state something
    (:func:`states_something`). A decision taken inside a tool loop ("the graph tools are not exposed in this
    session, so I'm falling back to rg") is a fact of its own, not only a timeline step."""
    return scan(StatementScan(), records).conclusions


def timeline(records: Sequence[Record], entry_limit: int = 160,
             failed: FailureCheck | None = None) -> list[str]:
    """One short line per step, oldest first (:func:`timeline_entries` without the positions)."""
    return [text for _, text in timeline_entries(records, entry_limit, failed)]


def timeline_entries(records: Sequence[Record], entry_limit: int = 160,
                     failed: FailureCheck | None = None) -> list[tuple[int, str]]:
    """One short line per step, oldest first, with the input position it was read at: user requests,
    assistant statements, tool calls (grouped per message), failures, todo updates."""
    return scan(TimelineScan(call_index(records), entry_limit, failed), records)


class TimelineScan:
    """:func:`timeline_entries` read record by record (``calls``: the tool calls by id, as for
    :class:`.outcomes.CommandScan`)."""

    def __init__(self, calls: Mapping[str, ToolCall], entry_limit: int = 160,
                 failed: FailureCheck | None = None) -> None:
        self.calls, self.entry_limit, self.failed = calls, entry_limit, failed or result_is_error
        self.judge = judge(self.failed)
        self.out: list[tuple[int, str]] = []

    @staticmethod
    def reads(kind: Kind) -> bool:
        return kind.input and (kind.role is Role.USER or kind.role is Role.ASSISTANT or kind.results)

    def feed(self, rec: Seen) -> None:
        if rec.msg is None or not rec.input:
            return
        at, out, entry_limit = rec.rec.index, self.out, self.entry_limit
        if rec.role is Role.USER:
            typed = rec.typed
            if typed:
                out.append((at, shorten("User: " + typed, entry_limit)))
        elif rec.role is Role.ASSISTANT and not rec.machine:
            said = rec.said
            if said:
                out.append((at, shorten("Assistant: " + said, entry_limit)))
            descs = [describe_call(c, 60) for c in rec.calls]
            if descs:
                out.append((at, shorten("Ran " + ", ".join(descs), entry_limit)))
        if not rec.results:
            return
        for res, call, failed in rec.answers(self.calls, self.judge):
            if call is not None and failed:
                out.append((at, shorten(f"{call.name} failed: {error_text(res)}", entry_limit)))

    def result(self) -> list[tuple[int, str]]:
        return self.out
