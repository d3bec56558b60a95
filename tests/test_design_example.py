"""docs/DESIGN.md's worked example of a new strategy is real code: it is run here, registered, and used
through the public API, so the page cannot drift from the interface."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import coding_session, jsonl, sys_msg

from ctxcompact import api, plugins, strategies
from ctxcompact.errors import UsageError
from ctxcompact.facts.text import typed_text

DESIGN = Path(__file__).resolve().parent.parent / "docs" / "DESIGN.md"


def example_code() -> str:
    text = DESIGN.read_text(encoding="utf-8")
    m = re.search(r"<!-- example:strategy -->\n```python\n(.*?)```", text, re.S)
    assert m, "docs/DESIGN.md lost its worked example"
    return m.group(1)


@pytest.fixture(scope="module")
def registered() -> None:
    exec(compile(example_code(), str(DESIGN), "exec"), {})
    yield
    plugins.STRATEGIES.unregister("drop-oldest")


def test_the_example_strategy_works_through_the_api(registered: None, tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    log.write_bytes(jsonl([sys_msg("You are a coding agent."), *coding_session(12, tool_chars=2000)]))
    opts = api.Options(strategy="drop-oldest", window=8000, exact="none")
    assert "drop-oldest" in strategies.names()
    result = api.run(log, opts, output=tmp_path / "out.jsonl")
    assert result.compacted and result.tokens_after < result.estimate.budget.threshold
    out = api.load_transcript(tmp_path / "out.jsonl")
    assert out.records[0].message is not None and out.records[0].message.text() == "You are a coding agent."
    requests = [typed_text(r) for r in out.records if typed_text(r) is not None]
    assert requests and requests[-1].startswith("Turn 11:")  # the latest request is kept
    assert api.validate(tmp_path / "out.jsonl").ok  # whole turns: no call lost its result
    state = api.load_state(tmp_path / "s.jsonl.ctxstate.json")
    assert state is not None and [c.strategy for c in state.compactions] == ["drop-oldest"]


def test_a_built_in_name_cannot_be_taken_and_unknown_names_are_usage_errors(registered: None) -> None:
    class Fake:
        name = "threshold"

    with pytest.raises(ValueError, match="built-in"):
        strategies.register(Fake())  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="unknown strategy 'nope'"):
        strategies.get_strategy("nope")
