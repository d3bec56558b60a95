"""The naive baseline a compaction is measured against: truncation (README "Measuring a compaction:
ctxcompact eval"). Drop the oldest records until the context fits the same token budget, keeping the system
records and never separating a tool call from its result."""

from __future__ import annotations

from collections.abc import Callable

from ..model import Record, Role, Transcript


def units(records: list[Record]) -> list[list[Record]]:
    """The non-system records in droppable units: a record, and with a record that calls tools every record
    up to the one that answers its last call (results carry no meaning without their calls)."""
    out: list[list[Record]] = []
    pending: set[str] = set()
    for rec in records:
        if rec.message is not None and rec.message.role is Role.SYSTEM:
            continue
        if pending and out:
            out[-1].append(rec)
        else:
            out.append([rec])
        if rec.message is not None:
            pending |= {c.id for c in rec.message.tool_calls()}
            pending -= {r.call_id for r in rec.message.tool_results()}
    return out


def truncate(transcript: Transcript, budget: int, tokens_of: Callable[[list[Record]], int]) -> Transcript:
    """The transcript with its oldest units dropped until ``tokens_of`` (the run's calibrated count) is at
    most ``budget``; the system records always stay, so the result may stay over a budget smaller than they
    are."""
    records = transcript.records
    system = [r for r in records if r.message is not None and r.message.role is Role.SYSTEM]
    rest = units(records)

    def kept_from(first: int) -> list[Record]:
        keep = {id(r) for r in system} | {id(r) for u in rest[first:] for r in u}
        return [r for r in records if id(r) in keep]  # in the transcript's order

    # Dropping a unit never adds tokens, so "over the budget" holds for a prefix of the starts: the first
    # start that fits is found by bisection (log U recounts; one recount per dropped unit was quadratic on
    # a long session)
    lo, hi = 0, len(rest)
    while lo < hi:
        mid = (lo + hi) // 2
        if tokens_of(kept_from(mid)) > budget:
            lo = mid + 1
        else:
            hi = mid
    start = lo
    return Transcript(transcript.format, kept_from(start), transcript.source)
