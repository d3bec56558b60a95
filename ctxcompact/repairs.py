"""What cleaning reports (docs/reference/cli.md#ctxcompact-clean-file): the repairs, their kinds, the texts of
the records the cleaner makes. The cleaner itself is :mod:`ctxcompact.clean`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .formats.base import Layout
from .model import Block, Message, Role, TextBlock, ToolCall, ToolResult, Transcript, blocks_text
from .secrets import scrub_credentials

NO_RESPONSE = "Tool no response"
UNDERSTOOD = "Understood."
CONTINUES = "(conversation continues)"
#: put before each text of a system line moved into a user turn, so neither the model nor a later summary
#: takes it for the user's words (facts.text treats the text as injected)
MOVED_SYSTEM = "[system message, moved into a user turn: not the user's words]"

#: every kind of repair :func:`clean` reports
REPAIR_KINDS = (
    "missing_result",
    "moved_result",
    "orphan_result",
    "duplicate_call_id",
    "appended_reply",
    "merged_messages",
    "reordered_blocks",
    "role_changed",
    "inserted_message",
)



@dataclass(frozen=True, slots=True)
class Repair:
    """One repair: ``kind`` (see :data:`REPAIR_KINDS`), the input ``line`` it concerns (for records the
    cleaner made, the line of the call or message they belong to), a short ``detail`` and the call id."""

    kind: str
    line: int
    detail: str
    call_id: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "detail", scrub_credentials(self.detail))  # a repair quotes ids and text

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line else "input"
        return f"{where}: {self.kind}: {self.detail}"

    def to_json(self) -> dict[str, object]:
        return {"kind": self.kind, "line": self.line, "detail": self.detail, "call_id": self.call_id}


@dataclass(slots=True)
class CleanResult:
    """A cleaned transcript and the repairs that made it."""

    transcript: Transcript
    repairs: list[Repair] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.repairs)


# Keys under which formats keep a call id in a block's or message's raw JSON; renamed ids are patched there
# too so that a format dumping from ``raw`` cannot write the old id back.
_ID_KEYS = ("id", "tool_call_id", "tool_use_id", "call_id")


def patch_raw(raw: dict[str, Any] | None, old: str, new: str) -> dict[str, Any] | None:
    if raw is None:
        return None
    patched = dict(raw)
    for key in _ID_KEYS:
        if patched.get(key) == old:
            patched[key] = new
    return patched


def renamed_call(call: ToolCall, new_id: str) -> ToolCall:
    return dataclasses.replace(call, id=new_id, raw=patch_raw(call.raw, call.id, new_id))


def renamed_result(result: ToolResult, new_id: str) -> ToolResult:
    if result.call_id == new_id:
        return result
    return dataclasses.replace(result, call_id=new_id, raw=patch_raw(result.raw, result.call_id, new_id))


def context_blocks(result: ToolResult, why: str) -> list[Block]:
    """An unanswerable result as user context: a text line, then any non-text parts (images…) it held."""
    flag = " (error)" if result.is_error else ""
    tool = f" of tool {result.name}" if result.name else ""
    text = f"[tool result for call {result.call_id}{tool} ({why}){flag}]: {blocks_text(result.content)}"
    rest: list[Block] = [b for b in result.content if not isinstance(b, (TextBlock, ToolResult))]
    return [TextBlock(text), *rest]


def user_message(msg: Message, blocks: list[Block]) -> Message:
    # A tool message's link fields make no sense on a user turn (OpenAI's "name" there would name a
    # participant, not the tool; the context text names the tool); everything else is carried through.
    drop = ("tool_call_id", "tool_use_id", "call_id", "name") if msg.role == Role.TOOL else ()
    extra = {k: v for k, v in msg.extra.items() if k not in drop}
    return Message(
        role=Role.USER,
        blocks=blocks,
        source_role=Role.USER.value,
        extra=extra,
        content_was_string=msg.content_was_string,
    )


def results_first(blocks: list[Block]) -> list[Block]:
    results: list[Block] = [b for b in blocks if isinstance(b, ToolResult)]
    return results + [b for b in blocks if not isinstance(b, ToolResult)]


def ends_on_result(msg: Message, layout: Layout) -> bool:
    if msg.role == Role.TOOL:
        return True
    return msg.role == layout.result_role and msg.is_tool_result_only
