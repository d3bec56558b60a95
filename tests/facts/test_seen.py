"""A record read once for every fact scan (facts.seen.Seen): the same answers as the model's and the fact
modules' own functions, each worked out once per record (a call's from its record to its results'), and
what is kept for that dropped once the call is answered."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import SAMPLES
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxcompact.context import build_context
from ctxcompact.facts import files, outcomes
from ctxcompact.facts.calls import call_index
from ctxcompact.facts.gather import FactFeed
from ctxcompact.facts.outcomes import call_failed, claims_resolution, judge
from ctxcompact.facts.seen import Seen
from ctxcompact.facts.text import is_machine_reply, typed_text
from ctxcompact.model import Message, Record, Role, TextBlock, ToolCall, ToolResult
from ctxcompact.options import Options
from ctxcompact.source import InputData

LOGS = sorted(SAMPLES.glob("*.jsonl"))


def _records(path: Path) -> list[Record]:
    ctx = build_context(InputData(path.read_bytes(), None), Options(lenient=True), None, schema=False)
    return ctx.transcript.records


@pytest.mark.parametrize("path", LOGS, ids=[p.name for p in LOGS])
def test_a_seen_record_answers_as_the_model_and_the_rules(path: Path) -> None:
    records = _records(path)
    calls = call_index(records)
    for rec in records:
        view = Seen(rec)
        msg = rec.message
        assert view.calls == (msg.tool_calls() if msg else [])
        assert view.results == (msg.tool_results() if msg else [])
        assert view.text == (msg.text() if msg else "")
        assert view.typed == typed_text(rec)
        assert view.machine == is_machine_reply(rec)
        assert view.answers(calls, judge()) == [
            (r, calls.get(r.call_id), None if r.synthetic else call_failed(calls.get(r.call_id), r))
            for r in view.results]


def _call_then_result(i: int, command: str = "pytest -q", output: str = "2 passed") -> list[Record]:
    call = ToolCall(f"c{i}", "bash", f'{{"command": "{command} tests/t{i}.py"}}')
    return [Record(index=2 * i, line=2 * i + 1, raw=None, data=None,
                   message=Message(Role.ASSISTANT, [TextBlock("Running it."), call])),
            Record(index=2 * i + 1, line=2 * i + 2, raw=None, data=None,
                   message=Message(Role.TOOL, [ToolResult(f"c{i}", [TextBlock(output)])]))]


def test_each_result_is_looked_up_and_judged_once_for_every_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    judged: list[str] = []
    real = outcomes.call_failed

    def counting(call: ToolCall | None, res: ToolResult, failed: object = None) -> bool:
        judged.append(res.call_id)
        return real(call, res, failed)  # type: ignore[arg-type]

    monkeypatch.setattr(outcomes, "call_failed", counting)
    feed = FactFeed(bounded=True)
    for i in range(3):
        for rec in _call_then_result(i, output="FAILED tests/t.py::x" if i == 1 else "2 passed"):
            feed.feed(rec)
    assert judged == ["c0", "c1", "c2"]  # four scans read each outcome (commands, errors, evidence, timeline)
    facts = feed.facts().facts
    assert [c.ok for c in facts.commands] == [True, False, True]
    assert [e.key for e in facts.errors] == ["cmd:pytest -q tests/t1.py"]


def test_a_calls_paths_are_read_once_and_forgotten_once_answered(monkeypatch: pytest.MonkeyPatch) -> None:
    read: list[str] = []
    real = files._paths_of_call

    def counting(call: ToolCall) -> list[str]:
        read.append(call.id)
        return real(call)

    monkeypatch.setattr(files, "_paths_of_call", counting)
    feed = FactFeed(bounded=True)
    call = ToolCall("c0", "read_file", '{"path": "src/app.py"}')  # (its success keys name its file)
    feed.feed(Record(index=0, line=1, raw=None, data=None, message=Message(Role.ASSISTANT, [call])))
    assert feed.memo  # the call awaits its result: what was read of it is kept
    feed.feed(Record(index=1, line=2, raw=None, data=None,
                     message=Message(Role.TOOL, [ToolResult("c0", [TextBlock("print(1)")])])))
    assert read == ["c0"]  # the files, the timeline (its record), the success keys (its result's)
    assert not feed.memo  # answered: nothing of it is held
    assert [f.path for f in feed.facts().facts.files] == ["src/app.py"]


_RESOLVED = re.compile(outcomes._RESOLVED_WORDS.pattern, re.I)


def _claims_by_the_regex_alone(text: str) -> bool:
    if not _RESOLVED.search(text):
        return False
    return any(_RESOLVED.search(s) and not outcomes._NEGATION.search(s)
               for s in re.split(r"(?<=[.!?\n])\s+", text))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(["fixed", "Fİxed", "ſucceeded", "ıs working", "now PASSES", "green", "not",
                                 "It", "works", "now", "tests", "pass", ".", "\n", " ", "FIXED", "grey"]),
                max_size=12).map(" ".join))
@example("It is f\u0130xed now.")
@example("The build \u017fucceeded.")
@example("Still not fixed.")
def test_the_resolution_words_pre_check_skips_no_match(text: str) -> None:
    assert claims_resolution(text) == _claims_by_the_regex_alone(text)
