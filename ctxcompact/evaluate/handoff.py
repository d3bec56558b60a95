"""What `eval` checks of the handoff (docs/guides/eval.md#the-handoff): whether the next call sees the work in
flight, where the latest request stands and the assistant's answer to it, and the earlier summaries the
original carried. Each is read from the original records by the rule ``run`` itself follows (one
implementation: :mod:`ctxcompact.facts.handoff` for the request's status and the work in flight,
:mod:`ctxcompact.facts.earlier` for earlier summaries) and looked up in what the next call sees
(:class:`scores.Compared`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..facts import earlier, handoff
from ..facts.text import latest_request_record
from ..model import OpaqueBlock, Record, Role, TextBlock
from ..strategies.tail import TRIM_MARKER
from .scores import Compared

#: a trimmed result of the work in flight is recognised by its beginning and the marker after it
TRIMMED_HEAD = 200
#: an earlier summary is carried when this share of its lines (the non-trivial ones) is in the next context
CARRIED_SHARE = 0.9
_MIN_LINE = 20  # shorter lines ("---", "Summary:") say nothing on their own


def in_flight(records: Sequence[Record]) -> tuple[list[Record], list[Record]]:
    """The work in flight (:func:`ctxcompact.facts.handoff.in_flight_start`) as (the records of the last
    assistant turn that made calls, the results that came back); both empty when the transcript ends on
    anything else (a reply, a request). Earlier steps of the loop are history, not in flight."""
    start = handoff.in_flight_start(records)
    if start is None:
        return [], []
    tail = [r for r in records[start:] if r.message is not None]
    calls = [r for r in tail if r.message.role is Role.ASSISTANT and r.message.tool_calls()]  # type: ignore[union-attr]
    results = [r for r in tail if r.message.tool_results() and not r.message.tool_calls()]  # type: ignore[union-attr]
    return calls, results


def in_flight_score(c: Compared) -> dict[str, Any]:
    """``open``: the original ends inside a tool loop; ``present``: every call of that last turn and every
    result that came back is in what the next call sees (a result by its full text, a call by its
    arguments), so the model does not ask again."""
    calls, results = in_flight(c.original)
    if not calls:
        return {"open": False, "calls": 0, "results": 0, "present": None}
    call_blocks = [b for r in calls for b in r.message.tool_calls()]  # type: ignore[union-attr]
    result_blocks = [b for r in results for b in r.message.tool_results()]  # type: ignore[union-attr]
    answered = {b.call_id for b in result_blocks}
    texts = [b.text for r in result_blocks for b in r.content if isinstance(b, TextBlock) and b.text.strip()]
    calls_there = all(c.has(b.arguments) or (not b.arguments and c.has(b.name)) for b in call_blocks)
    missing = [t for t in texts if not c.has(t)]
    # too large for the tail's share: trimmed, its beginning kept before the marker (strategies.tail)
    trimmed = sum(c.has(t[:TRIMMED_HEAD]) for t in missing) if TRIM_MARKER in c.text else 0
    return {
        "open": True,
        "calls": len(call_blocks),
        "results": len(result_blocks),
        "pending": sum(b.id not in answered for b in call_blocks),
        "present": calls_there and not missing,
        "trimmed": trimmed,  # results kept only in part, with the marker saying where the full text is
        "fits": not trimmed,  # the turn fitted its share whole (the target counts these calls)
    }


def request_status(records: Sequence[Record]) -> tuple[str | None, str | None]:
    """Where the latest request stands at the end of the transcript (:func:`ctxcompact.facts.handoff.
    request_status`: ``answered``, ``in_progress``, ``interrupted``) and the assistant's answer when it was
    answered; None without a request."""
    if latest_request_record(records) is None:
        return None, None
    status = handoff.request_status(records)
    return status.status, status.answer


def request_status_score(c: Compared) -> dict[str, Any]:
    """The status the original shows, and for an answered request whether the answer is in what the next call
    sees in full (so the agent does not redo the work it reported)."""
    status, answer = request_status(c.original)
    return {"status": status, "answer_visible": None if answer is None else c.has(answer)}


def _opaque_payloads(records: Sequence[Record]) -> list[Any]:
    return [b.raw for r in earlier.opaque_records(records) if r.message is not None
            for b in r.message.blocks if isinstance(b, OpaqueBlock)]


def earlier_summaries_score(c: Compared) -> dict[str, Any]:
    """Each earlier summary (:func:`ctxcompact.facts.earlier.earlier_summaries`: every kind a parser flags,
    and ctxcompact's own written back by a framework) is carried when :data:`CARRIED_SHARE` of its lines are
    in the next context; an encrypted one when the next context holds it as it was. ``line_share`` is the
    share of the readable ones' lines; ``sources`` who wrote them."""
    found = earlier.earlier_summaries(c.original)
    readable = [s for s in found if not s.opaque]
    opaque = _opaque_payloads(c.original)  # each encrypted one, also one nested in a readable one
    kept_opaque = _opaque_payloads(c.compacted.records)
    total = kept = carried = 0
    for s in readable:
        lines = [ln.strip() for ln in s.text.splitlines() if len(ln.strip()) >= _MIN_LINE]
        hit = sum(c.has(ln) for ln in lines)
        total, kept = total + len(lines), kept + hit
        carried += not lines or hit >= CARRIED_SHARE * len(lines)
    carried += sum(p in kept_opaque for p in opaque)
    return {"found": len(readable) + len(opaque), "carried": carried, "opaque": len(opaque),
            "sources": sorted({s.source for s in found} | ({"openai"} if opaque else set())),
            "line_share": round(kept / total, 4) if total else None}


def handoff_scores(c: Compared) -> dict[str, Any]:
    """The handoff part of `eval --json`: ``in_flight``, ``request``, ``earlier_summaries``."""
    return {"in_flight": in_flight_score(c), "request": request_status_score(c),
            "earlier_summaries": earlier_summaries_score(c)}
