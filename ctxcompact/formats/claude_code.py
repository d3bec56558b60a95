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

import dataclasses
import hashlib
import os
import re
import uuid as uuidlib
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from typing import Any

import orjson

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
from .base import Format, Layout, new_record

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


_UUID_KEY = re.compile(rb'"uuid"\s*:\s*"([^"\\]{1,200})"')
_PARENT_KEY = re.compile(rb'"parentUuid"\s*:\s*(?:"([^"\\]{1,200})"|null)')


def _salvage_link(raw: bytes) -> tuple[str, str | None] | None:
    """(uuid, parentUuid) of a line that did not read as a record, or None when it names no uuid."""
    try:
        obj = orjson.loads(raw.decode("utf-8", "replace"))
    except (orjson.JSONDecodeError, RecursionError):
        obj = None
    if isinstance(obj, dict):
        uuid, parent = obj.get("uuid"), obj.get("parentUuid")
        if isinstance(uuid, str):
            return uuid, parent if isinstance(parent, str) else None
        return None
    u, p = _UUID_KEY.search(raw), _PARENT_KEY.search(raw)
    if u is None:
        return None
    return u.group(1).decode("utf-8", "replace"), (p.group(1).decode("utf-8", "replace")
                                                   if p is not None and p.group(1) is not None else None)


def _subagent_runs(records: list[Record]) -> None:
    """Sidechain lines with no ``agentId`` (CLI 1.0.x writes subagents into the main file) belong to the run
    of their root line (the ``parentUuid`` chain up to the subagent's prompt)."""
    parent = {r.meta["uuid"]: r.meta.get("parent_uuid") for r in records
              if SUBAGENT_MESSAGE in r.meta and "uuid" in r.meta and r.meta.get("type") != "progress"}
    for r in records:
        if SUBAGENT_RUN in r.meta or r.meta.get("uuid") not in parent:
            continue
        cur, seen = r.meta["uuid"], set()
        while parent.get(cur) in parent and cur not in seen:
            seen.add(cur)
            cur = parent[cur]
        r.meta[SUBAGENT_RUN] = cur


def in_main_session_sidechain(obj: dict[str, Any]) -> bool:
    """A subagent's line inside the main session's file (``isSidechain`` without ``agentId``, CLI 1.0.x).
    A subagent's own log marks every line ``isSidechain`` *with* its ``agentId``: those lines are that
    log's conversation (tests/data/claude-code/spotter-sidechain-agent.jsonl)."""
    return obj.get("isSidechain") is True and not isinstance(obj.get("agentId"), str)


def _inactive(rec: Record, why: str) -> None:
    # Records are fresh from parse_line here (finish runs before anyone else sees them).
    rec.message = None
    rec.usage = None
    rec.meta["inactive"] = why


class ClaudeCodeFormat(Format):
    name = "claude-code"
    # On disk each parallel tool result is its own user line and an API response is split one block per
    # line, so a valid log needs no merging: describing it as it is keeps unchanged logs unchanged.
    layout = Layout(results_per_message=True, result_role=Role.USER, alternate=False, split_turns=True,
                    tree=True, agent_log=True)
    schema_file = "claude-code.schema.json"
    carries_attachments = False  # its compact summary line is text, as Claude Code writes its own
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
            _inactive(rec, "sidechain")
        return rec

    def relink_dropped(self, records: list[Record], dropped: Sequence[bytes]) -> None:
        """A dropped line's children hang from its parent instead (issue 26 item 5): the chain is followed
        from the last line back, so a gap would silently cut every line before it out of the context. The
        dropped line's ``uuid`` and ``parentUuid`` are read as far as they can be (invalid UTF-8 replaced,
        else the two keys found in the text); a line that names neither links nothing."""
        up: dict[str, str | None] = {}
        for raw in dropped:
            link = _salvage_link(raw)
            if link is not None:
                up[link[0]] = link[1]
        if not up:
            return
        for rec in records:
            parent = rec.meta.get("parent_uuid")
            seen: set[str] = set()
            while isinstance(parent, str) and parent in up and parent not in seen:
                seen.add(parent)
                parent = up[parent]
            if seen:
                if parent is None:
                    rec.meta.pop("parent_uuid", None)
                else:
                    rec.meta["parent_uuid"] = parent

    def finish(self, records: list[Record]) -> list[Record]:
        # Claude Code resumes from its last compaction boundary: what came before is history only.
        boundary = max((i for i, r in enumerate(records) if r.meta.get("compact_boundary")
                        and not in_main_session_sidechain(r.data)), default=-1)
        for r in records[: boundary + 1]:
            if r.message is not None:
                _inactive(r, "compacted")
        live = records[boundary + 1:]
        _subagent_runs(records)
        self._follow_branch(live)
        seen: set[tuple[str, str]] = set()
        for r in live:
            if r.usage is None:
                continue
            key = (r.meta.get("message_id", ""), r.meta.get("request_id", ""))
            if key != ("", ""):
                if key in seen:
                    r.usage = None
                seen.add(key)
        if boundary >= 0:
            _post_tokens(records[boundary], live)
        return records

    def foreign_type(self, record: Record) -> str | None:
        kind = record.meta.get("type")
        return kind if record.message is None and isinstance(kind, str) and kind not in KNOWN_TYPES else None

    def api_turns(self, records: list[Record]) -> list[Record]:
        """One record per API message: Claude Code writes a streamed response one content block per line
        (same ``message.id``), and a block can come after the result of its own message's tool_use (the
        tool ran while the response streamed on: thinking, redacted_thinking or text after a tool_use).
        The later lines' blocks join the first line of their message, in order, so the response is one
        assistant turn and the results follow it. Only tool results and message-less lines may lie between
        the lines joined; the log itself is never changed (Claude Code out writes the lines as they are)."""
        out: list[Record] = []
        open_at: dict[str, int] = {}  # message id -> index in out of its first line, while joinable
        joined = False
        for rec in records:
            msg = rec.message
            mid = rec.meta.get("message_id")
            if msg is None:
                out.append(rec)
                continue
            if msg.role is Role.ASSISTANT and isinstance(mid, str) and rec.origin is Origin.INPUT:
                if mid in open_at:
                    head = out[open_at[mid]]
                    assert head.message is not None
                    blocks = [*head.message.blocks, *msg.blocks]
                    out[open_at[mid]] = dataclasses.replace(
                        head, message=dataclasses.replace(head.message, blocks=blocks), dirty=True)
                    joined = True
                    continue
                open_at = {mid: len(out)}  # a new response: earlier ones can no longer be joined
            elif not msg.is_tool_result_only:
                open_at = {}
            out.append(rec)
        return out if joined else records

    @staticmethod
    def _follow_branch(live: list[Record]) -> None:
        by_uuid = {r.meta["uuid"]: r for r in live if "uuid" in r.meta and r.meta.get("inactive") is None}
        chained = [r for r in live if "uuid" in r.meta and r.meta.get("inactive") is None]
        if not chained:
            return
        active: set[str] = set()
        cur: Record | None = chained[-1]
        while cur is not None and cur.meta["uuid"] not in active:
            active.add(cur.meta["uuid"])
            parent = cur.meta.get("parent_uuid")
            cur = by_uuid.get(parent) if parent else None
        # Widen to a fixpoint: lines of the same API response (same message.id) and the tool-result lines
        # parented on an active line answering its calls are part of the branch too.
        members = [r for r in chained if r.message is not None]
        changed = True
        while changed:
            changed = False
            on = [r for r in members if r.meta["uuid"] in active]
            ids = {r.meta["message_id"] for r in on if "message_id" in r.meta}
            calls = {c.id for r in on if r.message is not None for c in r.message.tool_calls()}
            for r in members:
                if r.meta["uuid"] in active:
                    continue
                msg = r.message
                assert msg is not None
                same_response = r.meta.get("message_id") in ids
                answers = (msg.is_tool_result_only and r.meta.get("parent_uuid") in active
                           and all(t.call_id in calls for t in msg.tool_results()))
                if same_response or answers:
                    active.add(r.meta["uuid"])
                    changed = True
        for r in members:
            if r.meta["uuid"] not in active:
                _inactive(r, "off_branch")

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
                "uuid": str(uuidlib.uuid4()), "timestamp": _now()}
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

    def compaction_output(self, input_data: bytes, records: list[Record], pre_tokens: int,
                          post_tokens: int | None = None) -> list[Record]:
        """The input's lines as read (the log stays append-only), then a ``compact_boundary`` line, then the
        context the model now sees: summaries as ``isCompactSummary`` lines, kept messages as copies under
        fresh uuids. :meth:`link_records` chains them.

        Claude Code's meter (``/context``, its auto-compact trigger) takes the last assistant usage after the
        last boundary, skipping usage whose input is 0, and estimates the lines after it. So the copies' usage
        is zeroed (as Claude Code zeroes a preserved segment's) and the meter counts the compacted context
        afresh; the originals before the boundary keep what the provider billed. A copy also gets a fresh
        ``message.id`` (one per original id, so the lines of one response stay one response): Claude Code
        merges the lines that share an id, and a copy under its original's id sent its blocks twice."""
        history: list[Record] = []
        from .jsonl import history_lines  # the reader's rule for which lines are records

        for i, (raw, data) in enumerate(history_lines(input_data, self.name)):
            history.append(Record(index=i, line=i + 1, raw=raw, data=data, meta={"history": True}))
        boundary = Record(index=-1, line=0, raw=None, data=None, origin=Origin.SUMMARY, dirty=True,
                          meta={"compact_boundary": True, "pre_tokens": pre_tokens,
                                "post_tokens": post_tokens})
        after: list[Record] = []
        for rec in records:
            message = rec.message
            if message is None:
                continue  # progress, snapshots: already in the history
            if rec.raw is None and rec.data is None:
                if rec.origin is Origin.SUMMARY and message.role is Role.USER:
                    rec = dataclasses.replace(rec, meta={**rec.meta, "compact_summary": True,
                                                         "injected": True})
                after.append(rec)
                continue
            data = dict(rec.data) if isinstance(rec.data, dict) else {}
            for key in ("uuid", "parentUuid", "logicalParentUuid", "isSidechain", "timestamp"):
                data.pop(key, None)
            extra = dict(message.extra)
            if extra.get("usage") is not None:
                extra["usage"] = _zeroed(extra["usage"])
            if isinstance(extra.get("id"), str):
                extra["id"] = copy_message_id(extra["id"])
            if extra != message.extra:
                message = dataclasses.replace(message, extra=extra)
            after.append(dataclasses.replace(rec, raw=None, data=data, message=message, dirty=True,
                                             meta={**rec.meta, "copy": True}))
        return [*history, boundary, *after]

    def link_records(self, records: list[Record]) -> list[Record]:
        """Made records (no input line) are inserted into the ``parentUuid`` chain after the chained line
        before them: a fresh uuid, that line as parent, its session fields and timestamp; the later lines that
        hung off that line hang off the made one instead, so the chain stays one line longer, not forked."""
        out: list[Record] = []
        prev: dict[str, Any] | None = None  # the envelope of the last chained main-chain line written
        moved: dict[str, str] = {}  # old parent uuid -> the made line inserted after it
        for rec in records:
            data = rec.data if isinstance(rec.data, dict) else None
            if rec.raw is None and (data is None or rec.meta.get("copy")):
                parent = prev.get("uuid") if prev else None
                env = made_envelope(prev, parent, len(out))
                if rec.meta.get("compact_boundary"):
                    env = {**env, "parentUuid": None, "logicalParentUuid": parent, "type": "system",
                           "subtype": "compact_boundary", "content": "Conversation compacted",
                           "isMeta": False, "level": "info",
                           "compactMetadata": _compact_metadata(rec.meta)}
                elif data is not None:  # a kept line copied after a boundary: its own fields, a new place
                    env = {**data, **env, "type": data.get("type", env["type"])}
                if rec.meta.get("compact_summary"):
                    env.update({"isVisibleInTranscriptOnly": True, "isCompactSummary": True})
                if parent is not None and not rec.meta.get("compact_boundary"):
                    moved[parent] = env["uuid"]
                rec = dataclasses.replace(rec, data=env, dirty=True)
                data = env
            elif data is not None and data.get("parentUuid") in moved and not in_main_session_sidechain(data):
                data = {**data, "parentUuid": moved[data["parentUuid"]]}
                rec = dataclasses.replace(rec, data=data, dirty=True)
            if data is not None and isinstance(data.get("uuid"), str) and not in_main_session_sidechain(data):
                prev = data
            out.append(rec)
        return out

    def link_converted(self, objs: Iterator[Any]) -> Iterator[Any]:
        """Lines converted from another format: one new session, each line the child of the one before."""
        session = str(uuidlib.uuid4())
        prev: dict[str, Any] | None = {"sessionId": session, "cwd": os.getcwd(), "userType": "external"}
        for i, obj in enumerate(objs):
            env = made_envelope(prev, prev.get("uuid") if prev else None, i, timestamp=_now())
            obj = {**env, **{k: v for k, v in obj.items() if k not in env or k in ("type",)}}
            obj["timestamp"] = env["timestamp"]
            prev = obj
            yield obj


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


#: how Claude Code opens its own compact summary (CLI 2.1.39, the spotter compact excerpt)
COMPACT_SUMMARY_OPENING = ("This session is being continued from a previous conversation that ran out of "
                           "context. The summary below covers the earlier portion of the conversation.")


def copy_message_id(original: str) -> str:
    """The ``message.id`` of a kept line's copy after a boundary: derived from the original (the same input
    gives the same output), distinct from it, shaped like the provider's (``msg_`` and base62)."""
    digest = int.from_bytes(hashlib.sha256(f"ctxcompact-copy:{original}".encode()).digest()[:16], "big")
    chars = []
    while digest:
        digest, r = divmod(digest, 62)
        chars.append(_BASE62[r])
    return "msg_" + "".join(chars).rjust(22, "0")


_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _compact_metadata(meta: dict[str, Any]) -> dict[str, Any]:
    """``compactMetadata`` as Claude Code 2.1.x writes it: the trigger, the size before and (newer builds)
    after, which its meter falls back on when no usage follows the boundary."""
    out: dict[str, Any] = {"trigger": "auto", "preTokens": meta.get("pre_tokens", 0)}
    if isinstance(meta.get("post_tokens"), int):
        out["postTokens"] = meta["post_tokens"]
    return out


def _post_tokens(boundary: Record, live: list[Record]) -> None:
    """With no billed usage after the last boundary, its ``compactMetadata.postTokens`` (the compacted
    context's size, which Claude Code's meter falls back on too) measures the lines written with it: the
    boundary's own lines (ctxcompact's summary and copies carry the timestamp of the boundary; a line the
    client wrote since is later). Without it a log ctxcompact compacted was estimated at the default factor,
    far under its real size (the hidden prompt unknown)."""
    meta = boundary.data.get("compactMetadata") if isinstance(boundary.data, dict) else None
    post = meta.get("postTokens") if isinstance(meta, dict) else None
    if not isinstance(post, int) or post <= 0 or any(r.usage and r.usage.prompt_tokens > 0 for r in live):
        return
    stamp = boundary.meta.get("timestamp")
    written = [r for r in live if r.message is not None and isinstance(stamp, str)
               and str(r.meta.get("timestamp", "~")) <= stamp]
    target = written[-1] if written else boundary
    target.usage = Usage(post, source="compactMetadata.postTokens", after=True)


def _zeroed(usage: Any) -> Any:
    if not isinstance(usage, dict):
        return usage
    keys = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    return {**usage, **{k: 0 for k in keys if k in usage}}


#: the envelope fields a made line copies from the line it follows (the session it belongs to)
SESSION_FIELDS = ("userType", "cwd", "sessionId", "version", "gitBranch", "slug")


def made_envelope(prev: dict[str, Any] | None, parent: str | None, salt: int,
                  timestamp: str | None = None) -> dict[str, Any]:
    """The envelope of a line ctxcompact makes: chained on ``parent``, in ``prev``'s session. The uuid is
    derived from the parent and the position (the same input gives the same output, run after run)."""
    prev = prev or {}
    env: dict[str, Any] = {"parentUuid": parent, "isSidechain": False}
    env.update({k: prev[k] for k in SESSION_FIELDS if k in prev})
    if prev.get("isSidechain") is True and isinstance(prev.get("agentId"), str):  # a subagent's own log
        env.update({"isSidechain": True, "agentId": prev["agentId"]})
    env["type"] = "user"
    seed = f"{prev.get('sessionId', '')}:{parent}:{salt}"
    env["uuid"] = str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, "ctxcompact:" + seed))
    env["timestamp"] = timestamp or prev.get("timestamp") or _now()
    return env


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


FORMAT = ClaudeCodeFormat()
