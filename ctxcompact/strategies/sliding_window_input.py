"""What the sliding window reads of its context (strategies/sliding_window.py), behind one interface
(:class:`WindowInput`), so the planner's code is the same whether the context is held or read again by
offset (issue 25: ``run --strategy sliding-window`` on the streamed route,
docs/measurements/performance-log.md, branch `sw9`).

The planner asks for: the invocations and the split points that would separate a tool call from its result
(gathered record by record, :class:`~.invocations.Gathered`); the records owned by a range of input indexes
(a window handed to the summarizer) and their heuristic tokens; the input records at or in a range of
indexes (split-point candidates, an event's last record, timestamps); where the work in flight begins; and
the context rendered under a list of events, with each record's tokens and owner (the token trigger's
counting pass). :class:`HeldInput` answers from the records held (the held route); :class:`Streamed` answers
the same questions from a file read again (the streamed route). The planner's code is the same for both.

A streamed ``run`` (issue 25 item 2) gathers the invocations and split points in its pass 1 (:class:`Quiet`:
``Gathered`` fed the records ``events.full_view`` gives, the context's as the cleaner settles them and those
the state's events drop as they are read, merged by input index). When the strategy's rule says nothing is
due (``sliding_window.quiet``: most hook calls) the context passes through, written by pass 2, which is what
the held route writes then. When an event is due, the planner runs on :class:`Streamed`
(``compaction_stream._read_again``): the records of a window read again by a sweep over the file, the
integers the planner reads kept per record, each rendering a counting pass with the new events as the
state's layers, whose records (the output) are held only within twice the window. What it cannot answer
without holding more (a rendering over that, where the work in flight begins lying before the latest
request), a state with layers besides the events, an agent's own log (its compaction is written after its
lines) and a summarizer that does not declare it may (``plugins.SUMMARIZES_STREAMED``) take the held route
(``errors.Unstreamable``). A window's records are a list the summarizer reads (an LLM's prompt too).
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import itertools
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..clean import clean
from ..context import closes_trailing
from ..errors import Unstreamable
from ..facts.handoff import flight_skips, in_flight_start
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
    and the summaries). The counts are taken once, on first read. A streamed rendering (:class:`Streamed`)
    gives its counts and costs as it read them, and its records only when they are few enough to hold
    (else :attr:`transcript` raises Unstreamable: the held route makes this outcome)."""

    si: StrategyInput
    held: Transcript | None
    _base: Sequence[int] | None = field(default=None, repr=False)
    _costs: list[tuple[int, int]] | None = field(default=None, repr=False)

    @property
    def transcript(self) -> Transcript:
        if self.held is None:
            raise Unstreamable("the rendered context is too large to hold")
        return self.held

    def _counts(self) -> Sequence[int]:
        if self._base is None:
            self._base = self.si.count(self.transcript.records).base
        return self._base

    @property
    def tokens(self) -> int:
        return self.si.report.calibrated.project(sum(self._counts()))

    def costs(self) -> list[tuple[int, int]]:
        if self._costs is not None:
            return self._costs
        out: list[tuple[int, int]] = []
        records = self.transcript.records
        for rec, owner, c in zip(records, owner_index(records), self._counts(), strict=True):
            out.append((_cost_owner(rec, owner), c))
        return out


def _cost_owner(rec: Record, owner: int) -> int:
    """The owner a record's tokens are kept with from a split point on (-1: kept by any split)."""
    if rec.origin in (Origin.SUMMARY, Origin.CONTINUATION) or owner < 0 or (
            rec.message is not None and rec.message.role is Role.SYSTEM):
        return -1
    return owner


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

    def context(self) -> Rendered:
        """The context as read (under the state's events)."""


class HeldInput:
    """:class:`WindowInput` over the records held (the held route): every input record known again from the
    context and what the state's events dropped (``events.full_view``)."""

    def __init__(self, si: StrategyInput) -> None:
        self.si = si
        self.view = view = full_view(si.ctx.transcript.records, si.ctx.read)
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
        """The context with ``events`` as the next call reads it (as :meth:`Streamed.render` reads the file
        again): the events applied to the records as read, then cleaned. Applied to the cleaned records,
        an answer cleaning made for a call the events drop, or an id it renamed because a call they drop
        used it first, stayed."""
        ctx = self.si.ctx
        shadow = State(watermark=ctx.covered, sections={WindowEvents.KEY: WindowEvents(events)})
        read = ctx.read if ctx.read is not None else ctx.transcript.records
        recs = apply_events(list(read), shadow, ctx.transcript.format)
        t = Transcript(format=ctx.transcript.format, records=recs, source=ctx.transcript.source)
        return Rendered(self.si, clean(t, close_trailing=closes_trailing(self.si.opts)).transcript)

    def context(self) -> Rendered:
        return Rendered(self.si, self.si.ctx.transcript)


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

    def streamed(self, read: ReadAgain, state: State | None, fmt: str, source: str,
                 spans: list[tuple[int, int]]) -> Streamed:
        """The planner's input for a call that makes events on the streamed route (:class:`Streamed`)."""
        if self.broken:
            raise Unstreamable("what the resume point kept could not be read")
        if self.folded().back:
            # (a range of owners is then no slice of the view: a sweep that stops at the range's end misses
            # a record owned inside it that comes later; HeldInput sums such a view record by record)
            raise Unstreamable("the view's owners go back")
        return Streamed(self.folded(), read, state, fmt, source, spans)

    def folded(self) -> Gathered:
        """The invocations and split points gathered (the fold, ended)."""
        if not self.ended:
            self.merge.end()
            self.ended = True
        return self.gathered


def window_input(si: StrategyInput) -> WindowInput:
    """What the planner reads: the streamed run's (:class:`Streamed`, given as ``si.conversation``), else the
    records held."""
    given = si.conversation
    if isinstance(given, Streamed):
        given.si = si
        return given
    return HeldInput(si)


#: ``(state, parsed) -> the cleaned context's parts``: the file read again from its start as pass 1 read it,
#: ``state``'s layers applied to each record, ``parsed`` told each record as read (compaction_stream.reread)
ReadAgain = Callable[[State | None, Callable[[Record], None] | None], Iterator[list[Record]]]


class Streamed:
    """:class:`WindowInput` of a file not held (the streamed ``run``, module docstring): the invocations
    and split points pass 1 gathered (:class:`Quiet`); the records of a range read again, as the view
    (``events.full_view``) gives them, by a sweep from the start that holds only the records from the last
    range asked on (a range before it sweeps again); each view record's owner, heuristic tokens (prefix
    sums) and anchor kept as three integers while the sweep first passes it; a rendering counted as it is
    read, its records held only while within twice the window (:class:`Rendered`). ``spans``: the system
    lines the sweeps passed, in order (the fingerprint's, ``Context.system_spans``)."""

    def __init__(self, gathered: Gathered, read: ReadAgain, state: State | None, fmt: str, source: str,
                 spans: list[tuple[int, int]]) -> None:
        self.invocations = gathered.invocations()
        self.unsafe = gathered.unsafe_splits()
        self.read, self.state, self.fmt, self.source, self.spans = read, state, fmt, source, spans
        self.si: StrategyInput | None = None  # (window_input: given once the run's input is made)
        # what the sweeps passed, one entry per view record (built by the one furthest on)
        self.owners, self.prefix, self.anchored = array("q"), array("q", [0]), array("q")
        self.buffer: collections.deque[tuple[int, Record]] = collections.deque()
        self.kept_from = -2  # owners before it were let go by the sweep now going (a range before it: again)
        self.sweep: Iterator[Record] | None = None
        self.done = False
        self.complete = False  # a sweep passed every view record: the integers are all known
        self.seen = 0  # view records the sweep now going has passed
        self.last = -1  # the owner of the last record it passed
        self._context: Rendered | None = None

    def _view(self) -> Iterator[Record]:
        out: collections.deque[Record] = collections.deque()
        merge: ViewMerge[Record] = ViewMerge(out.append, _same)
        each = events_each(self.state, self.fmt, keep_dropped=False) if self.state is not None else None
        spans = self.spans

        def parsed(rec: Record) -> None:
            system = rec.message is not None and rec.message.role is Role.SYSTEM
            if system and rec.offset >= 0 and rec.raw and (not spans or rec.offset > spans[-1][0]):
                spans.append((rec.offset, len(rec.raw)))
            if each is not None and anchor(rec) and not is_ours(rec) and each.drops(rec):
                merge.drop(rec.index, rec)

        for part in self.read(self.state, parsed):
            for rec in part:
                merge.add(rec)
            while out:
                yield out.popleft()
        merge.end()
        yield from out

    def _pull(self) -> bool:
        """One more view record into the buffer; False at the end."""
        if self.sweep is None:
            self.sweep, self.done, self.seen, self.last = self._view(), False, 0, -1
        rec = next(self.sweep, None)
        if rec is None:
            self.done = True
            self.complete = self.complete or self.seen == len(self.owners)
            return False
        owner = rec.index if anchor(rec) else self.last
        if owner < self.last:
            raise Unstreamable("the view's owners go back")  # (HeldInput then bisects no slice either)
        self.last = owner
        if self.seen == len(self.owners) and not self.complete:  # the furthest: kept as integers
            self.owners.append(owner)
            tokens = heuristic.message_tokens(rec.message) if rec.message is not None else 0
            self.prefix.append(self.prefix[-1] + tokens)
            self.anchored.append(rec.index if anchor(rec) else -1)
        self.seen += 1
        self.buffer.append((owner, rec))
        return True

    def _reach(self, start: int, end: int | None) -> None:
        """The buffer holds every view record owned from ``start`` on, through the first owned from ``end``
        (None: to the end)."""
        if start < self.kept_from or self.sweep is None:
            self.sweep, self.kept_from, self.done, self.last = None, -1, False, -1
            self.buffer.clear()
        self.kept_from = max(self.kept_from, start)
        buffer = self.buffer
        while buffer and buffer[0][0] < start:
            buffer.popleft()
        while not self.done and (end is None or self.last < end):
            if not self._pull():
                break
            while buffer and buffer[0][0] < start:
                buffer.popleft()

    def between(self, start: int, end: int) -> list[Record]:
        self._reach(start, end)
        return [r for o, r in self.buffer if start <= o < end]

    def _known(self, end: int | None) -> None:
        """The integers kept reach past the records owned before ``end`` (None: the end)."""
        if self.complete or (end is not None and self.owners and self.owners[-1] >= end):
            return
        # (the records passed on the way are let go: a range before them sweeps again)
        self._reach(max(self.kept_from, self.owners[-1] if self.owners else -1), end)

    def tokens_between(self, start: int, end: int) -> int:
        self._known(end)
        lo, hi = bisect.bisect_left(self.owners, start), bisect.bisect_left(self.owners, end)
        return self.prefix[hi] - self.prefix[lo]

    def anchors(self, lo: int, hi: int | None) -> list[int]:
        self._known(None if hi is None else hi + 1)
        return sorted({i for i in self.anchored if i >= 0 and lo < i and (hi is None or i <= hi)})

    def record_at(self, index: int) -> Record | None:
        self._reach(min(index, self.kept_from) if self.sweep is not None else index, index + 1)
        return next((r for o, r in self.buffer if o == index and anchor(r) and r.index == index), None)

    def in_flight(self) -> int | None:
        """``in_flight_start`` over the view's records from the latest request on (what the planner asks
        when compacting inside it): the same answer as over the whole view unless its scan back could
        reach past them (then Unstreamable)."""
        numbered = [i for i in self.invocations if i.number > 0]
        start = numbered[-1].start if numbered else -1
        self._reach(start, None)
        tail = [r for o, r in self.buffer if o >= start]
        at = in_flight_start(tail)
        whole = start < 0 or not self.owners or self.owners[0] >= start  # (the tail is the whole view)
        if not whole and (at == 0 or all(flight_skips(r) for r in tail)):
            raise Unstreamable("where the work in flight begins lies before the latest request")
        return tail[at].index if at is not None and anchor(tail[at]) else None

    def render(self, events: list[Event]) -> Rendered:
        """One reading with ``events`` as the state's (a shadow state: the layers then cleaning, as the next
        call reads), counted part by part; its records kept while within twice the window."""
        si = self.si
        assert si is not None
        shadow = State(sections={WindowEvents.KEY: WindowEvents(events)}) if events else None
        held: list[Record] | None = []
        base: list[int] = []
        costs: list[tuple[int, int]] = []
        last = -1
        # (held up to twice the window: what trimming the work in flight reads, over the trigger, is rarely
        # more; beyond it the held route makes the outcome)
        window = 2 * si.budget.window
        for part in self.read(shadow, None):
            counts = si.count(part).base
            for rec, c in zip(part, counts, strict=True):
                if anchor(rec):
                    last = rec.index
                owner = _cost_owner(rec, last)
                if costs and costs[-1][0] == owner:  # (one entry per run of an owner: the sums are the same)
                    costs[-1] = (owner, costs[-1][1] + c)
                else:
                    costs.append((owner, c))
            base.append(sum(counts))
            if held is not None:
                held.extend(part)
                if si.report.calibrated.project(sum(base)) > window:
                    held = None  # (the held route makes this outcome, if its records are read)
        t = Transcript(format=self.fmt, records=held, source=self.source) if held is not None else None
        return Rendered(si, t, base, costs)

    def context(self) -> Rendered:
        if self._context is None:
            self._context = self.render(_events_of(self.state))
        return self._context


def _events_of(state: State | None) -> list[Event]:
    own = state.section(WindowEvents) if state is not None else None
    return list(own.events) if own is not None else []


def _same(rec: Record) -> Record:
    return rec
