"""LiteLLM (extra ``litellm``; docs/guides/frameworks.md#litellm): a ``CustomLogger`` that compacts the
messages of each chat completion and gives the usage of each response to the conversation's session.

- The proxy: ``async_pre_call_hook`` compacts ``data["messages"]`` (a file beside config.yaml makes the
  instance, ``litellm_settings: callbacks: <file>.<instance>`` loads it).
- The SDK: ``litellm.callbacks = [compaction]``; ``litellm.acompletion`` runs
  ``async_pre_call_deployment_hook`` on every call, which compacts ``kwargs["messages"]``.
  ``litellm.completion`` (sync) runs no hook that can change the request: pass
  ``messages=compaction.compact(messages)`` there.
- The usage of each response (``prompt_tokens``: LiteLLM folds cache reads and writes into it) goes to the
  session that compacted that call, by ``litellm_call_id``, from the post-call hooks LiteLLM awaits before it
  answers (``async_post_call_success_deployment_hook`` in ``acompletion``, ``async_post_call_success_hook``
  in the proxy), so it calibrates the very next call. The success *logging* callbacks run later, in the
  background, often after the next call has started: they are not used. After ``litellm.completion`` call
  ``compaction.observe(response)``.

A proxy serves many conversations through one instance: each has its own :class:`ctxcompact.Session`, found
by ``litellm_session_id`` when the request names one, else by the conversation's opening (its system prompt
and first user message, which a client resending its whole history always sends the same). At most
``max_sessions`` are kept (the least recently used is dropped).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import orjson
from litellm.integrations.custom_logger import CustomLogger

from ..messages import CompactResult, Session, acompact, compact

#: the call types whose ``messages`` are OpenAI chat messages
_CHAT = {"completion", "acompletion", "text_completion", "atext_completion"}
#: how many calls may wait for their usage (a call that failed never reports one)
_PENDING = 4096
#: how many proxy requests may be between the two pre-call hooks at once (the oldest is forgotten)
_IN_FLIGHT = 256


class _Conversation:
    """One conversation's session and how many calls it compacted (a usage for an earlier one is stale)."""

    __slots__ = ("calls", "session")

    def __init__(self) -> None:
        self.session = Session()
        self.calls = 0


def _call_type(call_type: Any) -> str:
    return str(getattr(call_type, "value", call_type))


class Compaction(CustomLogger):
    """Compact each chat completion's messages before they are sent; calibrate from each response's usage."""

    def __init__(self, *, window: int | None = None, model: str | None = None, max_sessions: int = 1024,
                 **options: Any) -> None:
        super().__init__()
        self.kwargs: dict[str, Any] = {"window": window, "model": model, "format": "openai", **options}
        self.max_sessions = max_sessions
        self._conversations: OrderedDict[str, _Conversation] = OrderedDict()
        # litellm_call_id → the conversation that compacted the call, and its call count then
        self._pending: OrderedDict[str, tuple[_Conversation, int]] = OrderedDict()
        self._sync: tuple[_Conversation, int] | None = None  # the last ``compact`` call, for ``observe``
        # the lists the proxy's hook returned, by id (each held, so no other list takes its id) → its
        # deployment hook leaves them alone
        self._done: OrderedDict[int, list[Any]] = OrderedDict()
        self._lock = threading.Lock()
        self.last: CompactResult | None = None  # what the last call did (for logs and tests)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # LiteLLM's proxy runs only an ``async_pre_call_hook`` the class itself defines (``vars(cls)``): a
        # subclass (one that logs, say) gets the nearest one as its own
        super().__init_subclass__(**kwargs)
        if "async_pre_call_hook" not in vars(cls):
            cls.async_pre_call_hook = cls.async_pre_call_hook  # type: ignore[method-assign]

    # sessions -------------------------------------------------------------------------------------------

    def session_for(self, messages: Sequence[Any], session_id: str | None = None) -> Session:
        """The session of the conversation these messages belong to (created on first sight)."""
        return self._conversation(messages, session_id).session

    def _conversation(self, messages: Sequence[Any], session_id: str | None) -> _Conversation:
        if session_id:
            key = "id:" + str(session_id)
        else:
            plain = [m for m in messages if isinstance(m, dict)]
            opening = [m for m in plain if m.get("role") in ("system", "developer")][:1]
            opening += [m for m in plain if m.get("role") == "user"][:1]
            data = orjson.dumps(opening, default=str, option=orjson.OPT_SORT_KEYS)
            key = "open:" + hashlib.sha256(data).hexdigest()
        with self._lock:
            conversation = self._conversations.pop(key, None) or _Conversation()
            self._conversations[key] = conversation
            while len(self._conversations) > self.max_sessions:
                self._conversations.popitem(last=False)
            return conversation

    def _expect_usage(self, call_id: Any, conversation: _Conversation) -> tuple[_Conversation, int]:
        with self._lock:
            conversation.calls += 1
            entry = (conversation, conversation.calls)
            if call_id:
                self._pending[str(call_id)] = entry
                while len(self._pending) > _PENDING:
                    self._pending.popitem(last=False)
            return entry

    def _observe_into(self, conversation: _Conversation, calls: int, response: Any) -> None:
        usage = getattr(response, "usage", None)
        prompt = getattr(usage, "prompt_tokens", None) if usage is not None else None
        with self._lock:
            current = conversation.calls == calls  # else a later call of the conversation was compacted
        if current and isinstance(prompt, int) and prompt > 0:
            conversation.session.observe({"prompt_tokens": prompt})

    # the step -------------------------------------------------------------------------------------------

    def compact(self, messages: list[Any], *, session_id: str | None = None, call_id: str | None = None
                ) -> list[Any]:
        """The messages to send (for ``litellm.completion``, which runs no pre-call hook)."""
        conversation = self._conversation(messages, session_id)
        entry = self._expect_usage(call_id, conversation)  # first: a late usage of the last call is stale now
        self.last = compact(messages, session=conversation.session, **self.kwargs)
        with self._lock:
            self._sync = entry
        return self.last.messages

    def observe(self, response: Any) -> None:
        """After ``litellm.completion``: the response's usage calibrates the conversation's next call."""
        with self._lock:
            last, self._sync = self._sync, None
        if last is not None:
            self._observe_into(*last, response)

    async def acompact(self, messages: list[Any], *, session_id: str | None = None,
                       call_id: str | None = None) -> list[Any]:
        """The same off the event loop (a worker thread)."""
        conversation = self._conversation(messages, session_id)
        self._expect_usage(call_id, conversation)
        self.last = await acompact(messages, session=conversation.session, **self.kwargs)
        return self.last.messages

    async def _hook(self, request: dict[str, Any], call_type: Any, *, proxy: bool) -> dict[str, Any]:
        messages = request.get("messages")
        if _call_type(call_type) not in _CHAT or not isinstance(messages, list) or not messages:
            return request
        with self._lock:
            if self._done.get(id(messages)) is messages:  # the proxy's hook already compacted this request
                del self._done[id(messages)]
                return request
        metadata = request.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        session_id = request.get("litellm_session_id") or metadata.get("litellm_session_id")
        out = await self.acompact(messages, session_id=session_id, call_id=request.get("litellm_call_id"))
        if proxy:  # its deployment hook comes next, in the same process
            with self._lock:
                self._done[id(out)] = out
                while len(self._done) > _IN_FLIGHT:
                    self._done.popitem(last=False)
        request["messages"] = out
        return request

    # LiteLLM's hooks ------------------------------------------------------------------------------------

    async def async_pre_call_hook(self, user_api_key_dict: Any, cache: Any, data: dict[str, Any],
                                  call_type: Any) -> dict[str, Any]:
        """The proxy's pre-call hook: compact ``data["messages"]``."""
        return await self._hook(data, call_type, proxy=True)

    async def async_pre_call_deployment_hook(self, kwargs: dict[str, Any], call_type: Any) -> dict[str, Any]:
        """Run by ``litellm.acompletion`` (SDK, Router and proxy) just before the request is sent."""
        return await self._hook(kwargs, call_type, proxy=False)

    def _observe_call(self, request: dict[str, Any], response: Any) -> None:
        with self._lock:
            pending = self._pending.pop(str(request.get("litellm_call_id")), None)
        if pending is not None:
            self._observe_into(*pending, response)

    async def async_post_call_success_deployment_hook(self, request_data: dict[str, Any], response: Any,
                                                      call_type: Any) -> Any:
        """Awaited by ``litellm.acompletion`` before it returns: the usage calibrates the next call."""
        self._observe_call(request_data, response)
        return None

    async def async_post_call_success_hook(self, data: dict[str, Any], user_api_key_dict: Any,
                                           response: Any) -> Any:
        """The proxy's post-call hook, awaited before it answers the client."""
        self._observe_call(data, response)
        return None
