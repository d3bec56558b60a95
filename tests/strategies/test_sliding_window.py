"""Sliding-window strategy (docs/guides/strategies.md#sliding-window): ADK-style events, the context rule,
pair safety, shrinking, growing runs."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import assistant, jsonl, sys_msg, tool, user
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcompact import api
from ctxcompact.errors import ExitCode, StateError, SummarizerError, UsageError
from ctxcompact.formats import read_transcript
from ctxcompact.model import Origin, Record, ToolCall, ToolResult
from ctxcompact.options import Options
from ctxcompact.state import State, load_state
from ctxcompact.strategies.events import apply_events
from ctxcompact.strategies.invocations import Invocation, invocations, plan_invocation_windows, unsafe_splits
from ctxcompact.strategies.sliding_window_state import Event, WindowEvents


def events_of(state: State | None) -> list[Event]:
    """The sliding window's events in a state (its own section)."""
    own = state.section(WindowEvents) if state is not None else None
    return own.events if own is not None else []


def turn(i: int, result: str | None = None) -> list[dict[str, Any]]:
    """One invocation of 4 records: request, call, result, answer."""
    return [user(f"request {i}"), assistant(None, [(f"c{i}", "bash", {"cmd": f"ls dir{i}"})]),
            tool(f"c{i}", result if result is not None else f"file{i}.txt " * 80), assistant(f"done {i}")]


def session(n: int, first: int = 1) -> list[dict[str, Any]]:
    out = [sys_msg("You are a helpful agent.")] if first == 1 else []
    for i in range(first, first + n):
        out += turn(i)
    return out


def sw(**kw: Any) -> Options:
    base: dict[str, Any] = {"strategy": "sliding-window", "invocation_threshold": 3, "overlap": 1,
                            "window": 200_000}
    base.update(kw)
    return Options(**base)


def ranges(state: State | None) -> list[tuple[int, int]]:
    assert state is not None
    return [(e.start, e.end) for e in events_of(state)]


def texts(result: api.RunResult) -> list[str]:
    return [r.message.text() for r in result.transcript.records if r.message is not None]


# With a system record at index 0 and 4 records per invocation, invocation k is records [4k-3, 4k+1).
def inv_range(first: int, last: int) -> tuple[int, int]:
    return 4 * first - 3, 4 * last + 1


# ------------------------------------------------------------------------------------ worked examples


def test_worked_example_theta3_overlap1(tmp_path: Path) -> None:
    """10 invocations (the 10th still running): events 1-3, 3-6, 6-9, as google/adk-python documents."""
    p = tmp_path / "t.jsonl"
    p.write_bytes(jsonl(session(10)))
    r = api.run(p, sw(), output=tmp_path / "out.jsonl")
    assert r.exit_code == ExitCode.OK and r.compacted
    assert ranges(r.state) == [inv_range(1, 3), inv_range(3, 6), inv_range(6, 9)]
    assert [e.invocations for e in events_of(r.state)] == [3, 4, 4]  # type: ignore[union-attr]
    assert [e.records for e in events_of(r.state)] == [12, 16, 16]  # type: ignore[union-attr]
    out = r.transcript.records
    # system verbatim, then the three summaries in order of start, then invocation 10 verbatim
    assert out[0].origin is Origin.INPUT and out[0].index == 0
    assert [rec.origin for rec in out[1:4]] == [Origin.SUMMARY] * 3
    assert [rec.index for rec in out[4:]] == [37, 38, 39, 40]
    assert all(t.startswith("[ctxcompact summary") for t in texts(r)[1:4])
    assert "request 10" in texts(r)[4]
    # the state on disk holds the events; the output file is the context
    saved = load_state(tmp_path / "t.jsonl.ctxstate.json")
    assert ranges(saved) == ranges(r.state)
    assert saved is not None and saved.watermark == 0 and saved.fingerprint.records == 37
    lines = (tmp_path / "out.jsonl").read_bytes().splitlines()
    assert len(lines) == 8 and orjson.loads(lines[-4])["content"] == "request 10"


def test_adk_docstring_example_threshold2_overlap1() -> None:
    """adk-python's own example: interval 2, overlap 1 → [1, 2] then [2, 4]."""
    invs = [Invocation(0, 0, 1)] + [Invocation(k, 2 * k - 1, 2 * k + 1) for k in range(1, 6)]
    ws = plan_invocation_windows(invs, 0, 2, 1)
    assert [(w.first, w.last) for w in ws] == [(1, 2), (2, 4)]
    assert [(w.start, w.end) for w in ws] == [(1, 5), (3, 9)]


@pytest.mark.parametrize("n, expected", [(3, []), (4, [(1, 3)]), (6, [(1, 3)]), (7, [(1, 3), (3, 6)])])
def test_invocation_trigger_counts_complete_invocations(tmp_path: Path, n: int,
                                                         expected: list[tuple[int, int]]) -> None:
    """The latest invocation is still running: 3 requests are 2 complete invocations, no event yet."""
    p = tmp_path / "t.jsonl"
    p.write_bytes(jsonl(session(n)))
    r = api.run(p, sw(), output=tmp_path / "o.jsonl")
    assert ranges(r.state) == [inv_range(a, b) for a, b in expected]
    assert r.compacted is bool(expected)


def test_first_run_equals_a_run_after_every_invocation(tmp_path: Path) -> None:
    objs = session(11)
    whole = tmp_path / "whole.jsonl"
    whole.write_bytes(jsonl(objs))
    once = api.run(whole, sw(), output=tmp_path / "o1.jsonl")
    grow = tmp_path / "grow.jsonl"
    for k in range(1, 12):
        grow.write_bytes(jsonl(objs[: 1 + 4 * k]))
        last = api.run(grow, sw(), output=tmp_path / "o2.jsonl")
    assert ranges(last.state) == ranges(once.state) == [inv_range(1, 3), inv_range(3, 6), inv_range(6, 9)]
    assert [r.message.text() for r in last.transcript.records if r.message] == texts(once)


def test_overlap_zero_and_larger_than_threshold(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_bytes(jsonl(session(7)))
    r0 = api.run(p, sw(overlap=0, reset_state=True), output=tmp_path / "o.jsonl")
    assert ranges(r0.state) == [inv_range(1, 3), inv_range(4, 6)]
    r5 = api.run(p, sw(overlap=5, reset_state=True), output=tmp_path / "o.jsonl")
    assert ranges(r5.state) == [inv_range(1, 3), inv_range(1, 6)]  # cannot start before invocation 1
    # the second event contains the first: only its summary is shown
    assert [rec.origin for rec in r5.transcript.records].count(Origin.SUMMARY) == 1


# ------------------------------------------------------------------------------------ the context rule


def _records(objs: list[dict[str, Any]]) -> list[Record]:
    return read_transcript(jsonl(objs), "openai").transcript.records


def _event(start: int, end: int, text: str) -> Event:
    return Event(start=start, end=end, invocations=1, records=end - start, original_tokens=10,
                 compacted_tokens=1, ratio=10.0, summary=text, summarizer="extractive")


def test_apply_events_overlap_and_containment() -> None:
    recs = _records(session(5))  # 21 records
    events = [_event(1, 9, "A"), _event(5, 13, "B"), _event(13, 15, "C"), _event(13, 17, "D")]
    state = State(sections={"events": WindowEvents(events)})
    out = apply_events(recs, state, "openai")
    summaries = [r.message.blocks[0].text.split("\n")[-1] for r in out if r.origin is Origin.SUMMARY]
    assert summaries == ["A", "B", "D"]  # C lies inside the later D: hidden
    verbatim = [r.index for r in out if r.origin is Origin.INPUT]
    assert verbatim == [0, *range(17, 21)]
    # nothing twice, nothing lost: every input record is verbatim or inside a shown range
    assert len(verbatim) == len(set(verbatim))
    shown = [(1, 9), (5, 13), (13, 17)]
    assert all(i in verbatim or any(a <= i < b for a, b in shown) for i in range(21))
    # summaries sit where their range begins: after the system record, before record 17
    assert [r.origin for r in out[:4]] == [Origin.INPUT, Origin.SUMMARY, Origin.SUMMARY, Origin.SUMMARY]


def test_apply_events_marks_summaries_and_skips_them_as_requests() -> None:
    from ctxcompact.facts import latest_request

    recs = _records(session(3))
    out = apply_events(recs, State(sections={"events": WindowEvents([_event(1, 13, "all of it")])}), "openai")
    assert latest_request(out) is None  # the summary is not something a person typed
    assert all(r.origin is Origin.SUMMARY for r in out if r.index < 0)


def test_anthropic_summary_is_not_merged_into_the_next_request() -> None:
    objs = [{"role": "user", "content": f"request {i}"} if k == 0
            else {"role": "assistant", "content": f"a{i}"}
            for i in range(1, 6) for k in range(2)]
    recs = read_transcript(jsonl(objs), "anthropic").transcript.records
    out = apply_events(recs, State(sections={"events": WindowEvents([_event(0, 4, "S")])}), "anthropic")
    roles = [r.message.role.value for r in out if r.message is not None]
    assert roles[:3] == ["user", "assistant", "user"]  # summary, acknowledgement, request 3
    assert all(a != b for a, b in itertools.pairwise(roles))


# ------------------------------------------------------------------------------------ pair safety


def _parallel_session(shape: list[tuple[int, bool]]) -> list[dict[str, Any]]:
    """Invocations with k parallel calls each; ``split`` puts each result in its own tool message."""
    out: list[dict[str, Any]] = [sys_msg("s")]
    for i, (k, answered_last) in enumerate(shape):
        out.append(user(f"request {i}"))
        if k:
            out.append(assistant(None, [(f"c{i}_{j}", "read", {"path": f"f{j}"}) for j in range(k)]))
            for j in range(k):
                if j < k - 1 or answered_last:
                    out.append(tool(f"c{i}_{j}", f"content {i} {j} " * 20))
        out.append(assistant(f"answer {i}"))
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 3), st.booleans()), min_size=2, max_size=7))
def test_unsafe_splits_are_exactly_the_points_inside_a_pair(shape: list[tuple[int, bool]]) -> None:
    recs = _records(_parallel_session(shape))
    bad = unsafe_splits(recs)
    calls = {b.id: r.index for r in recs if r.message for b in r.message.blocks if isinstance(b, ToolCall)}
    results = {b.call_id: r.index for r in recs if r.message for b in r.message.blocks
               if isinstance(b, ToolResult)}
    for p in range(len(recs) + 1):
        straddles = any(cid in results and min(ci, results[cid]) < p <= max(ci, results[cid])
                        for cid, ci in calls.items())
        assert (p in bad) == straddles


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 3), st.booleans()), min_size=3, max_size=8),
       st.integers(1, 3), st.integers(0, 2))
def test_compacted_context_never_separates_a_call_from_its_result(
        tmp_path_factory: pytest.TempPathFactory, shape: list[tuple[int, bool]], theta: int,
        omega: int) -> None:
    """Every split the strategy makes (invocation and token triggers, small window) keeps pairs whole:
    in the output every call has its result and every result its call (nothing turned into orphan text)."""
    d = tmp_path_factory.mktemp("pairs")
    p = d / "t.jsonl"
    p.write_bytes(jsonl(_parallel_session(shape)))
    r = api.run(p, sw(invocation_threshold=theta, overlap=omega, window=2_000), output=d / "o.jsonl")
    recs = r.transcript.records
    calls = {b.id for x in recs if x.message for b in x.message.blocks if isinstance(b, ToolCall)}
    res = {b.call_id for x in recs if x.message for b in x.message.blocks if isinstance(b, ToolResult)}
    assert calls == res
    assert not any("no matching call" in (x.message.text() if x.message else "") for x in recs)
    for e in events_of(r.state) if r.state else []:
        assert e.end not in unsafe_splits(_records(_parallel_session(shape)))


def test_open_call_in_an_old_invocation_does_not_block(tmp_path: Path) -> None:
    objs = [sys_msg("s"), user("request 1"), assistant(None, [("dead", "bash", {"cmd": "sleep"})])]
    objs += turn(2) + turn(3) + turn(4)
    p = tmp_path / "t.jsonl"
    p.write_bytes(jsonl(objs))
    r = api.run(p, sw(), output=tmp_path / "o.jsonl")
    assert ranges(r.state) == [(1, 11)]  # invocations 1-3, the dead call inside
    assert not any(b.call_id == "dead" for x in r.transcript.records if x.message
                   for b in x.message.blocks if isinstance(b, ToolResult))


# ------------------------------------------------------------------------------------ token trigger


def test_token_trigger_shrinks_the_kept_tail_step_by_step(tmp_path: Path) -> None:
    """Two invocations only (no invocation event), large results: the token trigger compacts the oldest
    records until the rest fits, and keeps as much as fits."""
    objs = [sys_msg("s"), *turn(1, "x" * 6000), *turn(2, "y" * 6000), user("request 3 please")]
    p = tmp_path / "t.jsonl"
    p.write_bytes(jsonl(objs))
    opts = sw(window=4_000, exact="none", default_factor=1.0)  # limit 2,800 tokens; each result ~1,000
    r = api.run(p, opts, output=tmp_path / "o.jsonl")
    assert r.exit_code == ExitCode.OK and r.compacted
    (ev,) = events_of(r.state)  # type: ignore[union-attr]
    assert ev.start == 1
    # keeping from request 2 (index 5) fits (~1,000 tokens + a summary); keeping result 1 too would not
    kept = [x.index for x in r.transcript.records if x.origin is Origin.INPUT]
    assert kept[0] == 0 and kept[1] == ev.end and ev.end in (4, 5)
    assert r.tokens_after <= 2_800


def test_token_trigger_keeps_at_least_the_latest_request_and_exit_5(tmp_path: Path) -> None:
    objs = [sys_msg("s"), *turn(1), *turn(2), user("request 3 " + "z" * 40_000)]
    p = tmp_path / "t.jsonl"
    p.write_bytes(jsonl(objs))
    r = api.run(p, sw(window=4_000, exact="none", default_factor=1.0), output=tmp_path / "o.jsonl")
    (ev,) = events_of(r.state)  # type: ignore[union-attr]
    assert (ev.start, ev.end) == (1, 9)  # everything before the latest request
    assert r.outcome.exit_code == ExitCode.DOES_NOT_FIT
    assert "latest request" in r.outcome.warnings[0]
    assert "request 3" in texts(r)[2]


def test_token_trigger_trims_an_oversized_result_in_flight(tmp_path: Path) -> None:
    """The latest request's own tool loop ends on a result larger than the window: it is trimmed as the
    threshold strategy trims its tail (it used to exit 5 here)."""
    objs = [sys_msg("s"), *turn(1), *turn(2), user("request 3"),
            assistant(None, [("big", "read", {"path": "huge"})]), tool("big", "z" * 40_000)]
    p = tmp_path / "t.jsonl"
    p.write_bytes(jsonl(objs))
    r = api.run(p, sw(window=4_000, exact="none", default_factor=1.0), output=tmp_path / "o.jsonl")
    (ev,) = events_of(r.state)
    assert (ev.start, ev.end) == (1, 9)  # everything before the latest request
    assert r.outcome.exit_code == ExitCode.OK and r.tokens_after <= 4_000
    assert "request 3" in texts(r)[2]
    (big,) = [b.text() for x in r.transcript.records if x.message is not None
              for b in x.message.tool_results() if b.call_id == "big"]
    assert big.startswith("z" * 100) and big.endswith(f"the full text is in {p} line {len(objs)}]")


def test_threshold_zero_disables(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_bytes(jsonl(session(8)))
    r = api.run(p, sw(threshold="0"), output=tmp_path / "o.jsonl")
    assert not r.compacted and r.state is not None and events_of(r.state) == []


# ------------------------------------------------------------------------------------ growing transcript


def test_thirty_invocations_over_ten_runs(tmp_path: Path) -> None:
    objs = [sys_msg("You are a coding agent.")]
    for i in range(1, 34):
        objs += turn(i, f"output of step {i}: " + "lorem ipsum " * (20 + 15 * (i % 4)))
    p = tmp_path / "t.jsonl"
    opts = sw(window=8_000, exact="none")
    cuts = [1 + 4 * k for k in (3, 7, 10, 14, 17, 21, 24, 27, 30, 33)]
    seen_events = 0
    for cut in cuts:
        p.write_bytes(jsonl(objs[:cut]))
        r = api.run(p, opts, output=tmp_path / "o.jsonl")
        assert r.exit_code == ExitCode.OK, r.warnings
        assert r.tokens_after <= 8_000
        state = load_state(tmp_path / "t.jsonl.ctxstate.json")
        assert state is not None and len(events_of(state)) >= seen_events  # events accumulate
        seen_events = len(events_of(state))
        verbatim = [x.index for x in r.transcript.records if x.origin is Origin.INPUT]
        assert len(verbatim) == len(set(verbatim)), "a record appears twice"
        shown = [(e.start, e.end) for e in events_of(state)]
        assert all(i in verbatim or any(a <= i < b for a, b in shown) for i in range(cut)), "a record lost"
        assert "request" in texts(r)[-4] or "request" in " ".join(texts(r))
    assert seen_events >= 8


def test_rewritten_transcript_is_detected(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_bytes(jsonl(session(5)))
    api.run(p, sw(), output=tmp_path / "o.jsonl")
    rewritten = session(5)
    rewritten[1] = user("a different first request")
    p.write_bytes(jsonl(rewritten + turn(6)))
    with pytest.raises(StateError, match="does not belong"):
        api.run(p, sw(), output=tmp_path / "o.jsonl")
    # --reset-state starts over on the rewritten transcript
    r = api.run(p, sw(reset_state=True), output=tmp_path / "o.jsonl")
    assert ranges(r.state) == [inv_range(1, 3)]
    # the original transcript grown by appending only matches the fingerprint again
    p.write_bytes(jsonl(session(8)))
    api.run(p, sw(reset_state=True), output=tmp_path / "o.jsonl")
    p.write_bytes(jsonl(session(9)))
    r = api.run(p, sw(), output=tmp_path / "o.jsonl")
    assert ranges(r.state) == [inv_range(1, 3), inv_range(3, 6)]


def test_summarizer_failure_falls_back_or_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken:
        name = "broken"

        def summarize(self, request: Any) -> Any:
            raise SummarizerError("no network")

    monkeypatch.setattr("ctxcompact.summarizers.fallback.summarizer_for", lambda opts: Broken())
    p = tmp_path / "t.jsonl"
    p.write_bytes(jsonl(session(4)))
    warned: list[str] = []
    r = api.run(p, sw(), output=tmp_path / "o.jsonl", warn=warned.append)
    assert r.state is not None and [e.fallback for e in events_of(r.state)] == [True]
    assert events_of(r.state)[0].summarizer == "extractive" and "no network" in warned[0]
    with pytest.raises(SummarizerError):
        api.run(p, sw(no_fallback=True, reset_state=True), output=tmp_path / "o.jsonl")


# ------------------------------------------------------------------------------------ genai, estimate


def _adk(inv: str, ts: float, role: str, part: dict[str, Any], author: str = "agent") -> dict[str, Any]:
    return {"invocation_id": inv, "author": "user" if role == "user" else author, "timestamp": ts,
            "id": f"e{ts}", "content": {"role": role, "parts": [part]}}


def _adk_session(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for k in range(1, n + 1):
        inv, t = f"inv-{k}", 100.0 * k
        out += [
            _adk(inv, t, "user", {"text": f"question {k}"}),
            _adk(inv, t + 1, "model", {"function_call": {"id": f"f{k}", "name": "lookup", "args": {"q": k}}}),
            _adk(inv, t + 2, "user", {"function_response": {"id": f"f{k}", "name": "lookup",
                                                            "response": {"r": f"row {k} " * 60}}}),
            _adk(inv, t + 3, "model", {"text": f"answer {k}"}),
        ]
    return out


def test_genai_invocation_ids(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_bytes(jsonl(_adk_session(7)))
    recs = read_transcript(p.read_bytes(), "genai").transcript.records
    invs = invocations(recs)
    assert [i.id for i in invs] == [f"inv-{k}" for k in range(1, 8)]
    assert [(i.start, i.end) for i in invs[:2]] == [(0, 4), (4, 8)]
    r = api.run(p, sw(), output=tmp_path / "o.jsonl")
    assert r.transcript.format == "genai"
    assert ranges(r.state) == [(0, 12), (8, 24)]  # invocations 1-3 and 3-6
    ev = events_of(r.state)[1]  # type: ignore[union-attr]
    assert (ev.start_timestamp, ev.end_timestamp) == (300.0, 603.0)


def test_estimate_describes_the_next_event(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_bytes(jsonl(session(5)))
    d = api.estimate(p, sw()).to_json()["sliding_window"]
    assert d["invocations"] == 5 and d["complete_invocations"] == 4 and d["new_invocations"] == 4
    nxt = d["next_event"]
    assert nxt["due"] is True and (nxt["start"], nxt["end"]) == inv_range(1, 3)
    assert (nxt["first_invocation"], nxt["last_invocation"]) == (1, 3)
    assert d["token_trigger"] == {"limit": 140_000, "tokens": d["token_trigger"]["tokens"], "fires": False}
    api.run(p, sw(), output=tmp_path / "o.jsonl")
    d2 = api.estimate(p, sw()).to_json()["sliding_window"]
    assert d2["events"] == 1 and d2["new_invocations"] == 1
    assert d2["next_event"]["due"] is False and d2["next_event"]["invocations_needed"] == 2
    assert d2["next_event"]["first_invocation"] == 3  # ω = 1 before invocation 4
    assert d2["next_event"]["start"] == inv_range(3, 3)[0]


def test_the_options_ranges_are_the_declared_ones_even_past_the_engines_check() -> None:
    """run_held (the message-list API's route) checks the options as every route does, and the range is the
    one declared with the options (plugins.STRATEGIES), not a copy of its own."""
    from ctxcompact.engine import run_held

    data = jsonl(session(6))
    cases = (({"overlap": -1}, "--overlap"), ({"invocation_threshold": 0}, "--invocation-threshold"),
             ({"safety_ratio": 0.01}, "--safety-ratio"))
    for change, flag in cases:
        opts = Options(strategy="sliding-window", window=3000, exact="none", **change)  # type: ignore[arg-type]
        with pytest.raises(UsageError, match=f"{flag} must be between"):
            run_held(data, opts, None, warn=lambda _m: None)
