"""A Claude Code log on the streamed route (formats/claude_code_stream.py): read record by record with a
resume point like the other formats, its branch checked at the end. Each call as in a new process: any
split of appends gives what the held route gives from scratch; a second call parses no line before the
point; lines that fork off the branch, rewind it or add a compact_boundary after it give the held route's
answer, streamed (a rewind's branch found over every line once, the calls after it resumed past it)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_resume import _resume_at, _run, _sequence

from ctxcompact import engine

DATA = Path(__file__).parent.parent / "data" / "claude-code"
SESSION = "55604662-cf2a-4331-851a-ec234028f8ca"


class _Log:
    """Lines of a Claude Code 2.1 session, shaped as the real ones (tests/data/claude-code/spotter-*): a
    response one content block per line (the same message.id, requestId and usage), parallel calls on
    consecutive lines, hook progress lines chained on the last line, each result parented on its own
    tool_use line, the next response on the last result."""

    def __init__(self, seed: int) -> None:
        self.rnd = random.Random(seed)
        self.n = 0
        self.tip: str | None = None
        self.lines: list[bytes] = []
        self.prompt = 1_000

    def _uuid(self) -> str:
        self.n += 1
        return f"00000000-0000-4000-8000-{self.n:012d}"

    def line(self, kind: str, parent: str | None, **fields: Any) -> str:
        uuid = self._uuid()
        obj = {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/w",
               "sessionId": SESSION, "version": "2.1.38", "gitBranch": "main", "type": kind, **fields,
               "uuid": uuid, "timestamp": f"2026-02-10T21:{self.n // 60 % 60:02d}:{self.n % 60:02d}.000Z"}
        self.lines.append(orjson.dumps(obj) + b"\n")
        self.tip = uuid
        return uuid

    def user(self, text: str) -> None:
        self.line("user", self.tip, message={"role": "user", "content": text})

    def turn(self, calls: int) -> None:
        """A response (thinking, text, ``calls`` tool_use lines), then its results."""
        mid, req = f"msg_{self.n:020d}", f"req_{self.n:020d}"
        self.prompt += self.rnd.randrange(200, 900)
        usage = {"input_tokens": 3, "cache_read_input_tokens": self.prompt, "output_tokens": 20}
        blocks: list[dict[str, Any]] = [{"type": "thinking", "thinking": "let me see", "signature": "s"},
                                        {"type": "text", "text": f"Looking at step {self.n}."}]
        ids = [f"toolu_{self.n:04d}_{i}" for i in range(calls)]
        blocks += [{"type": "tool_use", "id": c, "name": "Bash", "input": {"command": f"ls {c}"}}
                   for c in ids]
        made: list[str] = []
        for block in blocks:
            msg = {"model": "claude-opus-4-6", "id": mid, "type": "message", "role": "assistant",
                   "content": [block], "stop_reason": None, "usage": usage}
            made.append(self.line("assistant", self.tip, message=msg, requestId=req))
            if block["type"] == "tool_use" and self.rnd.random() < 0.5:
                self.line("progress", self.tip, data={"type": "hook_progress", "hookEvent": "PreToolUse"},
                          toolUseID=block["id"], parentToolUseID=block["id"])
        order = list(range(calls))
        self.rnd.shuffle(order)  # results in completion order, each on its own tool_use line
        for i in order:
            result = {"type": "tool_result", "tool_use_id": ids[i], "content": f"out {ids[i]} " * 20}
            self.line("user", made[len(made) - calls + i], message={"role": "user", "content": [result]},
                      toolUseResult={"stdout": "x"})

    def reply(self) -> None:
        self.prompt += 100
        msg = {"model": "claude-opus-4-6", "id": f"msg_{self.n:020d}", "type": "message",
               "role": "assistant", "content": [{"type": "text", "text": "Done."}], "stop_reason": "end_turn",
               "usage": {"input_tokens": 3, "cache_read_input_tokens": self.prompt, "output_tokens": 5}}
        self.line("assistant", self.tip, message=msg, requestId=f"req_{self.n:020d}")

    def boundary(self) -> None:
        logical = self.tip
        self.line("system", None, subtype="compact_boundary", content="Conversation compacted",
                  isMeta=False, level="info", logicalParentUuid=logical,
                  compactMetadata={"trigger": "auto", "preTokens": self.prompt})
        self.line("user", self.tip, message={"role": "user", "content": "This session is being continued "
                                             "from a previous conversation. Summary: it went well."},
                  isCompactSummary=True, isVisibleInTranscriptOnly=True)


def _session(seed: int = 1, turns: int = 24, boundary_at: int | None = None) -> list[bytes]:
    log = _Log(seed)
    for t in range(turns):
        if t == boundary_at:
            log.boundary()
        if t % 4 == 0:
            log.user(f"Please do task {t}: keep the tests green.")
        log.turn(log.rnd.choice([1, 1, 2, 3]))
        if t % 4 == 3:
            log.reply()
    return log.lines


def test_the_generated_log_reads_as_the_real_ones() -> None:
    """Every line is a good Claude Code line, and all are on the branch (so the route streams them)."""
    from ctxcompact.formats.jsonl import read_transcript

    lines = _session(boundary_at=12)
    records = read_transcript(b"".join(lines), "claude-code").transcript.records
    assert len(records) == len(lines)
    inactive = {r.meta.get("inactive") for r in records}
    assert inactive == {None, "compacted"}
    before = [b'"parentUuid":"' + r.meta["uuid"].encode() for r in records]
    assert sum(b'"tool_result"' in line and before[i - 1] not in line
               for i, line in enumerate(lines)) > 5  # results not chained on the line before


def _loads(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    loaded: list[Any] = []
    real = engine.InputData.load
    monkeypatch.setattr(engine.InputData, "load", lambda source: loaded.append(source) or real(source))
    return loaded


@pytest.mark.parametrize("boundary_at", [None, 6])
def test_a_second_call_parses_only_what_follows_the_resume_point(tmp_path, new_process, parsed, monkeypatch,
                                                                 boundary_at):
    """The usual hook call: lines appended on the branch's tip. No line before the resume point is parsed
    (the file is never held), and the answer is the held route's from scratch."""
    from ctxcompact.clean import Cleaner

    monkeypatch.setattr(Cleaner, "FIRST_TRY", 8)
    loaded = _loads(monkeypatch)
    lines = _session(boundary_at=boundary_at)
    path, out = tmp_path / "t.jsonl", tmp_path / "out.jsonl"
    path.write_bytes(b"".join(lines[:-5]))
    first = _run(path, out, hold=False)
    assert len(set(parsed)) == len(lines) - 5  # every line, the first time
    at = _resume_at(path)
    assert at > len(b"".join(lines)) // 2
    after = sum(1 for n in range(len(lines) - 5) if len(b"".join(lines[:n])) >= at)
    parsed.clear()
    path.write_bytes(b"".join(lines))
    got = _run(path, out, hold=False)
    assert loaded == []
    assert min(parsed) == at  # nothing before the resume point is parsed, by either pass
    assert len(set(parsed)) == after + 5 < len(lines) // 2
    held = _sequence(tmp_path, lines, [len(lines) - 5, len(lines)], cold=True, hold=True)
    assert [first, got] == held and first[0] != got[0]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), exact_opt=st.sampled_from(["tiktoken", "none"]),
       window=st.sampled_from([400_000, 12_000]), first_try=st.sampled_from([2, 5, 64]),
       boundary_at=st.sampled_from([None, 3, 10]))
def test_any_split_of_appends_gives_the_held_answer(tmp_path, new_process, monkeypatch, data, exact_opt,
                                                    window, first_try, boundary_at):
    """Each call a new ``run`` (as a new process), streamed from the resume point, against the held route
    from scratch: outputs, states, reports, repairs and warnings, below the threshold and across
    compactions (the held route makes those), a compact_boundary before or after the resume point."""
    from ctxcompact.clean import Cleaner

    monkeypatch.setattr(Cleaner, "FIRST_TRY", first_try)
    lines = _session(seed=data.draw(st.integers(0, 3)), turns=14, boundary_at=boundary_at)
    cuts = sorted(set(data.draw(st.lists(st.integers(min_value=1, max_value=len(lines)), min_size=2,
                                         max_size=4))))
    opts = {"exact": exact_opt, "window": window,
            "format": data.draw(st.sampled_from(["claude-code", "auto"]))}
    cached = _sequence(tmp_path, lines, cuts, cold=False, hold=False, **opts)
    cold = _sequence(tmp_path, lines, cuts, cold=True, hold=True, **opts)
    assert cached == cold


def _fork(lines: list[bytes], parent_of: int) -> bytes:
    """A user line whose parent is line ``parent_of``'s uuid (a rewind: Claude Code's Esc Esc)."""
    parent = orjson.loads(lines[parent_of])["uuid"]
    obj = {**orjson.loads(lines[-1]), "parentUuid": parent, "uuid": "11111111-0000-4000-8000-000000000001",
           "type": "user", "message": {"role": "user", "content": "No, do it another way."}}
    obj.pop("requestId", None)
    obj.pop("toolUseResult", None)
    return orjson.dumps(obj) + b"\n"


@pytest.mark.parametrize("shape", ["rewind", "rewind continued", "fork off the last response", "new boundary",
                                   "two boundaries"])
def test_lines_off_the_branch_after_the_resume_point_give_the_held_answer(tmp_path, new_process, parsed,
                                                                          monkeypatch, shape):
    """Appended lines that do not continue the branch: a rewind to an early line (the next turn on the old
    tip, or on the rewind's line: the lines after its parent go off the branch), a fork off a line before
    the tip (the lines after it go off the branch), a compact_boundary after the messages the resume point
    counted. The answer is the held route's from scratch, and the file is never held: a fork is read again
    from the start once the branch is found (formats/claude_code_stream.py), a boundary streamed again from
    the start (its messages before it are then history). The call after it resumes past it."""
    from ctxcompact.clean import Cleaner
    from ctxcompact.formats.claude_code_stream import StreamFinish

    monkeypatch.setattr(Cleaner, "FIRST_TRY", 8)
    log = _Log(5)
    for t in range(16):
        if t % 4 == 0:
            log.user(f"task {t}")
        log.turn(2)
    cut = len(log.lines)
    if shape.startswith("rewind"):
        log.lines.append(_fork(log.lines, 3))
        if shape == "rewind continued":
            log.tip = orjson.loads(log.lines[-1])["uuid"]
    elif shape == "fork off the last response":
        log.lines.append(_fork(log.lines, cut - 4))
    else:
        log.boundary()
        log.turn(1)
        log.reply()
        if shape == "two boundaries":
            log.boundary()
            log.reply()
    log.turn(1)
    log.reply()
    second = len(log.lines)
    log.user("and then?")
    log.turn(2)
    log.reply()
    lines = log.lines
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(lines[:cut]))
    first = _run(path, tmp_path / "out.jsonl", hold=False)
    assert _resume_at(path) > 0
    loaded = _loads(monkeypatch)
    found: list[int] = []
    real = StreamFinish._found
    monkeypatch.setattr(StreamFinish, "_found", lambda self, *a: found.append(1) or real(self, *a))
    path.write_bytes(b"".join(lines[:second]))
    got = _run(path, tmp_path / "out.jsonl", hold=False)
    follows = [len(found)]
    at = _resume_at(path)
    assert at > len(b"".join(lines[:cut]))  # (past the fork)
    parsed.clear()
    path.write_bytes(b"".join(lines))
    then = _run(path, tmp_path / "out.jsonl", hold=False)
    follows.append(len(found) - follows[0])
    assert loaded == []
    assert min(parsed) == at  # (the lines off the branch are known from the resume point)
    held = _sequence(tmp_path, lines, [cut, second, len(lines)], cold=True, hold=True)
    assert [first, got, then] == held
    # the fork's call found the branch over every line (once: pass 2 takes pass 1's), the next did not
    assert follows == ([1, 0] if "fork" in shape or "rewind" in shape else [0, 0])


def _rewound(seed: int, rewinds: list[tuple[int, int]], boundary_at: int | None = None) -> list[bytes]:
    """A session whose turn ``t`` of each ``(t, back)`` in ``rewinds`` begins with a rewind: a user line on
    the line ``back`` lines before the last (any line, one off the branch too: a rewind of a rewind), the
    turn on it."""
    log = _Log(seed)
    at = dict(rewinds)
    for t in range(14):
        if t == boundary_at:
            log.boundary()
        if t in at:
            log.tip = orjson.loads(log.lines[max(0, len(log.lines) - 1 - at[t])])["uuid"]
            log.user(f"No, go back and do task {t} another way.")
        elif t % 4 == 0:
            log.user(f"Please do task {t}.")
        log.turn(log.rnd.choice([1, 2]))
        if t % 4 == 3:
            log.reply()
    return log.lines


@settings(max_examples=14, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), window=st.sampled_from([400_000, 12_000]), first_try=st.sampled_from([2, 5, 64]),
       boundary_at=st.sampled_from([None, 4, 9]))
def test_any_split_of_appends_with_rewinds_gives_the_held_answer(tmp_path, new_process, monkeypatch, data,
                                                                 window, first_try, boundary_at):
    """Rewinds at random turns, to any earlier line (before the resume point, into the lines a rewind left:
    a rewind of a rewind), any split of appends: each call a new ``run`` on the streamed route (resumed, or
    read again after finding the branch) answers as the held route from scratch does: outputs, states,
    reports, repairs and warnings, below the threshold and across compactions."""
    from ctxcompact.clean import Cleaner

    monkeypatch.setattr(Cleaner, "FIRST_TRY", first_try)
    rewinds = data.draw(st.lists(st.tuples(st.integers(1, 13), st.integers(1, 60)), min_size=1, max_size=3))
    lines = _rewound(data.draw(st.integers(0, 3)), rewinds, boundary_at)
    cuts = sorted(set(data.draw(st.lists(st.integers(min_value=1, max_value=len(lines)), min_size=2,
                                         max_size=5))))
    opts = {"window": window, "exact": "none"}
    assert _sequence(tmp_path, lines, cuts, cold=False, hold=False, **opts) == \
        _sequence(tmp_path, lines, cuts, cold=True, hold=True, **opts)


def test_rewinds_stream_and_resume(tmp_path, new_process, monkeypatch):
    """The hook's calls on a log rewound twice (the second back into the lines the first left): none holds
    the file, only the call that reads a rewind first reads from the start, and every answer is the held
    route's from scratch."""
    from ctxcompact import route_file
    from ctxcompact.clean import Cleaner

    monkeypatch.setattr(Cleaner, "FIRST_TRY", 8)
    loaded = _loads(monkeypatch)
    counted: list[Any] = []
    real = route_file.count_file
    monkeypatch.setattr(route_file, "count_file",
                        lambda *a, **kw: counted.append(real(*a, **kw)) or counted[-1])
    lines = _rewound(2, [(6, 30), (10, 12)])
    starts = [i for i, line in enumerate(lines) if b"another way" in line]
    cuts = sorted({*range(8, len(lines), 9), *(i + 1 for i in starts), len(lines)})
    got = _sequence(tmp_path, lines, cuts, cold=False, hold=False)
    assert loaded == []
    fresh = [i for i, c in enumerate(counted) if c.resumed is None]
    # (the first calls, before a part settles; then each rewind's call only)
    assert [i for i in fresh if i > 1] == [cuts.index(i + 1) for i in starts]
    assert all(c.branch is not None for c in counted[cuts.index(starts[0] + 1):])  # (carried, or found)
    assert got == _sequence(tmp_path, lines, cuts, cold=True, hold=True)


def test_a_line_that_brings_one_off_the_branch_back_is_read_from_the_start(tmp_path, new_process,
                                                                           monkeypatch):
    """After a rewind, a response line with the message id of a line the rewind left (the held rule widens
    the branch by message ids: that line is on it again): the call reads again from the start, and answers
    as the held route does."""
    from ctxcompact.clean import Cleaner
    from ctxcompact.formats.claude_code_stream import StreamFinish
    from ctxcompact.formats.jsonl import read_transcript

    monkeypatch.setattr(Cleaner, "FIRST_TRY", 8)
    lines = _rewound(1, [(8, 20)])
    records = read_transcript(b"".join(lines), "claude-code").transcript.records
    left = next(r.data for r in records
                if r.meta.get("inactive") == "off_branch" and r.meta["type"] == "assistant")
    back = {**left, "parentUuid": orjson.loads(lines[-1])["uuid"],
            "uuid": "22222222-0000-4000-8000-000000000002"}
    lines.append(orjson.dumps(back) + b"\n")
    found: list[int] = []
    real = StreamFinish._found
    monkeypatch.setattr(StreamFinish, "_found", lambda self, *a: found.append(1) or real(self, *a))
    cuts = [len(lines) - 1, len(lines)]
    assert _sequence(tmp_path, lines, cuts, cold=False, hold=False) == \
        _sequence(tmp_path, lines, cuts, cold=True, hold=True)
    assert len(found) == 2  # (each call; the held calls from scratch find it over the whole file)


REAL = sorted(DATA.glob("*.jsonl"))
#: read held still: a CLI 1.0.x subagent's lines in the main file (their runs are found over the whole
#: file). (spotter-acompact-agent.jsonl, a subagent's compaction request whose lines fork off its first,
#: streams: its branch is found over every line, formats/claude_code_stream.py)
HELD = {"claude-code-viewer-orchestrator-1.0.108.jsonl",
        "claude-code-viewer-orchestrator-1.0.98-excerpt.jsonl"}


@pytest.mark.parametrize("path", REAL, ids=[p.name for p in REAL])
def test_a_real_log_streams_and_resumes(path, tmp_path, new_process, parsed, monkeypatch):
    """Every real log but those named in HELD is read streamed (never held) below the threshold, the first
    call on its first half and the second on all of it: the second parses only from the resume point
    (wherever the cleaner settled; from the start when a compact_boundary follows it), and both give the
    held route's answers."""
    from ctxcompact.clean import Cleaner

    monkeypatch.setattr(Cleaner, "FIRST_TRY", 4)
    loaded = _loads(monkeypatch)
    lines = path.read_bytes().splitlines(keepends=True)
    half = len(lines) // 2
    t = tmp_path / "t.jsonl"
    t.write_bytes(b"".join(lines[:half]))
    first = _run(t, tmp_path / "out.jsonl", hold=False, window=1_000_000)
    at = _resume_at(t)
    parsed.clear()
    t.write_bytes(b"".join(lines))
    got = _run(t, tmp_path / "out.jsonl", hold=False, window=1_000_000)
    if path.name in HELD:
        assert loaded
    else:
        assert loaded == []
        restarts = any(b'"compact_boundary"' in line for line in lines[half:])
        assert min(parsed) == (0 if restarts else at)
    held = _sequence(tmp_path, lines, [half, len(lines)], cold=True, hold=True, window=1_000_000)
    assert [first, got] == held


def _peak(path: Path, hold: bool) -> int:
    import gc
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    try:
        engine.run(path, engine.Options(window=1_000_000_000, use_state=False, exact="none"),
                   output=path.with_suffix(".out"), hold=hold)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _sessions(folder: Path, *turns: int) -> list[Path]:
    """Claude Code sessions of each number of turns, written to ``folder`` (one file each)."""
    paths = []
    for n in turns:
        path = folder / f"session{n}.jsonl"
        path.write_bytes(b"".join(_session(turns=n)))
        paths.append(path)
    return paths


def _added(small: Path, big: Path) -> int:
    return big.read_bytes().count(b"\n") - small.read_bytes().count(b"\n")


def test_memory_does_not_grow_with_the_records(tmp_path: Path) -> None:
    """Peak traced memory of a run on N and 4N turns: streamed, it grows by little per added record (the
    counts, the responses' usage keys), held by the records (so the test can fail)."""
    small, big = _sessions(tmp_path, 250, 1_000)
    _peak(_sessions(tmp_path, 20)[0], False)  # warm: imports, compiled patterns, caches not of the file
    streamed = (_peak(big, False) - _peak(small, False)) / _added(small, big)
    # held, each record's objects are kept: a quarter of the sizes measures it as well, at a quarter the time
    held_small, held_big = _sessions(tmp_path, 60, 240)
    held = (_peak(held_big, True) - _peak(held_small, True)) / _added(held_small, held_big)
    assert streamed < 200, f"{streamed:.0f} B per record (held: {held:.0f})"
    assert held > 4 * streamed, (held, streamed)


def _peak_compacting(path: Path, hold: bool) -> int:
    import gc
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    try:
        r = engine.run(path, engine.Options(window=20_000, use_state=False), output=path.with_suffix(".out"),
                       hold=hold, warn=lambda m: None)
        assert r.compacted
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_compaction_is_made_in_pass_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Claude Code compaction of the default path is made without holding the file (its lines copied,
    then the boundary and the context chained on the last line of the main chain): the held route's output
    byte for byte, the file never loaded, and its peak grows by little per added record (the held one's by
    the records, so the test can fail)."""
    small, big = _sessions(tmp_path, 250, 1_000)
    loaded = _loads(monkeypatch)
    _peak_compacting(_sessions(tmp_path, 60)[0], False)  # warm
    streamed = (_peak_compacting(big, False) - _peak_compacting(small, False)) / _added(small, big)
    assert loaded == []
    out = big.with_suffix(".out").read_bytes()
    held_small, held_big = _sessions(tmp_path, 60, 240)  # (a quarter of the sizes, as above)
    streamed_out = held_big.with_suffix(".out")
    # (the streamed output to compare with the held one: not traced, the peak is not wanted)
    engine.run(held_big, engine.Options(window=20_000, use_state=False), output=streamed_out, hold=False,
               warn=lambda m: None)
    streamed_bytes = streamed_out.read_bytes()
    held_peak = _peak_compacting(held_big, True) - _peak_compacting(held_small, True)
    held = held_peak / _added(held_small, held_big)
    assert streamed_out.read_bytes() == streamed_bytes
    assert out.startswith(big.read_bytes()) and b'"compact_boundary"' in out[big.stat().st_size:]
    assert streamed < 200, f"{streamed:.0f} B per record (held: {held:.0f})"
    assert held > 8 * streamed, (held, streamed)


def test_the_lines_before_a_boundary_are_not_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No state, a boundary near the end: the lines before it (history only) pass through the cleaner as
    they come, not held until a message after the boundary settles them (3.5 KB a record before: the
    held route's figure, test_memory_does_not_grow_with_the_records)."""
    from ctxcompact import stream_totals
    from ctxcompact.formats.claude_code_stream import StreamFinish

    # (pass 1 counts in batches, the boundary scan reads 1 MiB chunks: smaller ones, which small files fill)
    monkeypatch.setattr(stream_totals.Totals, "BATCH_RECORDS", 256)
    monkeypatch.setattr(stream_totals.Totals, "BATCH_BYTES", 64 * 1024)
    scan = StreamFinish._scan
    monkeypatch.setattr(StreamFinish, "_scan", lambda self, stream, at, limit: scan(self, stream, at, limit,
                                                                                   64 * 1024))
    small, big = tmp_path / "small.jsonl", tmp_path / "big.jsonl"
    small_lines, big_lines = _session(turns=50, boundary_at=48), _session(turns=200, boundary_at=198)
    small.write_bytes(b"".join(small_lines))
    big.write_bytes(b"".join(big_lines))
    added = len(big_lines) - len(small_lines)
    _peak(small, False)  # warm
    streamed = (_peak(big, False) - _peak(small, False)) / added
    assert streamed < 200, f"{streamed:.0f} B per record"


@pytest.mark.parametrize("wrong", ["none off", "all off"])
def test_a_branch_found_otherwise_than_the_lines_read_is_left_to_the_held_route(tmp_path, new_process,
                                                                                monkeypatch, wrong):
    """What follow finds before the read is checked at the end against the rule over the lines read: where
    they differ (here made so: none of the lines off the branch, or every message line) the call is held,
    and answers as the held route does."""
    from ctxcompact.formats.claude_code_stream import StreamFinish

    loaded = _loads(monkeypatch)
    lines = _rewound(3, [(9, 25)])
    real = StreamFinish._found

    def found(self: StreamFinish, *a: Any) -> Any:
        off, keys = real(self, *a)
        assert off  # (the rewind leaves lines off the branch)
        if wrong == "all off":
            every = [[orjson.loads(line)["uuid"], sum(map(len, lines[:i]))] for i, line in enumerate(lines)
                     if b'"message"' in line]
            return [every, keys]
        return [[], keys]

    monkeypatch.setattr(StreamFinish, "_found", found)
    cuts = [len(lines)]
    assert _sequence(tmp_path, lines, cuts, cold=True, hold=False) == \
        _sequence(tmp_path, lines, cuts, cold=True, hold=True)
    assert loaded == [tmp_path / "t.jsonl"] * 2
