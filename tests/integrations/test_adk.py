"""The Google ADK adapter driven by ADK's own Runner (InMemoryRunner) with a scripted fake model (a
``BaseLlm`` returning scripted ``LlmResponse``s with function calls and usage_metadata; no network) and a
real tool: the agent's callbacks, the plugin, and the ``BaseEventsSummarizer`` for ADK's own
``EventsCompactionConfig``.

Across a long session with a small window: the window is never exceeded (counted on what the fake model
received), the user's rule and the latest request survive three compactions, every function call keeps its
response, the response the model just asked for is visible, the usage the fake model reports calibrates the
next call; two ADK sessions never share state; the async path leaves the event loop free."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncGenerator, Callable
from typing import Any

import orjson
import pytest
from providers import ProviderServer, openai_completion

pytest.importorskip("google.adk", reason="the adk extra is not installed")
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.apps.app import EventsCompactionConfig
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.genai import types

from ctxcompact.integrations.adk import Compaction, CtxcompactPlugin, CtxcompactSummarizer
from ctxcompact.options import Options
from ctxcompact.tokens.exact import get_encoding

# ADK marks EventsCompactionConfig and its summarizer interface experimental (a UserWarning on each use)
pytestmark = pytest.mark.filterwarnings("ignore:.*EXPERIMENTAL.*:UserWarning")

RULE = "Rule: never push to main; always run the tests before committing."
WINDOW = 6_000
SYSTEM = "You are a coding agent."
_ENC = get_encoding("o200k_base")  # the rank files ctxcompact ships (offline)


def read_file(path: str) -> dict[str, Any]:
    """Read a file of the project."""
    return {"status": "success",
            "content": f"# {path}\n" + f"def handler_{path.replace('/', '_')}(x):\n    return x * 2\n" * 40}


def billed(request: LlmRequest) -> int:
    """What the fake provider counts for a request: o200k tokens of its contents and system instruction as
    JSON (an independent count, not ctxcompact's)."""
    contents = [c.model_dump(mode="json", exclude_none=True) for c in request.contents]
    system = request.config.system_instruction if request.config is not None else None
    return len(_ENC.encode(orjson.dumps({"system": str(system or ""), "contents": contents}).decode()))


class ScriptedGemini(BaseLlm):
    """For each user turn: a read_file call, then an answer. Records what it was sent (as JSON text and its
    billed size) and reports that size as usage_metadata.prompt_token_count, as Gemini does."""

    model: str = "scripted-gemini"
    seen: list[list[dict[str, Any]]] = []  # noqa: RUF012 (a pydantic field: each model gets its own)
    sizes: list[int] = []  # noqa: RUF012
    report: int | None = None  # a fixed prompt count to report instead of the measured one

    async def generate_content_async(self, llm_request: LlmRequest,
                                     stream: bool = False) -> AsyncGenerator[LlmResponse, None]:
        sent = [c.model_dump(mode="json", exclude_none=True) for c in llm_request.contents]
        self.seen.append(sent)
        size = billed(llm_request)
        self.sizes.append(size)
        last = sent[-1]["parts"] if sent else []
        asked = next((p["text"] for c in reversed(sent) if c["role"] == "user" for p in c["parts"]
                      if "text" in p), "")
        path = asked.split("src/", 1)[1].split()[0].rstrip(".") if "src/" in asked else "x.py"
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=self.report if self.report is not None else size, candidates_token_count=7,
            cached_content_token_count=0)
        if any("function_response" in p for p in last):
            content = types.Content(role="model", parts=[types.Part(text=f"src/{path} doubles its input.")])
        else:
            n = len(self.seen)
            content = types.Content(role="model", parts=[types.Part(function_call=types.FunctionCall(
                id=f"call-{n}", name="read_file", args={"path": f"src/{path}"}))])
        yield LlmResponse(content=content, usage_metadata=usage)


def _agent(model: ScriptedGemini, **callbacks: Any) -> LlmAgent:
    return LlmAgent(name="coder", model=model, instruction=SYSTEM, tools=[read_file], **callbacks)


async def _turns(runner: InMemoryRunner, session_id: str, turns: int, rule: str = RULE) -> None:
    await runner.session_service.create_session(app_name=runner.app_name, user_id="u", session_id=session_id)
    for t in range(turns):
        ask = f"{rule} Start with src/m0.py." if t == 0 else f"Now explain src/m{t}.py."
        message = types.Content(role="user", parts=[types.Part(text=ask)])
        async for _ in runner.run_async(user_id="u", session_id=session_id, new_message=message):
            pass


def _ids(sent: list[dict[str, Any]]) -> tuple[set[str], set[str]]:
    """The ids of the function calls and of the function responses in what the model was sent."""
    parts = [p for c in sent for p in c["parts"]]
    return ({p["function_call"]["id"] for p in parts if "function_call" in p},
            {p["function_response"]["id"] for p in parts if "function_response" in p})


def _check_calls(model: ScriptedGemini, turns: int, rule: str = RULE) -> None:
    assert len(model.seen) == 2 * turns
    for k, sent in enumerate(model.seen):
        text = orjson.dumps(sent).decode()
        assert rule.split(";")[0] in text, f"call {k} lost the rule"
        assert model.sizes[k] <= WINDOW, f"call {k}: {model.sizes[k]} tokens sent, window {WINDOW}"
        calls, answered = _ids(sent)
        assert calls <= answered, f"call {k}: {calls - answered} unanswered"
    for t in range(1, turns):  # the latest request reaches both calls of its turn
        for k in (2 * t, 2 * t + 1):
            assert f"src/m{t}.py" in orjson.dumps(model.seen[k]).decode(), f"call {k} lost the request"
        # the call after the tool ran sees the response it asked for, verbatim
        assert f"handler_src_m{t}.py" in orjson.dumps(model.seen[2 * t + 1]).decode()


@pytest.mark.parametrize("how", ["callbacks", "plugin"])
def test_adk_runner_loop(how: str) -> None:
    turns = 24
    model = ScriptedGemini(seen=[], sizes=[])
    if how == "callbacks":
        compaction = Compaction(window=WINDOW)
        runner = InMemoryRunner(agent=_agent(model, before_model_callback=compaction.before_model,
                                             after_model_callback=compaction.after_model), app_name="t")
    else:
        plugin = CtxcompactPlugin(window=WINDOW)
        compaction = plugin.compaction
        runner = InMemoryRunner(app=App(name="t", root_agent=_agent(model), plugins=[plugin]))
    asyncio.run(_turns(runner, "s1", turns))
    _check_calls(model, turns)
    assert len(compaction.sessions) == 1
    session = compaction.sessions.find(("t", "u", "s1", "coder"))
    assert session is not None
    state = session.state
    assert state is not None and len(state.compactions) >= 3
    assert state.calibration.points  # the usage the fake model reported was observed
    # the conversation is far over the window, and the calls went close to it before each compaction
    assert len(_ENC.encode(session.history().decode())) > 3 * WINDOW
    assert max(model.sizes) > 0.6 * WINDOW


def test_usage_calibrates_the_next_call() -> None:
    model = ScriptedGemini(seen=[], sizes=[], report=5_000)
    compaction = Compaction(window=200_000)
    runner = InMemoryRunner(agent=_agent(model, before_model_callback=compaction.before_model,
                                         after_model_callback=compaction.after_model), app_name="t")
    asyncio.run(_turns(runner, "s", 1))
    # the first call was estimated from the text alone; the second knows the provider counted 5,000
    assert compaction.last is not None and compaction.last.tokens_before >= 5_000 * 0.9
    assert model.sizes[-1] < 1_000  # what was really sent is small: the figure came from the usage


def test_two_sessions_never_share_state() -> None:
    model = ScriptedGemini(seen=[], sizes=[])
    compaction = Compaction(window=WINDOW)
    runner = InMemoryRunner(agent=_agent(model, before_model_callback=compaction.before_model,
                                         after_model_callback=compaction.after_model), app_name="t")
    rules = {"a": "Rule: answer in French; never use tabs.", "b": "Rule: answer in Latin; never use spaces."}

    async def both() -> None:
        await asyncio.gather(_turns(runner, "a", 12, rules["a"]), _turns(runner, "b", 12, rules["b"]))

    asyncio.run(both())
    assert len(compaction.sessions) == 2
    for sent in model.seen:
        text = orjson.dumps(sent).decode()
        assert ("French" in text) != ("Latin" in text)  # each call holds its own conversation only
    for sid in ("a", "b"):
        s = compaction.sessions.find(("t", "u", sid, "coder"))
        assert s is not None and s.state is not None and s.state.compactions
        other = rules["b" if sid == "a" else "a"].split(":")[1].split(";")[0]
        assert other.encode() not in s.history()


def test_the_event_loop_is_not_blocked() -> None:
    """While before_model compacts with an LLM summarizer (an OpenAI-compatible server on 127.0.0.1 that takes
    0.3 s to answer), the loop keeps running other tasks: the work is in a worker thread."""
    ticks: list[float] = []

    def after_ticks(body: Any) -> Callable[[Any], Any]:
        def answer(request: Any) -> Any:
            # (the reply also waits for 10 ticks of the loop after the request came, not on 0.3 s alone: a
            # loaded machine may not run the loop's thread 10 times in 0.3 s; a blocked loop never ticks)
            came, seen = time.perf_counter(), len(ticks)
            while sum(t >= came for t in ticks[seen:]) < 10 and time.perf_counter() < came + 30:
                time.sleep(0.005)
            return body
        return answer

    with ProviderServer() as server:
        reply = f"## User goals and rules\n- {RULE}\n"
        server.push(*(dataclasses.replace(r, body=after_ticks(r.body))
                      for r in (openai_completion(reply, delay=0.3) for _ in range(20))))
        opts = Options(keep_trailing_results=True, summarizer="openai", summary_model="gpt-test",
                       base_url=server.openai_url, api_key="k", max_retries=0)
        model = ScriptedGemini(seen=[], sizes=[])
        compaction = Compaction(window=WINDOW, options=opts)
        spans: list[tuple[float, float]] = []

        async def timed(callback_context: Any, llm_request: Any) -> None:
            start = time.perf_counter()
            await compaction.before_model(callback_context, llm_request)
            spans.append((start, time.perf_counter()))

        runner = InMemoryRunner(agent=_agent(model, before_model_callback=timed,
                                             after_model_callback=compaction.after_model), app_name="t")

        async def main() -> None:
            done = asyncio.Event()

            async def ticker() -> None:
                while not done.is_set():
                    ticks.append(time.perf_counter())
                    await asyncio.sleep(0.005)

            task = asyncio.create_task(ticker())
            await _turns(runner, "s", 8)
            done.set()
            await task

        asyncio.run(main())
        summaries = server.requests_to("/v1/chat/completions")
    assert summaries, "no compaction asked the summarizer"
    slow = [(a, b) for a, b in spans if b - a >= 0.3]
    assert len(slow) >= len(summaries) >= 1  # each compaction waited for the server
    # a callback that blocked the loop would see no tick while it waits; the loop ticks every 5 ms
    during = [sum(1 for t in ticks if a < t < b) for a, b in slow]
    assert all(n >= 10 for n in during), f"the loop did not run during the compactions: {during}"


# ------------------------------------------------------------------------- ADK's own compaction (summarizer)


def _compaction_events(runner: InMemoryRunner, sid: str) -> list[Any]:
    async def get() -> Any:
        return await runner.session_service.get_session(app_name=runner.app_name, user_id="u", session_id=sid)

    session = asyncio.run(get())
    return [e for e in session.events if e.actions and e.actions.compaction]


@pytest.mark.parametrize("config", ["sliding_window", "token_threshold"])
def test_events_compaction_with_the_ctxcompact_summarizer(config: str) -> None:
    turns = 12
    model = ScriptedGemini(seen=[], sizes=[])
    summarizer = CtxcompactSummarizer()
    if config == "sliding_window":
        cfg = EventsCompactionConfig(compaction_interval=3, overlap_size=1, summarizer=summarizer)
    else:
        cfg = EventsCompactionConfig(token_threshold=3_000, event_retention_size=2, summarizer=summarizer)
    runner = InMemoryRunner(app=App(name="t", root_agent=_agent(model), events_compaction_config=cfg))
    asyncio.run(_turns(runner, "s", turns))
    events = _compaction_events(runner, "s")
    assert len(events) >= 3
    for e in events:
        c = e.actions.compaction
        assert c.start_timestamp <= c.end_timestamp and c.compacted_content.role == "model"
        assert "ctxcompact summary" in c.compacted_content.parts[0].text.lower()
    later = [orjson.dumps(sent).decode() for sent in model.seen if "ctxcompact summary" in
             orjson.dumps(sent).decode().lower()]
    assert len(later) >= 3  # ADK sends our summary in place of the events it replaced
    # each summary carries the whole conversation on, and its range subsumes the earlier ones: ADK shows one
    assert all(text.count("ctxcompact summary of the earlier conversation") == 1 for text in later)
    for k, sent in enumerate(model.seen):
        text = orjson.dumps(sent).decode()
        assert "never push to main" in text, f"call {k} lost the rule"
        calls, answered = _ids(sent)
        assert calls <= answered
    for t in range(1, turns):
        assert f"src/m{t}.py" in orjson.dumps(model.seen[2 * t]).decode()
    # later summaries carry the conversation's facts on (one ctxcompact session per ADK conversation)
    assert len(summarizer.conversations) == 1


def test_the_summarizer_keeps_two_conversations_apart() -> None:
    model = ScriptedGemini(seen=[], sizes=[])
    summarizer = CtxcompactSummarizer()
    cfg = EventsCompactionConfig(compaction_interval=2, overlap_size=1, summarizer=summarizer)
    runner = InMemoryRunner(app=App(name="t", root_agent=_agent(model), events_compaction_config=cfg))
    rules = {"a": "Rule: answer in French; never use tabs.", "b": "Rule: answer in Latin; never use spaces."}

    async def both() -> None:
        await asyncio.gather(_turns(runner, "a", 8, rules["a"]), _turns(runner, "b", 8, rules["b"]))

    asyncio.run(both())
    assert len(summarizer.conversations) == 2
    assert len(_compaction_events(runner, "a")) >= 3 and len(_compaction_events(runner, "b")) >= 3
    for sent in model.seen:
        text = orjson.dumps(sent).decode()
        assert ("French" in text) != ("Latin" in text)


def test_summarizer_edges() -> None:
    from google.adk.events.event import Event

    summarizer = CtxcompactSummarizer()
    assert asyncio.run(summarizer.maybe_summarize_events(events=[])) is None
    # events with no content (state changes, an empty turn) give nothing to summarize
    bare = [Event(author="user", invocation_id="i1"), Event(author="coder", invocation_id="i1")]
    assert asyncio.run(summarizer.maybe_summarize_events(events=bare)) is None
    # a summary that would not shrink a short exchange is not written: ADK goes on with the events
    short = [Event(author="user", invocation_id="i2", content=types.Content(
                 role="user", parts=[types.Part(text="héllo ✓")])),
             Event(author="coder", invocation_id="i2", content=types.Content(
                 role="model", parts=[types.Part(text="hi")]))]
    assert asyncio.run(summarizer.maybe_summarize_events(events=short)) is None
    assert summarizer.last is not None and not summarizer.last.compacted


def test_an_empty_request_is_left_alone() -> None:
    compaction = Compaction(window=WINDOW)

    class Ctx:  # the two fields of ADK's CallbackContext the adapter reads
        agent_name = "coder"
        session = None

    request = LlmRequest(contents=[])
    asyncio.run(compaction.before_model(Ctx(), request))
    assert request.contents == [] and compaction.last is None and len(compaction.sessions) == 0


def test_state_on_disk_outlives_the_adapter(tmp_path: Any) -> None:
    """With ``state_dir`` each ADK session's state is a file: a new adapter (a restarted process) on the same
    ADK session goes on from it, and its continuations name the conversation file ``recall`` searches."""
    model = ScriptedGemini(seen=[], sizes=[])
    callbacks: dict[str, Any] = {}
    phase: dict[str, int] = {}

    async def before(callback_context: Any, llm_request: Any) -> None:
        await callbacks["c"].before_model(callback_context, llm_request)

    async def after(callback_context: Any, llm_response: Any) -> None:
        await callbacks["c"].after_model(callback_context, llm_response)

    runner = InMemoryRunner(agent=_agent(model, before_model_callback=before, after_model_callback=after),
                            app_name="t")
    callbacks["c"] = first = Compaction(window=WINDOW, state_dir=tmp_path)

    async def go() -> None:
        await _turns(runner, "s", 12)
        session = first.sessions.find(("t", "u", "s", "coder"))
        state = session.state if session is not None else None
        phase["compactions"] = len(state.compactions) if state is not None else 0
        callbacks["c"] = Compaction(window=WINDOW, state_dir=tmp_path)  # the process restarts
        for t in range(12, 24):
            message = types.Content(role="user", parts=[types.Part(text=f"Now explain src/m{t}.py.")])
            async for _ in runner.run_async(user_id="u", session_id="s", new_message=message):
                pass

    asyncio.run(go())
    files = sorted(p.name for p in tmp_path.iterdir())
    assert len([f for f in files if f.endswith(".ctxstate.json")]) == 1, files
    assert any(f.endswith(".history.jsonl") for f in files)
    s1 = first.sessions.find(("t", "u", "s", "coder"))
    s2 = callbacks["c"].sessions.find(("t", "u", "s", "coder"))
    assert s1 is not None and s2 is not None and s1.path == s2.path
    st = s2.state
    assert st is not None and len(st.compactions) >= 3 and st.calibration.points
    assert 1 <= phase["compactions"] < len(st.compactions)  # the second adapter went on from the file
    for k, sent in enumerate(model.seen):
        assert "never push to main" in orjson.dumps(sent).decode(), f"call {k} lost the rule"
        assert model.sizes[k] <= WINDOW
    assert str(s2.history_path) in orjson.dumps(model.seen[-1]).decode()  # the continuation cites it
