"""The facts read record by record (facts.gather.FactFeed) are the facts gathered at once, and the
conversation reader (strategies.conversation.Reader) reads the state of the latest request and the work in
flight on its window exactly as on the whole conversation: what lets a compaction stream
(compaction_stream)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import SAMPLES
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ctxcompact.context import build_context
from ctxcompact.facts.gather import FactFeed, gather
from ctxcompact.facts.handoff import request_status
from ctxcompact.facts.store import MAX_COMMANDS, MAX_TIMELINE, Facts, merge
from ctxcompact.model import Record
from ctxcompact.options import Options
from ctxcompact.source import InputData
from ctxcompact.strategies.conversation import held
from ctxcompact.strategies.tail import in_flight_records

DATA = Path(__file__).parents[1] / "data"
LOGS = sorted([*DATA.rglob("*.jsonl"), *SAMPLES.glob("*.jsonl")])
LOGS = [p for p in LOGS if "fuzz" not in p.parts]


def _records(data: bytes) -> list[Record] | None:
    try:
        ctx = build_context(InputData(data, None), Options(lenient=True), None, schema=False)
    except Exception:  # a log the held route refuses: nothing to compare
        return None
    return ctx.transcript.records


def _fed(records: list[Record], bounded: bool = False) -> FactFeed:
    feed = FactFeed(bounded=bounded)
    for rec in records:
        feed.feed(rec)
    return feed


def _check(records: list[Record]) -> None:
    feed = _fed(records)
    if feed.complete:  # (else a streamed run reads the file held)
        assert feed.facts() == gather(records)
    bounded = _fed(records, bounded=True)
    if bounded.complete:
        assert merge(Facts(), bounded.facts()) == merge(Facts(), gather(records))
    conv = held(records)
    body = conv.records
    assert body is not None and body[len(body) - len(conv.window):] == conv.window
    assert request_status(conv.window) == request_status(body)
    flight = in_flight_records(body)
    assert [id(r) for r in in_flight_records(conv.window)] == [id(r) for r in flight]
    # the work in flight is read whole from the window: no call of it apart from its results
    calls = {c.id for r in flight if r.message is not None for c in r.message.tool_calls()}
    results = {x.call_id for r in flight if r.message is not None for x in r.message.tool_results()}
    assert results <= calls


@pytest.mark.parametrize("path", LOGS, ids=[str(p.relative_to(p.parents[1])) for p in LOGS])
def test_every_test_log(path: Path) -> None:
    records = _records(path.read_bytes())
    if records is not None:
        _check(records)
        _check(records[: len(records) // 2])


def _line(kind: int, i: int, cid: str) -> list[dict[str, Any]]:
    args = orjson.dumps({"command": f"pytest t{i % 3}.py"}).decode()
    call = {"id": cid, "type": "function", "function": {"name": "bash", "arguments": args}}
    said = "FAILED t.py::x - AssertionError" if i % 2 else "ok"
    return [
        [{"role": "user", "content": f"please fix t{i % 3}.py; never touch setup.py"}],
        [{"role": "assistant", "content": f"The bug is in t{i % 3}.py, line {i}; fixed."}],
        [{"role": "assistant", "content": "Running the tests now.", "tool_calls": [call]}],
        [{"role": "assistant", "content": None, "tool_calls": [call]},
         {"role": "tool", "tool_call_id": cid, "content": said}],
        [{"role": "user", "content": "<system-reminder>noise</system-reminder>"}],
        [{"role": "assistant", "content": f"Thinking about step {i}."}],
        [{"role": "user", "content": "[Request interrupted by user]"}],
        [{"role": "system", "content": "be brief"}],
    ][kind]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(0, 7), min_size=2, max_size=40))
def test_any_conversation(kinds: list[int]) -> None:
    lines = [orjson.dumps(m) for i, k in enumerate(kinds) for m in _line(k, i, f"c{i}")]
    records = _records(b"\n".join(lines) + b"\n")
    if records is not None:
        _check(records)


def test_the_bounded_feed_drops_what_the_merge_drops() -> None:
    """Past the caps, the bounded feed holds a bounded timeline and command list; merged, its facts are
    gather's."""
    lines = [orjson.dumps({"role": "user", "content": "go"})]
    for i in range(3 * (MAX_TIMELINE + MAX_COMMANDS)):
        lines += [orjson.dumps(m) for m in _line(3, i, f"c{i}")]
        said = f"Step {i}: the test t{i}.py passes now."
        lines.append(orjson.dumps({"role": "assistant", "content": said}))
    records = _records(b"\n".join(lines) + b"\n")
    assert records is not None
    bounded = _fed(records, bounded=True)
    assert bounded.complete and bounded.trimmed
    assert len(bounded.timeline.out) < 4 * MAX_TIMELINE and len(bounded.commands.runs) < 4 * MAX_COMMANDS
    assert bounded.index is not None and len(bounded.index.calls) <= 1  # answered calls are forgotten
    assert merge(Facts(), bounded.facts()) == merge(Facts(), gather(records))
    assert len(gather(records).facts.timeline) > 4 * MAX_TIMELINE  # (so the test can fail)


def _old_facts() -> Facts:
    """Facts an earlier compaction kept: findings and decisions at positions before and among the new."""
    from ctxcompact.facts.store import Entry

    return Facts(findings=tuple(Entry(f"found {i}", i) for i in range(0, 90, 3)),
                 decisions=tuple(Entry(f"decided {i}", i) for i in range(1, 120, 3)))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(0, 7), min_size=2, max_size=60), st.integers(1, 3), st.integers(1, 3),
       st.sets(st.integers(1, 120)))
@example([1, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0], 1, 3, {1})  # an answer dropped where a text said along the way is
def test_the_bounded_feed_keeps_what_the_merge_keeps_of_answers(kinds: list[int], findings: int,
                                                                 decisions: int, shared: set[int]) -> None:
    """With the caps of findings and decisions made small (so any conversation passes them), the bounded
    feed's answers and texts said along the way, merged with no earlier facts or with some, are gather's;
    also where records share a position (``shared``: the record there takes the one before's, as the
    records of one input line do)."""
    from ctxcompact.facts import gather as gather_module
    from ctxcompact.facts import store

    lines = [orjson.dumps(m) for i, k in enumerate(kinds) for m in _line(k, i, f"c{i}")]
    records = _records(b"\n".join(lines) + b"\n")
    if records is None:
        return
    for i in sorted(shared):
        if i < len(records):
            records[i].index = records[i - 1].index
    with pytest.MonkeyPatch.context() as mp:
        for module in (gather_module, store):
            mp.setattr(module, "MAX_FINDINGS", findings)
            mp.setattr(module, "MAX_DECISIONS", decisions)
        bounded = _fed(records, bounded=True)
        if bounded.complete:
            for old in (Facts(), _old_facts()):
                assert merge(old, bounded.facts()) == merge(old, gather(records))


def test_the_bounded_feed_holds_a_bounded_number_of_answers() -> None:
    """A long session of requests, answers and conclusions said along the way: the bounded feed holds a
    bounded number of them; merged (with no earlier facts, or some), its facts are gather's."""
    from ctxcompact.facts.store import MAX_DECISIONS, MAX_FINDINGS

    lines: list[bytes] = []
    for i in range(5 * (MAX_FINDINGS + MAX_DECISIONS)):
        lines += [orjson.dumps(m) for k in (0, 1, 3, 1) for m in _line(k, i, f"c{i}")]
    records = _records(b"\n".join(lines) + b"\n")
    assert records is not None
    bounded = _fed(records, bounded=True)
    said = bounded.statements
    assert bounded.complete and bounded.trimmed
    assert len(said.answers) < 4 * MAX_FINDINGS and len(said.along) < 4 * MAX_DECISIONS
    full = gather(records)
    assert len(full.facts.findings) > 4 * MAX_FINDINGS and len(full.facts.decisions) > 4 * MAX_DECISIONS
    for old in (Facts(), _old_facts()):
        assert merge(old, bounded.facts()) == merge(old, full)
