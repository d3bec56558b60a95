"""Real ADK sessions: events written by ADK's own Runner (``InMemoryRunner``) and serialized as its API
server serializes them (``Event.model_dump_json(by_alias=True, exclude_none=True)``: camelCase, one event a
line), driven by a scripted model (a ``BaseLlm`` answering each request with a tool call, then a sentence; no
network) and a real tool. A session continues from a log (ours, after a compaction) by loading its events
into a new session first: what ADK sends the model then is what ADK makes of that log (its compaction
events hide the ranges they name). Needs the ``adk`` extra (``pytest.importorskip`` in the caller)."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import AsyncGenerator
from typing import Any


def read_file(path: str) -> dict[str, Any]:
    """Read a file of the project."""
    return {"status": "success", "content": f"# {path}\n" + "def handler(x):\n    return x * 2\n" * 40}


def session(turns: int, log: list[bytes] = (), first: int = 0,  # type: ignore[assignment]
            own: bool = False) -> list[bytes]:
    """The events ADK writes for ``turns`` requests (``Explain src/m<first + t>.py.``) after the events of
    ``log``, which are loaded first (and not returned). ``own``: with ADK's own compaction too
    (``EventsCompactionConfig``, every 4 invocations, ctxcompact's summarizer): its compaction events."""
    from google.adk.agents import LlmAgent
    from google.adk.apps import App
    from google.adk.apps.app import EventsCompactionConfig
    from google.adk.events import Event
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    class Scripted(BaseLlm):
        model: str = "scripted"

        async def generate_content_async(self, llm_request: LlmRequest,
                                         stream: bool = False) -> AsyncGenerator[LlmResponse, None]:
            last = llm_request.contents[-1].parts or [] if llm_request.contents else []
            n = len(llm_request.contents)
            if any(p.function_response for p in last):
                content = types.Content(role="model", parts=[types.Part(text=f"It doubles its input ({n}).")])
            else:
                asked = next((p.text for c in reversed(llm_request.contents) if c.role == "user"
                              for p in c.parts or [] if p.text), "") or ""
                path = asked.split()[-1].rstrip(".") if asked else "x.py"
                content = types.Content(role="model", parts=[types.Part(function_call=types.FunctionCall(
                    id=f"call-{first}-{n}", name="read_file", args={"path": path}))])
            usage = types.GenerateContentResponseUsageMetadata(prompt_token_count=100 * n,
                                                              candidates_token_count=7)
            yield LlmResponse(content=content, usage_metadata=usage)

    async def run() -> list[bytes]:
        agent = LlmAgent(name="coder", model=Scripted(), instruction="You are a coding agent.",
                         tools=[read_file])
        if own:
            from ctxcompact.integrations.adk import CtxcompactSummarizer

            config = EventsCompactionConfig(compaction_interval=4, overlap_size=1,
                                            summarizer=CtxcompactSummarizer())
            runner = InMemoryRunner(app=App(name="t", root_agent=agent, events_compaction_config=config))
        else:
            runner = InMemoryRunner(agent=agent, app_name="t")
        made = await runner.session_service.create_session(app_name="t", user_id="u", session_id="s")
        for line in log:
            await runner.session_service.append_event(made, Event.model_validate_json(line))
        for t in range(turns):
            ask = f"Explain src/m{first + t}.py."
            message = types.Content(role="user", parts=[types.Part(text=ask)])
            async for _ in runner.run_async(user_id="u", session_id="s", new_message=message):
                pass
        done = await runner.session_service.get_session(app_name="t", user_id="u", session_id="s")
        assert done is not None
        return [e.model_dump_json(by_alias=True, exclude_none=True).encode() + b"\n"
                for e in done.events[len(log):]]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (ADK marks parts of its API experimental)
        return asyncio.run(run())
