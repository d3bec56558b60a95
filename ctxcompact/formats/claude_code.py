"""Claude Code session logs: ``~/.claude/projects/<encoded-cwd>/<sessionId>.jsonl``.

Sources of each rule (no official schema exists):
- Line types, envelope fields, ``message`` shapes, split assistant messages, compaction boundaries:
  the notes in docs/reference/formats.md#how-each-is-read, checked against real logs published under MIT:
  marot/spotter ``test/fixtures/transcripts/`` (CLI 2.1.38/2.1.39) and lanegrid/agtrace
  ``crates/agtrace-providers/tests/samples/claude_session.jsonl`` (CLI 2.0.28); see tests/data/claude-code.
- Usage de-duplication by ``message.id`` + ``requestId``: every line of one streamed API response repeats
  the same ``usage`` snapshot (seen in both logs above; ccusage dedupes the same way).
- Block shapes inside ``message``: the Anthropic Messages API (text, thinking, redacted_thinking,
  tool_use, tool_result, image, document).

Rules:
- One record per line. ``user``/``assistant`` lines carry a message; every other ``type`` (system,
  summary, progress, file-history-snapshot, queue-operation, attachment, titles, unknown future types)
  is a record with no message, kept and written back unchanged.
- Records that the model no longer sees become message-less (``meta["inactive"]`` says why) but stay on
  output: ``isSidechain`` lines of a subagent inside the main session (``sidechain``: CLI 1.0.x, no
  ``agentId``), lines before the last ``compact_boundary`` (``compacted``,
  Claude Code resumes from its last boundary), and message lines off the active ``parentUuid`` branch
  (``off_branch``). A subagent's own log (``subagents/agent-*.jsonl``, CLI 2.x: every line ``isSidechain``
  with its ``agentId``) is read as its own conversation: there the sidechain lines are the context, and the
  lines ctxcompact makes carry the same ``isSidechain`` and ``agentId``. The active branch is the ancestors
  of the last chained line, plus tool-result lines hanging off a tool_use line of that branch (Claude Code
  parents each parallel result on its own tool_use line, so the plain ancestor walk would miss all but the
  last result).
- Usage (input + cache creation + cache read) goes on the first line of each ``message.id``+``requestId``
  group only: that line's prefix is exactly what the request saw.
- Machine-made user lines (``isMeta``, ``isCompactSummary``) get ``meta["injected"] = True``: not a typed
  request. The texts Claude Code wraps (command echoes and output, caveats, reminders) are told apart from
  typed requests in one place, ``facts.text``.
- Output (docs/reference/formats.md#claude-code-logs): a Claude Code log. Lines nothing changed are written as
  read; a changed line keeps its envelope (uuid, parentUuid, session fields) and only its ``message`` is
  rewritten (masked results also shrink ``toolUseResult``); lines ctxcompact makes are inserted into the
  ``parentUuid`` chain (:meth:`ClaudeCodeFormat.link_records`); lines converted from another format form one
  new linear session (:meth:`ClaudeCodeFormat.link_converted`).
"""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Iterator, Sequence
from typing import Any

import orjson

from ..call_ids import CallIds
from ..errors import LineError
from ..model import (
    EARLIER_SUMMARY,
    INSTRUCTIONS,
    INTERRUPTED,
    SUBAGENT_CALL,
    SUBAGENT_MESSAGE,
    SUBAGENT_RUN,
    Block,
    ImageBlock,
    Message,
    OpaqueBlock,
    Origin,
    Record,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResult,
    Usage,
    anthropic_prompt_tokens,
    is_interruption_message,
)
from ..reader import encode_json
from .base import Finish, Format, Layout, new_record
from .claude_code_out import (
    COMPACT_SUMMARY_OPENING,
    Seen,
    compaction_appended,
    link_converted,
    link_records,
    now,
)
from .claude_code_stream import StreamFinish
from .claude_code_tree import api_turns, finish, in_main_session_sidechain, relink_dropped, set_inactive

#: line types seen in real logs ; others are accepted too, as message-less records.
KNOWN_TYPES = frozenset({
    "user", "assistant", "system", "summary", "progress", "file-history-snapshot", "queue-operation",
    "attachment", "custom-title", "ai-title", "agent-name", "last-prompt", "pr-link", "permission-mode",
    "agent-setting", "bridge-session", "worktree-state", "file-history-delta",
    # CLI 2.1.328 (written while resuming, tests/clients): the request it sent, beside the conversation
    "api-request", "api-request-shape", "api-request-blob", "atis-latch", "cost-state", "mode",
})
# Only these carry no uuid/sessionId yet are unmistakably Claude Code.
_DISTINCT_BARE_TYPES = frozenset({"file-history-snapshot", "queue-operation", "file-history-delta"})

def _json_text(value: Any) -> str:
    return encode_json(value).decode()


def parse_blocks(content: Any, path: str) -> list[Block]:
    """Anthropic content blocks → model blocks (unknown kinds kept as opaque)."""
    if isinstance(content, str):
        return [TextBlock(content)]
    if not isinstance(content, list):
        raise LineError(path, "must be a string or an array of blocks")
    blocks: list[Block] = []
    for i, b in enumerate(content):
        p = f"{path}[{i}]"
        if not isinstance(b, dict):
            raise LineError(p, "must be an object")
        kind = b.get("type")
        if kind == "text":
            if not isinstance(b.get("text"), str):
                raise LineError(f"{p}.text", "must be a string")
            blocks.append(TextBlock(b["text"], raw=b))
        elif kind == "thinking":
            blocks.append(ThinkingBlock(str(b.get("thinking", "")), signature=b.get("signature"), raw=b))
        elif kind == "redacted_thinking":
            blocks.append(ThinkingBlock("", signature=b.get("data"), redacted=True, raw=b))
        elif kind == "tool_use":
            if not isinstance(b.get("id"), str) or not isinstance(b.get("name"), str):
                raise LineError(p, "tool_use needs string id and name")
            inp = b.get("input", {})
            blocks.append(ToolCall(b["id"], b["name"], _json_text(inp), inp, raw=b))
        elif kind == "tool_result":
            if not isinstance(b.get("tool_use_id"), str):
                raise LineError(f"{p}.tool_use_id", "must be a string")
            inner = b.get("content", "")
            nested = parse_blocks(inner if inner is not None else "", f"{p}.content")
            # Claude Code marks every failed tool (a non-zero exit, a refused permission, a validation error)
            # is_error: true, and writes the flag or nothing otherwise, so the flag is the outcome
            failed = bool(b.get("is_error"))
            blocks.append(ToolResult(b["tool_use_id"], nested, is_error=failed, raw=b, succeeded=not failed))
        elif kind in ("image", "document"):
            src = b.get("source")
            media = src.get("media_type") if isinstance(src, dict) else None
            blocks.append(ImageBlock(media, raw=b))
        else:
            # Count what is text in an unknown block, but never a base64 payload.
            light = {k: v for k, v in b.items() if k not in ("data", "source", "signature")}
            blocks.append(OpaqueBlock(str(kind), _json_text(light), raw=b))
    return blocks


def dump_blocks(blocks: list[Block]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for b in blocks:
        raw = dict(b.raw) if b.raw else {}
        if isinstance(b, TextBlock):
            out.append({**raw, "type": "text", "text": b.text})
        elif isinstance(b, ThinkingBlock):
            if b.redacted:
                out.append({**raw, "type": "redacted_thinking", "data": b.signature or b.text or ""})
            else:
                d = {**raw, "type": "thinking", "thinking": b.text}
                if b.signature is not None:
                    d["signature"] = b.signature
                out.append(d)
        elif isinstance(b, ToolCall):
            inp = b.input
            if inp is None:
                try:
                    inp = orjson.loads(b.arguments)
                except orjson.JSONDecodeError:
                    inp = {"arguments": b.arguments}
            out.append({**raw, "type": "tool_use", "id": b.id, "name": b.name, "input": inp})
        elif isinstance(b, ToolResult):
            was_string = isinstance(raw.get("content"), str) or not b.raw
            only_text = all(isinstance(c, TextBlock) for c in b.content)
            content: Any = b.text() if (was_string and only_text) else dump_blocks(b.content)
            d = {**raw, "type": "tool_result", "tool_use_id": b.call_id, "content": content}
            if b.is_error:
                d["is_error"] = True
            elif "is_error" in d:
                d["is_error"] = False
            out.append(d)
        else:  # ImageBlock, OpaqueBlock: carried through as read
            out.append(raw or {"type": getattr(b, "kind", "image")})
    return out


def _usage(msg: dict[str, Any]) -> Usage | None:
    u = msg.get("usage")
    if not isinstance(u, dict):
        return None
    total = anthropic_prompt_tokens(u)
    if total is None:
        return None
    out = u.get("output_tokens")
    return Usage(total, out if isinstance(out, int) else None, source="message.usage")


def _agent_progress(obj: dict[str, Any], meta: dict[str, Any]) -> None:
    """A ``progress`` line of ``type: agent_progress`` (CLI 2.x) carries one line of a running subagent
    (``data.message``) and the id of the Task call that started it (``parentToolUseID``): kept as
    subagent work, never as the model's context."""
    data = obj.get("data")
    if not isinstance(data, dict) or data.get("type") != "agent_progress":
        return
    inner = data.get("message")
    if not isinstance(inner, dict) or inner.get("type") not in ("user", "assistant"):
        return
    msg = inner.get("message")
    if not isinstance(msg, dict):
        return
    try:
        blocks = parse_blocks(msg.get("content", ""), "$.data.message.message.content")
    except LineError:
        return  # a progress line is the interface's: never a reason to reject the log
    role = Role.ASSISTANT if inner["type"] == "assistant" else Role.USER
    meta[SUBAGENT_MESSAGE] = Message(role, blocks, source_role=role.value)
    call = obj.get("parentToolUseID")
    run = call if isinstance(call, str) else data.get("agentId")
    if isinstance(run, str):
        meta[SUBAGENT_RUN] = run
    if isinstance(call, str):
        meta[SUBAGENT_CALL] = call


class ClaudeCodeFormat(Format):
    name = "claude-code"
    # On disk each parallel tool result is its own user line and an API response is split one block per
    # line, so a valid log needs no merging: describing it as it is keeps unchanged logs unchanged.
    layout = Layout(results_per_message=True, result_role=Role.USER, alternate=False, split_turns=True,
                    tree=True, agent_log=True)
    schema_file = "claude-code.schema.json"
    carries_attachments = False  # its compact summary line is text, as Claude Code writes its own
    client_files = ("CLAUDE.md",)
    compaction_note = ("note: the compaction is written after the log as Claude Code writes its own (a "
                       "compact_boundary line, then the context); Claude Code 2.1.328 resumes it "
                       "(docs/guides/claude-code-codex.md)")

    def sniff(self, obj: Any) -> int:
        if not isinstance(obj, dict):
            return 0
        kind = obj.get("type")
        if not isinstance(kind, str):
            return 0
        if "sessionId" in obj and "uuid" in obj and ("parentUuid" in obj or kind in KNOWN_TYPES):
            return 98
        if kind in _DISTINCT_BARE_TYPES:
            return 95
        if kind == "summary" and "leafUuid" in obj:
            return 95
        if "parentUuid" in obj and "isSidechain" in obj:
            return 90
        return 0

    def parse_line(self, obj: Any, index: int, line: int, raw: bytes | None) -> Record:
        if not isinstance(obj, dict):
            raise LineError("$", "a Claude Code log line must be a JSON object")
        kind = obj.get("type")
        if not isinstance(kind, str):
            raise LineError("$.type", "missing or not a string")
        meta: dict[str, Any] = {"type": kind}
        for key, name in (("uuid", "uuid"), ("parentUuid", "parent_uuid"), ("timestamp", "timestamp"),
                          ("sessionId", "session_id"), ("requestId", "request_id")):
            if isinstance(obj.get(key), str):
                meta[name] = obj[key]
        if kind == "system" and obj.get("subtype") == "compact_boundary":
            meta["compact_boundary"] = True
        rec = Record(index=index, line=line, raw=raw, data=obj, meta=meta)
        if kind == "progress":
            _agent_progress(obj, meta)
        if kind not in ("user", "assistant") or "message" not in obj:
            return rec
        msg = obj["message"]
        if not isinstance(msg, dict):
            raise LineError("$.message", "must be an object")
        if "content" not in msg:
            raise LineError("$.message.content", "missing")
        blocks = parse_blocks(msg["content"], "$.message.content")
        role = Role.ASSISTANT if kind == "assistant" else Role.USER
        extra = {k: v for k, v in msg.items() if k not in ("role", "content")}
        rec.message = Message(role, blocks, source_role=str(msg.get("role", kind)), extra=extra,
                              content_was_string=isinstance(msg["content"], str))
        if isinstance(msg.get("id"), str):
            meta["message_id"] = msg["id"]
        if role is Role.ASSISTANT:
            rec.usage = _usage(msg)
        elif obj.get("isMeta") or obj.get("isCompactSummary"):
            meta["injected"] = True  # the texts it wraps (command echoes, reminders…): facts.text
            if obj.get("isMeta") and not obj.get("isCompactSummary"):
                meta[INSTRUCTIONS] = True  # a skill's or command's expansion, if text is left: facts.handoff
        elif is_interruption_message(rec.message):
            meta[INTERRUPTED] = True  # Claude Code's own marker, a text block of its own
        if obj.get("isCompactSummary"):
            meta["compact_summary"] = True
            meta[EARLIER_SUMMARY] = "claude-code"
        if in_main_session_sidechain(obj):
            # what a subagent did: not the model's context, but what the summary says of it (facts.subagents)
            meta[SUBAGENT_MESSAGE] = rec.message
            if isinstance(obj.get("agentId"), str):
                meta[SUBAGENT_RUN] = obj["agentId"]
            set_inactive(rec, "sidechain")
        return rec

    def relink_dropped(self, records: list[Record], dropped: Sequence[bytes]) -> None:
        relink_dropped(records, dropped)

    def finish(self, records: list[Record]) -> list[Record]:
        return finish(records)

    def finish_stream(self, names: CallIds | None = None, kept: Any = None) -> Finish:
        # (no names: Claude Code's results are not given their calls' names)
        return StreamFinish(kept, self.parse_line)

    def foreign_type(self, record: Record) -> str | None:
        kind = record.meta.get("type")
        return kind if record.message is None and isinstance(kind, str) and kind not in KNOWN_TYPES else None

    def api_turns(self, records: list[Record]) -> list[Record]:
        return api_turns(records)

    def dump_message(self, message: Message, record: Record | None = None) -> Any:
        content: Any = dump_blocks(message.blocks)
        first = message.blocks[0] if len(message.blocks) == 1 else None
        if message.content_was_string and isinstance(first, TextBlock):
            content = first.text
        kind = "assistant" if message.role is Role.ASSISTANT else "user"
        msg = {"role": kind, "content": content, **message.extra}
        if record is not None and isinstance(record.data, dict):
            data = {**record.data, "message": msg}
            if data.get("type") in ("user", "assistant"):
                data["type"] = kind
            if "toolUseResult" in data:
                data["toolUseResult"] = _tool_use_result(data["toolUseResult"], message)
            return data
        made = {"parentUuid": None, "isSidechain": False, "type": kind, "message": msg,
                "uuid": str(uuidlib.uuid4()), "timestamp": now()}
        if message.role is Role.SYSTEM:
            # Claude Code has no system line (it sends its own system prompt): a system message converted to
            # it is context the agent wrote, not a request, which Claude Code marks isMeta
            made["isMeta"] = True
        return made

    def summary_records(self, summary_text: str, continuation: str,
                        attached: Sequence[ImageBlock] = ()) -> list[Record]:
        """One user line, as Claude Code writes its own compact summary: its opening sentence, the summary,
        then the continuation. Text only, as Claude Code's own (``carries_attachments`` is False: the
        continuation names what it could not carry)."""
        text = f"{COMPACT_SUMMARY_OPENING}\n\n{summary_text}\n\n{continuation}"
        return [new_record(self.make_message(Role.USER, text), Origin.SUMMARY,
                           {"compact_summary": True, "injected": True})]

    def compaction_seen(self) -> Seen:
        return Seen()

    def compaction_appended(self, seen: Any, records: list[Record], pre_tokens: int,
                            post_tokens: int | None = None) -> list[Record] | None:
        return compaction_appended(seen, records, pre_tokens, post_tokens)

    def link_records(self, records: list[Record]) -> list[Record]:
        return link_records(records)

    def link_converted(self, objs: Iterator[Any]) -> Iterator[Any]:
        return link_converted(objs)


def _tool_use_result(value: Any, message: Message) -> Any:
    """``toolUseResult`` (the tool's structured output, which Claude Code keeps beside the ``tool_result``
    block for its interface) shrunk to match a result whose content was replaced (masked): every string in it
    longer than the new content becomes the new content; the structure and the short fields stay. When many
    short strings keep it large (search results), it becomes the new content itself, a string, as Claude Code
    writes for a failed tool."""
    changed = [b for b in message.blocks if isinstance(b, ToolResult) and b.raw is not None
               and b.text() != _raw_result_text(b.raw.get("content"))]
    if len(changed) != 1:
        return value
    new = changed[0].text()

    def shrink(v: Any) -> Any:
        if isinstance(v, str):
            return new if len(v) > len(new) else v
        if isinstance(v, list):
            return [shrink(x) for x in v]
        if isinstance(v, dict):
            return {k: shrink(x) for k, x in v.items()}
        return v

    small = shrink(value)
    return small if len(_json_text(small)) <= 4 * len(new) + 200 else new


def _raw_result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""



FORMAT = ClaudeCodeFormat()
