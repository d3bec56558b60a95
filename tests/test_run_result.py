"""What ``run`` returns is the same kind of object on every route (issue 25): on the usual hook call (the
fast route, the input written unchanged) ``RunResult.transcript`` and ``.context`` are plain ``Transcript``s
holding the records the full route gives, and ``dataclasses.replace`` works on them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import orjson
import pytest

from ctxcompact import api, engine
from ctxcompact.model import Transcript


def _conversation(turns: int) -> bytes:
    lines = [{"role": "system", "content": "You are terse. Ünïcödé ok."}]
    for i in range(turns):
        lines += [{"role": "user", "content": f"question {i} — 日本語"},
                  {"role": "assistant", "content": None, "tool_calls": [{"id": f"c{i}", "type": "function",
                   "function": {"name": "ls", "arguments": "{}"}}]},
                  {"role": "tool", "tool_call_id": f"c{i}", "content": f"file{i}.txt"},
                  {"role": "assistant", "content": f"answer {i}"}]
    return b"".join(orjson.dumps(m) + b"\n" for m in lines)


CASES = {"one-turn.jsonl": _conversation(1), "many-turns.jsonl": _conversation(200)}


def _run(name: str, tmp: Path, *, fast: bool) -> api.RunResult:
    path = tmp / ("fast" if fast else "full") / name
    path.parent.mkdir()
    path.write_bytes(CASES[name])
    saved = engine._fast_run
    if not fast:
        engine._fast_run = lambda *a, **k: None  # type: ignore[assignment]
    try:
        return api.run(path, api.Options(window=400_000), output=path.with_suffix(".out.jsonl"))
    finally:
        engine._fast_run = saved


@pytest.mark.parametrize("name", sorted(CASES))
def test_fast_route_returns_a_real_transcript(name: str, tmp_path: Path) -> None:
    fast = _run(name, tmp_path, fast=True)
    full = _run(name, tmp_path, fast=False)
    assert fast.passthrough is not None, "the sample no longer takes the fast route: pick one that does"
    assert full.passthrough is None
    for result in (fast, full):
        assert type(result.transcript) is Transcript
        assert type(result.context) is Transcript
        assert result.context is result.transcript  # nothing compacted: what was given is what is written
        first = result.transcript.records[:1]
        copy = dataclasses.replace(result.transcript, records=first)
        assert type(copy) is Transcript and copy.records == first and copy.format == result.transcript.format
    assert fast.transcript.format == full.transcript.format
    assert [r.raw for r in fast.transcript.records] == [r.raw for r in full.transcript.records]
    assert len(fast.transcript.records) > 1


def test_fast_route_parses_only_when_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = engine.build_context

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(engine, "build_context", counting)
    result = _run("one-turn.jsonl", tmp_path, fast=True)
    assert result.passthrough is not None and calls == []
    records = result.transcript.records
    assert result.context is not None and result.context.records is records  # one parse for both
    assert calls == [1]


def test_fields_can_be_set_and_replaced(tmp_path: Path) -> None:
    result = _run("one-turn.jsonl", tmp_path, fast=True)
    other = Transcript("openai", [], "-")
    result.transcript = other
    assert result.transcript is other
    again = dataclasses.replace(result, compacted=True)
    assert again.transcript is other and again.compacted
