"""Codex and ADK logs holding a compaction line, on the streamed route (issue 25 item 1): the client's own
(Codex's ``compacted`` line, an ADK compaction event) or ctxcompact's, written into the log and put in the
input's place. The read finds the compaction lines first by a byte scan (``formats.base.marked_lines``),
then hides what they hide as the lines come; a compaction line after a resume point (it may hide lines
counted before the point) reads again from the start, streamed. Each call as in a new process: streamed
calls answer as the held route from scratch (outputs, states, reports), whatever the appends; the call
after ctxcompact's compaction parses nothing before the state's covered prefix, the next nothing before
its resume point."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_resume import _resume_at, _run, _sequence
from test_resume_agent_logs import AGENT_LINES
from test_resume_claude_code import _loads
from test_resume_own_compaction import _calls, _compacted

DATA = Path(__file__).parent.parent / "data" / "codex"
#: Codex's own compaction, a real rollout (its licence: tests/data/codex/SOURCES.md)
OWN = DATA / "localpush-rollout-compacted-excerpt.jsonl"


def _hiding(fmt: str, i: int) -> bytes:
    """A compaction line of the client's own: Codex's ``compacted`` line, an ADK compaction event hiding
    the events stamped from 0 to ``i`` (the generated events are stamped 1_700_000_000 + their index)."""
    if fmt == "codex":
        obj = {"timestamp": "2026-01-01T00:00:00.000Z", "type": "compacted",
               "payload": {"message": f"what happened up to {i}"}}
    else:
        obj = {"author": "user", "invocationId": f"e-c{i}", "id": f"ev-c{i}", "timestamp": 1_700_000_000 + i,
               "actions": {"compaction": {"startTimestamp": 1_700_000_000, "endTimestamp": 1_700_000_000 + i,
                                          "compactedContent": {"role": "model",
                                                               "parts": [{"text": f"up to {i}"}]}}}}
    return orjson.dumps(obj) + b"\n"


@pytest.mark.parametrize("state", [True, False], ids=["state", "no-state"])
@pytest.mark.parametrize("fmt", ["codex", "genai"])
def test_the_calls_after_our_compaction_stream_as_held(tmp_path, new_process, parsed, monkeypatch, fmt,
                                                      state):
    """ctxcompact compacts the log (its compaction written into it, in the input's place), the client goes
    on: each later call streamed, the first parsing nothing before the covered prefix (with a state), the
    next nothing before its resume point, all as the held route from scratch."""
    from ctxcompact.clean import Cleaner

    monkeypatch.setattr(Cleaner, "FIRST_TRY", 4)
    lines = AGENT_LINES[fmt]()
    base = b"".join(lines[:-12])
    log, kept = _compacted(tmp_path, base, 6_000, state)
    more = lines[-12:]
    cuts = [2, 6, len(more)]
    loaded = _loads(monkeypatch)
    parsed.clear()
    path = tmp_path / "t.jsonl"
    first, second = _calls(tmp_path, log, kept, more, cuts[:2], cold=False, hold=False, window=10**8)
    assert loaded == []
    # (the covered prefix: the summary's, which may leave the last lines to the context)
    prefix = orjson.loads(kept[0])["fingerprint"]["bytes"] if kept is not None else 0
    assert min(parsed) == prefix and (prefix > len(base) // 2 or not state)
    at = _resume_at(path) if state else None
    parsed.clear()
    path.write_bytes(log + b"".join(more))
    got = _run(path, tmp_path / "out.jsonl", hold=False, use_state=state, window=10**8)
    assert loaded == []
    if state:
        # (the generated ADK log: ctxcompact's compaction event stands between a call and its response, so
        # the cleaner settles no part after it and each call reads from the covered prefix, streamed)
        assert min(parsed) == (at or prefix) and (at > prefix or fmt == "genai")
    held = _calls(tmp_path, log, kept, more, cuts, cold=True, hold=True, window=10**8)
    assert [first, second, got] == held


@pytest.mark.parametrize("where", ["before", "after"])
def test_a_real_rollout_with_codexs_own_compaction_streams(tmp_path, new_process, parsed, monkeypatch, where):
    """The first call ends before Codex's ``compacted`` line (the second then reads again from the start: the
    line hides what the first counted) or after it (the second parses only from its resume point)."""
    from ctxcompact.clean import Cleaner

    monkeypatch.setattr(Cleaner, "FIRST_TRY", 4)
    lines = OWN.read_bytes().splitlines(keepends=True)
    at_line = next(i for i, line in enumerate(lines) if b'"type":"compacted"' in line)
    cut = at_line - 20 if where == "before" else at_line + 40
    loaded = _loads(monkeypatch)
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(lines[:cut]))
    first = _run(path, tmp_path / "out.jsonl", hold=False, window=1_000_000)
    resume = _resume_at(path)
    parsed.clear()
    path.write_bytes(b"".join(lines))
    got = _run(path, tmp_path / "out.jsonl", hold=False, window=1_000_000)
    assert loaded == []
    assert min(parsed) == (0 if where == "before" else resume) and resume > 0
    held = _sequence(tmp_path, lines, [cut, len(lines)], cold=True, hold=True, window=1_000_000)
    assert [first, got] == held


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fmt=st.sampled_from(["codex", "genai"]), data=st.data(),
       exact_opt=st.sampled_from(["tiktoken", "none"]), window=st.sampled_from([400_000, 30_000]),
       first_try=st.sampled_from([2, 5, 64]))
def test_any_split_of_appends_to_a_log_with_compaction_lines_gives_the_held_answer(
        tmp_path, new_process, monkeypatch, fmt, data, exact_opt, window, first_try):
    """The client's compaction lines among the lines, anywhere (one, two, or none), each call a new process
    streamed and resuming, against the held route from scratch."""
    from ctxcompact.clean import Cleaner

    monkeypatch.setattr(Cleaner, "FIRST_TRY", first_try)
    lines = AGENT_LINES[fmt]()
    at = sorted(data.draw(st.lists(st.integers(5, len(lines) - 1), max_size=2, unique=True)), reverse=True)
    for i in at:
        lines.insert(i, _hiding(fmt, i - 3))
    cuts = sorted(set(data.draw(st.lists(st.integers(min_value=1, max_value=len(lines)), min_size=2,
                                         max_size=4))))
    opts = {"exact": exact_opt, "window": window}
    streamed = _sequence(tmp_path, lines, cuts, cold=False, hold=False, **opts)
    assert streamed == _sequence(tmp_path, lines, cuts, cold=True, hold=True, **opts)


@pytest.mark.parametrize("window", [60_000, 50_000])
def test_a_compacting_call_on_a_real_rollout_with_codexs_own_compaction_streams(tmp_path, new_process,
                                                                                monkeypatch, window):
    """Over the threshold, Codex's ``compacted`` line in the log: compacted in pass 2 without holding the
    file, the output byte for byte and the state the held route's. (The developer lines the ``compacted``
    line hides are no system lines of the context: the state once noted them streamed, and a later call
    would have put them back.)"""
    lines = OWN.read_bytes().splitlines(keepends=True)
    loaded = _loads(monkeypatch)
    streamed = _sequence(tmp_path, lines, [len(lines)], cold=True, hold=False, window=window)
    assert loaded == [] and streamed[0][3]  # compacted, and never read into memory
    held = _sequence(tmp_path, lines, [len(lines)], cold=True, hold=True, window=window)
    assert streamed == held
    assert held[0][1]["fingerprint"]["system_lines"] == []
