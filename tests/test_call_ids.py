"""The call ids a streamed reading carries (``call_ids.CallIds``): answers as the two dicts it replaced (the
cleaner's carry, id -> settled calls; the calls' names, id -> the first call's tool), exactly, whatever the
ids; what a resume point keeps of it at a mark reads back as those dicts were then; and it holds ~60 bytes a
call where the dicts over the ids' strings held ~120-170 (docs/measurements/performance-log.md, branch
`mem7`)."""

from __future__ import annotations

import gc
import tracemalloc
from array import array
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcompact.call_ids import CallIds
from ctxcompact.clean import Cleaner
from ctxcompact.formats import get_format
from ctxcompact.model import Message, Record, Role, TextBlock, ToolCall, ToolResult

# ids that share prefixes, differ by a byte, are empty, not ASCII or a lone surrogate (a JSON "\ud800")
IDS = st.sampled_from(["a", "a_2", "b", "", "ab", "é", "\ud800", "call_1", "call_10", "call_1 "]) | st.text(
    max_size=4)
OPS = st.lists(st.tuples(st.sampled_from(["call", "name", "mark"]), IDS, st.sampled_from(["ls", "bash"])),
               max_size=300)


Marks = list[tuple[Any, dict[str, int], dict[str, str]]]


def _model(ops: list[tuple[str, str, str]]) -> tuple[CallIds, Marks]:
    """The store after ``ops``, and at each mark: the mark, the carry and the names as the dicts were then."""
    ids, calls, names = CallIds(), dict[str, int](), dict[str, str]()
    marks = []
    for op, key, tool in ops:
        if op == "call":
            ids.add_call(key)
            calls[key] = calls.get(key, 0) + 1
        elif op == "name":
            ids.give_name(key, tool)
            names.setdefault(key, tool)
        else:
            marks.append((ids.mark(), dict(calls), dict(names)))
        for probe in (key, key + "_2", "never"):
            assert ids.count(probe) == calls.get(probe, 0)
            assert ids.name(probe) == names.get(probe)
    return ids, marks


@settings(max_examples=25, deadline=None)
@given(OPS)
def test_the_store_answers_as_the_two_dicts(ops: list[tuple[str, str, str]]) -> None:
    _model(ops)


@settings(max_examples=25, deadline=None)
@given(OPS)
def test_the_store_answers_as_the_two_dicts_while_it_forgets_the_ids_looked_up_last(
        ops: list[tuple[str, str, str]]) -> None:
    """The ids looked up last are remembered by their str (``CallIds.recent``), a few at a time: the answers
    are the index's, whenever they are forgotten."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(CallIds, "RECENT", 2)
        ids, _marks = _model(ops)
    assert len(ids.recent) <= 2


def test_an_id_looked_up_again_is_not_looked_up_in_the_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """A call's id is asked for again soon (its result's name, the cleaner's count and settled call): the
    second time is a dict's lookup, not the index's probe in Python (~10 k instructions)."""
    ids = CallIds()
    probes: list[str] = []
    slot = CallIds._slot
    monkeypatch.setattr(CallIds, "_slot", lambda self, call_id, key=None: probes.append(call_id) or slot(
        self, call_id, key))
    for i in range(100):
        ids.give_name(f"call_{i}", "ls")
    probes.clear()
    for i in range(100):
        assert ids.name(f"call_{i}") == "ls" and ids.count(f"call_{i}") == 0
        ids.add_call(f"call_{i}")
    assert probes == [] and ids.count("call_7") == 1 and ids.name("never") is None
    assert probes == ["never"]


@settings(max_examples=25, deadline=None)
@given(OPS)
def test_a_resume_point_reads_back_the_ids_as_they_were_at_its_mark(ops: list[tuple[str, str, str]]) -> None:
    """At a mark after the last settled call (a reading's resume point: the cleaner settles nothing after
    its last mark), the ids read back answer as the dicts did then: names given after it are not carried,
    also those of an id a renamed call took before it."""
    ids, marks = _model([*ops, ("mark", "", "")])
    keys = {k for _, k, _ in ops} | {k + "_2" for _, k, _ in ops} | {"never"}
    for mark, calls, names in marks:
        if calls != marks[-1][1]:
            continue  # (a call settled after it)
        head, columns = ids.kept(mark)
        read = CallIds.read(head, [bytes(c) for c in columns])
        assert {k: (read.count(k), read.name(k)) for k in keys} == {
            k: (calls.get(k, 0), names.get(k)) for k in keys}
        again = read.copy()  # a reading resumed from it goes on as the store would
        again.give_name("fresh", "ls")
        again.add_call("fresh")
        assert (again.name("fresh"), again.count("fresh"), read.name("fresh")) == ("ls", 1, None)


def test_what_a_resume_point_keeps_is_checked() -> None:
    ids = CallIds()
    for i in range(50):
        ids.give_name(f"c{i}", "ls")
        ids.add_call(f"c{i}")
    head, columns = ids.kept(ids.mark())
    good = [bytes(c) for c in columns]
    assert CallIds.read(head, good).count("c49") == 1
    bad_columns = [
        [good[0][:-1], *good[1:]],  # the ids' bytes short of the last end
        [good[0], good[1][::-1], *good[2:]],  # ends out of order
        [*good[:2], good[2][:-4], good[3]],  # a column short
        [*good[:3], (7).to_bytes(4, "little") * 50, good[4]],  # a name that is not there
        [*good[:2], (-1).to_bytes(4, "little", signed=True) * 50, *good[3:]],  # a negative count
        good[:4],  # no index (a cache from before it was kept)
        [*good[:4], good[4][:-4]],  # an index not a power of two long
        [*good[:4], good[4][:len(good[4]) // 2]],  # an index more than half full (50 ids in 64 slots)
        [*good[:4], good[4].replace((7).to_bytes(4, "little"), (8).to_bytes(4, "little"))],  # one twice
        [*good[:4], good[4].replace((7).to_bytes(4, "little"), (51).to_bytes(4, "little"))],  # none such
        [*good[:4], good[4].replace((7).to_bytes(4, "little"), bytes(4))],  # an entry left out
    ]
    for columns in bad_columns:
        with pytest.raises(ValueError):
            CallIds.read(head, columns)
    for bad_head in ({**head, "unnamed": [50]}, {**head, "given": 49}, {**head, "names": ["ls", "ls"]}):
        with pytest.raises(ValueError):
            CallIds.read(bad_head, good)
    for widths in ([8, 2, 2], [2, 2], [3, 2, 2], None):  # not the columns' widths
        with pytest.raises(ValueError):
            CallIds.read({**head, "widths": widths}, good)
    with pytest.raises(KeyError):
        CallIds.read({"names": ["ls"], "widths": head["widths"]}, good)  # (no "unnamed", no "given")


def test_the_columns_widen_where_a_value_needs_it_and_read_back() -> None:
    """The ends, counts and names' numbers 2 bytes an item until one does not fit: the ends from 32 KiB of
    ids, a count or a name's number from 32,768; each widened whole, kept and read back with its width.
    Before, 8, 4 and 4 bytes an entry whatever they held (CTXCOUNTS8's resume point, still read: no widths
    in its head)."""
    ids = CallIds()
    ids.give_name("a", "ls")
    head, columns = ids.kept(ids.mark())
    assert head["widths"] == [2, 2, 2]
    del columns  # (views of the columns: they must not grow while held)
    for i in range(3_000):  # 12 bytes an id: past 32 KiB
        ids.give_name(f"call_{i:07d}", f"tool{i % 40_000}")
    for _ in range(33_000):
        ids.add_call("a")
    for i in range(33_000):  # names numbered past 32,767
        ids.give_name(f"n{i}", f"name{i}")
    head, columns = ids.kept(ids.mark())
    assert head["widths"] == [4, 4, 4]
    read = CallIds.read(head, [bytes(c) for c in columns])
    assert read.count("a") == 33_000 and read.name("n32999") == "name32999"
    assert read.name("call_0002999") == "tool2999" and read.name("a") == "ls" and read.count("n5") == 0
    old = {k: v for k, v in head.items() if k != "widths"}  # as CTXCOUNTS8 kept it: 8, 4 and 4 bytes
    wide = [bytes(columns[0]), array("q", read.ends).tobytes(), *(bytes(c) for c in columns[2:])]
    assert CallIds.read(old, wide).name("n32999") == "name32999"


def _records(n: int) -> list[Record]:
    """``n`` tool calls of an agent, each answered (ids as OpenAI's: 29 characters)."""
    out = []
    for i in range(n):
        call = f"call_{i:024x}"
        out += [Record(index=3 * i, line=3 * i + 1, raw=b"{}", data=None, offset=30 * i,
                       message=Message(Role.ASSISTANT, [ToolCall(call, "bash", "{}")])),
                Record(index=3 * i + 1, line=3 * i + 2, raw=b"{}", data=None, offset=30 * i + 10,
                       message=Message(Role.TOOL, [ToolResult(call, [TextBlock("ok")])])),
                Record(index=3 * i + 2, line=3 * i + 3, raw=b"{}", data=None, offset=30 * i + 20,
                       message=Message(Role.USER, [TextBlock("go on")]))]
    return out


def _carried_bytes(n: int) -> int:
    """Traced bytes a reading keeps after ``n`` calls (its names and the cleaner's carry, one store, as
    ``streaming.Reading`` shares it), the records dropped as their parts settle."""
    records = _records(n)
    gc.collect()
    tracemalloc.start()
    try:
        ids = CallIds()
        fmt = get_format("openai")
        finish = fmt.finish_stream(ids)
        assert finish is not None
        cleaner = Cleaner(fmt.layout, fmt.name, calls=ids)
        for i in range(len(records)):
            rec, records[i] = records[i], None  # type: ignore[call-overload]
            finish(rec)
            cleaner.feed(rec)
        cleaner.held = []  # (the part not settled yet: a part's records, not carried)
        del rec
        gc.collect()
        assert ids.count("call_" + "0" * 24) == 1 and ids.name(f"call_{n // 2:024x}") == "bash"
        return tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()


def test_a_reading_carries_few_bytes_a_call() -> None:
    # the two dicts over the ids' strings (shared): ~120 bytes a call at these sizes (their tables double
    # in between), ~170 at 190,000 calls; ~53 now (the id's 29 bytes, its end 4 bytes here, count and name
    # 2 each, the index); ~60 with the end 8 bytes and the count and name 4
    small, big = 600, 2_400
    _carried_bytes(50)  # warm: what the first reading imports and makes once (the format, its patterns)
    grew = (_carried_bytes(big) - _carried_bytes(small)) / (big - small)
    assert grew < 57, f"{grew:.0f} B a call"
