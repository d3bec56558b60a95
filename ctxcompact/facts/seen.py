"""One record as the fact scans read it (:class:`Seen`), and the scanner shape every fact module shares
(:class:`Scanner`, :func:`scan`).

A compaction feeds every record to about a dozen scans (facts.gather.FactFeed, the conversation reader):
each asked the record for its tool calls, its results, its text, what a person typed in it and whether a
model wrote it, and each result's call and outcome. :class:`Seen` works each out once, on first asking,
with the rules' own functions (the record's message, ``facts.text``, ``facts.outcomes.call_failed``), so
every scan reads the same answers and none re-derives them.

A record's :class:`Kind` (its role, whether it is an input record, makes calls, carries results, has
meta) is worked out with it, once: each scanner says which kinds it may take something from
(``Scanner.reads``), so the fact feed calls only those scans for a record of that kind (a scan's ``feed``
still reads any record right: the kinds are a filter on who is asked, never a rule).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol, TypeVar

from ..model import Message, Origin, Record, Role, ToolCall, ToolResult
from .text import is_machine_reply, typed_text

_T = TypeVar("_T")
_T_co = TypeVar("_T_co", covariant=True)
_UNSET: Any = object()

# The bits of a kind's key (Seen.kind): the role's code (0 without a message), then four flags
_ROLES: tuple[Role | None, ...] = (None, Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.TOOL)
_ROLE_CODE = {r: i for i, r in enumerate(_ROLES) if r is not None}
_INPUT, _CALLS, _RESULTS, _META = 8, 16, 32, 64


@dataclass(frozen=True, slots=True)
class Kind:
    """What decides which scans read a record (``Scanner.reads``): its message's ``role`` (None without a
    message), whether it is an ``input`` record (``Origin.INPUT``), makes tool ``calls``, carries tool
    ``results``, and has ``meta`` (``Record.meta`` not empty)."""

    role: Role | None
    input: bool
    calls: bool
    results: bool
    meta: bool


@cache
def kind_of(key: int) -> Kind:
    """The :class:`Kind` of a key (:attr:`Seen.kind`); at most 68 kinds exist."""
    return Kind(_ROLES[key & 7], bool(key & _INPUT), bool(key & _CALLS), bool(key & _RESULTS),
                bool(key & _META))


class Seen:
    """``rec`` as the scans read it: ``msg``, ``role`` (None without a message), ``input`` (an input record,
    not one the cleaner or ctxcompact made), ``calls`` and ``results`` (the message's tool calls and results,
    in order), ``kind`` (the key of its :class:`Kind`: :func:`kind_of`), ``n`` (its place in the records
    a reader feeds, set by that reader: :func:`scan`, facts.gather.FactFeed), and on first asking ``text``
    (``Message.text``), ``said`` (that text stripped), ``typed`` (:func:`.text.typed_text`), ``machine``
    (:func:`.text.is_machine_reply`) and :meth:`answers`."""

    __slots__ = ("_answers", "_machine", "_said", "_text", "_typed", "calls", "input", "kind", "msg", "n",
                 "rec", "results", "role")

    def __init__(self, rec: Record) -> None:
        self.rec = rec
        self.n = 0
        msg: Message | None = rec.message
        self.msg = msg
        self.input = rec.origin is Origin.INPUT
        self.role: Role | None = None
        self.calls: list[ToolCall] = []
        self.results: list[ToolResult] = []
        kind = _INPUT if self.input else 0
        if rec.meta:
            kind |= _META
        if msg is not None:
            self.role = msg.role
            for b in msg.blocks:  # (Message.tool_calls and tool_results in one walk)
                if type(b) is ToolCall:
                    self.calls.append(b)
                elif type(b) is ToolResult:
                    self.results.append(b)
            kind |= _ROLE_CODE[msg.role]
            if self.calls:
                kind |= _CALLS
            if self.results:
                kind |= _RESULTS
        self.kind = kind
        self._text = self._said = self._typed = self._machine = self._answers = _UNSET

    @property
    def text(self) -> str:
        """The message's plain text (``Message.text``), "" without a message."""
        if self._text is _UNSET:
            self._text = self.msg.text() if self.msg is not None else ""
        return self._text

    @property
    def said(self) -> str:
        """:attr:`text` stripped (what the timeline, the statements and the last action read of it)."""
        if self._said is _UNSET:
            self._said = self.text.strip()
        return self._said

    @property
    def typed(self) -> str | None:
        """What a person typed in the record (:func:`.text.typed_text`)."""
        if self._typed is _UNSET:
            self._typed = typed_text(self.rec)
        return self._typed

    @property
    def machine(self) -> bool:
        """An assistant record no model wrote (:func:`.text.is_machine_reply`)."""
        if self._machine is _UNSET:
            self._machine = is_machine_reply(self.rec)
        return self._machine

    def answers(self, calls: Mapping[str, ToolCall], failed: Callable[[ToolCall | None, ToolResult], bool],
                ) -> list[tuple[ToolResult, ToolCall | None, bool | None]]:
        """Each result with its call looked up in ``calls`` (None when there is none) and whether it failed
        (``failed``: :func:`.outcomes.judge`; None for a result the cleaner made). Worked out once for the
        first ``calls`` asked with (the scans of one feed share it); a scan with another index: its own."""
        kept = self._answers
        if kept is not _UNSET and kept[0] is calls:
            return kept[1]
        out: list[tuple[ToolResult, ToolCall | None, bool | None]] = []
        for res in self.results:
            call = calls.get(res.call_id)
            out.append((res, call, None if res.synthetic else failed(call, res)))
        if kept is _UNSET:
            self._answers = (calls, out)
        return out


def seen(rec: Record | Seen) -> Seen:
    """``rec`` as a :class:`Seen` (itself when it is one)."""
    return rec if type(rec) is Seen else Seen(rec)  # type: ignore[arg-type]


class Scanner(Protocol[_T_co]):
    """A fact read record by record: ``feed`` each record in order (as a :class:`Seen`), then ``result()``.
    Every list function of the fact modules is its scanner fed the whole list (:func:`scan`), so a reader
    that streams the records (facts.gather.FactFeed) applies the same rules. ``reads(kind)``: whether a
    record of that :class:`Kind` may change what the scanner holds (when False, ``feed`` of it does nothing:
    a reader may leave such records out; tests/facts/test_scan_routes.py checks it)."""

    def feed(self, rec: Seen) -> None: ...

    @staticmethod
    def reads(kind: Kind) -> bool: ...

    def result(self) -> _T_co: ...


def scan(scanner: Scanner[_T], records: Iterable[Record]) -> _T:
    """``scanner`` fed every record of ``records``, its result."""
    feed: Callable[[Seen], None] = scanner.feed
    for n, rec in enumerate(records):
        view = Seen(rec)
        view.n = n
        feed(view)
    return scanner.result()
