"""The OpenAI Agents SDK adapter driven by the SDK's own Runner with its ScriptedModel (no network): across a
long session the user's rule and the latest request survive three compactions, every function call keeps
its output, and the usage the model reports calibrates the next call."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")
from agents import Agent, RunConfig, Runner, Usage, function_tool
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

from ctxcompact.integrations.openai_agents import Compaction

RULE = "Rule: never push to main; always run the tests before committing."
WINDOW = 6_000


@function_tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"# {path}\n" + f"def handler_{path.replace('/', '_')}(x):\n    return x * 2\n" * 40


def _text(items: Any) -> str:
    import orjson

    return orjson.dumps([i if isinstance(i, dict) else i.model_dump(mode="json") for i in items]).decode()


async def _session(turns: int, prompt: int) -> tuple[ScriptedModel, Compaction]:
    steps: list[Any] = []
    for t in range(turns):
        usage = Usage(requests=1, input_tokens=prompt, output_tokens=5, total_tokens=prompt + 5)
        steps.append(ModelStep(output=[function_call("read_file", {"path": f"src/m{t}.py"}, call_id=f"c{t}")],
                               usage=usage))
        steps.append(ModelStep(output=[assistant_message(f"m{t} doubles its input.", item_id=f"m{t}")],
                               usage=usage))
    model = ScriptedModel(steps)
    agent = Agent(name="coder", instructions="You are a coding agent.", model=model, tools=[read_file])
    compaction = Compaction(window=WINDOW)
    history: list[Any] = []
    for t in range(turns):
        ask = RULE + " Start with src/m0.py." if t == 0 else f"Now explain src/m{t}.py."
        result = await Runner.run(agent, [*history, {"role": "user", "content": ask}],
                                  run_config=RunConfig(call_model_input_filter=compaction.filter),
                                  hooks=compaction.hooks)
        history = result.to_input_list()  # the SDK's own way of carrying a conversation on
    return model, compaction


def test_openai_agents_runner_loop() -> None:
    turns = 24
    model, compaction = asyncio.run(_session(turns, 100))
    calls = model.calls
    assert len(calls) == 2 * turns
    state = compaction.session.state
    assert state is not None and len(state.compactions) >= 3
    for k, call in enumerate(calls):
        text = _text(call.input)
        assert "never push to main" in text, f"call {k} lost the rule"
        ids = {i["call_id"] for i in map(_plain, call.input) if i.get("type") == "function_call"}
        outs = {i["call_id"] for i in map(_plain, call.input) if i.get("type") == "function_call_output"}
        assert ids <= outs
    for t in range(1, turns):
        assert f"src/m{t}.py" in _text(calls[2 * t].input)
    assert state.calibration.points  # the usage the model reported was observed


def _plain(item: Any) -> dict[str, Any]:
    return item if isinstance(item, dict) else item.model_dump(mode="json")


def test_usage_calibrates_the_next_call() -> None:
    _, compaction = asyncio.run(_session(2, 5_000))
    assert compaction.last is not None and compaction.last.tokens_before >= 5_000
