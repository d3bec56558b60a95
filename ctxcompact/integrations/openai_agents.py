"""OpenAI Agents SDK (extra ``openai-agents``; docs/guides/frameworks.md#openai-agents-sdk):

    from agents import Runner, RunConfig
    from ctxcompact.integrations.openai_agents import Compaction

    compaction = Compaction(window=200_000)
    result = await Runner.run(agent, "…", run_config=RunConfig(call_model_input_filter=compaction.filter),
                              hooks=compaction.hooks)

``filter`` (the SDK's ``call_model_input_filter``) hands the model input (Responses items) to
:func:`ctxcompact.acompact` and gives the model the result; the runner keeps its whole history, which the
session sees grow. ``hooks`` (``RunHooks``) gives each response's usage to the session (calibration).
"""

from __future__ import annotations

from typing import Any

from agents import RunHooks
from agents.run_config import CallModelData, ModelInputData

from ..messages import CompactResult, Session, acompact


class _Hooks(RunHooks):
    def __init__(self, session: Session) -> None:
        self.session = session

    async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
        usage = getattr(response, "usage", None)
        if usage is not None and getattr(usage, "input_tokens", None):
            self.session.observe(usage)


class Compaction:
    """One conversation's compaction for an Agents SDK run: ``filter`` and ``hooks``."""

    def __init__(self, *, window: int | None = None, model: str | None = None, session: Session | None = None,
                 **options: Any) -> None:
        self.session = session if session is not None else Session()
        self.kwargs: dict[str, Any] = {"window": window, "model": model, "format": "responses", **options}
        self.hooks = _Hooks(self.session)
        self.last: CompactResult | None = None

    async def filter(self, data: CallModelData[Any]) -> ModelInputData:
        md = data.model_data
        self.last = await acompact(list(md.input), session=self.session, **self.kwargs)
        return ModelInputData(input=self.last.messages, instructions=md.instructions)
