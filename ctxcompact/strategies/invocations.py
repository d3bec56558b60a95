"""Invocations and split points, for the sliding window (docs/guides/strategies.md#sliding-window): which
records form each invocation, where a split would separate a tool call from its result, and the windows the
invocation trigger makes (the rules in strategies/sliding_window.py's docstring)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..facts.text import typed_text
from ..model import Origin, Record, ToolCall, ToolResult
from .ranges import union_points

# --------------------------------------------------------------------------------------------------
# Invocations and split points


@dataclass(slots=True)
class Invocation:
    number: int  # 1-based; 0 is the preamble
    start: int  # input index of its first record
    end: int  # input index after its last record (exclusive)
    id: str | None = None
    timestamp_start: Any = None
    timestamp_end: Any = None


def anchor(rec: Record) -> bool:
    """A record read from the input at a known position (cleaning copies keep index and line)."""
    return rec.origin is Origin.INPUT and rec.index >= 0 and rec.line > 0


def invocations(records: list[Record]) -> list[Invocation]:
    """The invocations of ``records`` (input records in index order), preamble (number 0) first if any."""
    return Gathered.of(records).invocations()


def owner_index(records: list[Record]) -> list[int]:
    """Each record's input index; records made by cleaning belong to the input record before them."""
    out: list[int] = []
    last = -1
    for rec in records:
        if anchor(rec):
            last = rec.index
        out.append(last)
    return out


def unsafe_splits(records: list[Record]) -> set[int]:
    """Split points p (compact indexes < p, keep >= p) that would separate a tool call from its result.

    Parallel calls are covered pair by pair. A call with no result in the input never blocks a split:
    cleaning answers it (a synthetic result travels with the call), so it can be compacted with it."""
    return Gathered.of(records).unsafe_splits()


class _Numbering:
    """Invocations numbered as their records come: by the format's invocation ids, or by the requests a
    person typed."""

    __slots__ = ("by_ids", "current", "numbered", "out")

    def __init__(self, by_ids: bool) -> None:
        self.by_ids = by_ids
        self.out: list[Invocation] = []
        self.current: Invocation | None = None
        self.numbered = 0

    def add(self, seen: Seen) -> None:
        current = self.current
        if self.by_ids:
            inv = seen.invocation_id
            starts = bool(inv) and inv != (current.id if current is not None else None)
        else:
            starts = seen.typed
        if starts:
            self.numbered += 1
            current = Invocation(number=self.numbered, start=seen.index, end=seen.index + 1,
                                 id=seen.invocation_id if self.by_ids else None)
            self.out.append(current)
        elif current is None:
            current = Invocation(number=0, start=seen.index, end=seen.index + 1)
            self.out.append(current)
        self.current = current
        current.end = seen.index + 1
        ts = seen.timestamp
        if isinstance(ts, (int, float, str)) and not isinstance(ts, bool):
            if current.timestamp_start is None:
                current.timestamp_start = ts
            current.timestamp_end = ts

    def kept(self) -> list[Any]:
        """Marshal-able (:meth:`Gathered.kept`); the current invocation is the last."""
        return [self.numbered, [(i.number, i.start, i.end, i.id, i.timestamp_start, i.timestamp_end)
                                for i in self.out]]

    @classmethod
    def read(cls, by_ids: bool, kept: list[Any]) -> _Numbering:
        n = cls(by_ids)
        n.numbered = int(kept[0])
        n.out = [Invocation(int(a), int(b), int(c), d, e, f) for a, b, c, d, e, f in kept[1]]
        n.current = n.out[-1] if n.out else None
        return n


@dataclass(slots=True)
class Seen:
    """What :class:`Gathered` reads of a record: small, so a reading may keep it a while without keeping the
    record (a record the state's events drop waits for the context's records before it to be gathered:
    ``events.ViewMerge``)."""

    anchor: bool
    index: int
    invocation_id: Any
    typed: bool  # what a person typed (an anchor's; else not asked)
    timestamp: Any
    calls: tuple[str, ...]  # its tool calls' ids
    results: tuple[str, ...]  # the call ids its results (not cleaning's) answer

    @classmethod
    def of(cls, rec: Record) -> Seen:
        at = anchor(rec)
        meta = rec.meta
        msg = rec.message
        calls: tuple[str, ...] = ()
        results: tuple[str, ...] = ()
        if msg is not None:
            calls = tuple(b.id for b in msg.blocks if isinstance(b, ToolCall))
            results = tuple(b.call_id for b in msg.blocks if isinstance(b, ToolResult) and not b.synthetic)
        return cls(at, rec.index, meta.get("invocation_id"), at and typed_text(rec) is not None,
                   meta.get("timestamp"), calls, results)


class Gathered:
    """:func:`invocations` and :func:`unsafe_splits` gathered record by record, in input order (``add``),
    so a reading that does not hold the records gathers them as it goes; the held route folds its view
    through the same code (:meth:`of`). What it holds: the invocations, and each tool call's and result's
    owner (small per invocation and per call, not per record).

    Whether invocations are numbered by the format's ids is known only once a record has one: until then
    both numberings run (the one by ids costs a lookup per record); the first id drops the other."""

    __slots__ = ("back", "by_ids", "by_text", "calls", "owner", "results")

    def __init__(self) -> None:
        self.by_ids = _Numbering(True)
        self.by_text: _Numbering | None = _Numbering(False)
        self.owner = -1  # the input index of the last anchor: what the records cleaning made belong to
        self.calls: dict[str, int] = {}
        self.results: dict[str, int] = {}
        # an anchor read after a later one (cleaning moved a result read before its call to after it): the
        # view's owners go back, so a range of owners is no slice of it (sliding_window_input.Streamed)
        self.back = False

    @classmethod
    def of(cls, records: list[Record]) -> Gathered:
        g = cls()
        for rec in records:
            g.add(rec)
        return g

    def add(self, rec: Record) -> None:
        self.take(Seen.of(rec))

    def take(self, seen: Seen) -> None:
        """:meth:`add` of what it reads of a record."""
        if seen.anchor:
            self.back = self.back or seen.index < self.owner
            self.owner = seen.index
            if self.by_text is not None and seen.invocation_id:
                self.by_text = None
            self.by_ids.add(seen)
            if self.by_text is not None:
                self.by_text.add(seen)
        if self.owner < 0:
            return
        for cid in seen.calls:
            self.calls.setdefault(cid, self.owner)
        for cid in seen.results:
            self.results.setdefault(cid, self.owner)

    def kept(self) -> dict[str, Any]:
        """What it has gathered, marshal-able: a reading that starts after the records it was fed takes up
        from it (:meth:`read`; a streamed run's resume point)."""
        return {"ids": self.by_ids.kept(), "text": self.by_text.kept() if self.by_text is not None else None,
                "owner": self.owner, "calls": dict(self.calls), "results": dict(self.results),
                "back": self.back}

    @classmethod
    def read(cls, kept: dict[str, Any]) -> Gathered:
        """What :meth:`kept` kept (ValueError, KeyError, TypeError on anything else)."""
        g = cls()
        g.by_ids = _Numbering.read(True, kept["ids"])
        g.by_text = _Numbering.read(False, kept["text"]) if kept["text"] is not None else None
        g.owner = int(kept["owner"])
        g.calls, g.results = dict(kept["calls"]), dict(kept["results"])
        g.back = bool(kept["back"])  # (a point kept before it was: KeyError, read from byte 0)
        return g

    def invocations(self) -> list[Invocation]:
        """The invocations so far (the last one still growing while records are added)."""
        return (self.by_text if self.by_text is not None else self.by_ids).out

    def unsafe_splits(self) -> set[int]:
        spans: list[tuple[int, int]] = []
        for cid, ci in self.calls.items():
            ri = self.results.get(cid)
            if ri is None or ri == ci:
                continue
            spans.append((min(ci, ri) + 1, max(ci, ri) + 1))
        return union_points(spans)


def safe_point(p: int, lo: int, hi: int, bad: set[int] | frozenset[int]) -> int:
    """The nearest safe split point to ``p`` within (lo, hi]: backward first, then forward."""
    q = p
    while q > lo and q in bad:
        q -= 1
    if q > lo:
        return q
    q = p
    while q <= hi and q in bad:
        q += 1
    return q if q <= hi else p


# --------------------------------------------------------------------------------------------------
# Planning


@dataclass(slots=True)
class Window:
    start: int
    end: int  # exclusive
    first: int  # first invocation number in the window
    last: int  # last invocation number (the window may end inside it for the token trigger)
    new_first: int  # first new invocation (start of the block)
    trigger: str  # "invocations" or "tokens"
    ids: list[str] = field(default_factory=list)
    timestamp_start: Any = None
    timestamp_end: Any = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"start": self.start, "end": self.end, "records": self.end - self.start,
                             "first_invocation": self.first, "last_invocation": self.last,
                             "invocations": self.last - self.first + 1, "trigger": self.trigger}
        if self.ids:
            d["invocation_ids"] = list(self.ids)
        return d


def make_window(invs: list[Invocation], first_new: Invocation, end: int, last_no: int, omega: int,
            trigger: str) -> Window:
    # invocations are numbered 1, 2, … in order after the preamble: a number is its place in ``numbered``
    numbered = invs[1:] if invs and invs[0].number == 0 else invs
    pos = first_new.number - 1
    first = numbered[max(0, pos - omega)]
    inside = numbered[first.number - 1:last_no]
    return Window(start=first.start, end=end, first=first.number, last=last_no, new_first=first_new.number,
                  trigger=trigger, ids=[i.id for i in inside if i.id],
                  timestamp_start=inside[0].timestamp_start if inside else None,
                  timestamp_end=inside[-1].timestamp_end if inside else None)


def plan_invocation_windows(invs: list[Invocation], covered_end: int, theta: int, omega: int,
                            bad: set[int] | frozenset[int] = frozenset()) -> list[Window]:
    """Every event the invocation trigger makes now, oldest first (see the module docstring)."""
    numbered = [i for i in invs if i.number > 0]
    complete = numbered[:-1]
    out: list[Window] = []
    new = [i for i in complete if i.end > covered_end]
    at = 0  # new[at:] are the invocations not yet in a window (one pass, not a new list per window)
    while len(new) - at >= theta:
        block = new[at:at + theta]
        end = block[-1].end
        if end in bad:  # a call answered after the next request began: keep the pair together
            end = safe_point(end, max(covered_end, block[0].start), numbered[-1].start, bad)
        w = make_window(invs, block[0], end, block[-1].number, omega, "invocations")
        out.append(w)
        covered_end = w.end
        at += theta
        while at < len(new) and new[at].end <= covered_end:
            at += 1
    return out
