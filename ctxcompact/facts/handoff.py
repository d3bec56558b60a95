"""What the next model call needs to continue (docs/concepts/handoff.md): whether the latest request is done,
the work in flight, and the instructions in force. Pure functions over records.

- :func:`request_status`: ``answered`` (the assistant replied after the latest request, nothing pending),
  ``in_progress`` (no reply yet, or the last turn made calls), ``interrupted`` (the client's own interruption
  marker ends the turn), with the assistant's latest answer when it is ``answered``.
- :func:`in_flight_start`: where the work in flight begins: the last assistant turn, when it made tool calls
  and nothing but their results (or nothing: the calls are pending) follows it. Every strategy keeps these
  records verbatim (threshold after the continuation, mask never clears their results, sliding-window never
  compacts the latest request's invocation).
- :func:`instructions_in_force`: the text a client expanded from an active skill or slash command (Claude
  Code's ``isMeta`` expansion), marked as not typed by the user.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..model import (
    INSTRUCTIONS,
    INTERRUPTED,
    Origin,
    Record,
    Role,
    TextBlock,
    ThinkingBlock,
    is_interruption_message,
)
from .seen import Kind, Seen, scan, seen
from .text import (
    ANSWERED,
    IN_PROGRESS,
    INTERRUPTED_STATUS,
    is_machine_reply,
    latest_request_record,
    strip_injected,
)


@dataclass(frozen=True, slots=True)
class RequestStatus:
    status: str  # ANSWERED, IN_PROGRESS or INTERRUPTED_STATUS
    answer: str | None = None  # the assistant's latest answer, when ANSWERED


def _is_result(rec: Record) -> bool:
    msg = rec.message
    return msg is not None and (msg.role is Role.TOOL or (msg.role is Role.USER and msg.is_tool_result_only))


def is_interruption(rec: Record) -> bool:
    """The client's interruption marker: flagged by the parser, or a user message made only of the whole
    marker text (a log converted from Claude Code)."""
    if rec.meta.get(INTERRUPTED):
        return True
    return rec.message is not None and is_interruption_message(rec.message)


def _is_noise(record: Record | Seen) -> bool:
    """A record that neither answers nor asks: no message, a user line no person typed (reminders, command
    output, hook text), a reply no model wrote, ctxcompact's own summary and continuation."""
    view = seen(record)
    rec, msg = view.rec, view.msg
    if msg is None or rec.origin in (Origin.SUMMARY, Origin.CONTINUATION):
        return True
    if msg.role is Role.SYSTEM:
        return True
    if msg.role is Role.USER and not msg.is_tool_result_only and view.typed is None:
        return True
    # a reply no model wrote: Claude Code's <synthetic> notices, cleaning's "Understood." after a closed call
    return msg.role is Role.ASSISTANT and (view.machine or rec.origin is Origin.SYNTHETIC)


def _assistant_text(rec: Record) -> str:
    msg = rec.message
    if msg is None:
        return ""
    return "\n".join(b.text for b in msg.blocks if isinstance(b, TextBlock) and b.text.strip()).strip()


def request_status(records: Sequence[Record]) -> RequestStatus:
    """The state of the latest request, read from the records after it (the module docstring)."""
    latest = latest_request_record(records)
    start = 0
    if latest is not None:
        start = next(i for i, r in enumerate(records) if r is latest) + 1
    after = records[start:]
    answer: list[str] = []
    for rec in reversed(after):
        if status_stops(rec):
            if is_interruption(rec) and not answer:
                return RequestStatus(INTERRUPTED_STATUS)
            break  # the assistant replied after the interruption; a result the model has not answered
            # yet; calls in flight
        if not _is_noise(rec):
            text = _assistant_text(rec)
            if text:
                answer.append(text)
    if answer:
        return RequestStatus(ANSWERED, "\n\n".join(reversed(answer)))
    return RequestStatus(IN_PROGRESS)


def status_stops(rec: Record) -> bool:
    """Whether :func:`request_status`, reading back from the end, stops at ``rec``: an interruption, or
    anything but noise, an assistant's text and its thinking (the records before it do not matter)."""
    return stops_and_skips(rec)[0]


def flight_skips(rec: Record) -> bool:
    """A record :func:`in_flight_start` reads past, back from the end, to the turn whose calls are in
    flight: a result, or noise that is not an interruption."""
    return stops_and_skips(rec)[1]


def stops_and_skips(record: Record | Seen) -> tuple[bool, bool]:
    """:func:`status_stops` and :func:`flight_skips` of a record, whether it is noise and an interruption
    worked out once for both (the conversation reader asks both of every record, as a :class:`.seen.Seen`
    whose typed text and calls its other tests share)."""
    view = seen(record)
    rec = view.rec
    interrupted, noise = is_interruption(rec), _is_noise(view)
    skips = _is_result(rec) or (noise and not interrupted)
    if interrupted:
        return True, skips
    if noise:
        return False, skips
    msg = view.msg
    assert msg is not None
    if msg.role is not Role.ASSISTANT or view.calls:
        return True, skips
    return not _assistant_text(rec) and not all(isinstance(b, ThinkingBlock) for b in msg.blocks), skips


def turn_goes_on(rec: Record) -> bool:
    """A record that may belong to the same model turn as the one after it (a format that writes a turn as
    a line per block): an assistant message a model wrote, or an input line with no message."""
    msg = rec.message
    if msg is None:
        return rec.origin is Origin.INPUT
    return msg.role is Role.ASSISTANT and not is_machine_reply(rec)


def in_flight_start(records: Sequence[Record]) -> int | None:
    """The position in ``records`` of the first record of the work in flight (the last assistant turn, when
    it made tool calls and only their results, pending or there, follow it), or None."""
    i = len(records) - 1
    while i >= 0 and flight_skips(records[i]):
        i -= 1
    if i < 0:
        return None
    msg = records[i].message
    if msg is None or msg.role is not Role.ASSISTANT or not msg.tool_calls():
        return None
    # one model turn may span several lines (split turns: a line per block, results after the last call)
    while i > 0 and turn_goes_on(records[i - 1]):
        i -= 1
    while i < len(records) and records[i].message is None:
        i += 1  # the tail begins at a message
    return i


class FlightScan:
    """:func:`in_flight_start` of records read in order without holding them all (``strategies.mask``'s
    streamed masking): only the records from the last *wall* (not :func:`turn_goes_on`, not an assistant
    message with calls) before the last record :func:`flight_skips` does not pass are kept. Reading back
    from the end, ``in_flight_start`` stops at that record, then at the latest after the wall; so on the
    records kept it gives what it gives on all of them (a tool loop keeps its last call and results)."""

    def __init__(self) -> None:
        self.kept: list[Record] = []
        self.first = 0  # the position of kept[0] among every record read
        self.wall = -1  # the position in ``kept`` of the last wall

    def add(self, rec: Record) -> None:
        if not flight_skips(rec) and self.wall > 0:
            del self.kept[:self.wall]
            self.first += self.wall
            self.wall = 0
        msg = rec.message
        calls = msg is not None and msg.role is Role.ASSISTANT and bool(msg.tool_calls())
        if not turn_goes_on(rec) and not calls:
            self.wall = len(self.kept)
        self.kept.append(rec)

    def start(self) -> int | None:
        """:func:`in_flight_start` of every record read (its position among them), or None."""
        at = in_flight_start(self.kept)
        return None if at is None else self.first + at


def instructions_in_force(records: Sequence[Record]) -> list[str]:
    """The text of each active skill or slash-command expansion (records the parser flagged
    :data:`~ctxcompact.model.INSTRUCTIONS`), without its injected parts, oldest first, each once."""
    return scan(InstructionScan(), records)


class InstructionScan:
    """:func:`instructions_in_force` read record by record."""

    def __init__(self) -> None:
        self.out: list[str] = []

    @staticmethod
    def reads(kind: Kind) -> bool:
        return kind.meta and kind.role is not None

    def feed(self, rec: Seen) -> None:
        if not rec.rec.meta.get(INSTRUCTIONS) or rec.msg is None:
            return
        text = strip_injected(rec.text)
        if text and text not in self.out:
            self.out.append(text)

    def result(self) -> list[str]:
        return self.out
