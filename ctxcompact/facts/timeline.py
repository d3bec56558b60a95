"""The conversation as a short timeline, and the last thing the assistant did."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..model import Origin, Record, Role, ToolCall
from .calls import call_index, command_of, decode_args
from .files import paths_of_call
from .outcomes import FailureCheck, call_failed, error_text, result_is_error
from .text import is_machine_reply, shorten, typed_text
from .todos import is_open, todo_list_from_call


def describe_call(call: ToolCall, limit: int = 80) -> str:
    """``name(main argument)``: the command, the path, the todo count, or the first string argument."""
    todos = todo_list_from_call(call)
    if todos is not None:
        return f"{call.name}({sum(1 for t in todos if is_open(t))} open of {len(todos)})"
    cmd = command_of(call)
    if cmd is not None:
        return f"{call.name}({shorten(cmd, limit)})"
    paths = paths_of_call(call)
    if paths:
        more = f" +{len(paths) - 1}" if len(paths) > 1 else ""
        return f"{call.name}({shorten(paths[0], limit)}{more})"
    args = decode_args(call)
    if isinstance(args, dict):
        for v in args.values():
            if isinstance(v, str) and v.strip():
                return f"{call.name}({shorten(v, limit // 2)})"
    return f"{call.name}()"


@dataclass(slots=True)
class LastAction:
    text: str | None  # the last assistant text (shortened)
    calls: list[str]  # descriptions of the tool calls of the last assistant message that made calls

    def render(self) -> str:
        parts = []
        if self.text:
            parts.append(f'Said: "{self.text}"')
        if self.calls:
            parts.append("Called: " + ", ".join(self.calls))
        return " — ".join(parts)


def last_assistant_action(records: Sequence[Record], text_limit: int = 500) -> LastAction | None:
    """The last thing the assistant did, as it happened: its last message (from input records; a reply no
    model wrote, such as Claude Code's "No response requested.", is not an action) with the assistant
    records right before it that belong to the same step (a format that writes a message's text and its
    calls as separate lines: nothing else between them). Text and calls are never stitched together from
    messages further apart."""
    step: list[Record] = []
    for rec in reversed(records):
        msg = rec.message
        if msg is None or rec.origin is not Origin.INPUT:
            continue
        if msg.role is Role.ASSISTANT and not is_machine_reply(rec):
            if step or msg.text().strip() or msg.tool_calls():
                step.append(rec)
        elif step:
            break  # a result, a user message or a machine reply: the step began after it
    text = " ".join(r.message.text().strip() for r in reversed(step)
                    if r.message is not None and r.message.text().strip())
    calls = [describe_call(c) for r in reversed(step) if r.message is not None
             for c in r.message.tool_calls()]
    if not text and not calls:
        return None
    return LastAction(shorten(text, text_limit) if text else None, calls)


def answers(records: Sequence[Record]) -> list[tuple[int, str]]:
    """The assistant's answers, as (input position, text): its last text before each request a person typed,
    and its last text at the end. What it concluded, decided or delivered, whole (the caller caps the
    length)."""
    out: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for rec in records:
        msg = rec.message
        if msg is None or rec.origin is not Origin.INPUT:
            continue
        if msg.role is Role.ASSISTANT and not is_machine_reply(rec):
            said = msg.text().strip()
            if said:
                pending = (rec.index, said)
        elif msg.role is Role.USER and pending is not None and typed_text(rec) is not None:
            out.append(pending)
            pending = None
    if pending is not None:
        out.append(pending)
    return out


def timeline(records: Sequence[Record], entry_limit: int = 160,
             failed: FailureCheck | None = None) -> list[str]:
    """One short line per step, oldest first (:func:`timeline_entries` without the positions)."""
    return [text for _, text in timeline_entries(records, entry_limit, failed)]


def timeline_entries(records: Sequence[Record], entry_limit: int = 160,
                     failed: FailureCheck | None = None) -> list[tuple[int, str]]:
    """One short line per step, oldest first, with the input position it was read at: user requests,
    assistant statements, tool calls (grouped per message), failures, todo updates."""
    failed = failed or result_is_error
    calls = call_index(records)
    out: list[tuple[int, str]] = []
    for rec in records:
        msg = rec.message
        if msg is None or rec.origin is not Origin.INPUT:
            continue
        at = rec.index
        if msg.role is Role.USER:
            typed = typed_text(rec)
            if typed:
                out.append((at, shorten("User: " + typed, entry_limit)))
        elif msg.role is Role.ASSISTANT and not is_machine_reply(rec):
            said = msg.text().strip()
            if said:
                out.append((at, shorten("Assistant: " + said, entry_limit)))
            descs = [describe_call(c, 60) for c in msg.tool_calls()]
            if descs:
                out.append((at, shorten("Ran " + ", ".join(descs), entry_limit)))
        for res in msg.tool_results():
            call = calls.get(res.call_id)
            if call is None or res.synthetic:
                continue
            if call_failed(call, res, failed):
                out.append((at, shorten(f"{call.name} failed: {error_text(res)}", entry_limit)))
    return out
