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
    """The last thing the assistant said and the last tool calls it made (from input records; a reply no
    model wrote, such as Claude Code's "No response requested.", is not an action)."""
    text: str | None = None
    calls: list[str] | None = None
    for rec in reversed(records):
        msg = rec.message
        if msg is None or msg.role is not Role.ASSISTANT or rec.origin is not Origin.INPUT \
                or is_machine_reply(rec):
            continue
        if text is None and msg.text().strip():
            text = shorten(msg.text(), text_limit)
        if calls is None and msg.tool_calls():
            calls = [describe_call(c) for c in msg.tool_calls()]
        if text is not None and calls is not None:
            break
    if text is None and calls is None:
        return None
    return LastAction(text, calls or [])


def timeline(records: Sequence[Record], entry_limit: int = 160,
             failed: FailureCheck | None = None) -> list[str]:
    """One short line per step, oldest first: user requests, assistant statements, tool calls (grouped per
    message), failures, todo updates."""
    failed = failed or result_is_error
    calls = call_index(records)
    out: list[str] = []
    for rec in records:
        msg = rec.message
        if msg is None or rec.origin is not Origin.INPUT:
            continue
        if msg.role is Role.USER:
            typed = typed_text(rec)
            if typed:
                out.append(shorten("User: " + typed, entry_limit))
        elif msg.role is Role.ASSISTANT and not is_machine_reply(rec):
            said = msg.text().strip()
            if said:
                out.append(shorten("Assistant: " + said, entry_limit))
            descs = [describe_call(c, 60) for c in msg.tool_calls()]
            if descs:
                out.append(shorten("Ran " + ", ".join(descs), entry_limit))
        for res in msg.tool_results():
            call = calls.get(res.call_id)
            if call is None or res.synthetic:
                continue
            if call_failed(call, res, failed):
                out.append(shorten(f"{call.name} failed: {error_text(res)}", entry_limit))
    return out
