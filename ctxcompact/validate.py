"""Validation (docs/reference/cli.md#ctxcompact-clean-file): every line against the format's JSON Schema, plus
the cross-record rules.

Cross-record rules: tool-call ids are unique, and every tool result answers a call that came before it.
Every problem reads ``line N: <json path>: <what>``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from .errors import InputError, Problem
from .formats import MAX_PROBLEMS, get_format, read_lines
from .model import Message, ToolCall, ToolResult, Transcript
from .source import InputData

# Keys under which formats store a call id; used to point a problem at the exact JSON path in its line.
_CALL_KEYS = ("id", "call_id")
_RESULT_KEYS = ("tool_call_id", "tool_use_id", "call_id", "id")


def _paths_of(data: Any, value: str, keys: tuple[str, ...]) -> Iterator[str]:
    """JSON paths, in document order, of every string ``value`` stored under one of ``keys``."""
    stack: list[tuple[str, Any]] = [("$", data)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, dict):
            children = []
            for k, v in node.items():
                if k in keys and v == value:
                    yield f"{path}.{k}"
                if isinstance(v, (dict, list)):
                    children.append((f"{path}.{k}", v))
            stack.extend(reversed(children))
        elif isinstance(node, list):
            stack.extend(reversed([(f"{path}[{i}]", v) for i, v in enumerate(node)
                                   if isinstance(v, (dict, list))]))


def _path(data: Any, value: str, keys: tuple[str, ...], nth: int) -> str:
    """The path of the ``nth`` (0-based) occurrence of ``value`` in a line, ``$`` when not found."""
    for i, p in enumerate(_paths_of(data, value, keys)):
        if i == nth:
            return p
    return "$"


def last_turn(messages: Sequence[Message]) -> int:
    """Index of the last message that is not only tool results (-1: none). In a tree log (Claude Code) the
    calls from there on, which nothing but their own results follows, are the running session's live calls:
    no result is missing (the one rule of clean_part.py's ``answer_missing`` and eval's validity)."""
    return max((i for i, m in enumerate(messages) if not m.is_tool_result_only), default=-1)


def live_calls(transcript: Transcript, fmt: str | None = None) -> set[str]:
    """The ids of the running session's live calls when ``transcript`` is written as ``fmt`` (its own format
    by default): the calls of :func:`last_turn` on, in a tree layout; none otherwise."""
    if not get_format(fmt or transcript.format).layout.tree:
        return set()
    messages = [r.message for r in transcript.records if r.message is not None]
    start = last_turn(messages)
    return {c.id for m in messages[max(start, 0):] for c in m.tool_calls()} if start >= 0 else set()


def cross_record_problems(transcript: Transcript) -> list[Problem]:
    """Problems that span records: a tool-call id used twice; a tool result whose call comes later
    ("its call comes later, at line N") or does not exist at all. In a tree layout (Claude Code) a result may
    come before its call in the file: the ``parentUuid`` tree orders the log, and clean_part.py leaves results
    where they were written (issue 26 item 7: ``clean`` and ``validate`` agree on what is valid)."""
    tree = get_format(transcript.format).layout.tree
    first_call: dict[str, int] = {}
    for rec in transcript.records:
        for call in rec.message.tool_calls() if rec.message else []:
            first_call.setdefault(call.id, rec.line)
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for rec in transcript.records:
        if rec.message is None:
            continue
        nth_call: dict[str, int] = {}
        nth_result: dict[str, int] = {}
        for block in rec.message.blocks:
            if isinstance(block, ToolCall):
                n = nth_call[block.id] = nth_call.get(block.id, -1) + 1
                if block.id in seen:
                    first = seen[block.id]
                    where = "earlier in this line" if first == rec.line else f"at line {first}"
                    problems.append(Problem(rec.line, _path(rec.data, block.id, _CALL_KEYS, n),
                                            f"duplicate tool-call id {block.id!r} (first used {where})"))
                else:
                    seen[block.id] = rec.line
            elif isinstance(block, ToolResult):
                n = nth_result[block.call_id] = nth_result.get(block.call_id, -1) + 1
                if block.call_id in seen:
                    continue
                path = _path(rec.data, block.call_id, _RESULT_KEYS, n)
                later = first_call.get(block.call_id)
                if later is not None and tree:
                    continue
                if later is not None:
                    msg = (f"tool result for call {block.call_id!r} comes before its call "
                           f"(the call comes later, at line {later})")
                else:
                    msg = (f"tool result for call {block.call_id!r} answers no call "
                           "(no call with this id exists)")
                problems.append(Problem(rec.line, path, msg))
    return problems


@dataclass(slots=True)
class ValidationReport:
    """What ``validate`` found. ``records`` counts the lines read as records (bad lines excluded);
    ``dropped`` counts the lines dropped in lenient mode; ``ok`` is true when no problem is an error."""

    format: str
    records: int
    problems: list[Problem]
    dropped: int
    ok: bool
    #: lines of types the format does not know that are not part of the conversation: passed through as
    #: they are, not counted (type -> lines)
    passed_through: dict[str, int] = dataclasses.field(default_factory=dict)

    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "warning"]

    def to_json(self) -> dict[str, Any]:
        """A stable machine report: keys ``ok``, ``format``, ``records``, ``dropped``, ``errors``,
        ``warnings`` (counts) and ``problems`` (each ``line``, ``path``, ``message``, ``severity``)."""
        return {
            "ok": self.ok,
            "format": self.format,
            "records": self.records,
            "dropped": self.dropped,
            "errors": len(self.errors()),
            "warnings": len(self.warnings()),
            "problems": [p.to_json() for p in self.problems],
            **({"passed_through": dict(self.passed_through)} if self.passed_through else {}),
        }


def validate(source: str | Path | BinaryIO | bytes, fmt: str = "auto",
             lenient: bool = False) -> ValidationReport:
    """Check every line (JSON, schema, format shape) and the cross-record rules; never raises for a bad input
    (the report says what is wrong), only UsageError for an unknown format or unreadable path.

    Strict (default): bad lines are errors. Lenient: bad lines are warnings and counted as ``dropped``.
    Cross-record problems are errors in both modes (they are checked among the lines that were read).
    """
    try:
        # a whole-file JSON transcript is read as the JSONL of its records (source.InputData)
        transcript, line_problems, bad = read_lines(InputData.load(source).data, fmt)
    except InputError as err:  # the format could not be detected, or a document that holds no records
        problems = err.problems or [Problem(0, "", str(err))]
        return ValidationReport(fmt if fmt != "auto" else "unknown", 0, problems, 0, False)
    if lenient:
        line_problems = [dataclasses.replace(p, severity="warning") for p in line_problems]
    cross = cross_record_problems(transcript)
    if len(cross) > MAX_PROBLEMS:
        cross = [*cross[:MAX_PROBLEMS], Problem(0, "", f"… and {len(cross) - MAX_PROBLEMS} more problems")]
    problems = sorted([*line_problems, *cross], key=lambda p: p.line or float("inf"))
    ok = not any(p.severity == "error" for p in problems)
    foreign = get_format(transcript.format).foreign_type
    passed: dict[str, int] = {}
    for rec in transcript.records:
        kind = foreign(rec)
        if kind is not None:
            passed[kind] = passed.get(kind, 0) + 1
    return ValidationReport(transcript.format, len(transcript.records), problems, bad if lenient else 0, ok,
                            passed)
