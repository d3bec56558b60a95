"""What ``run`` returns is the same kind of object on every route (issue 25): below the threshold (first call,
and the next call from the count cache), a compacting call, a dry run and the message-list API all give plain
``Transcript``s in ``RunResult.transcript`` and ``.context``, and ``dataclasses.replace`` works on them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import orjson
import pytest

from ctxcompact import api, engine
from ctxcompact.errors import UsageError
from ctxcompact.model import Transcript


def _conversation(turns: int) -> bytes:
    lines = [{"role": "system", "content": "You are terse. Ünïcödé ok."}]
    for i in range(turns):
        lines += [{"role": "user", "content": f"question {i} — 日本語 " + "words " * 40},
                  {"role": "assistant", "content": None, "tool_calls": [{"id": f"c{i}", "type": "function",
                   "function": {"name": "ls", "arguments": "{}"}}]},
                  {"role": "tool", "tool_call_id": f"c{i}", "content": f"file{i}.txt"},
                  {"role": "assistant", "content": f"answer {i}"}]
    return b"".join(orjson.dumps(m) + b"\n" for m in lines)


def _route(route: str, tmp: Path) -> api.RunResult:
    path = tmp / "t.jsonl"
    out = tmp / "out.jsonl"
    path.write_bytes(_conversation(60))
    if route == "below":
        return api.run(path, api.Options(window=400_000), output=out)
    if route == "cached":
        api.run(path, api.Options(window=400_000), output=out)
        path.write_bytes(_conversation(61))
        return api.run(path, api.Options(window=400_000), output=out)
    if route == "compacting":
        result = api.run(path, api.Options(window=5_000), output=out)
        assert result.compacted
        return result
    if route == "dry":
        return api.run(path, api.Options(window=400_000), dry_run=True)
    assert route == "held"
    return engine.run_held(path.read_bytes(), api.Options(window=400_000), None)


@pytest.mark.parametrize("route", ["below", "cached", "compacting", "dry", "held"])
def test_every_route_returns_a_real_transcript(route: str, tmp_path: Path) -> None:
    result = _route(route, tmp_path)
    for t in (result.transcript, result.context):
        assert type(t) is Transcript
        first = t.records[:1]
        copy = dataclasses.replace(t, records=first)
        assert type(copy) is Transcript and copy.records == first and copy.format == t.format
    if not result.compacted:
        assert result.context is result.transcript  # nothing compacted: what was given is what is written
        assert [r.raw for r in result.transcript.records] == [
            line.rstrip(b"\n") for line in (tmp_path / "t.jsonl").read_bytes().splitlines(keepends=True)]
    assert len(result.transcript.records) > 1


def test_fields_can_be_set_and_replaced(tmp_path: Path) -> None:
    result = _route("below", tmp_path)
    other = Transcript("openai", [], "-")
    result.transcript = other
    assert result.transcript is other
    again = dataclasses.replace(result, compacted=True)
    assert again.transcript is other and again.compacted


@pytest.mark.parametrize(("change", "message"), [
    ({"window": 0}, "window"), ({"default_factor": 9.0}, "factor"), ({"keep_results": -1}, "keep"),
    ({"strategy_options": {"window": 5}}, "option of its own")])
def test_the_held_route_checks_options_as_the_others_do(change: dict[str, object], message: str,
                                                          tmp_path: Path) -> None:
    """engine.run_held (the message-list API's route) refuses what api.run and api.estimate refuse, with
    the same error, before reading anything."""
    opts = api.Options(**change)  # type: ignore[arg-type]
    data = _conversation(4)
    path = tmp_path / "t.jsonl"
    path.write_bytes(data)
    errors = []
    for call in (lambda: api.run(path, opts, dry_run=True), lambda: api.estimate(path, opts),
                 lambda: engine.run_held(data, opts, None)):
        with pytest.raises(UsageError, match=message) as caught:
            call()
        errors.append(str(caught.value))
    assert errors[0] == errors[1] == errors[2]
