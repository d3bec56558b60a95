"""Pydantic AI (extra ``pydantic-ai``; docs/guides/frameworks.md#pydantic-ai):

    from pydantic_ai import Agent
    from ctxcompact.integrations.pydantic_ai import Compaction

    agent = Agent(model, tools=[...], capabilities=[Compaction(window=200_000)])

``Compaction`` is a capability (Pydantic AI 2 replaced ``history_processors=`` with capabilities): before
each model request it hands the messages to :func:`ctxcompact.acompact` as OpenAI chat dicts and sends the
model the result as ``ModelMessage`` objects (each unchanged message the agent's own object); the run's
history stays whole. After each request it gives the response's ``usage`` (``RequestUsage``, whose
``input_tokens`` already includes cache reads and writes) to the session. ``compaction.process`` /
``compaction.aprocess`` are the same step as a plain history processor
(``ProcessHistory(compaction.aprocess)``), which rewrites the history and observes the usage of the response
to the request it compacted last.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    BaseToolReturnPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryFeedbackPart,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from ..messages import CompactResult, Session, acompact, compact

#: where a chat dict came from: (index of the ModelMessage, index of its part, or None for a whole response)
_Origin = tuple[int, int | None]


def _user_content(content: Any) -> Any:
    if isinstance(content, str):
        return content
    items = []
    for item in content:  # an image, file or audio: a line naming it (only a summary reads it)
        if isinstance(item, str):
            items.append({"type": "text", "text": item})
        else:
            where = getattr(item, "url", None) or getattr(item, "identifier", None) or ""
            items.append({"type": "text", "text": f"[{getattr(item, 'kind', type(item).__name__)} {where}]"})
    return items


def _request_part(part: Any) -> dict[str, Any] | None:
    if isinstance(part, SystemPromptPart):
        return {"role": "system", "content": part.content}
    if isinstance(part, UserPromptPart):
        return {"role": "user", "content": _user_content(part.content)}
    if isinstance(part, BaseToolReturnPart):
        return {"role": "tool", "tool_call_id": part.tool_call_id, "content": part.model_response_str()}
    if isinstance(part, RetryPromptPart):  # deprecated: a tool's retry answers its call
        if part.tool_name is not None:
            return {"role": "tool", "tool_call_id": part.tool_call_id, "content": part.model_response()}
        return {"role": "user", "content": part.model_response()}
    if isinstance(part, RetryFeedbackPart):
        return {"role": "user", "content": part.model_response()}
    # bookkeeping parts (instruction and tool deltas…): carried with their message, never sent apart
    return None


def _response(message: ModelResponse) -> dict[str, Any]:
    text = "\n\n".join(p.content for p in message.parts if isinstance(p, TextPart))
    out: dict[str, Any] = {"role": "assistant", "content": text or None}
    calls = [{"id": p.tool_call_id, "type": "function",
              "function": {"name": p.tool_name, "arguments": p.args_as_json_str()}}
             for p in message.parts if isinstance(p, ToolCallPart)]
    if calls:
        out["tool_calls"] = calls
    elif not text:
        out["content"] = ""
    return out


def to_chat(messages: Sequence[ModelMessage]) -> tuple[list[dict[str, Any]], list[_Origin]]:
    """Pydantic AI messages as OpenAI chat dicts (a request's parts one dict each, a response one dict), with
    where each dict came from."""
    out: list[dict[str, Any]] = []
    origins: list[_Origin] = []
    for i, message in enumerate(messages):
        if isinstance(message, ModelResponse):
            out.append(_response(message))
            origins.append((i, None))
            continue
        for j, part in enumerate(message.parts):
            converted = _request_part(part)
            if converted is not None:
                out.append(converted)
                origins.append((i, j))
    return out, origins


def _new_request_part(d: dict[str, Any]) -> Any:
    content = d.get("content")
    if not isinstance(content, str):
        content = "\n\n".join(c.get("text", "") for c in content or [] if isinstance(c, dict))
    if d.get("role") == "system":
        return SystemPromptPart(content)
    if d.get("role") == "tool":
        return ToolReturnPart(tool_name="", content=content, tool_call_id=str(d.get("tool_call_id", "")))
    return UserPromptPart(content)


def _new_response(d: dict[str, Any]) -> ModelResponse:
    parts: list[Any] = [TextPart(d["content"])] if isinstance(d.get("content"), str) and d["content"] else []
    for call in d.get("tool_calls") or []:
        fn = call.get("function", {})
        parts.append(ToolCallPart(fn.get("name", ""), fn.get("arguments"), tool_call_id=call.get("id", "")))
    return ModelResponse(parts=parts)


def from_chat(result: list[Any], listed: list[dict[str, Any]], origins: list[_Origin],
              messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """``compact``'s output back as Pydantic AI messages: a message whose parts all came back unchanged is the
    agent's own object, one that lost some parts (a first request whose prompt was summarised) a copy with the
    rest, and the summary and its continuation new requests."""
    where = {id(d): o for d, o in zip(listed, origins, strict=True)}
    sent: dict[int, list[int | None]] = {}  # each message's parts that were converted
    for i, j in origins:
        sent.setdefault(i, []).append(j)
    out: list[ModelMessage] = []
    group: tuple[int, list[int | None]] | None = None
    fresh: list[Any] = []  # new request parts waiting to become one request

    def flush() -> None:
        nonlocal group
        if fresh:
            out.append(ModelRequest(parts=list(fresh)))
            fresh.clear()
        if group is None:
            return
        i, kept = group
        group = None
        original = messages[i]
        if kept == sent[i] or isinstance(original, ModelResponse):
            out.append(original)
            return
        keep = {j for j in kept if j is not None}
        unsent = {j for j, p in enumerate(original.parts) if _request_part(p) is None}
        out.append(dataclasses.replace(original, parts=[p for j, p in enumerate(original.parts)
                                                        if j in keep or j in unsent]))

    for d in result:
        origin = where.get(id(d))
        if origin is None:
            if group is not None:
                flush()
            if d.get("role") == "assistant":
                flush()
                out.append(_new_response(d))
            else:
                fresh.append(_new_request_part(d))
            continue
        i, j = origin
        if group is None or group[0] != i:
            flush()
            group = (i, [])
        group[1].append(j)
    flush()
    return out


class Compaction(AbstractCapability[Any]):
    """One conversation's compaction: a Pydantic AI capability (``capabilities=[compaction]``), and the same
    step as a history processor (``process`` sync, ``aprocess`` async)."""

    def __init__(self, *, window: int | None = None, model: str | None = None, session: Session | None = None,
                 **options: Any) -> None:
        self.session = session if session is not None else Session()
        self.kwargs: dict[str, Any] = {"window": window, "model": model, "format": "openai", **options}
        self.last: CompactResult | None = None  # what the last call did (for logs and tests)
        self._sent: ModelMessage | None = None  # the last message of the last request compacted

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds a session: not part of an agent spec

    # the step, sync and async ---------------------------------------------------------------------------

    def _observe_answer(self, messages: Sequence[ModelMessage]) -> None:
        """The response to the request compacted last, if it is in ``messages`` and not yet observed."""
        sent, self._sent = self._sent, None
        if sent is None:
            return
        for k in range(len(messages) - 1, -1, -1):
            if messages[k] is sent:
                answer = next((m for m in messages[k + 1:] if isinstance(m, ModelResponse)), None)
                if answer is not None:
                    self.observe(answer)
                return

    def observe(self, response: ModelResponse) -> None:
        """Give one response's usage to the session (skipped when the model reported none)."""
        usage = response.usage
        if usage.input_tokens > 0 and not usage.unmeasured_requests:
            self.session.observe({"input_tokens": usage.input_tokens})  # cache reads and writes included

    def _finish(self, messages: list[ModelMessage], listed: list[dict[str, Any]], origins: list[_Origin],
                result: CompactResult) -> list[ModelMessage]:
        self.last = result
        out = messages if not result.compacted and result.kept == len(listed) else \
            from_chat(result.messages, listed, origins, messages)
        self._sent = out[-1] if out else None
        return out

    def process(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """A history processor (``ProcessHistory(compaction.process)``): the messages to send."""
        self._observe_answer(messages)
        listed, origins = to_chat(messages)
        return self._finish(messages, listed, origins, compact(listed, session=self.session, **self.kwargs))

    async def aprocess(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """The async history processor: the work runs in a worker thread, off the event loop."""
        self._observe_answer(messages)
        listed, origins = to_chat(messages)
        result = await acompact(listed, session=self.session, **self.kwargs)
        return self._finish(messages, listed, origins, result)

    # the capability's hooks -----------------------------------------------------------------------------

    async def before_model_request(self, ctx: Any, request_context: Any) -> Any:
        request_context.messages = await self.aprocess(list(request_context.messages))
        return request_context

    async def after_model_request(self, ctx: Any, *, request_context: Any,
                                  response: ModelResponse) -> ModelResponse:
        self._sent = None
        self.observe(response)
        return response
