"""The naive baselines a compaction is measured against, each given the same token budget (docs/guides/eval.md
#baselines): the *tail* (:func:`truncate`: drop the oldest records until the context fits, keeping the system
records and never separating a tool call from its result) and the *head of each message* (:func:`heads`:
every message cut to its first :data:`HEAD_CHARS` characters, then truncated the same way)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ..model import Message, Record, Role, TextBlock, Transcript, token_text

HEAD_CHARS = 200


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


def heads(transcript: Transcript, chars: int = HEAD_CHARS) -> Transcript:
    """Every non-system message as one text of its first ``chars`` characters (its token-bearing text: text,
    tool calls' names and arguments, results), in its own role; system records whole. Only to be read: the
    result is no valid transcript of its format (calls and results become text)."""
    out = []
    for rec in transcript.records:
        msg = rec.message
        if msg is None or msg.role is Role.SYSTEM:
            out.append(rec)
            continue
        text = "\n".join(token_text(msg)[0])[:chars]
        out.append(dataclasses.replace(rec, message=Message(msg.role, [TextBlock(text)]), dirty=True))
    return Transcript(transcript.format, out, transcript.source)
