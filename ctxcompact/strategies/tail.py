"""The work in flight, kept after a compaction (docs/concepts/handoff.md#the-work-in-flight): when the
transcript ends inside a tool loop, the last assistant turn and its results stay verbatim after the
continuation, so the next call sees the result it asked for instead of calling again. Which records form it
is :func:`ctxcompact.facts.handoff.in_flight_start`; this module fits them to their share of the budget,
trimming the largest results with a marker that says where the full text is (file and line). The threshold
strategy places the tail; ``mask`` never clears its results; ``sliding-window`` never compacts the latest
request's invocation, which holds it, and trims its results in place when they alone keep the context over the
window (:func:`trim_in_place`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..budget import Budget
from ..facts.handoff import in_flight_start
from ..model import Origin, Record, Role, TextBlock, ToolCall, ToolResult, message_chars
from .masking_state import MaskedResult


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


def tail_budget(budget: Budget) -> int:
    """Characters the tail may take: a quarter of the tokens the threshold leaves after the summary's budget,
    at 4 characters a token (so the compacted context stays far below the threshold whatever the correction
    factor), and never less than a quarter of the summary's own budget."""
    room = (budget.threshold or budget.window) - budget.summary_budget
    return max(room, budget.summary_budget, 0)


#: the words of the marker after a trimmed result (eval recognises a trimmed result by them)
TRIM_MARKER = "more characters of this result trimmed; the full text is in"


def trim_marker(chars: int, source: str, line: int) -> str:
    where = f"{source} line {line}" if source not in ("", "-") and line > 0 else (
        f"the transcript, line {line}" if line > 0 else "the transcript")
    return f"\n[… {chars:,} {TRIM_MARKER} {where}]"


def in_flight(records: Sequence[Record], budget: Budget, source: str) -> Tail:
    """The tail of ``records`` to keep verbatim, fitted to :func:`tail_budget` (an empty Tail when there is
    no work in flight, or when even its calls alone do not fit)."""
    start = in_flight_start(records)
    if start is None:
        return Tail()
    tail = list(records[start:])
    while tail and tail[-1].origin is Origin.SYNTHETIC and tail[-1].role is Role.ASSISTANT:
        tail.pop()  # cleaning's closing "Understood.": the next turn is the model's answer to the results
    limit = tail_budget(budget)
    results = [(i, b) for i, r in enumerate(tail) if r.message is not None
               for b in r.message.blocks if isinstance(b, ToolResult)]
    total = sum(message_chars(r.message) for r in tail if r.message is not None)
    if total <= limit:
        return Tail(tail, [], tail[0])
    sizes = [len(b.text()) for _, b in results]
    fixed = total - sum(sizes)
    room = limit - fixed - 200 * len(results)  # each trimmed result also carries its marker
    if room <= 0:
        return Tail()
    cap = _water_level(sizes, room)
    names = {b.id: b.name for r in tail if r.message is not None for b in r.message.blocks
             if isinstance(b, ToolCall)}
    trimmed: list[MaskedResult] = []
    out = list(tail)
    for (i, block), size in zip(results, sizes, strict=True):
        if size <= cap:
            continue
        rec = out[i]
        text = block.text()[:cap].rstrip() + trim_marker(size - cap, source, rec.line)
        new = dataclasses.replace(block, content=[TextBlock(text)])
        assert rec.message is not None
        blocks = [new if b is block else b for b in rec.message.blocks]
        out[i] = dataclasses.replace(rec, message=dataclasses.replace(rec.message, blocks=blocks), dirty=True)
        trimmed.append(MaskedResult(call_id=block.call_id, placeholder=text,
                                    tool=names.get(block.call_id) or block.name, index=rec.index, chars=size))
    return Tail(out, trimmed, tail[0])


def trim_in_place(records: list[Record], budget: Budget,
                  source: str) -> tuple[list[Record], list[MaskedResult]]:
    """``records`` with the results of the work in flight trimmed as :func:`in_flight` trims them, left where
    they are (a strategy that keeps the tail in place: ``sliding-window``), and the results trimmed (for the
    state's masking, so later runs show the same text); ``records`` unchanged when nothing needs trimming."""
    tail = in_flight(records, budget, source)
    if not tail.trimmed:
        return records, []
    at = next(i for i, r in enumerate(records) if r is tail.start)
    return [*records[:at], *tail.records, *records[at + len(tail.records):]], tail.trimmed


def _water_level(sizes: list[int], room: int) -> int:
    """The largest cap c with sum(min(size, c)) <= room: every result keeps up to c characters."""
    lo, hi = 0, max(sizes, default=0)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(min(s, mid) for s in sizes) <= room:
            lo = mid
        else:
            hi = mid - 1
    return lo
