"""The Pydantic AI adapter driven by Pydantic AI's own agent loop (Agent with real tools, FunctionModel as the
scripted model, no network): across a long session the window is never exceeded by what the model receives
(counted by the fake model's own tokenizer), the user's rule and the latest request survive three
compactions, every tool call keeps its return, the return the model just asked for is visible, and the usage
the model reports calibrates the next call. As a capability and as a history processor, sync and async."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import orjson
import pytest

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

import ctxcompact.messages
from ctxcompact.integrations.pydantic_ai import Compaction, from_chat, to_chat

RULE = "Rule: never push to main; always run the tests before committing."
WINDOW = 6_000


def read_file(path: str) -> str:
    """Read a file."""
    return f"# {path}\n" + f"def handler_{path.replace('/', '_')}(x):\n    return x * 2\n" * 40


def _text(messages: list[ModelMessage]) -> str:
    return orjson.dumps(to_chat(messages)[0]).decode()


def _tokens(messages: list[ModelMessage]) -> int:
    """The fake model's tokenizer: one token per 3.5 bytes of the chat JSON (denser than ctxcompact guesses,
    so the calibration has something to learn)."""
    return int(len(_text(messages)) / 3.5)


class Scripted:
    """Each turn: a read_file call for the file the latest user prompt names, then an answer; records what it
    was sent and reports its own count of it (plus a cache-read part, already inside input_tokens)."""

    def __init__(self, cache_read: int = 0) -> None:
        self.seen: list[list[ModelMessage]] = []
        self.cache_read = cache_read

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        usage = RequestUsage(input_tokens=_tokens(messages) + self.cache_read,
                             cache_read_tokens=self.cache_read)
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        if any(isinstance(p, ToolReturnPart) for p in last.parts):
            name = next(p.tool_name for p in last.parts if isinstance(p, ToolReturnPart))
            return ModelResponse(parts=[TextPart(f"{name} says it doubles its input.")], usage=usage)
        prompt = next(str(p.content) for p in reversed(last.parts) if p.part_kind == "user-prompt")
        path = next(w.strip(".") for w in prompt.split() if w.startswith("src/"))
        call = ToolCallPart("read_file", {"path": path}, tool_call_id=f"c{len(self.seen)}")
        return ModelResponse(parts=[call], usage=usage)


def _agent(model: Scripted, compaction: Compaction, mode: str) -> Agent[None, str]:
    if mode == "capability":
        caps: list[Any] = [compaction]
    else:
        caps = [ProcessHistory(compaction.process if mode == "process" else compaction.aprocess)]
    return Agent(FunctionModel(model), system_prompt="You are a coding agent.", tools=[read_file],
                 capabilities=caps)


def _ask(t: int, rule: str = RULE) -> str:
    return f"{rule} Start with src/m0.py." if t == 0 else f"Now explain src/m{t}.py."


async def _session(turns: int, mode: str, model: Scripted, compaction: Compaction, rule: str = RULE,
                   asynchronous: bool = True) -> list[Any]:
    agent = _agent(model, compaction, mode)
    history: list[ModelMessage] | None = None
    results = []
    for t in range(turns):
        if asynchronous:
            run = await agent.run(_ask(t, rule), message_history=history)
        else:
            run = await asyncio.to_thread(agent.run_sync, _ask(t, rule), message_history=history)
        history = run.all_messages()  # Pydantic AI's own way of carrying a conversation on
        results.append(compaction.last)
    return results


def _check_session(model: Scripted, compaction: Compaction, turns: int, rule: str = RULE) -> None:
    assert len(model.seen) == 2 * turns
    state = compaction.session.state
    assert state is not None and len(state.compactions) >= 3
    for k, sent in enumerate(model.seen):
        text = _text(sent)
        assert _tokens(sent) <= WINDOW, f"call {k}: {_tokens(sent)} tokens sent"
        assert rule.split(";")[0] in text, f"call {k} lost the rule"
        assert "You are a coding agent." in text, f"call {k} lost the system prompt"
        calls = {p.tool_call_id for m in sent if isinstance(m, ModelResponse) for p in m.parts
                 if isinstance(p, ToolCallPart)}
        returns = {p.tool_call_id for m in sent if isinstance(m, ModelRequest) for p in m.parts
                   if isinstance(p, ToolReturnPart)}
        assert calls <= returns, f"call {k}: tool calls without their return"
    for t in range(1, turns):
        for k in (2 * t, 2 * t + 1):  # the latest request, at both calls of the turn
            assert f"Now explain src/m{t}.py." in _text(model.seen[k])
        # the return the model just asked for is there verbatim
        assert f"handler_src_m{t}.py" in _text(model.seen[2 * t + 1]), f"turn {t}: the return is not visible"
    assert state.calibration.points  # the usage the model reported was observed


@pytest.mark.parametrize("mode", ["capability", "aprocess", "process"])
def test_pydantic_ai_agent_loop(mode: str) -> None:
    turns = 24
    model, compaction = Scripted(), Compaction(window=WINDOW)
    results = asyncio.run(_session(turns, mode, model, compaction, asynchronous=mode != "process"))
    assert sum(r.compacted for r in results) >= 1
    _check_session(model, compaction, turns)


class Recording(Compaction):
    """Records the estimate of every request (compaction.last is per request; a run makes several)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.estimates: list[int] = []

    async def aprocess(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        out = await super().aprocess(messages)
        assert self.last is not None
        self.estimates.append(self.last.tokens_before)
        return out


@pytest.mark.parametrize("mode", ["capability", "aprocess"])
def test_usage_calibrates_the_next_call_without_counting_the_cache_twice(mode: str) -> None:
    """RequestUsage.input_tokens already holds the cache reads: what was billed is the floor of the next
    estimate, and once calibrated the estimate is the model's own count, not 5,000 (the cache) over it."""
    model, compaction = Scripted(cache_read=5_000), Recording(window=200_000)
    asyncio.run(_session(4, mode, model, compaction))
    billed = [_tokens(sent) + 5_000 for sent in model.seen]
    estimates = compaction.estimates
    assert len(estimates) == len(billed) == 8
    assert estimates[0] < 1_000  # nothing observed yet: ctxcompact's own count
    for k in range(1, len(billed)):
        assert estimates[k] >= billed[k - 1], (k, estimates, billed)
    for k in range(2, len(billed)):
        assert abs(estimates[k] - billed[k]) < 1_000, (k, estimates, billed)


def test_two_sessions_in_one_process_share_nothing() -> None:
    """Two conversations at once on one agent, each with its own Compaction given per run."""
    turns = 12
    model = Scripted()
    agent = Agent(FunctionModel(model), system_prompt="You are a coding agent.", tools=[read_file])
    rules = [RULE, "Rule: answer in French; never touch the database."]
    compactions = [Compaction(window=WINDOW), Compaction(window=WINDOW)]

    async def conversation(rule: str, compaction: Compaction) -> None:
        history: list[ModelMessage] | None = None
        for t in range(turns):
            run = await agent.run(_ask(t, rule), message_history=history, capabilities=[compaction])
            history = run.all_messages()

    async def both() -> None:
        await asyncio.gather(*(conversation(r, c) for r, c in zip(rules, compactions, strict=True)))

    asyncio.run(both())
    for rule, other in (rules, rules[::-1]):
        mine = [sent for sent in model.seen if rule.split(";")[0] in _text(sent)]
        assert len(mine) == 2 * turns
        assert not any(other.split(";")[0] in _text(sent) for sent in mine)
    for compaction in compactions:
        state = compaction.session.state
        assert state is not None and len(state.compactions) >= 1


def test_the_loop_keeps_running_while_it_compacts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compaction runs in a worker thread: while it works (held here until then) the loop ticks."""
    real = ctxcompact.messages.compact
    windows: list[tuple[float, float, int]] = []
    ticks: list[float] = []

    def slow(*args: Any, **kwargs: Any) -> Any:
        start = time.monotonic()
        # (held until the loop has ticked 3 times, not for a fixed 50 ms: a loaded machine may not run the
        # loop's thread within 50 ms; a loop that stopped while this runs never ticks, and the check fails)
        seen, give_up = len(ticks), start + 30
        while sum(t >= start for t in ticks[seen:]) < 3 and time.monotonic() < give_up:
            time.sleep(0.005)
        out = real(*args, **kwargs)
        windows.append((start, time.monotonic(), threading.get_ident()))
        return out

    monkeypatch.setattr(ctxcompact.messages, "compact", slow)

    async def main() -> int:
        loop_thread = threading.get_ident()

        async def ticker() -> None:
            while True:
                ticks.append(time.monotonic())
                await asyncio.sleep(0.005)

        task = asyncio.create_task(ticker())
        await _session(3, "capability", Scripted(), Compaction(window=WINDOW))
        task.cancel()
        return loop_thread

    loop_thread = asyncio.run(main())
    assert windows and all(tid != loop_thread for _, _, tid in windows)
    for start, end, _ in windows:
        assert sum(start <= t <= end for t in ticks) >= 3  # the loop ran during each compaction


def test_conversion_round_trip_keeps_the_agents_own_objects() -> None:
    """Unchanged messages come back as the very objects given; an empty history is an empty list."""
    model, compaction = Scripted(), Compaction(window=200_000)
    asyncio.run(_session(2, "capability", model, compaction))
    sent = model.seen[-1]
    listed, origins = to_chat(sent)
    back = from_chat(list(listed), listed, origins, sent)
    assert len(back) == len(sent) and all(x is y for x, y in zip(back, sent, strict=True))
    assert to_chat([]) == ([], []) and from_chat([], [], [], []) == []
    assert Compaction(window=WINDOW).process([]) == []
