"""The context with the sliding window's events applied (docs/guides/strategies.md#sliding-window): each
visible event's range replaced by its summary (the context rule in strategies/sliding_window.py's
docstring), and every input record known again from what the events dropped."""

from __future__ import annotations

import bisect
import collections
import dataclasses
from typing import Any

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


def is_ours(rec: Record) -> bool:
    return rec.origin is Origin.SUMMARY and META_KEY in rec.meta




def apply_events(records: list[Record], state: State, fmt_name: str) -> list[Record]:
    """Replace each visible event's range by its summary (the rule in the module docstring).

    Events whose range ends at or before the watermark are covered by the threshold summary instead. The
    records dropped are kept on the summary records' meta, so the strategy can summarize an overlap
    again without re-reading the input."""
    own = state.section(WindowEvents)
    events = own.events if own is not None else []
    order = [i for i in visible_events(events) if events[i].end > state.watermark]
    if not order:
        return records
    fmt = get_format(fmt_name)
    dropped: list[Record] = []
    out: list[Record] = []
    pending = collections.deque(order)
    # the visible ranges merged: whether an index is covered is one bisect (not a scan of every event)
    merged: list[list[int]] = []
    for i in order:  # ordered by start
        e = events[i]
        if merged and e.start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e.end)
        elif e.start < e.end:
            merged.append([e.start, e.end])
    merged_starts = [m[0] for m in merged]
    last_dropped = False
    for rec in records:
        if is_ours(rec):
            continue  # an earlier rendering; regenerated below
        if anchor(rec):
            while pending and events[pending[0]].start <= rec.index:
                out.extend(event_records(fmt, events[pending.popleft()], [], dropped))
            k = bisect.bisect_right(merged_starts, rec.index) - 1
            covered = k >= 0 and rec.index < merged[k][1]
            last_dropped = covered and (rec.message is None or rec.message.role is not Role.SYSTEM)
            if last_dropped:
                dropped.append(rec)
                continue
        elif last_dropped and rec.origin is Origin.SYNTHETIC:
            continue  # cleaning's answer to a call that is now summarized
        out.append(rec)
    for i in pending:
        out.extend(event_records(fmt, events[i], [], dropped))
    if fmt.layout.alternate:
        out = alternate_acks(out, fmt)
    return out


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
    out: list[Record] = []
    nxt_at: list[Record | None] = [None] * len(records)  # the next record with a message, from the right
    following: Record | None = None
    for i in range(len(records) - 1, -1, -1):
        nxt_at[i] = following
        if records[i].message is not None:
            following = records[i]
    for i, rec in enumerate(records):
        out.append(rec)
        if not is_ours(rec) or rec.message is None or rec.message.role is not Role.USER:
            continue
        nxt = nxt_at[i]
        if nxt is not None and nxt.message is not None and nxt.message.role is Role.USER:
            out.append(new_record(fmt.make_message(Role.ASSISTANT, ACK_TEXT), Origin.SUMMARY,
                                  {META_KEY: {"ack": True}}))
    return out


def full_view(records: list[Record]) -> list[Record]:
    """Every input record known: the context's and those the events dropped, in input order."""
    by_index: dict[int, Record] = {}
    for rec in records:
        if is_ours(rec):
            for d in rec.meta[META_KEY].get("dropped", []):
                by_index.setdefault(d.index, d)
    out: list[Record] = []
    extra = sorted(by_index.values(), key=lambda r: r.index)
    j = 0
    for rec in records:
        if is_ours(rec) or rec.origin in (Origin.SUMMARY, Origin.CONTINUATION):
            continue
        if anchor(rec):
            while j < len(extra) and extra[j].index < rec.index:
                out.append(extra[j])
                j += 1
            while j < len(extra) and extra[j].index == rec.index:
                j += 1
        out.append(rec)
    out.extend(extra[j:])
    return out
