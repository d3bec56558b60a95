"""A state with sections to apply again on the streamed route (issue 25): the masking an earlier ``--strategy
mask`` or ``--prune`` run left (placeholders by call id, thinking cleared, usage before it ignored) is
applied to each record as it is read (``strategies.reapply_each``: masking's own ``reapply``, a record at
a time), then cleaned, as ``context.build_context`` does; its fingerprint is proven in pass 1's SHA-256
pass. Sliding-window events are applied as the records come too (``strategies.events.EventsEach``, the code
of ``apply_events``): each summary placed before the first record past where its range begins, the records
in a range dropped as they stream by. Outputs, states, reports and warnings are the held route's byte for
byte."""

from __future__ import annotations

import functools
import gc
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from helpers import SAMPLES, coding_session, jsonl, resumed_calls, runs_on_one_file, sys_msg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcompact import engine, stream_totals
from ctxcompact.options import Options

DATA = Path(__file__).parent.parent / "data"



def _calls(work: Path, hold: bool, datas: list[bytes], options: list[dict[str, Any]],
           loads: list[Any]) -> list[tuple[Any, ...]]:
    """``helpers.runs_on_one_file`` with the records each call read."""
    return runs_on_one_file(work, hold, datas, options, loads, lambda r: (r.estimate.records,))


def _session(turns: int) -> list[bytes]:
    return jsonl([sys_msg("You are a coding agent."), *coding_session(turns, tool_chars=1500)]).splitlines(
        keepends=True)


LINES = _session(24)
CUTS = [40, 48, 60, 72, 84, len(LINES)]


@pytest.mark.parametrize("first", [{"strategy": "mask"}, {"prune": True}], ids=["mask", "prune"])
@pytest.mark.parametrize("then", [{}, {"exact": "none"}], ids=["exact", "heuristic"])
def test_calls_after_a_masking_stream_and_give_the_held_run(first: dict[str, Any], then: dict[str, Any],
                                                            tmp_path: Path, loads: list[Any]) -> None:
    """A masking (or --prune's) run, then the hook's default calls on the grown session: below the
    threshold, over it (a compaction with the masking applied), and after it; every later call streams."""
    datas = [b"".join(LINES[:n]) for n in CUTS]
    options = [{"window": 6_000, **first}, *[{"window": 6_000, **then}] * (len(CUTS) - 1)]
    streamed = _calls(tmp_path / "s", False, datas, options, loads)
    held = _calls(tmp_path / "h", True, datas, options, loads)
    assert [s[:-1] for s in streamed] == [h[:-1] for h in held]
    assert streamed[0][1]["masking"]["records"]  # the first call masked
    assert [s[-1] for s in streamed[1:]] == [False] * (len(CUTS) - 1)  # then never held
    assert any(s[3] for s in streamed[1:]) and all(h[-1] for h in held)


def test_a_masking_changed_between_calls_is_not_resumed_under(tmp_path: Path, loads: list[Any]) -> None:
    """Masking, streamed calls (from the second on, from a resume point), masking again (more results),
    then streamed calls, none holding the file (the maskings stream too: mask_stream): the resume point
    kept under the first masking is not taken under the second (what it carries was counted with the first
    masking's placeholders)."""
    cuts = [70, 74, 78, 90, 94, 97]  # (a resume point is kept past 64 records)
    datas = [b"".join(LINES[:n]) for n in cuts]
    mask, call = {"window": 6_000, "strategy": "mask"}, {"window": 1_000_000}
    options = [mask, call, call, {**mask, "window": 4_000}, call, call]
    streamed = _calls(tmp_path / "s", False, datas, options, loads)
    assert [s[:-1] for s in streamed] == [h[:-1] for h in _calls(tmp_path / "h", True, datas, options, loads)]
    masked = [len(s[1]["masking"]["records"]) for s in streamed]
    assert masked[3] > masked[0] and [s[-1] for s in streamed] == [False] * 6


def test_thinking_cleared_earlier_is_cleared_on_the_streamed_route(tmp_path: Path, loads: list[Any]) -> None:
    """An anthropic session whose thinking an earlier ``--clear-thinking`` masking cleared: the records
    the masking dropped or changed are the held route's, then a second call after it."""
    lines = (SAMPLES / "anthropic-session.jsonl").read_bytes().splitlines(keepends=True)
    datas = [b"".join(lines[: len(lines) - 2]), b"".join(lines)]
    options = [{"window": 3_000, "strategy": "mask", "clear_thinking": True}, {"window": 1_000_000}]
    streamed = _calls(tmp_path / "s", False, datas, options, loads)
    assert [s[:-1] for s in streamed] == [h[:-1] for h in _calls(tmp_path / "h", True, datas, options, loads)]
    assert streamed[0][1]["masking"].get("thinking_before") and streamed[1][-1] is False


def test_a_changed_prefix_under_a_masking_is_the_held_routes_error(tmp_path: Path, loads: list[Any]) -> None:
    """The input the masking acted on was edited: the same error and exit code (the held route says it)."""
    datas = [b"".join(LINES[:40]), b"".join(LINES[:48]).replace(b"Turn 3:", b"Turn 9:")]
    options = [{"window": 6_000, "strategy": "mask"}, {"window": 6_000}]
    streamed = _calls(tmp_path / "s", False, datas, options, loads)
    held = _calls(tmp_path / "h", True, datas, options, loads)
    assert streamed[1][0] == "error" and streamed[1] == held[1] and streamed[0][:-1] == held[0][:-1]


SW = {"strategy": "sliding-window", "invocation_threshold": 2, "overlap": 1}


@pytest.mark.parametrize("then", [{}, {"exact": "none"}], ids=["exact", "heuristic"])
def test_calls_after_sliding_window_events_stream_and_give_the_held_run(then: dict[str, Any], tmp_path: Path,
                                                                       loads: list[Any]) -> None:
    """A sliding-window run that makes events, then the hook's default calls on the grown session: each
    event's summary placed where its range begins and its records dropped as they stream by (below the
    threshold), a compaction over it, a call after it; none holds the file."""
    datas = [b"".join(LINES[:n]) for n in CUTS]
    big, small = {"window": 1_000_000, **then}, {"window": 6_000, **then}
    options = [{"window": 6_000, **SW}, big, big, small, big, big]
    streamed = _calls(tmp_path / "s", False, datas, options, loads)
    assert [s[:-1] for s in streamed] == [h[:-1] for h in _calls(tmp_path / "h", True, datas, options, loads)]
    assert len(streamed[0][1]["events"]) >= 2 and streamed[1][0].count(b"[ctxcompact summary") >= 1
    assert [s[-1] for s in streamed[1:]] == [False] * (len(CUTS) - 1) and streamed[3][3]  # (3: compacted)


REAL = [SAMPLES / "openai-long.jsonl", SAMPLES / "anthropic-session.jsonl",  # (anthropic: acknowledgements)
        DATA / "anthropic" / "agent_session.jsonl", DATA / "codex" / "localpush-rollout-tools.jsonl"]


@pytest.mark.parametrize("path", REAL, ids=[f"{p.parent.name}/{p.name}" for p in REAL])
def test_real_fixtures_with_events_stream_and_give_the_held_run(path: Path, tmp_path: Path,
                                                                loads: list[Any]) -> None:
    """Each event a complete invocation (an agent log's summary written as the agent's own), then a call
    passing through and one at a window it compacts at."""
    datas = [path.read_bytes()] * 3
    options = [{"window": 20_000, **SW, "invocation_threshold": 1, "overlap": 0}, {"window": 1_000_000},
               {"window": 3_000}]
    streamed = _calls(tmp_path / "s", False, datas, options, loads)
    assert [s[:-1] for s in streamed] == [h[:-1] for h in _calls(tmp_path / "h", True, datas, options, loads)]
    assert streamed[0][1]["events"] and streamed[1][-1] is False


def test_an_event_from_the_first_record_over_a_call_and_its_result(tmp_path: Path, loads: list[Any]) -> None:
    """No preamble: the first event's range begins at record 0 and holds turn 0's call and its result,
    both dropped as they stream by (cleaning answers neither)."""
    lines = jsonl(coding_session(6, tool_chars=3000)).splitlines(keepends=True)
    datas = [b"".join(lines[:16]), b"".join(lines)]
    options = [{"window": 1_000_000, **SW, "invocation_threshold": 1, "overlap": 0}, {"window": 1_000_000}]
    streamed = _calls(tmp_path / "s", False, datas, options, loads)
    assert [s[:-1] for s in streamed] == [h[:-1] for h in _calls(tmp_path / "h", True, datas, options, loads)]
    first = streamed[0][1]["events"][0]
    assert (first["start"], first["end"]) == (0, 4)  # (records 1, 2: turn 0's call and its result)
    assert streamed[1][-1] is False
    assert b"call_0" not in streamed[1][0] and b"call_3" in streamed[1][0]


def test_an_emptied_input_under_events_is_the_held_routes_answer(tmp_path: Path, loads: list[Any]) -> None:
    datas = [b"".join(LINES[:40]), b""]
    options = [{"window": 6_000, **SW}, {"window": 6_000}]
    streamed = _calls(tmp_path / "s", False, datas, options, loads)
    held = _calls(tmp_path / "h", True, datas, options, loads)
    assert streamed[0][1]["events"] and [s[:-1] for s in streamed] == [h[:-1] for h in held]


@functools.cache
def _whole_held(work: Path) -> tuple[Any, ...]:
    return _calls(work, True, [b"".join(LINES[:40]), b"".join(LINES)], [{"window": 6_000, **SW},
                  {"window": 1_000_000}], [])[1]


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(min_value=1, max_value=30), min_size=1, max_size=3))
def test_any_split_of_appends_under_events_gives_the_held_output(tmp_path_factory: Any, loads: list[Any],
                                                                 splits: list[int]) -> None:
    """The events made on the first 40 lines, then the rest appended in any split, each call streamed:
    the last output is the held route's of the whole in one call, and so are the events."""
    cuts = sorted({min(40 + sum(splits[: i + 1]), len(LINES)) for i in range(len(splits))} | {len(LINES)})
    datas = [b"".join(LINES[:40]), *[b"".join(LINES[:n]) for n in cuts]]
    options = [{"window": 6_000, **SW}, *[{"window": 1_000_000}] * len(cuts)]
    streamed = _calls(tmp_path_factory.mktemp("s") / "w", False, datas, options, loads)
    whole = _whole_held(tmp_path_factory.getbasetemp() / "whole")
    assert streamed[-1][0] == whole[0] and streamed[-1][1]["events"] == whole[1]["events"]
    assert [s[-1] for s in streamed[1:]] == [False] * len(cuts)


def _peak_after(first: dict[str, Any], work: Path, lines: list[bytes]) -> int:
    """Traced peak of a call passing a session through under the state a first call with options ``first``
    left on its first 40 lines."""
    work.mkdir()
    path = work / "t.jsonl"
    path.write_bytes(b"".join(lines[:40]))
    engine.run(path, Options(**{"window": 6_000, "exact": "none", **first}), output=work / "o.jsonl",
               warn=lambda m: None)
    path.write_bytes(b"".join(lines))
    gc.collect()
    tracemalloc.start()
    try:
        engine.run(path, Options(window=10**9, exact="none"), output=work / "o.jsonl", warn=lambda m: None)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_call_under_events_holds_little_per_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The events' summaries placed and their records dropped as they stream by: what the call holds grows
    by the count cache's bytes a line and pass 1's counts, not by the records (~160 B a record here; the
    held route ~1.8 KB). Pass 1 counts in batches of records: small ones here, so the growth shows at a
    size a test can afford."""
    monkeypatch.setattr(stream_totals.Totals, "BATCH_RECORDS", 64)
    monkeypatch.setattr(stream_totals.Totals, "BATCH_BYTES", 64 * 1024)
    n = 300
    session = [sys_msg("You are a coding agent."), *coding_session(5 * n // 4, tool_chars=300)]
    lines = jsonl(session).splitlines(keepends=True)
    _peak_after(SW, tmp_path / "warm", lines[:n])
    big = _peak_after(SW, tmp_path / "big", lines[:5 * n])
    grew = (big - _peak_after(SW, tmp_path / "small", lines[:n])) / (4 * n)
    assert grew < 600, f"{grew:.0f} B per record"


def test_a_call_past_the_events_resumes(tmp_path: Path, loads: list[Any],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Once a part settles after the last event's range, a later call's pass 1 starts there (the events
    are all placed before it; the call right after the sliding-window one has no resume point; the
    sliding-window call's own pass 1 reads every record, what its rule decides by)."""
    resumed = resumed_calls(monkeypatch)
    lines = _session(40)
    cuts = [40, 44, 110, 130]  # (the cleaner settles a part past 64 records)
    datas = [b"".join(lines[:n]) for n in cuts]
    options = [{"window": 6_000, **SW}, *[{"window": 1_000_000}] * (len(cuts) - 1)]
    streamed = _calls(tmp_path / "s", False, datas, options, loads)
    assert [s[:-1] for s in streamed] == [h[:-1] for h in _calls(tmp_path / "h", True, datas, options, loads)]
    assert streamed[0][1]["events"] and [s[-1] for s in streamed[1:]] == [False] * (len(cuts) - 1)
    assert streamed[0][1]["events"][-1]["end"] < 44 and resumed == [False, False, False, True]
