"""What `eval` checks of the handoff (docs/guides/eval.md#the-handoff): whether the next call sees the work in
flight, where the latest request stands and the assistant's answer to it, and the earlier summaries the
original carried. Each is read from the original records and looked up in what the next call sees
(:class:`scores.Compared`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..facts.text import is_machine_reply, latest_request_record
from ..model import Record, Role, TextBlock
from .scores import Compared

INTERRUPTED = "[Request interrupted by user"  # Claude Code's marker of a turn the person stopped
#: an earlier summary is carried when this share of its lines (the non-trivial ones) is in the next context
CARRIED_SHARE = 0.9
_MIN_LINE = 20  # shorter lines ("---", "Summary:") say nothing on their own


def _messages(records: Sequence[Record]) -> list[Record]:
    return [r for r in records if r.message is not None and r.message.role is not Role.SYSTEM]


def _is_results_only(rec: Record) -> bool:
    msg = rec.message
    return msg is not None and bool(msg.tool_results()) and not msg.tool_calls() and not any(
        isinstance(b, TextBlock) and b.text.strip() for b in msg.blocks)


def in_flight(records: Sequence[Record]) -> tuple[list[Record], list[Record]]:
    """The work in flight when the transcript ends inside a tool loop: the last assistant turn's records that
    made calls (one model response: parallel calls are several records in some formats) with no text answer
    after them, and the results that came back, as (calls, results); both empty when the transcript ends on
    anything else (a reply, a request). Earlier steps of the loop are history, not in flight."""
    calls: list[Record] = []
    results: list[Record] = []
    for rec in reversed(_messages(records)):
        msg = rec.message
        assert msg is not None
        if msg.role is Role.ASSISTANT and not msg.tool_calls() and not msg.text().strip():
            continue  # a thinking-only or empty split record of the same turn
        if _is_results_only(rec) and not calls:
            results.append(rec)
        elif msg.role is Role.ASSISTANT and msg.tool_calls():
            calls.append(rec)
        else:
            break  # a text answer, a request, or the results of the step before
    if not calls:
        return [], []
    return calls[::-1], results[::-1]


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
    present = all(c.has(b.arguments) or (not b.arguments and c.has(b.name)) for b in call_blocks) and all(
        c.has(t) for b in result_blocks for t in _result_texts(b.content) if t.strip())
    return {
        "open": True,
        "calls": len(call_blocks),
        "results": len(result_blocks),
        "pending": sum(b.id not in answered for b in call_blocks),
        "present": present,
    }


def _result_texts(content: Sequence[Any]) -> list[str]:
    out: list[str] = []
    for b in content:
        if isinstance(b, TextBlock):
            out.append(b.text)
    return out


def request_status(records: Sequence[Record]) -> tuple[str | None, Record | None]:
    """Where the latest request stands at the end of the transcript, and the assistant's answer if it was
    answered: ``interrupted`` (the person stopped the turn after it), ``answered`` (the assistant replied in
    text after it and nothing is in flight), ``in_progress`` (anything else: calls pending or results not
    yet answered); None without a request."""
    req = latest_request_record(records)
    if req is None:
        return None, None
    after = _messages(records[[id(r) for r in records].index(id(req)) + 1:])
    if any(_interrupts(r) for r in after):
        return "interrupted", None
    calls, _ = in_flight(records)
    if calls:
        return "in_progress", None
    for rec in reversed(after):
        msg = rec.message
        assert msg is not None
        if msg.role is Role.ASSISTANT and msg.text().strip() and not is_machine_reply(rec):
            return "answered", rec
    return "in_progress", None


def _interrupts(rec: Record) -> bool:
    msg = rec.message
    return msg is not None and msg.role is Role.USER and any(
        isinstance(b, TextBlock) and b.text.lstrip().startswith(INTERRUPTED) for b in msg.blocks)


def request_status_score(c: Compared) -> dict[str, Any]:
    """The status the original shows, and for an answered request whether the answer is in what the next call
    sees in full (so the agent does not redo the work it reported)."""
    status, answer = request_status(c.original)
    return {
        "status": status,
        "answer_visible": None if answer is None else c.has(answer.message.text().strip()),  # type: ignore[union-attr]
    }


def earlier_summaries(records: Sequence[Record]) -> list[Record]:
    """Summaries the original holds from earlier compactions, as its format marks them: Claude Code's
    ``isCompactSummary`` line, Codex's ``compacted`` record, an ADK compaction event."""
    return [r for r in records if r.message is not None
            and (r.meta.get("compact_summary") or r.meta.get("compaction"))]


def earlier_summaries_score(c: Compared) -> dict[str, Any]:
    """Each earlier summary is carried when :data:`CARRIED_SHARE` of its lines are in the next context;
    ``line_share`` is the share over all of them."""
    found = earlier_summaries(c.original)
    total = kept = carried = 0
    for rec in found:
        lines = [ln.strip() for ln in rec.message.text().splitlines() if len(ln.strip()) >= _MIN_LINE]  # type: ignore[union-attr]
        hit = sum(c.has(ln) for ln in lines)
        total, kept = total + len(lines), kept + hit
        carried += not lines or hit >= CARRIED_SHARE * len(lines)
    return {"found": len(found), "carried": carried,
            "line_share": round(kept / total, 4) if total else None}


def handoff_scores(c: Compared) -> dict[str, Any]:
    """The handoff part of `eval --json`: ``in_flight``, ``request``, ``earlier_summaries``."""
    return {"in_flight": in_flight_score(c), "request": request_status_score(c),
            "earlier_summaries": earlier_summaries_score(c)}
