"""Codex CLI rollout files: ``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl``.

Sources of each rule:
- Envelope ``{timestamp, type, payload}`` and the line types (session_meta, response_item, event_msg,
  turn_context, compacted): openai/codex ``codex-rs/protocol/src/protocol.rs`` (RolloutItem, RolloutLine,
  CompactedItem, TurnContextItem, EventMsg).
- ResponseItem payloads (message with input_text/output_text, reasoning, function_call with a JSON-string
  ``arguments`` and ``call_id``, function_call_output, custom_tool_call(_output), local_shell_call,
  web_search_call, ghost_snapshot): ``codex-rs/protocol/src/models.rs``; checked against the real log
  lanegrid/agtrace ``crates/agtrace-providers/tests/samples/codex_session.jsonl`` (CLI 0.66.0, MIT).
- token_count: ``info.last_token_usage.input_tokens`` is the last request's prompt (it includes
  ``cached_input_tokens``, OpenAI's convention); ``info.model_context_window`` the window. The event is
  repeated with the same totals after each turn_context (seen in the agtrace log), so a repeat is ignored.
- Legacy (mid-2025) files: a bare header line and bare ResponseItems without ``payload``; accepted.

Rules:
- ``response_item`` lines carry the messages (what the model saw). ``event_msg`` lines (user_message,
  agent_message, agent_reasoning, token_count…) duplicate them for the UI and carry no message, nor do
  turn_context, ghost_snapshot and unknown items: they are kept and written back unchanged.
- ``session_meta`` is read as the system message (its ``instructions``, possibly empty) so strategies keep
  it verbatim: Codex needs it as the first line to resume the file.
- User messages that Codex injects (``<environment_context>``, ``<user_instructions>``, AGENTS.md
  instructions, ``<turn_aborted>``…) get ``meta["injected"] = True``.
- Reasoning: the visible summary/content text is counted; ``encrypted_content`` is kept as the thinking
  block's signature and counted as 0 tokens. The Responses API drops reasoning items of earlier turns from
  the context, so their blobs cost nothing; the current turn's reasoning is covered by calibration from
  token_count. Counting base64 length would overcount by orders of magnitude.
- Usage of a token_count goes on the first model-output record of the response it reports (the record
  the request produced), so the calibration prefix is exactly the request's input.
- ``compacted`` lines replace the history before them (Codex rebuilds history from ``replacement_history``
  on resume, from ``message`` only when there is none): earlier records become message-less
  (``meta["inactive"] = "compacted"``) and the compacted line carries the summary as an injected user
  message.
- Output is writable: response_item lines (plus the session_meta kept as system message) are what Codex
  replays on ``codex resume``. A compaction leaves out the context Codex writes at a turn's start (its
  instructions, its environment) when the rollout's client sends it afresh after resuming (0.87 on), and
  keeps it for an older one, which does not (``codex_seen.Seen.resends``).
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

from ..call_ids import CallIds
from ..errors import LineError
from ..model import (
    EARLIER_SUMMARY,
    INTERRUPTED,
    OPAQUE_SUMMARY,
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
    token_text,
)
from ..reader import encode_json
from .base import Finish, Format, Layout, NeedsWhole, Restart, marked_lines, str_field
from .codex_seen import INJECTED_PREFIXES, Seen

ROLLOUT_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted",
                           "inter_agent_communication", "world_state",
                           # CLI 0.169.0 (tests/clients): the usage of each response, beside token_count
                           "token_usage_record"})
ITEM_TYPES = frozenset({"message", "reasoning", "function_call", "function_call_output", "custom_tool_call",
                        "custom_tool_call_output", "local_shell_call", "web_search_call", "ghost_snapshot",
                        "compaction", "other"})
_OUTPUT_ITEMS = frozenset({"reasoning", "function_call", "custom_tool_call", "local_shell_call",
                           "web_search_call"})

_ROLES = {"user": Role.USER, "assistant": Role.ASSISTANT, "developer": Role.SYSTEM, "system": Role.SYSTEM}


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _content_blocks(content: Any, path: str) -> list[Block]:
    if isinstance(content, str):
        return [TextBlock(content)]
    if not isinstance(content, list):
        raise LineError(path, "must be a string or an array of content items")
    out: list[Block] = []
    for i, c in enumerate(content):
        if not isinstance(c, dict):
            raise LineError(f"{path}[{i}]", "must be an object")
        kind = c.get("type")
        if kind in ("input_text", "output_text", "text"):
            if not isinstance(c.get("text"), str):
                raise LineError(f"{path}[{i}].text", "must be a string")
            out.append(TextBlock(c["text"], raw=c))
        elif kind in ("input_image", "image"):
            out.append(ImageBlock(None, raw=c))
        else:
            out.append(OpaqueBlock(str(kind), encode_json(c).decode(), raw=c))
    return out


_EXIT_HEADER = re.compile(r"\A(?:Exit code: (\d+)|(?:[^\n]*\n){0,4}?Process exited with code (\d+))\n")


def output_status(output: Any) -> bool | None:
    """The outcome a function_call_output records in a structured field: ``{success}`` (old CLIs), the
    ``metadata.exit_code`` of a JSON-encoded ``{output, metadata}`` string, or the runtime's own header
    (``Exit code: N`` / ``Process exited with code N`` before ``Output:``). None when there is none: the
    words of the output are never read here."""
    if isinstance(output, dict):
        ok = output.get("success")
        return ok if isinstance(ok, bool) else None
    if not isinstance(output, str):
        return None
    if output.startswith("{") and '"metadata"' in output[-400:]:
        try:
            decoded = orjson.loads(output)
        except orjson.JSONDecodeError:
            decoded = None
        meta = decoded.get("metadata") if isinstance(decoded, dict) else None
        code = meta.get("exit_code") if isinstance(meta, dict) else None
        if isinstance(code, int) and not isinstance(code, bool):
            return code == 0
    m = _EXIT_HEADER.match(output[:600])
    if m:
        return int(m.group(1) or m.group(2)) == 0
    return None


def _output_blocks(output: Any, path: str) -> tuple[list[Block], bool]:
    """function_call_output.output: a string, content items, or (old CLIs) ``{content, success}``."""
    if isinstance(output, dict):
        ok = output.get("success")
        inner = output.get("content", "")
        if not isinstance(inner, (str, list)):
            inner = encode_json(inner).decode()
        blocks = _content_blocks(inner, path)
        return blocks, ok is False
    if output is None:
        return [TextBlock("")], False
    return _content_blocks(output, path), False


def _item_message(p: dict[str, Any], path: str) -> Message | None:
    kind = p.get("type")
    extra = {k: v for k, v in p.items() if k not in ("role", "content")}
    if kind == "message":
        role = _ROLES.get(str(p.get("role")))
        if role is None:
            raise LineError(f"{path}.role", f"unknown role {p.get('role')!r}")
        return Message(role, _content_blocks(p.get("content", []), f"{path}.content"),
                       source_role=str(p["role"]), extra=extra)
    if kind == "function_call":
        args, cid = p.get("arguments"), p.get("call_id")
        if not isinstance(args, str) or not isinstance(cid, str) or not isinstance(p.get("name"), str):
            raise LineError(path, "function_call needs string name, arguments and call_id")
        try:
            decoded = orjson.loads(args)
        except orjson.JSONDecodeError:
            decoded = None  # truncated arguments occur; keep the text
        return Message(Role.ASSISTANT, [ToolCall(cid, p["name"], args, decoded, raw=p)],
                       source_role="function_call", extra=extra)
    if kind == "custom_tool_call":
        if not isinstance(p.get("call_id"), str) or not isinstance(p.get("name"), str):
            raise LineError(path, "custom_tool_call needs string name and call_id")
        inp = p.get("input", "")
        text = inp if isinstance(inp, str) else encode_json(inp).decode()
        return Message(Role.ASSISTANT, [ToolCall(p["call_id"], p["name"], text, None, raw=p)],
                       source_role="custom_tool_call", extra=extra)
    if kind == "local_shell_call":
        cid = p.get("call_id") or p.get("id")
        if not isinstance(cid, str):
            raise LineError(f"{path}.call_id", "local_shell_call needs a call_id or id")
        action = p.get("action", {})
        return Message(Role.ASSISTANT, [ToolCall(cid, "local_shell", encode_json(action).decode(), action,
                                                 raw=p)], source_role="local_shell_call", extra=extra)
    if kind in ("function_call_output", "custom_tool_call_output"):
        if not isinstance(p.get("call_id"), str):
            raise LineError(f"{path}.call_id", "must be a string")
        blocks, err = _output_blocks(p.get("output"), f"{path}.output")
        result = ToolResult(p["call_id"], blocks, is_error=err, raw=p,
                            succeeded=output_status(p.get("output")))
        return Message(Role.TOOL, [result], source_role=str(kind), extra=extra)
    if kind == "reasoning":
        texts = [s.get("text", "") for key in ("summary", "content") if isinstance(p.get(key), list)
                 for s in p[key] if isinstance(s, dict) and isinstance(s.get("text"), str)]
        enc = p.get("encrypted_content")
        block = ThinkingBlock("\n".join(texts), signature=enc if isinstance(enc, str) else None,
                              redacted=bool(enc) and not texts, raw=p)
        return Message(Role.ASSISTANT, [block], source_role="reasoning", extra=extra)
    if kind == "web_search_call":
        light = encode_json(p.get("action", {})).decode()
        return Message(Role.ASSISTANT, [OpaqueBlock("web_search_call", light, raw=p)],
                       source_role="web_search_call", extra=extra)
    return None  # ghost_snapshot, compaction (encrypted), other: never counted


def _usage(payload: dict[str, Any]) -> Usage | None:
    info = payload.get("info")
    if not isinstance(info, dict):
        return None
    last = info.get("last_token_usage")
    if not isinstance(last, dict) or not isinstance(last.get("input_tokens"), int):
        return None
    win = info.get("model_context_window")
    window = win if isinstance(win, int) else None
    total = last.get("total_tokens")
    if last["input_tokens"] == 0 and isinstance(total, int) and total > 0:
        # the meter Codex (and ctxcompact) writes after a compaction: no request, the compacted history's
        # size in total_tokens; it measures the history through this line
        return Usage(total, None, context_window=window, after=True,
                     source="event_msg.token_count.last_token_usage.total_tokens (after a compaction)")
    out = last.get("output_tokens")
    return Usage(last["input_tokens"], out if isinstance(out, int) else None, context_window=window,
                 source="event_msg.token_count.last_token_usage")


def _is_compacted(obj: Any) -> bool:
    """A ``compacted`` line (as :meth:`CodexFormat.parse_line` reads one)."""
    return isinstance(obj, dict) and "payload" in obj and str_field(obj, "type") == "compacted"


def _hide(rec: Record) -> None:
    """A line before the last ``compacted`` line: history only (the session's instructions stay)."""
    if rec.message is not None and rec.meta.get("type") != "session_meta":
        rec.message = None
        rec.meta["inactive"] = "compacted"
    rec.usage = None


class _Finish(Finish):
    """:meth:`CodexFormat.finish` one record at a time: the usage of a ``token_count`` goes on the first
    model-output record of the response it reports (the assistant items since the last other message), a
    report repeated after a turn_context is dropped. A ``compacted`` line hides every line before it: a
    reader that streams finds the last one first (:meth:`scan`) and hides the lines before it as they come;
    one it did not find, or one after a resume point (the lines before the point were counted), sends the
    file to the held route or to a read from the start (``whole``: the held route, whose lines hidden are
    already made message-less)."""

    def __init__(self, kept: Any = None, *, whole: bool = False) -> None:
        #: the billed totals of the last report placed (a repeat of it is dropped)
        self.previous: Any = None if kept is None else kept["previous"]
        self.before = self.previous  # (as it was before the last record: kept)
        self.first: Record | None = None  # the first model-output record of the current response
        self.whole = whole
        self.resumed = kept is not None
        self.last: int | None = None  # the offset of the last compacted line the read reaches (scan)
        self.known = None if kept is None else kept.get("last")  # the one the read that kept it knew

    def scan(self, path: Path, at: int, limit: int | None) -> None:
        with open(path, "rb") as stream:
            for offset, line in marked_lines(stream, at, limit, b'"compacted"'):
                try:
                    if _is_compacted(orjson.loads(line)):
                        self.last, self.hides, self.hides_all = offset, True, True
                except orjson.JSONDecodeError:
                    pass  # (not a record: the reader leaves the file to the held route)

    def __call__(self, rec: Record) -> None:
        self.before = self.previous
        if self.last is not None and rec.offset < self.last:
            _hide(rec)
            return
        msg = rec.message
        if msg is not None:
            if rec.meta.get("compaction") and not self.whole:
                if rec.offset != self.last:
                    raise NeedsWhole("a compacted line the scan did not find")
                if self.resumed and rec.offset != self.known:
                    raise Restart("a compacted line hides lines read before the resume point")
            if msg.role is Role.ASSISTANT and rec.meta.get("type") in ("response_item", "legacy"):
                self.first = self.first or rec
            else:
                self.first = None
            return
        usage = rec.usage
        if usage is None or usage.after:
            return  # (a compaction's size stays on its line: its totals repeat the last report's)
        rec.usage = None
        totals = rec.data["payload"]["info"].get("total_token_usage")
        if totals is not None and totals == self.previous:
            return  # the same report repeated after a turn_context
        self.previous = totals
        target = self.first
        if target is not None and target.usage is None:
            target.usage = usage
            rec.meta["usage_on_line"] = target.line
        else:
            rec.usage = usage

    def kept(self) -> Any:
        # (the first model-output record is found again from the record a resumed read starts at: a message
        # of another role than the one before it)
        return {"previous": self.before, "last": self.last}


class CodexFormat(Format):
    name = "codex"
    # Each function_call_output is its own item; the Responses API does not require alternation.
    layout = Layout(results_per_message=True, result_role=Role.TOOL, alternate=False, split_turns=True,
                    agent_log=True)
    writable = True
    fallback = "openai"
    schema_file = "codex.schema.json"
    client_files = ("AGENTS.md",)  # (0.87 on send it after resuming; before, codex_seen.Seen.restored)

    def sniff(self, obj: Any) -> int:
        if not isinstance(obj, dict):
            return 0
        kind = str_field(obj, "type")
        if kind in ROLLOUT_TYPES and isinstance(obj.get("payload"), dict):
            return 98
        if obj.get("record_type") == "state":
            return 90
        if kind in ITEM_TYPES - {"message"} and ("call_id" in obj or "ghost_commit" in obj
                                                 or "encrypted_content" in obj):
            return 70
        parts = obj.get("content") if kind == "message" else None
        if isinstance(parts, list) and any(
                isinstance(c, dict) and c.get("type") in ("input_text", "output_text") for c in parts):
            return 60
        return 0

    def parse_line(self, obj: Any, index: int, line: int, raw: bytes | None) -> Record:
        if not isinstance(obj, dict):
            raise LineError("$", "a rollout line must be a JSON object")
        kind = str_field(obj, "type")
        meta: dict[str, Any] = {}
        if isinstance(obj.get("timestamp"), str):
            meta["timestamp"] = obj["timestamp"]
        rec = Record(index=index, line=line, raw=raw, data=obj, meta=meta)
        if "payload" not in obj:  # legacy: bare header, state marker or bare ResponseItem
            meta["type"] = "legacy"
            if kind in ITEM_TYPES:
                meta["item"] = kind
                rec.message = _item_message(obj, "$")
            return rec
        p = obj["payload"]
        if kind is None:
            raise LineError("$.type", "missing or not a string")
        if not isinstance(p, dict):
            raise LineError("$.payload", "must be an object")
        meta["type"] = kind
        if kind == "response_item":
            meta["item"] = p.get("type")
            rec.message = _item_message(p, "$.payload")
            if p.get("type") == "compaction":
                # the Responses API's compaction item: an earlier summary, encrypted; kept as it is (a message
                # of its own so the strategies carry it; its blob costs no tokens we can count)
                rec.message = Message(Role.ASSISTANT, [OpaqueBlock("compaction", "", raw=p)],
                                      source_role="compaction")
                meta.update({EARLIER_SUMMARY: "openai", OPAQUE_SUMMARY: True})
        elif kind == "session_meta":
            instr = p.get("instructions")
            base = p.get("base_instructions")
            if not isinstance(instr, str):
                instr = base.get("text") if isinstance(base, dict) else base if isinstance(base, str) else ""
            rec.message = Message(Role.SYSTEM, [TextBlock(str(instr or ""))], source_role="session_meta")
        elif kind == "turn_context":
            if isinstance(p.get("model"), str):
                meta["model"] = p["model"]
        elif kind == "event_msg":
            meta["event"] = p.get("type")
            if p.get("type") == "turn_aborted":
                meta[INTERRUPTED] = True
            if p.get("type") == "token_count":
                rec.usage = _usage(p)
        elif kind == "compacted":
            # Codex rebuilds the history from replacement_history when it is there, else from message
            replacement = p.get("replacement_history")
            texts = [] if isinstance(replacement, list) else (
                [p["message"]] if isinstance(p.get("message"), str) and p["message"] else [])
            carried: list[Block] = []
            for item in replacement if isinstance(replacement, list) else []:
                if isinstance(item, dict) and item.get("type") == "compaction":
                    # an encrypted earlier summary inside it: kept as it is (facts.earlier.opaque_records)
                    carried.append(OpaqueBlock("compaction", "", raw=item))
                elif isinstance(item, dict) and item.get("type") == "message":
                    texts.extend(b.text for b in _content_blocks(item.get("content", []), "$.payload")
                                 if isinstance(b, TextBlock))
                elif isinstance(item, dict):
                    # calls, outputs, reasoning (a masking's history): counted, not read as the summary
                    try:
                        inner = _item_message(item, "$.payload.replacement_history")
                    except LineError:
                        inner = None
                    if inner is not None:
                        counted, _ = token_text(inner)
                        carried.append(OpaqueBlock(str(item.get("type")), "\n".join(counted), raw=item))
            rec.message = Message(Role.USER, [TextBlock("\n\n".join(texts)), *carried],
                                  source_role="compacted")
            meta.update({"injected": True, "compaction": True, EARLIER_SUMMARY: "codex"})
        msg = rec.message
        if (msg is not None and msg.role is Role.USER and kind != "compacted"
                and msg.text().lstrip().startswith(INJECTED_PREFIXES)):
            meta["injected"] = True
            if msg.text().lstrip().startswith("<turn_aborted>"):
                meta[INTERRUPTED] = True
        return rec

    def finish(self, records: list[Record]) -> list[Record]:
        last_compacted = max((i for i, r in enumerate(records) if r.meta.get("compaction")), default=-1)
        for r in records[:max(last_compacted, 0)]:
            _hide(r)
        place = _Finish(whole=True)
        for r in records:
            place(r)
        return records

    def finish_stream(self, names: CallIds | None = None, kept: Any = None) -> Finish:
        return _Finish(kept)

    def foreign_type(self, record: Record) -> str | None:
        kind = record.meta.get("type")
        return kind if isinstance(kind, str) and kind not in ROLLOUT_TYPES and kind != "legacy" else None

    def dump_message(self, message: Message, record: Record | None = None) -> Any:
        data = record.data if record is not None and isinstance(record.data, dict) else None
        if data is not None and data.get("type") == "session_meta":
            return {**data, "payload": {**data["payload"], "instructions": message.text() or None}}
        payload = self._item(message)
        if data is not None and "payload" not in data:
            return payload  # legacy bare item
        stamp = data.get("timestamp") if data is not None else None
        return {"timestamp": stamp or _now(), "type": "response_item", "payload": payload}

    def compaction_seen(self) -> Seen:
        return Seen()

    @staticmethod
    def _made(records: list[Record]) -> list[int]:
        return [i for i, r in enumerate(records)  # not an input item (an encrypted summary taken out of one)
                if r.raw is None and r.data is None and r.message is not None
                and r.origin is not Origin.INPUT]

    def _compacts(self, records: list[Record]) -> bool:
        return bool(self._made(records)) or any(r.dirty and r.message is not None for r in records)

    def compaction_appended(self, seen: Any, records: list[Record], pre_tokens: int,
                            post_tokens: int | None = None) -> list[Record] | None:
        """A rollout is append-only, and Codex records its own compaction as a ``compacted`` line whose
        ``replacement_history`` becomes the whole history on resume (openai/codex
        ``codex-rs/core/src/codex/rollout_reconstruction.rs``: ``history.replace(replacement_history)``, later
        ``response_item`` lines recorded after it). So after the input's lines as read
        (``jsonl.compaction_output``) come one ``compacted`` line, the kept items after it, then the meter,
        made from what ``seen`` (:meth:`compaction_seen`) took of those lines
        (docs/guides/claude-code-codex.md).

        ``replacement_history`` is the context up to the last summary (all of it for a masking), session_meta
        aside, as response items, laid out as Codex 0.169 lays out its own: the user's latest request as its
        own user message (unless it is kept after the summary), then the summary and its continuation. The
        context Codex writes at a turn's start (:meth:`.Seen.resent`) is left out, there and after it: Codex
        (0.87 and later) sends its own afresh after resuming a ``compacted`` line it did not write, so a copy
        would reach the model twice (tests/clients); an older Codex does not, so for its rollouts the context
        stays (:meth:`.Seen.resends`). ``message`` is the summary text ("" for a masking, as Codex's
        remote compaction writes). ``latest_token_usage_record`` is the input's
        last usage record, as Codex copies it. The meter is a ``token_count`` event like the one Codex writes
        after its own compaction: the billed ``total_token_usage`` kept, ``last_token_usage`` zero but for
        ``total_tokens``, the size of the compacted context (``post_tokens``)."""
        if not self._compacts(records):
            return None
        made = self._made(records)
        end = made[-1] + 1 if made else len(records)
        kept = [r for r in records[end:] if r.raw is not None and r.message is not None
                and not seen.resent(r.raw)]
        kept_raw = {r.raw for r in kept}
        present = {r.raw for r in records}
        replacement: list[Any] = []
        for rec in records[:end]:
            msg = rec.message
            if msg is None or rec.meta.get("type") == "session_meta" or seen.resent(rec.raw):
                continue  # (Codex sends its instructions and environment afresh after the history)
            if made and rec is records[made[0]]:
                if seen.request is not None and seen.request[0] not in kept_raw:
                    replacement.append(seen.request[1])  # Codex's own order: the request before the summary
                replacement.extend(seen.restored(present))  # (then its context, for an older Codex)
            data = rec.data if isinstance(rec.data, dict) else None
            payload = data.get("payload") if data is not None and not rec.dirty else None
            replacement.append(payload if isinstance(payload, dict) else self._item(msg))
        summary = "\n\n".join(records[i].message.text() for i in made)  # type: ignore[union-attr]
        body: dict[str, Any] = {"message": summary, "replacement_history": replacement}
        if seen.usage_record is not None:
            body["latest_token_usage_record"] = seen.usage_record
        stamp = seen.stamp or _now()
        out = [Record(index=-1, line=0, raw=None, dirty=True,
                      data={"timestamp": stamp, "type": "compacted", "payload": body}), *kept]
        meter = seen.meter(post_tokens)
        if meter is not None:
            out.append(Record(index=-1, line=0, raw=None, dirty=True,
                              data={"timestamp": stamp, "type": "event_msg", "payload": meter}))
        return out

    def from_list_item(self, obj: Any) -> Any:
        """A list of OpenAI Responses input items (the message-list API's ``format="responses"``) is read as
        bare ``response_item`` payloads: an "easy" message (``{"role", "content": "text"}``, no ``type``) as
        the message item it stands for; every other item as it is."""
        if isinstance(obj, dict) and "type" not in obj and "role" in obj:
            content = obj.get("content")
            if isinstance(content, str):
                kind = "output_text" if obj["role"] == "assistant" else "input_text"
                content = [{"type": kind, "text": content}]
            return {**obj, "type": "message", "content": content}
        return obj

    def to_list_item(self, obj: Any) -> Any:
        """A line this format wrote around a Responses item (its ``response_item`` envelope) as the item."""
        wrapped = isinstance(obj, dict) and obj.get("type") == "response_item"
        return obj["payload"] if wrapped and isinstance(obj.get("payload"), dict) else obj

    def dump_messages(self, message: Message) -> list[Any]:
        """The rollout lines for a message from another format (``--to codex``): a rollout item holds one
        thing, so the text goes in a ``message`` item and every call and result gets its own
        ``function_call`` / ``function_call_output`` item, results first, calls last (the order a Responses
        API turn has: what the model read, what it said, what it asked for)."""
        results = [b for b in message.blocks if isinstance(b, ToolResult)]
        calls = [b for b in message.blocks if isinstance(b, ToolCall)]
        skip = (ToolResult, ToolCall, ThinkingBlock)
        rest: list[Block] = [b for b in message.blocks if not isinstance(b, skip)]
        if not results and not calls:
            return [self.dump_message(message)]
        parts: list[Message] = [Message(role=Role.TOOL, blocks=[r], source_role="tool") for r in results]
        if rest:
            role = Role.USER if message.role is Role.TOOL else message.role
            parts.append(Message(role=role, blocks=rest, source_role=role.value))
        parts.extend(Message(role=Role.ASSISTANT, blocks=[c], source_role="assistant") for c in calls)
        return [self.dump_message(m) for m in parts]

    @staticmethod
    def _item(message: Message) -> dict[str, Any]:
        blocks = message.blocks
        if len(blocks) == 1:
            b = blocks[0]
            raw = dict(b.raw) if b.raw else {}
            if isinstance(b, ToolCall):
                if raw.get("type") == "custom_tool_call":
                    return {**raw, "call_id": b.id, "name": b.name, "input": b.arguments}
                if raw.get("type") == "local_shell_call":
                    return raw
                return {**raw, "type": "function_call", "name": b.name, "arguments": b.arguments,
                        "call_id": b.id}
            if isinstance(b, ToolResult):
                custom = raw.get("type") == "custom_tool_call_output"
                kind = "custom_tool_call_output" if custom else "function_call_output"
                return {**raw, "type": kind, "call_id": b.call_id, "output": b.text()}
            if isinstance(b, ThinkingBlock) and raw.get("type") == "reasoning":
                return raw
            if isinstance(b, OpaqueBlock) and raw:
                return raw
        role = message.source_role if message.source_role in ("user", "assistant", "developer", "system") \
            else ("developer" if message.role is Role.SYSTEM else
                  "assistant" if message.role is Role.ASSISTANT else "user")
        part = "output_text" if role == "assistant" else "input_text"
        content: list[dict[str, Any]] = []
        for b in blocks:
            if isinstance(b, TextBlock):
                content.append({**(b.raw or {}), "type": part, "text": b.text})
            elif isinstance(b, ImageBlock) and b.raw:
                content.append(b.raw)
            elif isinstance(b, ToolResult):
                content.append({"type": part, "text": b.text()})
            elif isinstance(b, ToolCall):
                # A message mixing text and calls cannot be one rollout item; keep the call readable.
                content.append({"type": part, "text": f"[tool call {b.name}({b.arguments})]"})
        extra = {k: v for k, v in message.extra.items() if k != "type"}
        return {**extra, "type": "message", "role": role, "content": content}


FORMAT = CodexFormat()
