"""What the sliding window reads of its context, gathered as the records come (issue 25 items 1-2): the
invocations and split points (``invocations.Gathered``), and the fingerprint through the last event's end
from the input held or from the file a streamed run read (``state.line_end``)."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import itertools
from pathlib import Path
from typing import Any

from helpers import assistant, jsonl, sys_msg, tool, user
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcompact import api
from ctxcompact.context import Context
from ctxcompact.formats import read_transcript
from ctxcompact.model import Record
from ctxcompact.options import Options
from ctxcompact.state import HashedFile, State, line_end
from ctxcompact.strategies.base import Written
from ctxcompact.strategies.invocations import Gathered, invocations, unsafe_splits
from ctxcompact.tokens.counts import Counts


def _records(objs: list[dict[str, Any]], fmt: str = "openai") -> list[Record]:
    return read_transcript(io.BytesIO(jsonl(objs)), fmt).transcript.records


def _session(shape: list[tuple[int, int]]) -> list[dict[str, Any]]:
    """Invocations with ``k`` calls each, the results ``late`` records later (answered after the next
    request when that is past the invocation: a split there would separate a pair)."""
    out: list[dict[str, Any]] = [sys_msg("s")]
    owed: list[tuple[int, dict[str, Any]]] = []
    for i, (k, late) in enumerate(shape):
        out.append(user(f"request {i}"))
        if k:
            out.append(assistant(None, [(f"c{i}_{j}", "read", {"path": f"f{j}"}) for j in range(k)]))
            owed += [(len(out) + late, tool(f"c{i}_{j}", f"content {i} {j}")) for j in range(k)]
        due = [m for at, m in owed if at <= len(out)]
        owed = [(at, m) for at, m in owed if at > len(out)]
        out += due
        out.append(assistant(f"answer {i}"))
    return out + [m for _, m in owed]


def _frozen(g: Gathered) -> tuple[list[tuple[Any, ...]], set[int]]:
    return [dataclasses.astuple(i) for i in g.invocations()], g.unsafe_splits()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 4)), min_size=1, max_size=7), st.data())
def test_gathered_record_by_record_is_what_the_prefix_gives(shape: list[tuple[int, int]],
                                                            data: st.DataObject) -> None:
    """Read at any point, the fold gives the invocations and split points of the records so far; fed on, it
    gives those of all of them (a streamed reading gathers what the held route folds over its view)."""
    recs = _records(_session(shape))
    cut = data.draw(st.integers(0, len(recs)))
    g = Gathered()
    for rec in recs[:cut]:
        g.add(rec)
    assert _frozen(g) == _frozen(Gathered.of(recs[:cut]))
    for rec in recs[cut:]:
        g.add(rec)
    assert _frozen(g) == _frozen(Gathered.of(recs))
    assert [dataclasses.astuple(i) for i in invocations(recs)] == _frozen(g)[0]
    assert unsafe_splits(recs) == g.unsafe_splits()
    # every record read from the input is in exactly one invocation, the numbered ones by request
    invs = g.invocations()
    assert [i.start for i in invs if i.number > 0] == [r.index for r in recs if r.message is not None
                                                      and r.message.role.value == "user"]
    assert all(a.end == b.start for a, b in itertools.pairwise(invs))


def test_ids_seen_late_number_every_invocation_by_ids() -> None:
    """Records without an invocation id before the first that has one: the invocations are numbered by the
    ids from the start, as if the fold had known (the records before the first id are the preamble), not by
    the requests typed before it."""
    recs = _records([sys_msg("s"), user("no id yet"), assistant("a"), user("first with id"), assistant("b"),
                     user("second"), assistant("c")])
    ids = [None, None, None, "i1", "i1", "i2", "i2"]
    recs = [dataclasses.replace(r, meta={**r.meta, "invocation_id": i} if i else r.meta)
            for r, i in zip(recs, ids, strict=True)]
    invs = Gathered.of(recs).invocations()
    assert [(i.number, i.start, i.end, i.id) for i in invs] == [(0, 0, 3, None), (1, 3, 5, "i1"),
                                                                (2, 5, 7, "i2")]


def test_a_call_answered_in_a_later_invocation_blocks_the_points_between() -> None:
    recs = _records(_session([(1, 4), (0, 0), (0, 0)]))
    call = next(r.index for r in recs if r.message is not None and r.message.tool_calls())
    result = next(r.index for r in recs if r.message is not None and r.message.role.value == "tool")
    assert result > call + 2
    assert Gathered.of(recs).unsafe_splits() == set(range(call + 1, result + 1))


def test_line_end_is_the_same_held_and_from_the_file(tmp_path: Path) -> None:
    """The end of the line through a byte, found in the bytes held, in a file, and in the bytes a streamed
    run read of a file that has grown since (never past them)."""
    for data in (b'{"a":1}\n{"b":2}\r\n\n{"c":3}', b'{"a":1}\n{"b":2}\n', b"x", b""):
        p = tmp_path / "t.jsonl"
        p.write_bytes(data + b'\n{"later":1}\n')  # appended after the run read ``data``
        hashed = HashedFile(p, len(data), hashlib.sha256(data).digest())
        for at in range(len(data) + 1):
            want = data.find(b"\n", at)
            want = len(data) if want < 0 else want + 1
            assert line_end(data, at) == line_end(hashed, at, chunk_size=2) == want
        q = tmp_path / "whole.jsonl"
        q.write_bytes(data)
        assert [line_end(q, at, chunk_size=3) for at in range(len(data) + 1)] == \
            [line_end(data, at) for at in range(len(data) + 1)]


def test_commit_fingerprints_the_same_from_the_file_a_streamed_run_read(tmp_path: Path) -> None:
    """The state's fingerprint through the last event's end, made by the strategy's commit from the input
    held (the held route) and from the file as a streamed run hands it (``HashedFile``): the same, bytes,
    lines and hash; the system lines through it too."""
    objs = [sys_msg("s")]
    for i in range(1, 11):
        objs += [user(f"request {i}"), assistant(None, [(f"c{i}", "bash", {"cmd": f"ls {i}"})]),
                 tool(f"c{i}", f"out {i} " * 40), assistant(f"done {i}")]
    data = jsonl(objs) + b'{"role": "user", "content": "still running"}'  # no newline at the end
    p = tmp_path / "t.jsonl"
    p.write_bytes(data)
    opts = Options(strategy="sliding-window", invocation_threshold=3, overlap=1, window=200_000)
    r = api.run(p, opts, output=tmp_path / "o.jsonl", hold=True)
    assert r.outcome is not None and r.compacted and r.state is not None
    held = r.state.fingerprint
    assert 0 < held.nbytes < len(data) and data[held.nbytes - 1:held.nbytes] == b"\n"
    assert held.lines == data.count(b"\n", 0, held.nbytes)
    ctx = r.context
    assert ctx is not None
    made = Context(transcript=ctx, input_records=len(objs) + 1, covered=0, input_bytes=len(data),
                   input_lines=data.count(b"\n") + 1, system_spans=[(0, data.index(b"\n"))], repairs=[],
                   problems=[], dropped=0, input_format="openai")
    counts = Counts([], None, None)  # (the commit does not read them)
    states = []
    for source in (data, HashedFile(p, len(data), hashlib.sha256(data).digest()), p):
        s = State()
        r.outcome.commit(s, Written(ctx=made, data=source, tokens_before=0, tokens_after=0,
                                    counts=counts))
        states.append(s.fingerprint)
    assert states[0] == states[1] == states[2]
    assert (states[0].nbytes, states[0].lines, states[0].sha256) == (held.nbytes, held.lines, held.sha256)
    assert states[0].system_lines == [(0, data.index(b"\n"))]
