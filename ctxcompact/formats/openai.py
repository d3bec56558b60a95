"""OpenAI Chat Completions messages, one message per line.

Shape of a line (docs/reference/formats.md#how-each-is-read): ``role`` system/developer/user/assistant/tool;
``content`` a string, null, or an
array of content parts (``text``, ``image_url``, ``input_audio``, ``file``, ``refusal``); an assistant line
may carry ``tool_calls[]`` (``id``, ``type: "function"``, ``function.name``, ``function.arguments`` as JSON
*text*), and a ``tool`` line answers one call through ``tool_call_id``. An assistant line may also carry the
``usage`` object of the response that produced it, which gives the prompt tokens the provider billed.

Decisions where the API leaves room:

- ``function.arguments`` is kept exactly as written (it is what the model produced); it is decoded into
  :attr:`ToolCall.input` when it decodes, also when it was JSON-encoded twice (seen in real data).
- The legacy ``function_call`` field and ``function`` role (deprecated since 2023) are rejected with a
  message that says how to convert them: they link calls to results by position, not id, so the cross-record
  rules and repairs could not be applied faithfully.
- A line shaped like a fine-tuning record (``{"messages": [...]}``) is rejected: one message per line.
- Unknown top-level fields go to :attr:`Message.extra`; unknown content-part types are rejected, as the
  API rejects them (an Anthropic block here usually means the wrong ``--format``).
"""

from __future__ import annotations

from typing import Any

import orjson

from ..call_ids import CallIds
from ..errors import LineError
from ..model import (
    Block,
    ImageBlock,
    Message,
    OpaqueBlock,
    Record,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResult,
    Usage,
)
from ..reader import json_type_name
from .base import Finish, Format, Layout, LinkNames, block_types, link_result_names, omitted_text_part

ROLES = {
    "system": Role.SYSTEM,
    "developer": Role.SYSTEM,
    "user": Role.USER,
    "assistant": Role.ASSISTANT,
    "tool": Role.TOOL,
}
PART_TYPES = ("text", "image_url", "input_audio", "file", "refusal")
_BINARY_PARTS = ("image_url", "input_audio", "file")
# Block types of the Anthropic Messages API: seeing one here almost always means the wrong --format.
_ANTHROPIC_TYPES = {"tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document",
                    "server_tool_use", "web_search_tool_result"}
# Fields this module interprets; everything else on a line is carried in Message.extra.
_KNOWN = {"role", "content", "tool_calls", "tool_call_id"}


def decode_arguments(arguments: str) -> Any:
    """The decoded value of a tool call's JSON arguments text, or None when it does not decode.

    Arguments encoded twice (a JSON string whose value is itself JSON text) are decoded to the inner value.
    """
    try:
        value = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return None
    if isinstance(value, str):
        try:
            inner = orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
        if isinstance(inner, (dict, list)):
            return inner
    return value


def _data_url_media_type(url: Any) -> str | None:
    if isinstance(url, str) and url.startswith("data:"):
        head = url[5:].split(",", 1)[0]
        media = head.split(";", 1)[0]
        return media or None
    return None


def _parse_part(part: Any, path: str) -> Block:
    if not isinstance(part, dict):
        raise LineError(path, f"expected a content part object, got {json_type_name(part)}")
    kind = part.get("type")
    if not isinstance(kind, str):
        what = "missing" if kind is None else f"expected a string, got {json_type_name(kind)}"
        raise LineError(f"{path}.type", what)
    if kind == "text":
        text = part.get("text")
        if not isinstance(text, str):
            raise LineError(f"{path}.text", f"expected a string, got {json_type_name(text)}")
        return TextBlock(text=text, raw=part)
    if kind == "refusal":
        refusal = part.get("refusal")
        if not isinstance(refusal, str):
            raise LineError(f"{path}.refusal", f"expected a string, got {json_type_name(refusal)}")
        return OpaqueBlock(kind="refusal", text=refusal, raw=part)
    if kind == "image_url":
        body = part.get("image_url")
        url = body.get("url") if isinstance(body, dict) else None
        return ImageBlock(media_type=_data_url_media_type(url), raw=part)
    if kind == "input_audio":
        body = part.get("input_audio")
        fmt = body.get("format") if isinstance(body, dict) else None
        return ImageBlock(media_type=f"audio/{fmt}" if isinstance(fmt, str) else None, raw=part)
    if kind == "file":
        body = part.get("file")
        data = body.get("file_data") if isinstance(body, dict) else None
        return ImageBlock(media_type=_data_url_media_type(data), raw=part)
    hint = " (an Anthropic block: try --format anthropic)" if kind in _ANTHROPIC_TYPES else ""
    raise LineError(f"{path}.type", f"unknown content part type {kind!r}; expected one of "
                    f"{', '.join(PART_TYPES)}{hint}")


def _parse_content(content: Any) -> tuple[list[Block], bool]:
    if content is None:
        return [], False
    if isinstance(content, str):
        return [TextBlock(content)], True
    if isinstance(content, list):
        return [_parse_part(p, f"$.content[{i}]") for i, p in enumerate(content)], False
    raise LineError("$.content", f"expected a string, null or an array of content parts, got "
                    f"{json_type_name(content)}")


def _parse_tool_call(call: Any, path: str) -> ToolCall:
    if not isinstance(call, dict):
        raise LineError(path, f"expected a tool call object, got {json_type_name(call)}")
    kind = call.get("type", "function")
    if kind != "function":
        raise LineError(f"{path}.type",
                        f"unsupported tool call type {kind!r} (only 'function' calls are read)")
    call_id = call.get("id")
    if not isinstance(call_id, str):
        what = "missing: every tool call needs an id" if call_id is None else (
            f"expected a string, got {json_type_name(call_id)}")
        raise LineError(f"{path}.id", what)
    fn = call.get("function")
    if not isinstance(fn, dict):
        what = "missing" if fn is None else f"expected an object, got {json_type_name(fn)}"
        raise LineError(f"{path}.function", what)
    name = fn.get("name")
    if not isinstance(name, str):
        raise LineError(f"{path}.function.name", "missing" if name is None else
                        f"expected a string, got {json_type_name(name)}")
    arguments = fn.get("arguments")
    if not isinstance(arguments, str):
        if arguments is None and "arguments" not in fn:
            raise LineError(f"{path}.function.arguments", "missing (the arguments as a JSON string)")
        raise LineError(f"{path}.function.arguments",
                        f"expected a JSON string, got {json_type_name(arguments)} "
                        '(OpenAI carries arguments as JSON text, e.g. "{\\"path\\": \\"a.txt\\"}")')
    return ToolCall(call_id, name, arguments, decode_arguments(arguments), call)  # (positional: per call)


def _parse_usage(usage: Any) -> Usage | None:
    if not isinstance(usage, dict):
        return None
    prompt = usage.get("prompt_tokens")
    if not isinstance(prompt, int) or isinstance(prompt, bool):
        return None
    out = usage.get("completion_tokens")
    output = out if isinstance(out, int) and not isinstance(out, bool) else None
    return Usage(prompt_tokens=prompt, output_tokens=output, source="usage.prompt_tokens")


def _ordered(out: dict[str, Any], template: Any) -> dict[str, Any]:
    """``out`` with its keys in the order of the line it came from (new keys last), so a rewritten line
    reads like the original."""
    if not isinstance(template, dict):
        return out
    ordered = {k: out[k] for k in template if k in out}
    ordered.update((k, v) for k, v in out.items() if k not in ordered)
    return ordered


_OMIT: Any = object()  # "leave the field out"


def _empty_content(template: dict[str, Any] | None, default: Any) -> Any:
    """What to write for a message with no content: what the line had (null, [] or no field), else
    ``default``."""
    if template is None:
        return default
    if "content" not in template:
        return _OMIT
    value = template["content"]
    return value if value is None or value == [] or value == "" else default


def _data_url(media_type: Any, data: Any) -> str:
    return f"data:{media_type};base64,{data}"


def _binary_part(block: ImageBlock) -> dict[str, Any]:
    """An OpenAI content part for a binary block, converting Anthropic image/document blocks."""
    raw = block.raw or {}
    kind = raw.get("type")
    if kind in _BINARY_PARTS:
        return raw
    source: dict[str, Any] = raw["source"] if isinstance(raw.get("source"), dict) else {}
    stype = source.get("type")
    if kind == "image" and stype == "base64":
        url = _data_url(source.get("media_type"), source.get("data"))
        return {"type": "image_url", "image_url": {"url": url}}
    if kind == "image" and stype == "url":
        return {"type": "image_url", "image_url": {"url": source.get("url")}}
    if kind == "document" and stype == "base64":
        return {"type": "file", "file": {"file_data": _data_url(source.get("media_type"), source.get("data")),
                                         "filename": raw.get("title") or "document"}}
    if kind == "document" and stype == "text" and isinstance(source.get("data"), str):
        return {"type": "text", "text": source["data"]}
    return omitted_text_part(kind, block.media_type)


class OpenAIFormat(Format):
    name = "openai"
    layout = Layout(results_per_message=True, result_role=Role.TOOL, alternate=False)
    schema_file = "openai.schema.json"

    def sniff(self, obj: Any) -> int:
        if not isinstance(obj, dict):
            return 0
        role = obj.get("role")
        if role is None and isinstance(obj.get("messages"), list):
            return 10  # a fine-tuning record: claim it so the parser can say what is wrong
        if obj.get("type") == "message" or not isinstance(role, str):
            return 0
        if role in ("developer", "tool", "function"):
            return 90
        if role not in ROLES:
            return 0
        if "tool_calls" in obj or "function_call" in obj:
            return 90
        content = obj.get("content")
        if content is None:
            return 60  # content null/absent: legal here, never for Anthropic
        if isinstance(content, str):
            return 40  # plain text: either format could read it
        if isinstance(content, list):
            types = block_types(content)
            if types & _ANTHROPIC_TYPES:
                return 0
            if types & {"image_url", "input_audio", "file", "refusal"}:
                return 90
            return 40
        return 5

    def parse_line(self, obj: Any, index: int, line: int, raw: bytes | None) -> Record:
        if not isinstance(obj, dict):
            raise LineError("$", f"expected a JSON object, got {json_type_name(obj)}")
        role = obj.get("role")
        if role is None:
            if isinstance(obj.get("messages"), list):
                raise LineError("$", 'this line holds a whole conversation ({"messages": [...]}, the '
                                "fine-tuning layout); the openai format expects one message per line "
                                "(split it, e.g. jq -c '.messages[]')")
            raise LineError("$.role", "missing: each line must be a message with a role")
        if not isinstance(role, str):
            raise LineError("$.role", f"expected a string, got {json_type_name(role)}")
        if role == "function":
            raise LineError("$.role", "the legacy 'function' role is not supported; write a 'tool' message "
                            "with tool_call_id instead")
        if role not in ROLES:
            raise LineError("$.role", f"unknown role {role!r}; expected one of {', '.join(ROLES)}")
        if "function_call" in obj:
            raise LineError("$.function_call", "the legacy function_call field is not supported; write "
                            "tool_calls (with ids) instead")
        blocks, was_string = _parse_content(obj.get("content"))
        # most lines have no unknown field: a set test in C instead of a comprehension per line
        extra = {} if obj.keys() <= _KNOWN else {k: v for k, v in obj.items() if k not in _KNOWN}
        usage = None
        if role == "tool":
            call_id = obj.get("tool_call_id")
            if not isinstance(call_id, str):
                what = ("missing: a tool message must name the call it answers" if call_id is None
                        else f"expected a string, got {json_type_name(call_id)}")
                raise LineError("$.tool_call_id", what)
            name = obj.get("name")
            # Chat Completions has no outcome field; an agent's own is_error / error beside the message is one
            flag, err = obj.get("is_error"), obj.get("error")
            succeeded = (not flag) if isinstance(flag, bool) else (False if err else None)
            result = ToolResult(call_id=call_id, content=blocks, name=name if isinstance(name, str) else None,
                                succeeded=succeeded)
            blocks = [result]
        elif "tool_calls" in obj:
            calls = obj["tool_calls"]
            if role != "assistant":
                raise LineError("$.tool_calls", f"only assistant messages carry tool calls, not {role!r}")
            if calls is not None:
                if not isinstance(calls, list):
                    raise LineError("$.tool_calls", f"expected an array, got {json_type_name(calls)}")
                blocks = blocks + [_parse_tool_call(c, f"$.tool_calls[{i}]") for i, c in enumerate(calls)]
        if role == "assistant":
            usage = _parse_usage(obj.get("usage"))
        # (positional, in the fields' order: keywords cost a dataclass __init__ per line about as much again)
        message = Message(ROLES[role], blocks, role, extra, was_string)
        return Record(index, line, raw, obj, message, usage)

    def finish(self, records: list[Record]) -> list[Record]:
        return link_result_names(records)

    def finish_stream(self, names: CallIds | None = None, kept: Any = None) -> Finish:
        return LinkNames(names)

    # -- writing ---------------------------------------------------------------------------------------

    def _content(self, blocks: list[Block], was_string: bool) -> Any:
        if was_string and len(blocks) == 1 and isinstance(blocks[0], TextBlock):
            return blocks[0].text
        parts: list[Any] = []
        for b in blocks:
            if isinstance(b, TextBlock):
                parts.append({**(b.raw or {}), "type": "text", "text": b.text})
            elif isinstance(b, ImageBlock):
                parts.append(_binary_part(b))
            elif isinstance(b, OpaqueBlock) and b.kind == "refusal":
                parts.append({**(b.raw or {}), "type": "refusal", "refusal": b.text})
            elif isinstance(b, OpaqueBlock) and isinstance(b.raw, dict) and b.raw.get("type") in PART_TYPES:
                parts.append(b.raw)
            # Thinking and other formats' opaque blocks have no Chat Completions form: not written.
        return parts

    def _call(self, call: ToolCall) -> dict[str, Any]:
        raw = call.raw if isinstance(call.raw, dict) and isinstance(call.raw.get("function"), dict) else {}
        fn = {**raw.get("function", {}), "name": call.name, "arguments": call.arguments}
        return _ordered({**raw, "id": call.id, "type": "function", "function": fn}, raw)

    def dump_message(self, message: Message, record: Record | None = None) -> Any:
        template = record.data if record is not None and isinstance(record.data, dict) else None
        results = message.tool_results()
        out: dict[str, Any]
        if message.role == Role.TOOL or results:
            if len(results) != 1 or len(message.blocks) != 1:
                raise ValueError("openai: a tool message carries exactly one tool result (use dump_messages)")
            res = results[0]
            out = {"role": "tool"}
            # the API requires content on tool messages: "" when there is none
            content = (self._content(res.content, message.content_was_string) if res.content
                       else _empty_content(template, ""))
            if content is not _OMIT:
                out["content"] = content
            out["tool_call_id"] = res.call_id
            out.update((k, v) for k, v in message.extra.items() if k not in out)
            return _ordered(out, template)
        role = message.source_role if ROLES.get(message.source_role) == message.role else message.role.value
        content_blocks: list[Block] = [b for b in message.blocks if not isinstance(b, ToolCall)]
        calls = message.tool_calls()
        out = {"role": role}
        content = (self._content(content_blocks, message.content_was_string) if content_blocks
                   else _empty_content(template, None))
        if content is not _OMIT:
            out["content"] = content
        if calls:
            out["tool_calls"] = [self._call(c) for c in calls]
        elif template is not None and "tool_calls" in template and not template["tool_calls"]:
            out["tool_calls"] = template["tool_calls"]  # an explicit null/[] stays; no calls left: omitted
        out.update((k, v) for k, v in message.extra.items() if k not in out)
        return _ordered(out, template)

    def dump_messages(self, message: Message) -> list[Any]:
        """The lines for a message from another format: each tool result becomes its own ``tool`` message
        (in order), followed by a message with the remaining content, if any."""
        results = message.tool_results()
        if not results:
            return [self.dump_message(message)]
        lines = [self.dump_message(Message(role=Role.TOOL, blocks=[r], source_role="tool")) for r in results]
        rest: list[Block] = [b for b in message.blocks if not isinstance(b, ToolResult)]
        if any(not isinstance(b, ThinkingBlock) for b in rest):
            role = Role.USER if message.role == Role.TOOL else message.role
            lines.append(self.dump_message(Message(role=role, blocks=rest, source_role=role.value)))
        return lines


FORMAT = OpenAIFormat()
