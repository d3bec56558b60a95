"""The work in flight, kept after a compaction (docs/concepts/handoff.md#the-work-in-flight): when the
transcript ends inside a tool loop, the last assistant turn and its results stay verbatim after the
continuation, so the next call sees the result it asked for instead of calling again. Which records form it
is :func:`ctxcompact.facts.handoff.in_flight_start`; this module fits them to the room the rest of the context
leaves, counted with the run's own counter and projected with its calibration (the hidden prompt and the
slope: :meth:`Calibrated.project`, exactly as the run judges the result), trimming the largest results with a
marker that says where the full text is (file and line) only by as much as needed. The threshold strategy
places the tail (:func:`plan`, then :func:`fit` again once the summary is made); ``mask`` never clears its
results; ``sliding-window`` never compacts the latest request's invocation, which holds it, and trims its
results in place when they alone keep the context over the threshold (:func:`trim_in_place`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..budget import Budget
from ..facts.handoff import in_flight_start
from ..model import Origin, Record, Role, TextBlock, ToolCall, ToolResult
from ..tokens.calibration import Calibrated
from .masking_state import MaskedResult

#: our tokens of some records, with the run's counter (the one the run judges its result with)
Count = Callable[[list[Record]], int]


@dataclass(slots=True)
class Tail:
    records: list[Record] = field(default_factory=list)  # what follows the continuation, in order
    trimmed: list[MaskedResult] = field(default_factory=list)  # results cut to fit (the state reapplies)
    start: Record | None = None  # the first record of the tail, as read

    @property
    def first_index(self) -> int:
        """The input index where the tail begins (-1 when its position in the input is unknown)."""
        s = self.start
        return s.index if s is not None and s.index >= 0 and s.offset >= 0 and s.line > 0 else -1


#: the words of the marker after a trimmed result (eval recognises a trimmed result by them)
TRIM_MARKER = "more characters of this result trimmed; the full text is in"


def trim_marker(chars: int, source: str, line: int) -> str:
    where = f"{source} line {line}" if source not in ("", "-") and line > 0 else (
        f"the transcript, line {line}" if line > 0 else "the transcript")
    return f"\n[… {chars:,} {TRIM_MARKER} {where}]"


def in_flight_records(records: Sequence[Record]) -> list[Record]:
    """The work in flight of ``records`` as read (empty when the transcript does not end inside a tool loop),
    without cleaning's closing "Understood." (the next turn is the model's answer to the results)."""
    start = in_flight_start(records)
    if start is None:
        return []
    tail = list(records[start:])
    while tail and tail[-1].origin is Origin.SYNTHETIC and tail[-1].role is Role.ASSISTANT:
        tail.pop()
    return tail


def room(cal: Calibrated, limit: int) -> int:
    """The most of our tokens a context may hold for :meth:`Calibrated.project` to stay within ``limit``
    (-1 when even an empty one would not: the hidden prompt alone is over it)."""
    if cal.project(0) > limit:
        return -1
    lo, hi = 0, max(limit, 1)
    while cal.project(hi) <= limit:  # a slope below 1 lets more than ``limit`` of ours fit
        lo, hi = hi, hi * 2
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if cal.project(mid) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return lo


def fit(tail: list[Record], space: int, count: Count, source: str) -> Tail:
    """``tail`` within ``space`` of our tokens: whole when it fits; else every result longer than a common
    length is cut to it (with the marker), the length the largest that fits (bisection on the trimmed length,
    counted with ``count``); an empty Tail when even the calls with nothing of their results do not fit."""
    if not tail:
        return Tail()
    if count(tail) <= space:
        return Tail(tail, [], tail[0])
    sizes = [len(b.text()) for r in tail if r.message is not None for b in r.message.blocks
             if isinstance(b, ToolResult)]
    if not sizes or count(_trimmed(tail, 0, source)[0]) > space:
        return Tail()
    lo, hi = 0, max(sizes) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(_trimmed(tail, mid, source)[0]) <= space:
            lo = mid
        else:
            hi = mid - 1
    records, trimmed = _trimmed(tail, lo, source)
    return Tail(records, trimmed, tail[0])


@dataclass(slots=True)
class Plan:
    """Where the work in flight goes before the summary is made: the tail (whole, or trimmed to what is left
    after a summary of ``summary`` tokens), the ceiling the compacted context is fitted under (the threshold,
    or the window when the threshold cannot hold it) and the summary's share, in our tokens."""

    tail: Tail
    ceiling: int
    summary: int


def plan(tail: list[Record], fixed: int, summary: int, least: int, budget: Budget, cal: Calibrated,
         count: Count, source: str, most: int | None = None) -> Plan:
    """Where the tail goes (docs/concepts/handoff.md#the-work-in-flight). ``fixed``: what the compacted
    context holds besides the summary and the tail; ``summary``: the summary's budget, ``least``: the least
    it may shrink to; ``most``: what the compacted context must stay under (the context it replaces), all in
    our tokens, projected with ``cal`` as the run judges its result. The first of these that fits:

    1. the tail whole, the summary giving way to it (by at most the tail's size, never below ``least``) so
       the context stays under the threshold (over it only as far as the summary's own budget already was:
       the hidden prompt nearly fills the threshold); else the tail whole under the window, the summary
       shrinking towards ``least`` as far as the tail needs (the next call compacts again);
    2. the results trimmed, with the summary's whole budget, under the threshold;
    3. the same under the window, then with the summary at ``least``;
    4. no tail (even the calls do not fit): the turn is summarized like the rest.
    """
    ceilings = _ceilings(budget)
    if not tail:
        return Plan(Tail(), ceilings[0], summary)

    def space(ceiling: int) -> int:
        return min(room(cal, ceiling), most if most is not None else ceiling * 64) - fixed

    thr, win = space(ceilings[0]), space(budget.window)
    whole = count(tail)
    given = summary - min(whole, max(0, summary + whole - thr))
    if given >= least and given + whole <= win:
        return Plan(Tail(tail, [], tail[0]), budget.window, given)
    if min(summary, win - whole) >= least:
        return Plan(Tail(tail, [], tail[0]), budget.window, min(summary, win - whole))
    tries = [(ceilings[0], summary)] if thr >= summary else []
    for ceiling, share in [*tries, (budget.window, summary), (budget.window, least)]:
        fitted = fit(tail, space(ceiling) - share, count, source)
        if fitted.records:
            return Plan(fitted, ceiling, share)
    return Plan(Tail(), ceilings[0], summary)


def trim_in_place(records: list[Record], budget: Budget, source: str, cal: Calibrated, count: Count, *,
                  under_threshold: bool = False,
                  headroom: int = 0) -> tuple[list[Record], list[MaskedResult]]:
    """``records`` with the results of the work in flight trimmed only as much as the context needs, left
    where they are (a strategy that keeps the tail in place: ``sliding-window``, ``mask``), and the results
    trimmed (for the state's masking, so later runs show the same text); ``records`` unchanged when nothing
    needs trimming or even trimming cannot fit. As :func:`plan`: a tail that fits the window whole stays
    whole (unless ``under_threshold``: ``mask`` must end under the threshold), else it is trimmed to fit
    ``headroom`` tokens below the threshold (``mask``, which never summarizes, leaves the summary's budget
    free there for the next turns), else the threshold, else the window."""
    tail = in_flight_records(records)
    if not tail:
        return records, []
    at = next(i for i, r in enumerate(records) if r is tail[0])
    rest = count([*records[:at], *records[at + len(tail):]])
    fitted = fit_in_place(tail, rest, budget, source, cal, count, under_threshold=under_threshold,
                          headroom=headroom)
    if fitted is None:
        return records, []
    return [*records[:at], *fitted.records, *records[at + len(tail):]], fitted.trimmed


def fit_in_place(tail: list[Record], rest: int, budget: Budget, source: str, cal: Calibrated, count: Count, *,
                 under_threshold: bool = False, headroom: int = 0) -> Tail | None:
    """:func:`trim_in_place`'s tail (the work in flight), the rest of the context counting ``rest``: the
    tail with its results trimmed, or None where it stays as it is (it fits whole, or even trimming cannot
    fit it)."""
    if not under_threshold and rest + count(tail) <= room(cal, budget.window):
        return None
    ceilings = _ceilings(budget)
    if headroom > 0 and len(ceilings) > 1 and ceilings[0] - headroom > 0:
        ceilings.insert(0, ceilings[0] - headroom)
    for ceiling in ceilings:
        fitted = fit(tail, room(cal, ceiling) - rest, count, source)
        if fitted.records:
            return fitted if fitted.trimmed else None
    return None


def _ceilings(budget: Budget) -> list[int]:
    """What a compacted context is fitted under, in order: just below the threshold (a context at the
    threshold compacts again: ``Budget.would_compact``), then the window."""
    if budget.threshold and budget.threshold <= budget.window:
        return [budget.threshold - 1, budget.window]
    return [budget.window]


def _trimmed(tail: list[Record], cap: int, source: str) -> tuple[list[Record], list[MaskedResult]]:
    """``tail`` with every result longer than ``cap`` characters cut to ``cap`` and the marker after it."""
    names = {b.id: b.name for r in tail if r.message is not None for b in r.message.blocks
             if isinstance(b, ToolCall)}
    out = list(tail)
    trimmed: list[MaskedResult] = []
    for i, rec in enumerate(tail):
        msg = rec.message
        if msg is None or not any(isinstance(b, ToolResult) and len(b.text()) > cap for b in msg.blocks):
            continue
        blocks = []
        for b in msg.blocks:
            size = len(b.text()) if isinstance(b, ToolResult) else 0
            if not isinstance(b, ToolResult) or size <= cap:
                blocks.append(b)
                continue
            text = b.text()[:cap].rstrip() + trim_marker(size - cap, source, rec.line)
            blocks.append(dataclasses.replace(b, content=[TextBlock(text)]))
            trimmed.append(MaskedResult(call_id=b.call_id, placeholder=text,
                                        tool=names.get(b.call_id) or b.name, index=rec.index, chars=size))
        out[i] = dataclasses.replace(rec, message=dataclasses.replace(msg, blocks=blocks), dirty=True)
    return out, trimmed
