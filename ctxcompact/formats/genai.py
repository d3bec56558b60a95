"""Gemini ``Content`` lines and Google ADK ``Event`` lines that wrap one.

Sources of each rule:
- Content/Part shapes (``role`` user/model, ``parts`` with text, thought, function_call{id,name,args},
  function_response{id,name,response}, inline_data, file_data, executable_code, code_execution_result):
  google-genai ``types.Content``/``types.Part``.
- Event envelope (author, invocation_id, id, timestamp in float seconds, actions, usage_metadata), the
  camelCase aliases of the API server and the snake_case of ``model_dump()``: google/adk-python
  ``src/google/adk/events/event.py`` and ``event_actions.py`` (pydantic ``alias_generator=to_camel``,
  ``populate_by_name=True``); real events from google/adk-docs ``docs/get-started/testing.md`` (/run).
- Compaction: ``actions.compaction{start_timestamp, end_timestamp, compacted_content}`` appended by ADK's
  ``LlmEventSummarizer``; readers hide events whose timestamp lies in the range and use the summary
  (adk-python ``apps/compaction.py``). A compaction with no range or no content is ignored.
- Function responses answering parallel calls are merged into one Content (ADK's
  ``merge_parallel_function_response_events``; the Gemini API expects one response part per call in the
  turn after the calls).

Rules:
- Role ``model`` is the assistant; ``user`` and the legacy ``function`` are user turns.
- ``thought: true`` text parts are thinking; inline/file data are binary parts at the fixed image cost.
- ``function_response.response`` is an object: its compact JSON is the result text. Calls or responses
  with no ``id`` (plain Gemini API) are paired by name in order and given ids ``genai-call-N`` that are
  never written back.
- ``meta``: invocation_id, timestamp, author, event_id (the sliding-window strategy groups on them);
  ``usage_metadata.prompt_token_count`` is the Record's usage.
- Layout: results merged in one user Content; no strict alternation (the Gemini API accepts consecutive
  same-role contents and ADK sessions hold them, e.g. several agents answering in a row).
- Writable: Content lines, or Event lines for records that were events (spelling kept).
"""

from __future__ import annotations

import uuid as uuidlib
from bisect import bisect_right
from pathlib import Path
from typing import Any

import orjson

from ..call_ids import CallIds
from ..errors import LineError
from ..model import (
    EARLIER_SUMMARY,
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
)
from ..reader import encode_json
from .base import Finish, Format, Layout, NeedsWhole, Restart, marked_lines

SYNTHETIC_ID_PREFIX = "genai-call-"
_EVENT_KEYS = ("author", "invocationId", "invocation_id", "actions", "usageMetadata", "usage_metadata")
_ROLES = {"user": Role.USER, "model": Role.ASSISTANT, "function": Role.USER}



_FAILED_STATUS = frozenset({"error", "failed", "failure", "fail"})
_OK_STATUS = frozenset({"success", "succeeded", "ok", "completed"})


def response_status(resp: Any) -> bool | None:
    """The outcome a function_response records: ADK's convention is a dict with ``status`` ("success" /
    "error") and ``error_message``, and the runner answers a tool that raised with ``{"error": …}``. None when
    the response has neither (its words decide,
    docs/concepts/summary.md#errors-files-and-subagents-in-the-summary)."""
    if not isinstance(resp, dict):
        return None
    if resp.get("error") or resp.get("error_message"):
        return False
    status = resp.get("status")
    if isinstance(status, str):
        if status.lower() in _FAILED_STATUS:
            return False
        if status.lower() in _OK_STATUS:
            return True
    return None

def _get(d: dict[str, Any], snake: str) -> Any:
    """A field in either spelling (ADK emits camelCase via the API server, snake_case via model_dump)."""
    if snake in d:
        return d[snake]
    head, *rest = snake.split("_")
    return d.get(head + "".join(w.title() for w in rest))


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(w.title() for w in rest)


def _uses_snake(obj: Any) -> bool:
    text = encode_json(obj)
    return any(k in text for k in (b'"function_call"', b'"function_response"', b'"invocation_id"',
                                   b'"inline_data"', b'"usage_metadata"'))


def _parse_content(content: Any, path: str) -> Message:
    if not isinstance(content, dict):
        raise LineError(path, "must be an object")
    role = content.get("role", "user")
    if _role_name(role) not in _ROLES:
        raise LineError(f"{path}.role", f"must be user or model, not {role!r}")
    parts = content.get("parts", [])
    if not isinstance(parts, list):
        raise LineError(f"{path}.parts", "must be an array")
    blocks: list[Block] = []
    for i, part in enumerate(parts):
        p = f"{path}.parts[{i}]"
        if not isinstance(part, dict):
            raise LineError(p, "must be an object")
        fc, fr = _get(part, "function_call"), _get(part, "function_response")
        inline, fdata = _get(part, "inline_data"), _get(part, "file_data")
        if isinstance(part.get("text"), str):
            if part.get("thought") is True:
                sig = _get(part, "thought_signature")
                blocks.append(ThinkingBlock(part["text"], signature=sig, raw=part))
            else:
                blocks.append(TextBlock(part["text"], raw=part))
        elif fc is not None:
            if not isinstance(fc, dict) or not isinstance(fc.get("name"), str):
                raise LineError(f"{p}.function_call", "needs a string name")
            args = fc.get("args") or {}
            blocks.append(ToolCall(str(fc.get("id") or ""), fc["name"], encode_json(args).decode(), args,
                                   raw=part))
        elif fr is not None:
            if not isinstance(fr, dict) or not isinstance(fr.get("name"), str):
                raise LineError(f"{p}.function_response", "needs a string name")
            resp = fr.get("response", {})
            blocks.append(ToolResult(str(fr.get("id") or ""), [TextBlock(encode_json(resp).decode())],
                                     name=fr["name"], raw=part, succeeded=response_status(resp)))
        elif inline is not None or fdata is not None:
            media = _get(inline or fdata or {}, "mime_type")
            blocks.append(ImageBlock(media if isinstance(media, str) else None, raw=part))
        else:
            light = {k: v for k, v in part.items() if k not in ("thought_signature", "thoughtSignature")}
            kind = next(iter(light), "part")
            blocks.append(OpaqueBlock(kind, encode_json(light).decode(), raw=part))
    extra = {k: v for k, v in content.items() if k not in ("role", "parts")}
    return Message(_ROLES[role], blocks, source_role=role, extra=extra)



def _role_name(value: Any) -> str | None:
    """A role as a name to look up (None for an array or object, which no lookup may hash)."""
    return value if isinstance(value, str) else None

def _compaction(obj: dict[str, Any]) -> tuple[tuple[float, float], dict[str, Any]] | None:
    """An event's compaction (``actions.compaction``): the range of timestamps it replaces and its summary;
    None without one, or for one with no range or no content (ignored)."""
    actions = obj.get("actions")
    compaction = _get(actions, "compaction") if isinstance(actions, dict) else None
    if not isinstance(compaction, dict):
        return None
    start, end = _get(compaction, "start_timestamp"), _get(compaction, "end_timestamp")
    summary = _get(compaction, "compacted_content")
    if isinstance(start, (int, float)) and isinstance(end, (int, float)) and isinstance(summary, dict):
        return (float(start), float(end)), summary
    return None


def _is_event(obj: Any) -> bool:
    """An ADK Event line, not a bare Content."""
    return isinstance(obj, dict) and not ("parts" in obj and not any(k in obj for k in _EVENT_KEYS))


def _hides(start: float, end: float, rec: Record) -> bool:
    """Whether a compaction of the range ``start``-``end`` hides ``rec``, an event before it (as ADK does on
    read: its timestamp inside the range)."""
    ts = rec.meta.get("timestamp")
    return rec.message is not None and isinstance(ts, (int, float)) and start <= ts <= end


def _hide(rec: Record) -> None:
    rec.message = None
    rec.usage = None
    rec.meta["inactive"] = "compacted"


class _Finish(Finish):
    """:meth:`GenaiFormat.finish` one record at a time: calls and responses that have no id are paired by
    name, in order, under ids ``genai-call-N``. An ADK compaction hides the events before it whose
    timestamp lies in its range: a reader that streams finds the compactions first (:meth:`scan`) and hides
    those events as they come; one it did not find, or one after a resume point that the read which kept
    the point did not know (it may hide events counted before the point), sends the file to the held route
    or to a read from the start (``whole``: the held route, whose events hidden are already message-less)."""

    def __init__(self, kept: Any = None, *, whole: bool = False) -> None:
        self.n = 0 if kept is None else int(kept["n"])
        #: the ids of the calls with no id of their own not yet answered, by name
        self.pending: dict[str, list[str]] = {} if kept is None else {
            str(k): [str(i) for i in v] for k, v in kept["pending"].items()}
        self.before: tuple[int, dict[str, list[str]]] | None = None  # (as before the last record: kept)
        self.whole = whole
        self.resumed = kept is not None
        self.ranges: list[tuple[int, float, float]] = []  # the compactions the read reaches (scan): offsets
        #: the compactions the read that kept the resume point knew
        self.known: set[int] = set() if kept is None else {int(o) for o in kept.get("known", ())}

    def scan(self, path: Path, at: int, limit: int | None) -> None:
        with open(path, "rb") as stream:
            for offset, line in marked_lines(stream, at, limit, b'"compaction"'):
                try:
                    obj = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue  # (not a record: the reader leaves the file to the held route)
                found = _compaction(obj) if _is_event(obj) else None
                if found is not None:
                    self.ranges.append((offset, *found[0]))
                    self.hides = True

    def __call__(self, rec: Record) -> None:
        self.before = None
        if "compaction" in rec.meta and not self.whole:
            if all(offset != rec.offset for offset, _s, _e in self.ranges):
                raise NeedsWhole("an ADK compaction the scan did not find")
            if self.resumed and rec.offset not in self.known:
                raise Restart("an ADK compaction may hide events read before the resume point")
        if any(offset > rec.offset and _hides(start, end, rec) for offset, start, end in self.ranges):
            _hide(rec)
        if rec.message is None:
            return
        for b in rec.message.blocks:
            if isinstance(b, ToolCall) and not b.id:
                self._keep()
                self.n += 1
                b.id = f"{SYNTHETIC_ID_PREFIX}{self.n}"
                self.pending.setdefault(b.name, []).append(b.id)
            elif isinstance(b, ToolResult) and not b.call_id:
                self._keep()
                queue = self.pending.get(b.name or "", [])
                if queue:
                    b.call_id = queue.pop(0)
                else:
                    self.n += 1
                    b.call_id = f"{SYNTHETIC_ID_PREFIX}{self.n}"

    def hides_taken(self, taken: Any) -> bool:
        """Every line ``taken`` was given (:class:`_Seen`) is an event whose timestamp lies in the range of
        a compaction the read reaches (after them all), which hides it in :meth:`GenaiFormat.finish`: so
        the compaction ctxcompact appended after them (its range the first to the last timestamp of the
        events its summary covers, the prefix's), or ADK's own where their ranges span them. The ranges
        merged, then each timestamp looked up: linear in the lines, not lines times compactions."""
        merged: list[list[float]] = []
        for _offset, start, end in sorted(self.ranges, key=lambda r: r[1]):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            elif start <= end:
                merged.append([start, end])
        starts = [m[0] for m in merged]
        for stamp in taken.stamps:
            at = bisect_right(starts, stamp) - 1 if stamp is not None else -1
            if at < 0 or stamp > merged[at][1]:
                return False
        return True

    def _keep(self) -> None:
        if self.before is None:  # (only a record with a block that has no id changes what is carried)
            self.before = (self.n, {k: list(v) for k, v in self.pending.items() if v})

    def kept(self) -> Any:
        n, pending = self.before if self.before is not None else (self.n, self.pending)
        return {"n": n, "pending": {k: list(v) for k, v in pending.items() if v},
                "known": sorted(self.known | {offset for offset, _s, _e in self.ranges})}


class _Seen:
    """What an ADK compaction (``jsonl.compaction_output``) takes of the input's lines, one at a time: each
    event's timestamp by its record's index (None: a bare Content or no number), the latest one, and whether
    an event spells its fields in snake_case (``model_dump()``)."""

    def __init__(self) -> None:
        self.stamps: list[Any] = []
        self.last: Any = None
        self.snake = False

    def add(self, obj: Any, raw: bytes | None) -> None:
        event = _is_event(obj)
        stamp = _get(obj, "timestamp") if event else None
        if not isinstance(stamp, (int, float)):
            stamp = None
        self.stamps.append(stamp)
        if stamp is not None:
            self.last = stamp if self.last is None else max(self.last, stamp)
        self.snake = self.snake or (event and _uses_snake(obj))


class GenaiFormat(Format):
    name = "genai"
    layout = Layout(results_per_message=False, result_role=Role.USER, alternate=False)
    writable = True
    fallback = ""
    schema_file = "genai.schema.json"

    def sniff(self, obj: Any) -> int:
        if not isinstance(obj, dict):
            return 0
        if any(k in obj for k in ("invocationId", "invocation_id")) and "author" in obj:
            return 98
        content = obj.get("content")
        if "author" in obj and ((isinstance(content, dict) and "parts" in content) or "actions" in obj):
            return 95
        if (isinstance(obj.get("parts"), list) and _role_name(obj.get("role", "user")) in _ROLES
                and "content" not in obj):
            return 90
        return 0

    def parse_line(self, obj: Any, index: int, line: int, raw: bytes | None) -> Record:
        if not isinstance(obj, dict):
            raise LineError("$", "a genai line must be a JSON object (Content or ADK Event)")
        meta: dict[str, Any] = {}
        rec = Record(index=index, line=line, raw=raw, data=obj, meta=meta)
        if "parts" in obj and not any(k in obj for k in _EVENT_KEYS):
            rec.message = _parse_content(obj, "$")
            return rec
        meta["event"] = True
        for snake, name in (("invocation_id", "invocation_id"), ("timestamp", "timestamp"),
                            ("author", "author"), ("id", "event_id"), ("branch", "branch")):
            value = _get(obj, snake)
            if value is not None:
                meta[name] = value
        content = obj.get("content")
        if content is not None:
            rec.message = _parse_content(content, "$.content")
        compaction = _compaction(obj)
        if compaction is not None:
            rec.message = _parse_content(compaction[1], "$.actions.compaction.compacted_content")
            meta.update({"compaction": compaction[0], "injected": True, EARLIER_SUMMARY: "adk"})
        um = _get(obj, "usage_metadata")
        if isinstance(um, dict) and isinstance(_get(um, "prompt_token_count"), int):
            out = _get(um, "candidates_token_count")
            rec.usage = Usage(_get(um, "prompt_token_count"), out if isinstance(out, int) else None,
                              source="usage_metadata.prompt_token_count")
        return rec

    def finish(self, records: list[Record]) -> list[Record]:
        # Hide what an ADK compaction replaced (timestamp inside its range), as ADK does on read.
        ranges = [(i, r.meta["compaction"]) for i, r in enumerate(records) if "compaction" in r.meta]
        for ci, (start, end) in ranges:
            for r in records[:ci]:
                if _hides(start, end, r):
                    _hide(r)
        pair = _Finish(whole=True)
        for r in records:
            pair(r)
        return records

    def finish_stream(self, names: CallIds | None = None, kept: Any = None) -> Finish:
        return _Finish(kept)

    def dump_message(self, message: Message, record: Record | None = None) -> Any:
        data = record.data if record is not None and isinstance(record.data, dict) else None
        snake = _uses_snake(data) if data is not None else False
        key = (lambda s: s) if snake else _camel
        parts = [self._part(b, key) for b in message.blocks]
        role = message.source_role if message.source_role in _ROLES else (
            "model" if message.role is Role.ASSISTANT else "user")
        content = {**message.extra, "role": role, "parts": parts}
        if data is not None and "parts" in data and not any(k in data for k in _EVENT_KEYS):
            return content
        if data is not None:
            out = {**data, "content": content}
            actions = out.get("actions")
            if isinstance(actions, dict) and _get(actions, "compaction") is not None:
                out.pop("content")  # the summary lives in the compaction action, not in content
                comp = dict(actions["compaction"])
                comp[key("compacted_content")] = content
                out["actions"] = {**actions, "compaction": comp}
            return out
        meta = record.meta if record is not None else {}
        if "invocation_id" in meta or "author" in meta:
            return {"content": content, key("invocation_id"): meta.get("invocation_id", ""),
                    "author": meta.get("author", "model" if message.role is Role.ASSISTANT else "user"),
                    "actions": {}, "id": str(uuidlib.uuid4()), "timestamp": meta.get("timestamp", 0.0)}
        return content

    def compaction_seen(self) -> _Seen:
        return _Seen()

    def compaction_appended(self, seen: Any, records: list[Record], pre_tokens: int,
                            post_tokens: int | None = None) -> list[Record] | None:
        """The compaction events written after the input's events (an ADK session is append-only), from the
        timestamps ``seen`` (:meth:`compaction_seen`) took of them; None without any: a log of bare Contents
        has no timestamps to name a range and is written as the context itself.
        One compaction event per summary, as ADK's ``LlmEventSummarizer`` writes it: ``author`` "user", a new
        ``invocationId``, ``actions.compaction`` with the first and last timestamps of the events the summary
        replaces (``meta["covers"]``, the input records a sliding-window summary stands for, else those
        between the kept records around it) and the summary as ``compactedContent`` (role "model"; a
        continuation is a second part). ADK (and this reader) hide the events inside that range."""
        stamps: list[Any] = seen.stamps
        if seen.last is None:
            return None
        key = (lambda x: x) if seen.snake else _camel
        events: list[Record] = []
        last = seen.last
        kept_before = -1
        for pos, rec in enumerate(records):
            if rec.origin is Origin.INPUT and rec.index >= 0:
                kept_before = rec.index
                continue
            if rec.origin is not Origin.SUMMARY or rec.message is None:
                continue
            kept_after = next((r.index for r in records[pos + 1:]
                               if r.origin is Origin.INPUT and r.index >= 0), len(stamps))
            start, end = rec.meta.get("covers", (kept_before + 1, kept_after))
            covered = [stamps[i] for i in range(max(start, 0), min(end, len(stamps)))
                       if stamps[i] is not None]
            if not covered:
                continue
            blocks = list(rec.message.blocks)
            follow = records[pos + 1] if pos + 1 < len(records) else None
            if follow is not None and follow.origin is Origin.CONTINUATION and follow.message is not None:
                blocks += follow.message.blocks
            content = {"role": "model", "parts": [self._part(b, key) for b in blocks]}
            n = len(events) + 1
            seed = f"ctxcompact:{min(covered)}:{max(covered)}:{n}"
            compaction = {key("start_timestamp"): min(covered), key("end_timestamp"): max(covered),
                          key("compacted_content"): content}
            data = {key("invocation_id"): "e-" + str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, seed)),
                    "author": "user", "actions": {"compaction": compaction},
                    "id": str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, seed + ":id")),
                    "timestamp": round(last + n / 1000, 6)}
            events.append(Record(index=-1, line=0, raw=None, data=data, origin=Origin.SUMMARY,
                                 dirty=True, meta={"event": True}))
        return events or None

    @staticmethod
    def _part(b: Block, key: Any) -> dict[str, Any]:
        raw = dict(b.raw) if b.raw else {}
        if isinstance(b, ThinkingBlock):
            return {**raw, "text": b.text, "thought": True}
        if isinstance(b, TextBlock):
            return {**raw, "text": b.text}
        if isinstance(b, ToolCall):
            args = b.input
            if args is None:
                try:
                    args = orjson.loads(b.arguments)
                except orjson.JSONDecodeError:
                    args = {"arguments": b.arguments}
            old = raw.get("function_call") or raw.get("functionCall") or {}
            call: dict[str, Any] = {**old, "name": b.name, "args": args}
            if b.id and not b.id.startswith(SYNTHETIC_ID_PREFIX):
                call["id"] = b.id
            raw.pop("function_call", None)
            raw.pop("functionCall", None)
            return {**raw, key("function_call"): call}
        if isinstance(b, ToolResult):
            old = raw.get("function_response") or raw.get("functionResponse") or {}
            text = b.text()
            response: Any = {"result": text}
            if "response" in old and encode_json(old["response"]).decode() == text:
                response = old["response"]  # unchanged: keep the object as it was
            resp: dict[str, Any] = {**old, "name": b.name or old.get("name", ""), "response": response}
            if b.call_id and not b.call_id.startswith(SYNTHETIC_ID_PREFIX):
                resp["id"] = b.call_id
            raw.pop("function_response", None)
            raw.pop("functionResponse", None)
            return {**raw, key("function_response"): resp}
        if raw:
            return raw
        return {"text": ""}


FORMAT = GenaiFormat()
