"""What the sliding window reads of its context (strategies/sliding_window.py), behind one interface
(:class:`WindowInput`), so the planner's code is the same whether the context is held or read again by
offset (issue 25: ``run --strategy sliding-window`` on the streamed route, docs/measurements/performance.md).

The planner asks for: the invocations and the split points that would separate a tool call from its result
(gathered record by record, :class:`~.invocations.Gathered`); the records owned by a range of input indexes
(a window handed to the summarizer) and their heuristic tokens; the input records at or in a range of
indexes (split-point candidates, an event's last record, timestamps); where the work in flight begins; and
the context rendered under a list of events, with each record's tokens and owner (the token trigger's
counting pass). :class:`HeldInput` answers from the records held (the held route); a streamed reading would
answer the same questions from offsets and counting passes.

A streamed ``run`` (issue 25 item 2, the calls that make no event: most hook calls) gathers the invocations
and split points in its pass 1 (:class:`Quiet`: ``Gathered`` fed the records ``events.full_view`` gives, the
context's as the cleaner settles them and those the state's events drop as they are read, merged by input
index); when the strategy's rule says nothing is due (``sliding_window.quiet``) the context passes through,
written by pass 2, which is what the held route writes then. Any other outcome reads the file held.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..clean import clean
from ..facts.handoff import in_flight_start
from ..model import Origin, Record, Role, Transcript
from ..state import State
from ..tokens import heuristic
from .base import StrategyInput
from .events import ViewMerge, apply_events, events_each, full_view, is_ours
from .invocations import Gathered, Invocation, Seen, anchor, owner_index
from .sliding_window_state import Event, WindowEvents


@dataclass(slots=True)
class Rendered:
    """The context rendered under some events (cleaned, as the next request sees it) and what the token
    trigger reads of it: its tokens as the provider will count them (``Calibrated.project``), and each
    record's (owner input index, tokens), -1 for what no split can remove (system records, the preamble's
    and the summaries). The counts are taken once, on first read."""

    si: StrategyInput
    transcript: Transcript
    _base: Sequence[int] | None = field(default=None, repr=False)

    def _counts(self) -> Sequence[int]:
        if self._base is None:
            self._base = self.si.count(self.transcript.records).base
        return self._base

    @property
    def tokens(self) -> int:
        return self.si.report.calibrated.project(sum(self._counts()))

    def costs(self) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        records = self.transcript.records
        for rec, owner, c in zip(records, owner_index(records), self._counts(), strict=True):
            if rec.origin in (Origin.SUMMARY, Origin.CONTINUATION) or owner < 0 or (
                    rec.message is not None and rec.message.role is Role.SYSTEM):
                out.append((-1, c))
            else:
                out.append((owner, c))
        return out


class WindowInput(Protocol):
    """What the sliding window's planner reads of its context (the module docstring)."""

    invocations: list[Invocation]
    unsafe: set[int]  # split points that would separate a tool call from its result

    def between(self, start: int, end: int) -> list[Record]:
        """The context's records owned by input indexes ``start`` ≤ owner < ``end`` (every input record,
        those the state's events dropped too), in order."""

    def tokens_between(self, start: int, end: int) -> int:
        """The heuristic tokens of :meth:`between`'s records."""

    def anchors(self, lo: int, hi: int | None) -> list[int]:
        """The input indexes ``lo`` < index ≤ ``hi`` (None: any after ``lo``) of records read from the input,
        sorted."""

    def record_at(self, index: int) -> Record | None:
        """The record read from the input at ``index``, if known."""

    def in_flight(self) -> int | None:
        """The input index where the work in flight begins (``facts.handoff.in_flight_start``), if known."""

    def render(self, events: list[Event]) -> Rendered:
        """The context with ``events`` as the state's events (the context rule, then cleaning)."""


class HeldInput:
    """:class:`WindowInput` over the records held (the held route): every input record known again from the
    context and what the state's events dropped (``events.full_view``)."""

    def __init__(self, si: StrategyInput) -> None:
        self.si = si
        self.view = view = full_view(si.ctx.transcript.records)
        gathered = Gathered.of(view)  # (one pass for both)
        self.invocations = gathered.invocations()
        self.unsafe = gathered.unsafe_splits()
        owners = owner_index(view)
        # owners never decrease along the view (input order): a window's records are one bisected slice
        self.owners = owners if all(a <= b for a, b in itertools.pairwise(owners)) else None
        self._prefix: list[int] | None = None

    def between(self, start: int, end: int) -> list[Record]:
        owners = self.owners
        if owners is None:
            return [r for r, o in zip(self.view, owner_index(self.view), strict=True) if start <= o < end]
        return self.view[bisect.bisect_left(owners, start):bisect.bisect_left(owners, end)]

    def tokens_between(self, start: int, end: int) -> int:
        """(prefix sums, built once: a roll-up's range reaches back to the first event)"""
        if self.owners is None:
            return sum(heuristic.message_tokens(r.message) for r in self.between(start, end)
                       if r.message is not None)
        if self._prefix is None:
            self._prefix = list(itertools.accumulate(
                (heuristic.message_tokens(r.message) if r.message is not None else 0 for r in self.view),
                initial=0))
        lo, hi = bisect.bisect_left(self.owners, start), bisect.bisect_left(self.owners, end)
        return self._prefix[hi] - self._prefix[lo]

    def anchors(self, lo: int, hi: int | None) -> list[int]:
        return sorted({r.index for r in self.view
                       if anchor(r) and lo < r.index and (hi is None or r.index <= hi)})

    def record_at(self, index: int) -> Record | None:
        for rec in self.view:
            if anchor(rec) and rec.index == index:
                return rec
        return None

    def in_flight(self) -> int | None:
        at = in_flight_start(self.view)
        return self.view[at].index if at is not None and anchor(self.view[at]) else None

    def render(self, events: list[Event]) -> Rendered:
        ctx = self.si.ctx
        shadow = State(watermark=ctx.covered, sections={WindowEvents.KEY: WindowEvents(events)})
        recs = apply_events(list(ctx.transcript.records), shadow, ctx.transcript.format)
        t = Transcript(format=ctx.transcript.format, records=recs, source=ctx.transcript.source)
        return Rendered(self.si, clean(t).transcript)


class Quiet:
    """Pass 1's gatherer (``streaming.count_file``'s ``gather``): the records as ``events.full_view`` gives
    them folded into a :class:`~.invocations.Gathered`. What it holds: the fold, and what it reads of each
    dropped record (:class:`~.invocations.Seen`) until the context's records before it are settled."""

    def __init__(self, state: State | None, fmt: str, reading: Any) -> None:
        self.gathered = Gathered()
        self.merge: ViewMerge[Seen] = ViewMerge(self.gathered.take, Seen.of)
        self.broken = False  # what a resume point kept could not be read: the held route decides
        resume = reading.start  # (a ResumePoint: the reading starts there, after what was gathered)
        if resume is not None:
            try:
                self.gathered = Gathered.read(resume.gathered["gathered"])
                self.merge = ViewMerge(self.gathered.take, Seen.of)
                for index, seen in resume.gathered["waiting"]:
                    self.merge.drop(int(index), Seen(*seen))
            except (KeyError, TypeError, ValueError):
                self.broken = True
        # the state's events as the reading applies them (its own EventsEach): which records they drop
        self.events = events_each(state, fmt, keep_dropped=False) if state is not None else None
        if self.events is not None:
            reading.parsed = self.parsed
        self.ended = False

    def kept(self) -> dict[str, Any]:
        """What a reading starting where this one is now takes up from (``ResumePoint.gathered``):
        the fold, and the dropped records waiting for the context's before them."""
        return {"gathered": self.gathered.kept(),
                "waiting": [(i, dataclasses.astuple(seen)) for i, seen in self.merge.extra]}

    def parsed(self, rec: Record) -> None:
        """Told each record as read, before the state's layers (``streaming.Reading.parsed``)."""
        assert self.events is not None
        if anchor(rec) and not is_ours(rec) and self.events.drops(rec):
            self.merge.drop(rec.index, Seen.of(rec))

    def add(self, part: list[Record]) -> None:
        """A part the cleaner settled, in order."""
        for rec in part:
            self.merge.add(rec)

    def result(self) -> Gathered:
        if not self.ended:
            self.merge.end()
            self.ended = True
        return self.gathered
