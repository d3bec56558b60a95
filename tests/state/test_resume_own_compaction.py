"""A Claude Code log after ctxcompact's own compaction, on the streamed route (issue 25 item 1): the recipe
(docs/guides/claude-code-codex.md) puts the output, the input's lines then a compact_boundary and the
context, in the input's place and the client continues it. The next hook call streams (it went held: the
boundary's postTokens stood until a bill followed it, and with a state the log carried the state's
summary), parses nothing before the state's covered prefix or its resume point, and answers as the held
route from scratch: outputs, states and reports, whatever the appends, with or without a state; a fork or a
rewind still gives the held route's answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_resume import _resume_at, _run
from test_resume_claude_code import _loads, _Log, _session

from ctxcompact import api
from ctxcompact.state.cache import cache_path

DATA = Path(__file__).parent.parent / "data" / "claude-code"
#: a real log (its licence: tests/data/claude-code/SOURCES.md), compacted at a 30,000 window as in
#: tests/formats/test_after_own_compaction.py
REAL = DATA / "spotter-tool-heavy.jsonl"


Kept = tuple[bytes, bytes] | None  # the state and the count cache beside it, as the compacting call left them


def _compacted(tmp: Path, base: bytes, window: int, state: bool) -> tuple[bytes, Kept]:
    """The log after ctxcompact compacted ``base`` (the output in the input's place), and the state then."""
    work = tmp / "first"
    work.mkdir(exist_ok=True)
    path, out = work / "t.jsonl", work / "out.jsonl"
    path.write_bytes(base)
    r = api.run(path, api.Options(window=window, use_state=state), output=out, warn=lambda m: None)
    assert r.compacted and out.read_bytes().startswith(base)
    kept = Path(f"{path}.ctxstate.json")
    return out.read_bytes(), (kept.read_bytes(), cache_path(kept).read_bytes()) if state else None


def _continued(log: bytes, turns: int, seed: int = 3) -> list[bytes]:
    """What the client writes after it: the user's next request, then turns chained on the log's tip."""
    cont = _Log(seed)
    cont.n = 10**6  # (uuids apart from the session's)
    cont.tip = orjson.loads(log.splitlines()[-1])["uuid"]
    cont.user("Carry on from the summary.")
    for t in range(turns):
        cont.turn(cont.rnd.choice([1, 2]))
        if t % 3 == 2:
            cont.reply()
            cont.user(f"Next, step {t}.")
    return cont.lines


def _calls(tmp: Path, log: bytes, state: Kept, more: list[bytes], cuts: list[int], *, cold: bool,
           hold: bool, **kw: Any) -> list[tuple]:
    """A call on the compacted log with the first ``cut`` lines of ``more`` appended, for each cut, each as a
    new process; ``cold``: the count cache removed before each."""
    path = tmp / "t.jsonl"
    kept = Path(f"{path}.ctxstate.json")
    for f in (kept, cache_path(kept)):
        f.unlink(missing_ok=True)
    if state is not None:
        kept.write_bytes(state[0])
        cache_path(kept).write_bytes(state[1])
    got = []
    for cut in cuts:
        path.write_bytes(log + b"".join(more[:cut]))
        if cold:
            cache_path(kept).unlink(missing_ok=True)
        got.append(_run(path, tmp / "out.jsonl", hold=hold, use_state=state is not None, **kw))
    return got


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, tuple[bytes, Kept]]:
    base = b"".join(_session(turns=40))
    return {state: _compacted(tmp_path_factory.mktemp("own"), base, 8_000, state) for state in (True, False)}


@pytest.mark.parametrize("state", [True, False], ids=["state", "no-state"])
@pytest.mark.parametrize("source", ["generated", "real"])
def test_the_calls_after_our_compaction_stream_as_held(tmp_path, new_process, parsed, monkeypatch, generated,
                                                      state, source):
    """The request alone (the boundary's postTokens still the measurement), then the turns after it (billed):
    both calls streamed, the first after a compaction parsing nothing before the covered prefix (with a
    state) and the next nothing before its resume point; each answers as the held route from scratch."""
    from ctxcompact.clean import Cleaner

    monkeypatch.setattr(Cleaner, "FIRST_TRY", 4)
    if source == "real":
        log, kept = _compacted(tmp_path, REAL.read_bytes(), 30_000, state)
        prefix = len(REAL.read_bytes())
    else:
        log, kept = generated[state]
        prefix = log.index(b'"compact_boundary"')
        prefix = log.rindex(b"\n", 0, prefix) + 1
    more = _continued(log, 9)
    cuts = [1, len(more) // 2, len(more)]
    loaded = _loads(monkeypatch)
    parsed.clear()
    path = tmp_path / "t.jsonl"
    first, second = _calls(tmp_path, log, kept, more, cuts[:2], cold=False, hold=False)
    assert loaded == []
    assert min(parsed) == (prefix if state else 0)  # (each call from the prefix: none settled a part after)
    at = _resume_at(path) if state else None
    parsed.clear()
    path.write_bytes(log + b"".join(more))
    got = _run(path, tmp_path / "out.jsonl", hold=False, use_state=state)
    assert loaded == []
    if at is not None:
        assert at > prefix and min(parsed) == at
    held = _calls(tmp_path, log, kept, more, cuts, cold=True, hold=True)
    assert [first, second, got] == held
    assert first[6] != got[6]  # (the first measured by postTokens, the second by the bill after it)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), state=st.booleans(), exact_opt=st.sampled_from(["tiktoken", "none"]),
       window=st.sampled_from([400_000, 9_000]), first_try=st.sampled_from([2, 5, 64]))
def test_any_split_of_appends_after_our_compaction_gives_the_held_answer(
        tmp_path, new_process, monkeypatch, generated, data, state, exact_opt, window, first_try):
    """Each call a new process, streamed and resuming, against the held route from scratch, below the
    threshold and compacting again (the small window)."""
    from ctxcompact.clean import Cleaner

    monkeypatch.setattr(Cleaner, "FIRST_TRY", first_try)
    log, kept = generated[state]
    more = _continued(log, 8, seed=data.draw(st.integers(0, 3)))
    cuts = sorted(set(data.draw(st.lists(st.integers(min_value=1, max_value=len(more)), min_size=1,
                                         max_size=4))))
    opts = {"exact": exact_opt, "window": window}
    streamed = _calls(tmp_path, log, kept, more, cuts, cold=False, hold=False, **opts)
    assert streamed == _calls(tmp_path, log, kept, more, cuts, cold=True, hold=True, **opts)


def _off(lines: list[bytes], parent: str) -> bytes:
    """A user line whose parent is ``parent`` (a rewind, or a fork off a line before the tip)."""
    obj = {**orjson.loads(lines[-1]), "parentUuid": parent, "uuid": "11111111-0000-4000-8000-000000000001",
           "type": "user", "message": {"role": "user", "content": "No, do it another way."}}
    for key in ("requestId", "toolUseResult", "isCompactSummary", "isVisibleInTranscriptOnly"):
        obj.pop(key, None)
    return orjson.dumps(obj) + b"\n"


@pytest.mark.parametrize("shape", ["rewind to the summary", "fork off the last response",
                                   "rewind before the boundary"])
def test_lines_off_the_branch_after_our_compaction_give_the_held_answer(tmp_path, new_process, monkeypatch,
                                                                        generated, shape):
    log, kept = generated[True]
    more = _continued(log, 6)
    lines = log.splitlines(keepends=True)
    boundary = next(i for i, line in enumerate(lines) if b'"compact_boundary"' in line)
    parent = {"rewind to the summary": lines[boundary + 1], "fork off the last response": more[-4],
              "rewind before the boundary": lines[boundary - 5]}[shape]
    more = [*more, _off(more, orjson.loads(parent)["uuid"])]
    first, got = _calls(tmp_path, log, kept, more, [len(more) - 1, len(more)], cold=False, hold=False)
    assert [first, got] == _calls(tmp_path, log, kept, more, [len(more) - 1, len(more)], cold=True, hold=True)
    assert first[0] != got[0]


def test_a_log_whose_copy_of_the_summary_was_edited_reads_as_held(tmp_path, new_process, generated):
    """The log's summary line no longer holds the state's summary: the state's lead is the context's
    summary again (context.log_carries), on both routes."""
    log, kept = generated[True]
    assert kept is not None
    lines = log.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if b'"isCompactSummary"' in line)
    obj = orjson.loads(lines[at])
    obj["message"]["content"] = "This session is being continued. (edited)"
    lines[at] = orjson.dumps(obj) + b"\n"
    edited = b"".join(lines)
    more = _continued(edited, 3)
    got = _calls(tmp_path, edited, kept, more, [1, len(more)], cold=False, hold=False)
    assert got == _calls(tmp_path, edited, kept, more, [1, len(more)], cold=True, hold=True)

