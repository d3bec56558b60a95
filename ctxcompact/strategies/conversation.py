"""The conversation a compaction summarizes, read record by record (docs/concepts/handoff.md): what
``threshold.compact`` needs of the context, without needing the whole of it.

A compaction keeps the system records and any encrypted earlier summary, quotes the latest request and its
attachments, reads the state of that request and the work in flight from the last records, and summarizes
the rest. :class:`Reader` takes the cleaned context's records in order and keeps exactly that: the system
and opaque records, the latest request's record, the open todos, and a *window* of the last records. The
records before the window go to the fact feed (:class:`~ctxcompact.facts.gather.FactFeed`) and are dropped,
so a streamed run holds the window and the facts, not the file. A held run keeps every record as well (an
LLM summarizer reads them) and reads the same window: the one code path either way. A streamed run gives an
LLM summarizer the records before the window read again from the file (:class:`Summarized`, as often as it
iterates them), the same records a held run keeps (:func:`placed`).

**The window.** :func:`~ctxcompact.facts.handoff.request_status` and
:func:`~ctxcompact.facts.handoff.in_flight_start` read back from the end and stop at records of a kind: the
window begins at the last record where both are sure to stop (a *wall*: no part of a model turn and no
assistant message with calls; a later record that is not one :func:`~ctxcompact.facts.handoff.flight_skips`
passes over; a record at or after it where :func:`~ctxcompact.facts.handoff.status_stops`). Read on the
window, both give what they give on the whole conversation (tests/engine/test_run_streamed.py checks it on
every test file); in a tool loop the window is the last call and its results, never more than a turn. A split
never separates a tool call from its result: the work in flight is read whole from the window.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import Unstreamable
from ..facts.earlier import opaque_of
from ..facts.handoff import stops_and_skips, turn_goes_on
from ..facts.seen import Seen
from ..facts.todos import Todo, TodoScan, is_open
from ..model import Origin, Record, Role

if TYPE_CHECKING:
    from ..facts.gather import FactFeed


def _wall(view: Seen) -> bool:
    """A record no work in flight reaches back past (and none starts at)."""
    return not turn_goes_on(view.rec) and not (view.role is Role.ASSISTANT and view.calls)


def placed(rec: Record) -> tuple[str, list[Record]]:
    """Where :class:`Reader` puts ``rec``: ``"carried"`` (a summary or continuation of an earlier
    compaction), ``"system"``, ``"opaque"`` (an encrypted earlier summary kept as it is) or ``"summarized"``
    (what a summary covers), with the encrypted parts it keeps of it (``facts.earlier.opaque_of``)."""
    if rec.origin in (Origin.SUMMARY, Origin.CONTINUATION):
        return "carried", []
    if rec.message is not None and rec.message.role is Role.SYSTEM:
        return "system", []
    kept = opaque_of(rec)
    return ("opaque" if kept and kept[0] is rec else "summarized"), kept


@dataclass(slots=True)
class Summarized:
    """The first ``count`` records :func:`placed` says are summarized, read again from the cleaned context's
    parts (``parts()``: the file read again, ``compaction_stream.read_conversation``) at each iteration:
    what a held run's ``Conversation.before`` gives, without holding it. The parts are read to their end, so
    the reading checks the file did not change (unless the caller stops early)."""

    parts: Callable[[], Iterator[list[Record]]]
    count: int

    def __iter__(self) -> Iterator[Record]:
        n = 0
        for part in self.parts():
            for rec in part:
                if n < self.count and placed(rec)[0] == "summarized":
                    n += 1
                    yield rec


@dataclass(slots=True)
class Conversation:
    """What a compaction reads of a context (:class:`Reader`)."""

    system: list[Record]  # the input's system records, kept verbatim
    opaque: list[Record]  # encrypted earlier summaries, kept as they are
    carried: list[Record]  # summaries and continuations of an earlier compaction (from the state)
    latest_record: Record | None  # the last message a person typed
    window: list[Record]  # the last records: the latest answer and the work in flight are read here
    todos: list[Todo]  # open todos of the last todo list
    #: every record of the conversation (a held context), else None: what came before the window is in
    #: ``feed``
    records: list[Record] | None = None
    feed: FactFeed | None = None
    #: the records the reader took that a summary covers (``len(records)`` when held)
    taken: int = 0
    #: a streamed run: the cleaned context's parts read again (the records before the window, for
    #: :class:`Summarized`); None: none are given (only the feed)
    again: Callable[[], Iterator[list[Record]]] | None = None

    def before(self, at: int) -> tuple[list[Record] | Summarized, FactFeed | None]:
        """The conversation before ``window[at]``, to summarize: its records (held), or the feed of its
        facts and those records read again (streamed: the feed fed the window's records before ``at``, once;
        :class:`Unstreamable` when asked again, or when the feed's facts would not be
        :func:`~ctxcompact.facts.gather.gather`'s)."""
        cut = self.taken - len(self.window) + at
        if self.records is not None:
            return self.records[:cut], None
        feed, self.feed = self.feed, None
        if feed is None:
            raise Unstreamable("the conversation is summarized a second time")
        for rec in self.window[:at]:
            feed.feed(rec)
        if not feed.complete:
            raise Unstreamable("a subagent's lines, or a result read before its call")
        return (Summarized(self.again, cut) if self.again is not None else []), feed


@dataclass(slots=True)
class Reader:
    """Reads a context's records in order into a :class:`Conversation`. ``hold``: keep every record (a held
    context); else the records before the window are fed to a :class:`FactFeed` and dropped."""

    hold: bool
    system: list[Record] = field(default_factory=list)
    opaque: list[Record] = field(default_factory=list)
    carried: list[Record] = field(default_factory=list)
    latest: Record | None = None
    window: list[Record] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    feed: FactFeed = field(default_factory=lambda: _feed())
    todos: TodoScan = field(default_factory=TodoScan)
    #: the window's records as the fact scans read them (what they ask of each worked out once)
    seen: list[Seen] = field(default_factory=list)
    walls: list[int] = field(default_factory=list)  # positions of the walls in the window
    #: told each record the conversation no longer holds (a streamed run forgets what it knew of it)
    dropped: Callable[[Record], None] = lambda rec: None
    last_stop: int = -1  # position in the window of the last record status_stops
    last_unskipped: int = -1  # of the last record flight_skips does not pass
    taken: int = 0  # records a summary covers (Conversation.taken)

    def add(self, rec: Record) -> None:
        if self._add(rec):
            self._cut()

    def _add(self, rec: Record) -> bool:
        """Take ``rec``; whether the window's start may move."""
        where, kept = placed(rec)
        if where == "carried":
            self.carried.append(rec)
            return False
        if where == "system":
            self.system.append(rec)
            return False
        self.opaque.extend(kept)
        if where == "opaque":
            return False  # kept as it is: not part of what is summarized
        self.taken += 1
        view = Seen(rec)
        if view.typed is not None:
            if self.latest is not None and not any(r is self.latest for r in self.window):
                self.dropped(self.latest)  # (already out of the window: nothing holds it now)
            self.latest = rec
        if view.calls:  # (TodoScan.reads)
            self.todos.feed(view)
        if self.hold:
            self.records.append(rec)
        at = len(self.window)
        self.window.append(rec)
        self.seen.append(view)
        if _wall(view):
            self.walls.append(at)
        stops, skipped = stops_and_skips(view)  # (the tests share the Seen's typed text and calls)
        if stops:
            self.last_stop = at
        if not skipped:
            self.last_unskipped = at
        return stops or not skipped

    def _cut(self) -> None:
        """Move the window's start to the last wall before the last record flight_skips does not pass, at or
        before the last record status_stops; what is before it goes to the feed."""
        k = bisect.bisect_right(self.walls, min(self.last_unskipped - 1, self.last_stop)) - 1
        if k < 0 or self.walls[k] == 0:
            return
        cut = self.walls[k]
        if not self.hold:
            for view in self.seen[:cut]:
                self.feed.feed(view)
                if view.rec is not self.latest:
                    self.dropped(view.rec)
        del self.window[:cut]
        del self.seen[:cut]
        self.walls = [w - cut for w in self.walls[k:]]
        self.last_stop -= cut
        self.last_unskipped -= cut

    def conversation(self) -> Conversation:
        return Conversation(
            system=self.system, opaque=self.opaque, carried=self.carried, latest_record=self.latest,
            window=self.window, todos=[t for t in self.todos.result() or [] if is_open(t)],
            records=self.records if self.hold else None, feed=None if self.hold else self.feed,
            taken=self.taken)


def _feed() -> FactFeed:
    from ..facts.gather import FactFeed  # the facts' modules load only when a compaction reads them

    return FactFeed(bounded=True)


def held(records: Sequence[Record]) -> Conversation:
    """The conversation of a held context."""
    reader = Reader(hold=True)
    for rec in records:
        reader.add(rec)
    return reader.conversation()
