"""Google ADK (extra ``adk``; docs/guides/frameworks.md#google-adk), three ways, each one to three lines:

    from ctxcompact.integrations.adk import Compaction, CtxcompactPlugin, CtxcompactSummarizer

    compaction = Compaction(window=200_000)                       # the agent's callbacks
    agent = LlmAgent(..., before_model_callback=compaction.before_model,
                     after_model_callback=compaction.after_model)

    app = App(name="app", root_agent=agent, plugins=[CtxcompactPlugin(window=200_000)])   # every agent

    app = App(name="app", root_agent=agent, events_compaction_config=EventsCompactionConfig(
        compaction_interval=3, overlap_size=1, summarizer=CtxcompactSummarizer()))        # ADK's compaction

``before_model`` hands ``llm_request.contents`` (google-genai ``Content`` objects) to
:func:`ctxcompact.acompact` in a worker thread and rewrites the list in place with the result (unchanged
contents are ADK's own objects, the summary and continuation new ``Content``s); each ADK session and agent has
its own :class:`~ctxcompact.Session`. ``after_model`` gives ``llm_response.usage_metadata`` to that session
(calibration). ADK rebuilds the contents from the session's events at every call, so the events stay whole
and the session sees the conversation grow.

:class:`CtxcompactSummarizer` is ADK's ``BaseEventsSummarizer``: ADK chooses when and which events to compact,
ctxcompact writes the summary (its extractive summarizer by default, no model call) as the compaction event's
``compacted_content``. A summary of events that follow one it wrote carries that conversation's facts on.
"""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.adk.apps.base_events_summarizer import BaseEventsSummarizer
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions, EventCompaction
from google.adk.plugins.base_plugin import BasePlugin
from google.genai import types

from ..budget import DEFAULT_WINDOW
from ..messages import CompactResult, Session, acompact

#: how many ADK sessions (each agent of each) one adapter keeps state for; the oldest unused is dropped
MAX_SESSIONS = 1024


class _Sessions:
    """A ctxcompact Session per key, the least recently used dropped past ``limit`` (a file session's state
    stays on disk and is read again when its ADK session comes back)."""

    def __init__(self, limit: int, state_dir: str | os.PathLike[str] | None = None) -> None:
        self.limit = limit
        self.state_dir = Path(state_dir) if state_dir is not None else None
        self._by_key: OrderedDict[Any, Session] = OrderedDict()

    def _new(self, key: Any) -> Session:
        if self.state_dir is None:
            return Session()
        name = hashlib.sha256(repr(key).encode()).hexdigest()[:24]
        return Session(self.state_dir / f"adk-{name}.ctxstate.json")

    def get(self, key: Any) -> Session:
        session = self._by_key.get(key)
        if session is None:
            session = self._by_key[key] = self._new(key)
            while len(self._by_key) > self.limit:
                self._by_key.popitem(last=False)
        self._by_key.move_to_end(key)
        return session

    def find(self, key: Any) -> Session | None:
        return self._by_key.get(key)

    def __len__(self) -> int:
        return len(self._by_key)


def _key(callback_context: Any) -> tuple[str, str, str, str]:
    session = callback_context.session
    return (str(getattr(session, "app_name", "")), str(getattr(session, "user_id", "")),
            str(getattr(session, "id", "")), str(callback_context.agent_name))


class Compaction:
    """The agent's ``before_model_callback`` and ``after_model_callback`` (``before_model``, ``after_model``);
    the keyword arguments are :func:`ctxcompact.compact`'s (``window``, ``model``, ``strategy``,
    ``summarizer``, ``options``…). ``state_dir``: keep each session's state on disk in that folder
    (``Session(path)``, one file per ADK session and agent, with the conversation beside it for ``recall``)
    instead of in memory."""

    def __init__(self, *, window: int | None = None, model: str | None = None,
                 state_dir: str | os.PathLike[str] | None = None, max_sessions: int = MAX_SESSIONS,
                 **options: Any) -> None:
        self.kwargs: dict[str, Any] = {"window": window, "model": model, "format": "gemini", **options}
        self.sessions = _Sessions(max_sessions, state_dir)
        self.last: CompactResult | None = None  # what the last call did (for logs and tests)

    def session_for(self, callback_context: Any) -> Session:
        """The ctxcompact session of this ADK session and agent."""
        return self.sessions.get(_key(callback_context))

    async def before_model(self, callback_context: Any, llm_request: Any) -> None:
        contents = list(llm_request.contents)
        if not contents:
            return None
        result = await acompact(contents, session=self.session_for(callback_context), **self.kwargs)
        self.last = result
        if len(result.messages) != len(contents) or any(
                a is not b for a, b in zip(result.messages, contents, strict=True)):
            llm_request.contents[:] = result.messages
        return None  # None: the (rewritten) request goes to the model

    async def after_model(self, callback_context: Any, llm_response: Any) -> None:
        usage = getattr(llm_response, "usage_metadata", None)
        if usage is None or getattr(usage, "prompt_token_count", None) is None:
            return None  # a partial (streamed) response, or a model that reports none
        session = self.sessions.find(_key(callback_context))
        if session is not None and session.state is not None:
            session.observe(usage)
        return None


class CtxcompactPlugin(BasePlugin):
    """The same callbacks for every agent of an ``App`` (or ``Runner(plugins=…)``)."""

    def __init__(self, *, name: str = "ctxcompact", **kwargs: Any) -> None:
        super().__init__(name=name)
        self.compaction = Compaction(**kwargs)

    async def before_model_callback(self, *, callback_context: Any, llm_request: Any) -> None:
        return await self.compaction.before_model(callback_context, llm_request)

    async def after_model_callback(self, *, callback_context: Any, llm_response: Any) -> None:
        return await self.compaction.after_model(callback_context, llm_response)


def _digest(content: Any) -> str:
    return hashlib.sha256(content.model_dump_json(exclude_none=True).encode()).hexdigest()


@dataclass(slots=True)
class _Conversation:
    """What the summarizer keeps of one ADK conversation between its compactions."""

    session: Session = field(default_factory=Session)
    output: list[Any] = field(default_factory=list)  # the last compact() output (the summary's messages)
    summary: str = ""  # the digest of the last summary content it wrote
    start: float | None = None  # the first timestamp its summaries cover
    events: set[str] = field(default_factory=set)  # the ids of the events summarized so far


class CtxcompactSummarizer(BaseEventsSummarizer):
    """ADK's ``BaseEventsSummarizer`` for ``EventsCompactionConfig(summarizer=…)``: ctxcompact's summary of
    the events ADK hands over, as the compaction event's content. Keyword arguments as
    :func:`ctxcompact.compact` (``summarizer="anthropic"`` or ``"openai"`` for an LLM summary; ``window``
    sizes its budget).

    Each ADK conversation has its own ctxcompact session, found from what ADK hands back: the previous
    summary (the token-threshold trigger's seed) or events summarized before (a sliding window's overlap).
    Its summary carries the whole conversation on (the session's facts), so the compaction's range starts at
    the conversation's first summarized event and ADK shows it in place of the earlier ones it subsumes."""

    def __init__(self, *, window: int | None = None, model: str | None = None,
                 max_sessions: int = MAX_SESSIONS, **options: Any) -> None:
        # a summary is what was asked for: compact whatever the size (threshold 1 token)
        self.kwargs: dict[str, Any] = {"window": window or DEFAULT_WINDOW, "model": model, "format": "gemini",
                                       "threshold": "1", **options}
        self.conversations: OrderedDict[str, _Conversation] = OrderedDict()
        self.max_sessions = max_sessions
        self.last: CompactResult | None = None

    async def maybe_summarize_events(self, *, events: list[Event]) -> Event | None:
        if not events:
            return None
        conv, seeded = self._find(events)
        fresh = [e for e in events[1 if seeded else 0:] if e.id not in conv.events]
        contents = [*conv.output, *(e.content for e in fresh if e.content is not None and e.content.parts)]
        if not contents:
            return None
        result = await acompact(contents, session=conv.session, **self.kwargs)
        self.last = result
        if not result.compacted:
            return None  # not worth it (a summary would not shrink it): ADK goes on with the events
        new = [m for m in result.messages if not any(m is c for c in contents)]
        parts = [p for m in new for p in (m.parts or [])]
        if not parts:
            return None
        summary = types.Content(role="model", parts=parts)
        conv.output, conv.summary = result.messages, _digest(summary)
        conv.start = events[0].timestamp if conv.start is None else min(conv.start, events[0].timestamp)
        conv.events.update(e.id for e in events)
        compaction = EventCompaction(start_timestamp=conv.start, end_timestamp=events[-1].timestamp,
                                     compacted_content=summary)
        return Event(author="user", actions=EventActions(compaction=compaction), invocation_id=Event.new_id())

    def _find(self, events: list[Event]) -> tuple[_Conversation, bool]:
        """The conversation these events belong to, and whether the first event is its summary (a seed)."""
        first = events[0]
        digest = _digest(first.content) if first.content is not None and first.author == "model" else None
        ids = {e.id for e in events}
        for key, conv in reversed(self.conversations.items()):
            seeded = digest is not None and digest == conv.summary
            if seeded or conv.events & ids:
                self.conversations.move_to_end(key)
                return conv, seeded
        conv = self.conversations[first.id or Event.new_id()] = _Conversation()
        while len(self.conversations) > self.max_sessions:
            self.conversations.popitem(last=False)
        return conv, False
