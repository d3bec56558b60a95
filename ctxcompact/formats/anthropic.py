"""Anthropic Messages API messages, one message per line.

Shape of a line (docs/reference/formats.md#how-each-is-read): ``role`` user/assistant, ``content`` a string or
an array of blocks (``text``,
``image``, ``document``, ``tool_use``, ``tool_result``, ``thinking``, ``redacted_thinking``, server-tool
blocks…). The API takes the system prompt as a request parameter, so a transcript carries it as a line
``{"role": "system", "content": string | text blocks}``. A whole response object (``"type": "message"``,
``id``, ``model``, ``usage``…) is read as an assistant line; its ``usage`` gives the prompt tokens billed,
which for Anthropic is ``input_tokens + cache_creation_input_tokens + cache_read_input_tokens``.

Blocks the model does not interpret (server tools, MCP, containers, unknown future types) are kept as
:class:`OpaqueBlock` whose token text is the block's compact JSON. Every block keeps its ``raw`` object and
is written back from it, with the model's fields laid over it, so unknown keys (``cache_control``,
``citations``…) survive a rewrite.
"""

from __future__ import annotations

from typing import Any

from ..call_ids import CallIds
from ..errors import LineError
from ..model import (
    EARLIER_SUMMARY,
    NO_META,
    OPAQUE_SUMMARY,
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
    anthropic_prompt_tokens,
)
from ..reader import encode_json, json_type_name
from .base import (
    Finish,
    Format,
    Layout,
    LinkNames,
    block_types,
    link_result_names,
    omitted_text_part,
    str_field,
)

ROLES = {"system": Role.SYSTEM, "user": Role.USER, "assistant": Role.ASSISTANT}
_KNOWN = {"role", "content"}
# Types that only Anthropic uses; their presence makes a line certainly Anthropic.
_OWN_TYPES = {"tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document",
              "server_tool_use", "web_search_tool_result", "mcp_tool_use", "mcp_tool_result",
              "container_upload", "search_result", "web_fetch_tool_result", "code_execution_tool_result"}
_OPENAI_TYPES = {"image_url", "input_audio", "file", "refusal"}


def _compact(value: Any) -> str:
    return encode_json(value).decode()


def _want_str(obj: dict[str, Any], key: str, path: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        what = ("missing" if key not in obj
                else f"expected a string, got {json_type_name(value)}")
        raise LineError(f"{path}.{key}", what)
    return value


def _compaction_meta(blocks: list[Block]) -> dict[str, Any]:
    """A message holding a ``compaction`` block (the Messages API's server-side compaction) carries an earlier
    summary (docs/concepts/handoff.md#earlier-summaries): readable when the block has text ``content``,
    opaque (kept as it is) otherwise."""
    found = [b for b in blocks if isinstance(b, OpaqueBlock) and b.kind == "compaction"]
    if not found:
        return NO_META
    readable = any(isinstance((b.raw or {}).get("content"), str) for b in found)
    return {EARLIER_SUMMARY: "anthropic", **({} if readable else {OPAQUE_SUMMARY: True})}


def _parse_block(block: Any, path: str, *, nested: bool = False) -> Block:
    if not isinstance(block, dict):
        raise LineError(path, f"expected a content block object, got {json_type_name(block)}")
    kind = block.get("type")
    if not isinstance(kind, str):
        raise LineError(f"{path}.type", "missing" if kind is None else
                        f"expected a string, got {json_type_name(kind)}")
    if kind == "text":
        return TextBlock(text=_want_str(block, "text", path), raw=block)
    if kind in ("image", "document"):
        source = block.get("source")
        media = source.get("media_type") if isinstance(source, dict) else None
        return ImageBlock(media_type=media if isinstance(media, str) else None, raw=block)
    if nested:
        # Inside a tool_result only text, image and document are defined: keep the rest opaque.
        return OpaqueBlock(kind=kind, text=_compact(block), raw=block)
    if kind == "tool_use":
        call_id = _want_str(block, "id", path)
        name = _want_str(block, "name", path)
        value = block.get("input")
        if not isinstance(value, dict):
            what = "missing" if "input" not in block else (
                f"expected an object, got {json_type_name(value)} (Anthropic tool input is a JSON object, "
                "not JSON text)")
            raise LineError(f"{path}.input", what)
        return ToolCall(id=call_id, name=name, arguments=_compact(value), input=value, raw=block)
    if kind == "tool_result":
        call_id = _want_str(block, "tool_use_id", path)
        content = block.get("content")
        blocks: list[Block]
        if content is None:
            blocks = []
        elif isinstance(content, str):
            blocks = [TextBlock(text=content)]
        elif isinstance(content, list):
            blocks = [_parse_block(b, f"{path}.content[{i}]", nested=True) for i, b in enumerate(content)]
        else:
            raise LineError(f"{path}.content", f"expected a string or an array of blocks, got "
                            f"{json_type_name(content)}")
        is_error = block.get("is_error", False)
        if not isinstance(is_error, bool):
            raise LineError(f"{path}.is_error", f"expected true or false, got {json_type_name(is_error)}")
        # the Messages API's is_error is the outcome when the log writes it; an absent flag says nothing
        succeeded = (not is_error) if "is_error" in block else None
        return ToolResult(call_id=call_id, content=blocks, is_error=is_error, raw=block, succeeded=succeeded)
    if kind == "thinking":
        sig = block.get("signature")
        return ThinkingBlock(text=_want_str(block, "thinking", path),
                             signature=sig if isinstance(sig, str) else None, raw=block)
    if kind == "redacted_thinking":
        return ThinkingBlock(text=_want_str(block, "data", path), redacted=True, raw=block)
    if kind in _OPENAI_TYPES:
        raise LineError(f"{path}.type", f"{kind!r} is an OpenAI content part, not an Anthropic block "
                        "(try --format openai)")
    return OpaqueBlock(kind=kind, text=_compact(block), raw=block)


def _parse_usage(usage: Any) -> Usage | None:
    total = anthropic_prompt_tokens(usage)
    if total is None:
        return None
    out = usage.get("output_tokens")
    output = out if isinstance(out, int) and not isinstance(out, bool) else None
    return Usage(prompt_tokens=total, output_tokens=output, source="usage.input_tokens+cache")


def _ordered(out: dict[str, Any], template: Any) -> dict[str, Any]:
    if not isinstance(template, dict):
        return out
    ordered = {k: out[k] for k in template if k in out}
    ordered.update((k, v) for k, v in out.items() if k not in ordered)
    return ordered


def _own(raw: Any, kind: str) -> dict[str, Any]:
    """``raw`` when it is an Anthropic block of ``kind`` (so its unknown keys are kept), else {}."""
    return raw if isinstance(raw, dict) and raw.get("type") == kind else {}


def binary_block(block: ImageBlock) -> dict[str, Any] | None:
    """The Anthropic ``image``/``document`` block for a binary block (converting OpenAI ``image_url`` and
    ``file`` parts, data URLs and http(s) URLs), or None when it has no Anthropic form."""
    raw = block.raw or {}
    kind = raw.get("type")
    if kind in ("image", "document"):
        return raw
    url = None
    if kind == "image_url" and isinstance(raw.get("image_url"), dict):
        url = raw["image_url"].get("url")
        target = "image"
    elif kind == "file" and isinstance(raw.get("file"), dict):
        url = raw["file"].get("file_data")
        target = "document"
    if isinstance(url, str) and url.startswith("data:") and ";base64," in url:
        head, data = url[5:].split(";base64,", 1)
        return {"type": target, "source": {"type": "base64", "media_type": head, "data": data}}
    if isinstance(url, str) and kind == "image_url":
        return {"type": "image", "source": {"type": "url", "url": url}}
    return None


def _binary_block(block: ImageBlock) -> dict[str, Any]:
    converted = binary_block(block)
    if converted is not None:
        return converted
    return omitted_text_part((block.raw or {}).get("type"), block.media_type)


class AnthropicFormat(Format):
    name = "anthropic"
    layout = Layout(results_per_message=False, result_role=Role.USER, alternate=True)
    schema_file = "anthropic.schema.json"

    def sniff(self, obj: Any) -> int:
        if not isinstance(obj, dict):
            return 0
        role = str_field(obj, "role")
        if role not in ROLES or "tool_calls" in obj or "tool_call_id" in obj or "function_call" in obj:
            return 0
        if obj.get("type") == "message" and role == "assistant":
            return 95
        content = obj.get("content")
        if isinstance(content, str):
            return 40  # plain text: either format could read it
        if isinstance(content, list):
            types = block_types(content)
            if types & _OPENAI_TYPES:
                return 0
            if types & _OWN_TYPES:
                return 90
            return 40 if types <= {"text"} else 20
        return 0  # content null or missing is not valid here

    def parse_line(self, obj: Any, index: int, line: int, raw: bytes | None) -> Record:
        if not isinstance(obj, dict):
            raise LineError("$", f"expected a JSON object, got {json_type_name(obj)}")
        role = obj.get("role")
        if role is None:
            raise LineError("$.role", "missing: each line must be a message with a role")
        if not isinstance(role, str):
            raise LineError("$.role", f"expected a string, got {json_type_name(role)}")
        if role not in ROLES:
            hint = " (tool results are tool_result blocks in a user message)" if role == "tool" else ""
            raise LineError("$.role", f"unknown role {role!r}; expected user, assistant or system{hint}")
        if "content" not in obj:
            raise LineError("$.content", "missing: a message needs content (a string or an array of blocks)")
        content = obj["content"]
        if isinstance(content, str):
            blocks: list[Block] = [TextBlock(text=content)]
            was_string = True
        elif isinstance(content, list):
            blocks = [_parse_block(b, f"$.content[{i}]") for i, b in enumerate(content)]
            was_string = False
        else:
            raise LineError("$.content",
                            f"expected a string or an array of blocks, got {json_type_name(content)}")
        if role == "system":
            for i, b in enumerate(blocks):
                if not isinstance(b, TextBlock):
                    raise LineError(f"$.content[{i}].type", "a system line may hold only text blocks")
        usage = _parse_usage(obj.get("usage")) if role == "assistant" else None
        extra = {k: v for k, v in obj.items() if k not in _KNOWN}
        message = Message(role=ROLES[role], blocks=blocks, source_role=role, extra=extra,
                          content_was_string=was_string)
        meta = _compaction_meta(blocks)
        return Record(index=index, line=line, raw=raw, data=obj, message=message, usage=usage, meta=meta)

    def finish(self, records: list[Record]) -> list[Record]:
        return link_result_names(records)

    def finish_stream(self, names: CallIds | None = None, kept: Any = None) -> Finish:
        return LinkNames(names)

    # -- writing ---------------------------------------------------------------------------------------

    def _block(self, b: Block) -> dict[str, Any] | None:
        if isinstance(b, TextBlock):
            return _ordered({**_own(b.raw, "text"), "type": "text", "text": b.text}, b.raw)
        if isinstance(b, ImageBlock):
            return _binary_block(b)
        if isinstance(b, ToolCall):
            value = b.input if isinstance(b.input, dict) else None
            if value is None:
                # arguments that are not a JSON object cannot be an Anthropic input: keep them visibly
                value = {} if b.arguments.strip() in ("", "{}") else {"arguments": b.arguments}
            raw = _own(b.raw, "tool_use")
            return _ordered({**raw, "type": "tool_use", "id": b.id, "name": b.name, "input": value}, raw)
        if isinstance(b, ToolResult):
            raw = _own(b.raw, "tool_result")
            out: dict[str, Any] = {**raw, "type": "tool_result", "tool_use_id": b.call_id}
            if not b.content:
                if "content" in raw:
                    # keep an empty value as it was; content that was emptied becomes ""
                    out["content"] = raw["content"] if not raw["content"] else ""
            elif (len(b.content) == 1 and isinstance(b.content[0], TextBlock)
                  and (not raw or isinstance(raw.get("content"), str))):
                out["content"] = b.content[0].text
            else:
                out["content"] = [d for d in (self._block(c) for c in b.content) if d is not None]
            if b.is_error or "is_error" in raw:
                out["is_error"] = b.is_error
            return _ordered(out, raw)
        if isinstance(b, ThinkingBlock):
            if b.redacted:
                raw = _own(b.raw, "redacted_thinking")
                # formats keep the opaque payload in text (here) or signature (Claude Code): either one
                data = b.text or b.signature or ""
                return _ordered({**raw, "type": "redacted_thinking", "data": data}, raw)
            if b.signature is None:
                return None  # the API refuses thinking without its signature: not written
            raw = _own(b.raw, "thinking")
            return _ordered({**raw, "type": "thinking", "thinking": b.text, "signature": b.signature}, raw)
        if isinstance(b, OpaqueBlock):
            if isinstance(b.raw, dict) and b.raw.get("type") == b.kind and b.kind not in _OPENAI_TYPES:
                return b.raw
            if b.kind == "refusal" and b.text:
                return {"type": "text", "text": b.text}
            return None  # another format's opaque part has no Anthropic form
        return None

    def dump_message(self, message: Message, record: Record | None = None) -> Any:
        template = record.data if record is not None and isinstance(record.data, dict) else None
        role = "user" if message.role == Role.TOOL else message.role.value
        blocks = [d for d in (self._block(b) for b in message.blocks) if d is not None]
        content: Any
        first = message.blocks[0] if len(message.blocks) == 1 else None
        content = first.text if message.content_was_string and isinstance(first, TextBlock) else blocks
        out: dict[str, Any] = {"role": role, "content": content}
        out.update((k, v) for k, v in message.extra.items() if k not in out)
        return _ordered(out, template)

    def dump_messages(self, message: Message) -> list[Any]:
        """The lines for a message from another format (one line: results stay blocks of a user message)."""
        return [self.dump_message(message)]


FORMAT = AnthropicFormat()
