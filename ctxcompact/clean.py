"""Cleaning (docs/reference/cli.md#ctxcompact-clean-file): make a transcript valid input for its target API,
reporting every repair. The repairs themselves, and the order they are made in, are clean_part.py's
(:class:`~ctxcompact.clean_part.PartCleaner`); this module feeds them: :class:`Cleaner` a record at a time,
handing out the parts that have settled, and :func:`clean` the whole transcript through it.

Cleaning is idempotent: a cleaned transcript comes back unchanged with no repairs.
"""

from __future__ import annotations

import dataclasses

from .call_ids import CallIds
from .clean_part import Carry, PartCleaner
from .formats.base import Layout
from .model import Record, Role, ToolResult, Transcript
from .repairs import (  # noqa: F401 - the names cleaning is known by
    CONTINUES,
    MOVED_SYSTEM,
    NO_RESPONSE,
    REPAIR_KINDS,
    UNDERSTOOD,
    CleanResult,
    Repair,
    context_blocks,
    ends_on_result,
    renamed_call,
    renamed_result,
    results_first,
    user_message,
)


def clean(
    transcript: Transcript, layout: Layout | None = None, *, close_trailing: bool = True
) -> CleanResult:
    """Repair ``transcript`` for its format's API (docs/reference/cli.md#ctxcompact-clean-file); ``layout``
    defaults to its format's.

    ``close_trailing=False`` leaves a trailing tool result unanswered instead of appending ``Understood.``:
    what a before-model hook wants right after tools ran, when the model's next turn is the answer."""
    if layout is None:
        from .formats import get_format  # late: the registry imports every format module

        layout = get_format(transcript.format).layout
    cleaner = Cleaner(layout, transcript.format, source=transcript.source, close_trailing=close_trailing)
    out: list[Record] = []
    for rec in transcript.records:
        out.extend(cleaner.feed(rec))
    done = cleaner.finish()
    if not out:
        return CleanResult(dataclasses.replace(transcript, records=done.transcript.records), done.repairs)
    return CleanResult(dataclasses.replace(transcript, records=out + done.transcript.records), done.repairs)


_NEVER = 1 << 62


class Cleaner:
    """The cleaner fed one record at a time (docs/measurements/performance.md#a-hooks-call): ``feed`` returns
    the records of a part of the transcript that is settled (cleaning the whole transcript could not change
    them), ``finish`` cleans the rest and makes the repairs the end calls for (the synthetic result of a
    pending call, the reply after a trailing tool result). :func:`clean` is this cleaner run over every
    record, so a caller that streams gets exactly what cleaning the whole transcript gives.

    A part settles only where nothing later can reach back into it: cleaning it (with what the parts before
    left: their call ids) repairs nothing and answers every call with a result after it, and the next
    message is of another role, carries no tool result and is not a system message (it cannot be merged into
    the part, answer one of its calls, or become a user turn beside it); lines before the first message
    settle at any line (nothing moves before them, so a log's lines hidden by its compaction are not held).
    The test of a part costs its length, and a part that does not settle is tested again only once it has
    doubled (never again when its repair is one no later record can undo): linear in all."""

    FIRST_TRY = 64  # records
    FIRST_TRY_BYTES = 1 << 20  # or this many bytes of input lines, whichever comes first (large results)

    def __init__(self, layout: Layout, fmt: str, *, source: str = "-", close_trailing: bool = True,
                 calls: CallIds | None = None) -> None:
        self.layout, self.format, self.source, self.close_trailing = layout, fmt, source, close_trailing
        self.held: list[Record] = []
        self.held_bytes = 0
        self.carry = Carry(calls if calls is not None else CallIds())  # (``calls``: a reading's, shared)
        self.next_try, self.next_bytes = self.FIRST_TRY, self.FIRST_TRY_BYTES
        self.last_role: Role | None = None
        self.settled = 0  # records handed out by feed

    def feed(self, rec: Record) -> list[Record]:
        out: list[Record] = []
        msg = rec.message
        due = len(self.held) >= self.next_try or self.held_bytes >= self.next_bytes
        if msg is not None:
            if (due and self.last_role is not None and msg.role != self.last_role
                    and msg.role is not Role.SYSTEM
                    and not any(isinstance(b, ToolResult) for b in msg.blocks)):
                out = self._settle()
            self.last_role = msg.role
        elif due and self.last_role is None:  # no message yet (a log's lines before its compaction boundary)
            out = self._settle()
        self.held.append(rec)
        self.held_bytes += len(rec.raw) if rec.raw is not None else 0
        return out

    def _settle(self) -> list[Record]:
        part = PartCleaner(Transcript(self.format, self.held, self.source), self.layout, close_trailing=False,
                        carry=self.carry)
        result = part.run()
        if (result.repairs or any(c.result is None for c in part.calls)
                or any((c.result.pos, c.result.bi) < (c.pos, c.bi) for c in part.calls if c.result)):
            # a pending call may be answered, an early result's call may come, a call answered by a result
            # before it may yet be answered by one after it (which takes it first): try again once doubled;
            # any other repair stays whatever follows, so the part never settles
            transient = all(r.kind in ("missing_result", "orphan_result") for r in result.repairs)
            self.next_try = 2 * len(self.held) if transient else _NEVER
            self.next_bytes = 2 * self.held_bytes if transient else _NEVER
            return []
        for c in part.calls:
            self.carry.calls.add_call(c.new_id)
        self.carry.started = self.carry.started or any(
            r.message is not None and r.message.role is not Role.SYSTEM for r in self.held)
        self.settled += len(self.held)
        self.held, self.held_bytes = [], 0
        self.next_try, self.next_bytes = self.FIRST_TRY, self.FIRST_TRY_BYTES
        return result.transcript.records

    def carried(self) -> tuple[CallIds, bool, int]:
        """What the settled parts so far leave to the rest (their call ids, whether the conversation has
        begun, how many records they held): all a cleaner fed the records after them needs of them."""
        return self.carry.calls, self.carry.started, self.settled

    def resume(self, calls: CallIds, started: bool, settled: int) -> None:
        """Start after settled parts that left :meth:`carried` (a reader resuming after a prefix it proved
        unchanged): fed the records after them, it hands out what feeding every record would. ``calls`` is
        taken as it is (a copy of what they left: it grows)."""
        assert not self.held and not self.settled
        self.carry, self.settled = Carry(calls, started), settled

    def finish(self) -> CleanResult:
        """The rest of the transcript, cleaned, with every repair (settled parts had none)."""
        rest = Transcript(self.format, self.held, self.source)
        self.held = []
        return PartCleaner(rest, self.layout, close_trailing=self.close_trailing, carry=self.carry).run()


