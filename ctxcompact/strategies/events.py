"""The context with the sliding window's events applied (docs/guides/strategies.md#sliding-window): each
visible event's range replaced by its summary (the context rule in strategies/sliding_window.py's
docstring), and every input record known again from what the events dropped."""

from __future__ import annotations

import bisect
import collections
import dataclasses
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from ..facts.text import SUMMARY_MARKER, continuation_text
from ..formats import get_format
from ..formats.base import new_record
from ..model import Origin, Record, Role
from ..state import State
from .invocations import anchor
from .ranges import visible_events
from .sliding_window_state import Event, WindowEvents

#: meta key on the summary records this module writes; holds the records its events dropped
META_KEY = "sliding_window"
ACK_TEXT = "Understood."

T = TypeVar("T")


def is_ours(rec: Record) -> bool:
    return rec.origin is Origin.SUMMARY and META_KEY in rec.meta




def apply_events(records: list[Record], state: State, fmt_name: str) -> list[Record]:
    """Replace each visible event's range by its summary (the rule in the module docstring).

    Events whose range ends at or before the watermark are covered by the threshold summary instead. The
    records dropped are kept on the summary records' meta, so the strategy can summarize an overlap
    again without re-reading the input."""
    each = events_each(state, fmt_name)
    if each is None:
        return records
    out = [r for rec in records for r in each(rec)]
    out.extend(each.end())
    return out


def events_each(state: State, fmt_name: str, *, keep_dropped: bool = True) -> EventsEach | None:
    """:func:`apply_events` a record at a time (None: no event to apply), for a reading that does not hold
    the records (``streaming``, through ``strategies.reapply_each``). ``keep_dropped``: keep the records
    the events drop on the summaries' meta (the strategy's own run reads them again: :func:`full_view`);
    a reading that only counts and writes the context does not need them, and holding them would grow
    with the file."""
    own = state.section(WindowEvents)
    events = own.events if own is not None else []
    order = [i for i in visible_events(events) if events[i].end > state.watermark]
    if not order:
        return None
    return EventsEach([events[i] for i in order], get_format(fmt_name), keep_dropped)


class EventsEach:
    """The context rule applied as the records come, in input order: each visible event's summary is given
    before the first input record at or past where its range begins (or at the end), the input records in
    a visible range are dropped with the answers cleaning made for them, and (alternating layouts) an
    acknowledgement follows a summary that a user message follows (:class:`_Acks`). What it holds between
    records: the events not yet placed, and what :class:`_Acks` holds after a summary until the next
    message, so a reading's memory does not grow with the file."""

    def __init__(self, events: list[Event], fmt: Any, keep_dropped: bool) -> None:
        self.fmt = fmt
        self.pending = collections.deque(events)  # ordered by start
        # the visible ranges merged: whether an index is covered is one bisect (not a scan of every event)
        merged: list[list[int]] = []
        for e in events:
            if merged and e.start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e.end)
            elif e.start < e.end:
                merged.append([e.start, e.end])
        self.merged = merged
        self.merged_starts = [m[0] for m in merged]
        self.dropped: list[Record] = []  # (one list, on every summary's meta: full_view reads it)
        self.keep_dropped = keep_dropped
        self.last_dropped = False
        self.acks = _Acks(fmt) if fmt.layout.alternate else None

    def __call__(self, rec: Record) -> list[Record]:
        """What ``rec`` gives in its place: nothing, or it, with the summaries placed before it."""
        out: list[Record] = []
        if is_ours(rec):
            return out  # an earlier rendering; regenerated here
        if anchor(rec):
            while self.pending and self.pending[0].start <= rec.index:
                out.extend(event_records(self.fmt, self.pending.popleft(), [], self.dropped))
            self.last_dropped = self.drops(rec)
            if self.last_dropped:
                if self.keep_dropped:
                    self.dropped.append(rec)
                return self._acked(out)
        elif self.last_dropped and rec.origin is Origin.SYNTHETIC:
            return self._acked(out)  # cleaning's answer to a call that is now summarized
        out.append(rec)
        return self._acked(out)

    def drops(self, rec: Record) -> bool:
        """Whether the input record ``rec`` (an anchor, not one of ours) is dropped: inside a visible
        event's range, and not a system message."""
        k = bisect.bisect_right(self.merged_starts, rec.index) - 1
        covered = k >= 0 and rec.index < self.merged[k][1]
        return covered and (rec.message is None or rec.message.role is not Role.SYSTEM)

    def passes_on(self, index: int) -> bool:
        """Whether every record from input index ``index`` on is given as it is: no event left to place,
        none covering it or a later record, nothing held (where a later read may start)."""
        return not self.pending and not (self.acks is not None and self.acks.held) and (
            not self.merged or self.merged[-1][1] <= index)

    def skip_to(self, index: int) -> bool:
        """A read starting at input index ``index``, where an earlier one :meth:`passes_on`: the events
        ending before it were placed by that read. False if one does not (it cannot start there)."""
        self.pending = collections.deque(e for e in self.pending if e.end > index)
        return all(e.start >= index for e in self.pending)

    def end(self) -> list[Record]:
        """The summaries of the events whose range begins after the last record, and what is held."""
        out: list[Record] = []
        while self.pending:
            out.extend(event_records(self.fmt, self.pending.popleft(), [], self.dropped))
        out = self._acked(out)
        return out + self.acks.end() if self.acks is not None else out

    def _acked(self, records: list[Record]) -> list[Record]:
        return records if self.acks is None else [r for rec in records for r in self.acks(rec)]


def event_records(fmt: Any, event: Event, _rest: list[int], dropped: list[Record]) -> list[Record]:
    text = event.summary if event.summary.startswith(SUMMARY_MARKER) else f"{SUMMARY_MARKER}\n{event.summary}"
    # "covers": the input records it stands for, which a format writing events needs (ADK's time range)
    meta = {META_KEY: {"start": event.start, "end": event.end, "dropped": dropped},
            "covers": (event.start, event.end)}
    if fmt.layout.agent_log:
        # an agent's own log (Claude Code, Codex) gets the summary as the threshold output writes it: the
        # agent's own opening, the summary, the closing continuation
        made = fmt.summary_records(text, continuation_text(None))
        return [dataclasses.replace(r, meta={**r.meta, **meta}) for r in made]
    return [new_record(fmt.make_message(Role.USER, text), Origin.SUMMARY, meta)]


def alternate_acks(records: list[Record], fmt: Any) -> list[Record]:
    """Alternating layouts: an assistant acknowledgement after a summary that a user message follows, so
    cleaning never merges a summary into the user's next request."""
    acks = _Acks(fmt)
    out = [r for rec in records for r in acks(rec)]
    return out + acks.end()


class _Acks:
    """:func:`alternate_acks` as the records come: a summary of ours in a user message is held, with the
    records without a message after it, until the next record with a message says whether it needs an
    acknowledgement (that record is a user message)."""

    def __init__(self, fmt: Any) -> None:
        self.fmt = fmt
        self.held: list[Record] = []

    def __call__(self, rec: Record) -> list[Record]:
        out: list[Record] = []
        if self.held and rec.message is not None:
            out.extend(self._release(rec.message.role is Role.USER))
        if self.held or (is_ours(rec) and rec.message is not None and rec.message.role is Role.USER):
            self.held.append(rec)
        else:
            out.append(rec)
        return out

    def end(self) -> list[Record]:
        return self._release(False)

    def _release(self, ack: bool) -> list[Record]:
        held, self.held = self.held, []
        if not held:
            return held
        made = new_record(self.fmt.make_message(Role.ASSISTANT, ACK_TEXT), Origin.SUMMARY,
                          {META_KEY: {"ack": True}})
        return [held[0], made, *held[1:]] if ack else held


def full_view(records: list[Record], read: list[Record] | None = None) -> list[Record]:
    """Every input record known: the context's and those the events dropped, in input order. ``read``: the
    records the context was cleaned from (``Context.read``), whose summaries hold what the events dropped
    even where cleaning merged a summary into the message before it (a request the range follows)."""
    by_index: dict[int, Record] = {}
    for rec in records if read is None else read:
        if is_ours(rec):
            for d in rec.meta[META_KEY].get("dropped", []):
                by_index.setdefault(d.index, d)
    out: list[Record] = []
    merge: ViewMerge[Record] = ViewMerge(out.append, _same)
    for d in sorted(by_index.values(), key=lambda r: r.index):
        merge.drop(d.index, d)
    for rec in records:
        merge.add(rec)
    merge.end()
    return out


def _same(rec: Record) -> Record:
    return rec


class ViewMerge(Generic[T]):
    """:func:`full_view`'s merge as the records come: the context's records (:meth:`add`, in order) and
    those the events dropped (:meth:`drop`, by input index, in order, each before any context record after
    it is added), each handed to ``sink`` as ``of`` makes it, in input order. A dropped record waits only
    for the context's records before it (a streamed reading drops it as it is read, and hands out the
    context's records once cleaned): what waits is ``of``'s, so ``of`` may keep less than the record."""

    def __init__(self, sink: Callable[[T], None], of: Callable[[Record], T]) -> None:
        self.sink, self.of = sink, of
        self.extra: collections.deque[tuple[int, T]] = collections.deque()

    def drop(self, index: int, item: T) -> None:
        self.extra.append((index, item))

    def add(self, rec: Record) -> None:
        if is_ours(rec) or rec.origin in (Origin.SUMMARY, Origin.CONTINUATION):
            return
        extra = self.extra
        if anchor(rec):
            while extra and extra[0][0] < rec.index:
                self.sink(extra.popleft()[1])
            while extra and extra[0][0] == rec.index:
                extra.popleft()
        self.sink(self.of(rec))

    def end(self) -> None:
        while self.extra:
            self.sink(self.extra.popleft()[1])
