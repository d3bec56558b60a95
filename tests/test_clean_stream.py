"""The cleaner fed record by record (``clean.Cleaner``, docs/measurements/performance.md#a-hooks-call) gives
exactly what cleaning the whole transcript in one part gives, whatever the layout, the faults and where the
parts settle; a clean transcript settles as it goes (what a streaming caller needs); and testing parts stays
linear."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcompact import clean as clean_mod
from ctxcompact.call_ids import CallIds
from ctxcompact.clean import Cleaner, clean
from ctxcompact.formats import get_format
from ctxcompact.formats.base import Layout
from ctxcompact.model import Block, Message, Record, Role, TextBlock, ToolCall, ToolResult, Transcript

LAYOUTS = {
    "openai": Layout(results_per_message=True, result_role=Role.TOOL, alternate=False),
    "anthropic": Layout(results_per_message=False, result_role=Role.USER, alternate=True),
    "tree": get_format("claude-code").layout,
    "codex": get_format("codex").layout,
    "genai": get_format("genai").layout,
}
IDS = ["a", "b", "c", "a_2"]


def _msg(role: Role, *blocks: Block) -> Message:
    return Message(role=role, blocks=list(blocks), source_role=role.value)


@st.composite
def transcripts(draw: st.DrawFn) -> tuple[Transcript, Layout]:
    """Long conversations of well-formed turns (so parts settle) with faults mixed in anywhere."""
    name = draw(st.sampled_from(sorted(LAYOUTS)))
    layout = LAYOUTS[name]
    n = iter(range(100_000))
    items: list[Message | None] = []
    if draw(st.booleans()):
        items.append(_msg(Role.SYSTEM, TextBlock("sys")))
    fresh = iter(f"k{i}" for i in range(100_000))
    for _ in range(draw(st.integers(0, 30))):
        turn = draw(st.sampled_from(["qa", "tools", "tools", "fault", "none", "split"]))
        if turn == "none":
            items.append(None)
        elif turn == "qa":
            items += [_msg(Role.USER, TextBlock(f"q{next(n)}")),
                      _msg(Role.ASSISTANT, TextBlock(f"a{next(n)}"))]
        elif turn in ("tools", "split"):
            ids = [next(fresh) for _ in range(draw(st.integers(1, 3)))]
            items.append(_msg(Role.USER, TextBlock(f"q{next(n)}")))
            if turn == "split":  # one assistant line per call (Claude Code, Codex)
                items += [_msg(Role.ASSISTANT, ToolCall(i, "ls", "{}")) for i in ids]
            else:
                calls = (ToolCall(i, "ls", "{}") for i in ids)
                items.append(_msg(Role.ASSISTANT, TextBlock(f"t{next(n)}"), *calls))
            results = [ToolResult(i, [TextBlock(f"r{next(n)}")]) for i in ids]
            if layout.results_per_message:
                items += [_msg(layout.result_role, r) for r in results]
            else:
                items.append(_msg(layout.result_role, *results))
            items.append(_msg(Role.ASSISTANT, TextBlock(f"done{next(n)}")))
        else:  # a fault: a reused id, an orphan or early result, a pending call, a system line, a role run
            fault = draw(st.sampled_from(["call", "result", "system", "user", "assistant"]))
            cid = draw(st.sampled_from(IDS))
            if fault == "call":
                items.append(_msg(Role.ASSISTANT, ToolCall(cid, "ls", "{}")))
            elif fault == "result":
                items.append(_msg(layout.result_role, ToolResult(cid, [TextBlock(f"r{next(n)}")])))
            else:
                items.append(_msg(Role(fault), TextBlock(f"x{next(n)}")))
    recs = [Record(index=i, line=i + 1, raw=f"line {i + 1}".encode(), data={}, message=m)
            for i, m in enumerate(items)]
    return Transcript(format="test", records=recs), layout


def _picture(t: Transcript) -> list[tuple[object, ...]]:
    out: list[tuple[object, ...]] = []
    for r in t.records:
        m = r.message
        blocks = () if m is None else tuple(
            (type(b).__name__, getattr(b, "id", None), getattr(b, "call_id", None),
             b.text if isinstance(b, TextBlock) else (b.text() if isinstance(b, ToolResult) else None))
            for b in m.blocks)
        out.append((r.line, r.origin, r.dirty, None if m is None else m.role, blocks))
    return out


def _whole(t: Transcript, layout: Layout, close: bool,
           monkeypatch: pytest.MonkeyPatch) -> clean_mod.CleanResult:
    with monkeypatch.context() as m:
        m.setattr(Cleaner, "FIRST_TRY", 10**9)  # never settles: one part, the whole transcript
        m.setattr(Cleaner, "FIRST_TRY_BYTES", 10**18)
        return clean(t, layout, close_trailing=close)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=transcripts(), first=st.integers(1, 6), first_bytes=st.sampled_from([1, 2, 5, 10**18]),
       close=st.booleans())
def test_record_by_record_equals_the_whole(case, first, first_bytes, close, monkeypatch) -> None:
    """Parts tried after ``first`` records or ``first_bytes`` bytes of input lines (each test line is 1 B)."""
    t, layout = case
    want = _whole(t, layout, close, monkeypatch)
    with monkeypatch.context() as m:
        m.setattr(Cleaner, "FIRST_TRY", first + 10**9 * (first_bytes < 10**18))
        m.setattr(Cleaner, "FIRST_TRY_BYTES", first_bytes)
        got = clean(t, layout, close_trailing=close)
    assert _picture(got.transcript) == _picture(want.transcript)
    assert [(r.kind, r.line, r.detail, r.call_id) for r in got.repairs] == \
        [(r.kind, r.line, r.detail, r.call_id) for r in want.repairs]
    # an unchanged record is passed through as the same object, in parts or whole
    assert [id(r) for r in got.transcript.records if not r.dirty and r.raw] == \
        [id(r) for r in want.transcript.records if not r.dirty and r.raw]


def _clean_session(turns: int) -> Iterator[Record]:
    i = 0
    for k in range(turns):
        for m in (_msg(Role.USER, TextBlock(f"q{k}")),
                  _msg(Role.ASSISTANT, ToolCall(f"c{k}", "ls", "{}")),
                  _msg(Role.TOOL, ToolResult(f"c{k}", [TextBlock("out")])),
                  _msg(Role.ASSISTANT, TextBlock(f"a{k}"))):
            i += 1
            yield Record(index=i - 1, line=i, raw=b"x", data={}, message=m)


def test_a_clean_transcript_settles_as_it_goes() -> None:
    cleaner = Cleaner(LAYOUTS["openai"], "openai")
    most_held = 0
    for rec in _clean_session(5_000):
        cleaner.feed(rec)
        most_held = max(most_held, len(cleaner.held))
    assert cleaner.settled >= 20_000 - 2 * Cleaner.FIRST_TRY
    assert most_held <= Cleaner.FIRST_TRY + 4  # memory: one part, not the transcript
    done = cleaner.finish()
    assert done.repairs == []


def test_a_fault_at_the_start_keeps_testing_linear(monkeypatch: pytest.MonkeyPatch) -> None:
    """A part that never settles (an orphan result first) is tested again only when it has doubled: all the
    tests together cost about two cleanings of the whole (testing at every record would be quadratic)."""
    orphan = Record(index=0, line=0, raw=b"x", data={}, message=_msg(Role.TOOL, ToolResult("z", [])))
    records = [orphan, *_clean_session(8_000)]
    tries: list[int] = []
    real = Cleaner._settle

    def counting(self: Cleaner) -> list[Record]:
        tries.append(len(self.held))
        return real(self)

    monkeypatch.setattr(Cleaner, "_settle", counting)
    cleaner = Cleaner(LAYOUTS["openai"], "openai")
    for rec in records:
        assert cleaner.feed(rec) == []
    assert cleaner.finish().repairs  # the orphan, reported at the end
    assert sum(tries) <= 2 * len(records) and len(tries) <= 10


class _CountingIds(CallIds):
    """The settled parts' call ids, counting every id read (the store has no way to read them all at once
    but :meth:`CallIds.kept`, which a cleaner never calls)."""

    touched = 0

    def count(self, call_id: str) -> int:
        _CountingIds.touched += 1
        return super().count(call_id)

    def kept(self, mark: tuple[int, int]) -> Any:
        raise AssertionError("a cleaner read every id")


def test_a_part_reads_only_the_call_ids_it_names() -> None:
    """Cleaning a settled part looks up the earlier parts' call ids it names, never all of them: the ids
    read grow with the transcript, not with its square (reading them all per part made a 20 MB transcript
    of small tool calls take minutes to stream)."""
    records = list(_clean_session(8_000))
    cleaner, touched = _ids_touched(records)
    assert len(cleaner.carry.calls) >= 7_000
    assert touched <= 4 * len(records), touched


def _ids_touched(records: list[Record]) -> tuple[Cleaner, int]:
    """The cleaner that cleaned ``records`` (nothing to repair) and how many call-id lookups it made."""
    cleaner = Cleaner(LAYOUTS["openai"], "openai")
    cleaner.carry.calls = _CountingIds()
    _CountingIds.touched = 0
    for rec in records:
        cleaner.feed(rec)
    assert cleaner.finish().repairs == []
    return cleaner, _CountingIds.touched


def test_large_records_settle_by_their_bytes() -> None:
    """A part is tried once it holds FIRST_TRY_BYTES of input lines, not only FIRST_TRY records: a session of
    ~300 KB tool results is held a few records at a time, not 64 of them (what streaming memory follows)."""
    big = b"x" * 300_000
    cleaner = Cleaner(LAYOUTS["openai"], "openai")
    most_held = 0
    for rec in _clean_session(200):
        rec.raw = big
        cleaner.feed(rec)
        most_held = max(most_held, len(cleaner.held))
    assert cleaner.finish().repairs == []
    assert cleaner.settled >= 790 and most_held <= 8, most_held


@pytest.mark.parametrize("name", ["tree", "codex", "openai"])
def test_a_call_answered_by_an_earlier_result_waits_for_a_later_one(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A result that comes before any call with its id, then that call, then another result for it: the
    whole transcript pairs the call with the result after it (an earlier result is taken only by a call left
    unanswered), so a part holding the call and only the earlier result must not settle (hypothesis found a
    tree layout's part settling, which made the later result the duplicate)."""
    layout = LAYOUTS[name]
    result = _msg(layout.result_role, ToolResult("a", [TextBlock("early")]))
    items = [_msg(Role.USER, TextBlock("q0")), _msg(Role.ASSISTANT, TextBlock("a0")), result]
    for i in range(1, 6):
        items += [_msg(Role.USER, TextBlock(f"q{i}")), _msg(Role.ASSISTANT, TextBlock(f"a{i}"))]
    items += [_msg(Role.ASSISTANT, ToolCall("a", "ls", "{}"))]
    for i in range(6, 12):
        items += [_msg(Role.USER, TextBlock(f"q{i}")), _msg(Role.ASSISTANT, TextBlock(f"a{i}"))]
    items += [_msg(layout.result_role, ToolResult("a", [TextBlock("late")]))]
    t = Transcript(format="test", records=[Record(index=i, line=i + 1, raw=b"x", data={}, message=m)
                                           for i, m in enumerate(items)])
    want = _whole(t, layout, False, monkeypatch)
    with monkeypatch.context() as m:
        m.setattr(Cleaner, "FIRST_TRY", 1)
        got = clean(t, layout, close_trailing=False)
    assert _picture(got.transcript) == _picture(want.transcript)
    assert [(r.kind, r.line) for r in got.repairs] == [(r.kind, r.line) for r in want.repairs]
    assert any(r.kind == "orphan_result" and r.line == 3 for r in want.repairs)  # the early one is left over


def test_a_part_looks_up_each_call_id_it_names_once() -> None:
    """Each call id a part names is looked up among the earlier parts' ids once, for the call and for its
    result alike (a lookup is ~10 k instructions; a run below the threshold makes them for every call)."""
    records = list(_clean_session(500))
    ids = {b.id for r in records if r.message is not None for b in r.message.tool_calls()}
    touched = _ids_touched(records)[1]
    assert len(ids) >= 400 and touched == len(ids)


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_settled_parts_leave_no_cycles_for_the_cyclic_gc(name: str) -> None:
    """A part's calls and results are freed as soon as it is handed out, not by the cyclic GC: a call and
    its result linked each other, so a streamed read's parts stayed in memory, with their ~1 MB tool
    results, until a collection ran (rarer as the heap grows: ~30 MiB more at 120 MB of such records)."""
    import gc

    found = []
    for n in (3, 300):  # (the first: what a first use makes once, lazy imports, types)
        cleaner = Cleaner(LAYOUTS[name], name)
        gc.collect()
        gc.disable()
        try:
            for rec in _clean_session(n):
                cleaner.feed(rec)
            cleaner.finish()
            found.append(gc.collect())
        finally:
            gc.enable()
    assert found[1] == 0, found
