"""LangChain v1 middleware (extra ``langchain``; docs/guides/frameworks.md#langchain):

    from langchain.agents import create_agent
    from ctxcompact.integrations.langchain import CtxcompactMiddleware

    agent = create_agent(model, tools, middleware=[CtxcompactMiddleware(window=200_000)])

``before_model`` hands the agent's messages to :func:`ctxcompact.compact` (as OpenAI chat dicts, LangChain's
own conversion) and, when it compacted, replaces the state's messages with the result, the way LangChain's
``SummarizationMiddleware`` does; unchanged messages are the agent's own objects. ``after_model`` gives the
model's ``usage_metadata`` to the session (calibration). The async hooks run the work off the event loop.
"""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import (
    BaseMessage,
    RemoveMessage,
    convert_to_messages,
    convert_to_openai_messages,
)
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from ..messages import CompactResult, Session, acompact, compact


class CtxcompactMiddleware(AgentMiddleware):
    """Compact the agent's history before each model call when it is over the threshold."""

    def __init__(self, *, window: int | None = None, model: str | None = None, session: Session | None = None,
                 **options: Any) -> None:
        super().__init__()
        self.session = session if session is not None else Session()
        self.kwargs: dict[str, Any] = {"window": window, "model": model, "format": "openai", **options}
        self.last: CompactResult | None = None  # what the last call did (for logs and tests)

    def _update(self, messages: list[BaseMessage], listed: list[dict[str, Any]],
                result: CompactResult) -> dict[str, Any] | None:
        self.last = result
        if not result.compacted:
            return None
        by_id = {id(d): m for d, m in zip(listed, messages, strict=True)}
        out = [by_id[id(m)] if id(m) in by_id else convert_to_messages([m])[0] for m in result.messages]
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *out]}

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        messages = list(state["messages"])
        listed = convert_to_openai_messages(messages)
        return self._update(messages, listed, compact(listed, session=self.session, **self.kwargs))

    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        messages = list(state["messages"])
        listed = convert_to_openai_messages(messages)
        return self._update(messages, listed, await acompact(listed, session=self.session, **self.kwargs))

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        messages = state["messages"]
        usage = getattr(messages[-1], "usage_metadata", None) if messages else None
        if usage:
            self.session.observe(usage)
        return None

    async def aafter_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return self.after_model(state, runtime)
