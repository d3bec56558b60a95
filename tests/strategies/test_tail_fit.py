"""The work in flight fitted with the run's own counter and calibration
(docs/concepts/handoff.md#the-work-in-flight): ``room`` inverts the calibration's projection, ``fit``
keeps the tail whole when it fits and else cuts its results only by as much as needed, and on real logs
the result the model asked for is kept whole in every replayed hook call where it fits the window (it
used to be sized in characters at 3-4 a token, and trimmed in 21 of 51 such calls)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcompact import api
from ctxcompact.evaluate.replay import replay
from ctxcompact.formats.base import new_record
from ctxcompact.model import Message, Origin, Record, Role, TextBlock, ToolCall, ToolResult
from ctxcompact.options import Options
from ctxcompact.strategies.tail import TRIM_MARKER, fit, room
from ctxcompact.tokens.calibration import Calibrated
from ctxcompact.tokens.counts import count_records

DATA = Path(__file__).resolve().parents[1] / "data"
OPTS = Options()


def count(records: list[Record]) -> int:
    return sum(count_records(records, OPTS).base)


def cal(hidden: int, slope: float | None, factor: float = 1.25) -> Calibrated:
    return Calibrated(tokens=0, calibrated=0, base=0, factor=factor, source="test", real=None, hidden=hidden,
                      slope=slope)


@given(st.integers(0, 60_000), st.one_of(st.none(), st.floats(0.5, 3.0)), st.integers(0, 400_000))
def test_room_is_the_most_the_projection_lets_through(hidden: int, slope: float | None, limit: int) -> None:
    c = cal(hidden if slope is not None else 0, slope)
    r = room(c, limit)
    if r < 0:
        assert c.project(0) > limit
    else:
        assert c.project(r) <= limit < c.project(r + 1)


def tail(*results: str) -> list[Record]:
    calls = [ToolCall(id=f"c{i}", name="bash", arguments=f'{{"cmd": "cat f{i}"}}')
             for i in range(len(results))]
    out = [new_record(Message(role=Role.ASSISTANT, blocks=list(calls)), Origin.INPUT)]
    for i, text in enumerate(results):
        out.append(new_record(Message(role=Role.TOOL, blocks=[
            ToolResult(call_id=f"c{i}", content=[TextBlock(text)], name="bash")]), Origin.INPUT))
    return out


def test_fit_keeps_a_tail_that_fits_whole_and_nothing_when_even_the_calls_do_not() -> None:
    t = tail("ok ✓ ünïcode", "")
    assert fit(t, count(t), count, "s.jsonl").records == t
    assert fit([], 10_000, count, "s.jsonl").records == []
    assert fit(t, 3, count, "s.jsonl").records == []  # not even the call fits


@settings(deadline=None, max_examples=12)
@given(st.integers(2_000, 30_000),
       st.sampled_from(["line of output ✓\n", "日本語の出力です。", '{"id": 7, "ok": true}, ']))
def test_fit_trims_only_as_much_as_the_space_needs(space: int, unit: str) -> None:
    big, small = unit * (200_000 // len(unit)), "short result"
    t = tail(big, small)
    fitted = fit(t, space, count, "s.jsonl")
    assert fitted.records and count(fitted.records) <= space
    (cut,) = fitted.trimmed  # the small result stays whole, the large one is cut, with the marker
    kept = cut.placeholder.split("\n[…")[0]
    assert TRIM_MARKER in cut.placeholder and big.startswith(kept) and cut.chars == len(big)
    # one more line's worth of the result would not have fitted: nothing was cut that did not need to be
    assert count(fit(t, space + 2 * len(unit) + 8, count, "s.jsonl").records) > count(fitted.records)
    assert count(fitted.records) >= space - 16


def _in_flight_calls(log: Path, window: int) -> list[dict]:
    out = replay(log, api.Options(window=window))  # (never over the window: test_replay_window.py)
    return [p for p in out["series"] if "recall" in p and p["recall"]["in_flight"] is not None]


def test_real_log_the_in_flight_result_is_whole_at_every_compacting_call() -> None:
    """spotter-subagent-command (Claude Code, a ~25,000-token hidden prompt) replayed at a 34,000 window:
    every compacting call inside a tool loop keeps the whole turn and its results."""
    calls = _in_flight_calls(DATA / "claude-code" / "spotter-subagent-command.jsonl", 34_000)
    assert len(calls) >= 5 and all(p["recall"]["in_flight"] for p in calls), calls


def test_real_log_a_result_that_cannot_fit_is_trimmed_to_what_the_threshold_leaves() -> None:
    """codemie-bmad-techspec at 55,000: line 38's four reads (~160,000 characters) cannot fit; they are
    trimmed only as far as the threshold needs (the compacted context within 1 % of it: the character guess
    stopped at 39,300 of 44,000), and every other compacting call keeps its work in flight whole."""
    calls = _in_flight_calls(DATA / "claude-code" / "codemie-bmad-techspec-excerpt.jsonl", 55_000)
    at38 = next(p for p in calls if p["line"] == 38)
    assert at38["recall"]["in_flight_trimmed"] and 0.99 * 44_000 <= at38["tokens"] < 44_000
    assert all(p["recall"]["in_flight"] for p in calls if p is not at38), calls
