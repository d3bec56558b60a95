"""``run --strategy sliding-window`` on the streamed route when no event is due (issue 25 item 2, the cheap
step; most hook calls): pass 1 gathers the invocations and split points as it counts
(``sliding_window_input.Quiet``: the records ``events.full_view`` gives, those the state's events drop
merged in by input index), the strategy's rule says nothing is due (``sliding_window.quiet``), and pass 2
writes the context: the output, the state, the exit code, the warnings and the strategy's report keys are
the held route's, and the file is never held (``InputData.load``). A call that makes an event reads the
file held, as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import SAMPLES, coding_session, jsonl, resumed_calls, runs_on_one_file, sys_msg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

DATA = Path(__file__).parent.parent / "data"
SW = {"strategy": "sliding-window", "invocation_threshold": 3, "overlap": 1, "window": 1_000_000}


def _calls(work: Path, hold: bool, datas: list[bytes], options: list[dict[str, Any]],
           loads: list[Any]) -> list[tuple[Any, ...]]:
    """``helpers.runs_on_one_file`` with whether it would compact and the strategy's report keys."""
    return runs_on_one_file(work, hold, datas, options, loads,
                            lambda r: (r.estimate.would_compact, r.estimate.extras.get("sliding_window")))


def _same_as_held(work: Path, datas: list[bytes], options: list[dict[str, Any]], loads: list[Any],
                  held: list[bool] | None = None) -> list[tuple[Any, ...]]:
    """The streamed calls, checked against the held route's: the same answers; none of them holding the
    file (``held``: which do), whether an event is due or not."""
    streamed = _calls(work / "s", False, datas, options, loads)
    on_held = _calls(work / "h", True, datas, options, loads)
    assert [s[:-1] for s in streamed] == [h[:-1] for h in on_held]
    assert [s[-1] for s in streamed] == (held if held is not None else [False] * len(datas))
    return streamed


def _due(got: tuple[Any, ...]) -> bool:
    """Whether the strategy's rule said an event was due (by invocations, or over the token trigger)."""
    keys = got[-2]
    return keys is not None and (bool(keys["events_due"]) or keys["token_trigger"]["fires"])


LINES = jsonl([sys_msg("You are a coding agent."), *coding_session(24, tool_chars=1500)]).splitlines(
    keepends=True)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=4))
def test_any_split_of_appends_streams(tmp_path_factory: Any, loads: list[Any], splits: list[int]) -> None:
    """The session grown in any split, a sliding-window call after each append: the calls with no window
    due pass through streamed (under the events the earlier calls made), the others make their events
    streamed too (sliding_window_input.Streamed); every answer is the held route's."""
    cuts = sorted({min(8 + sum(splits[: i + 1]), len(LINES)) for i in range(len(splits))})
    datas = [b"".join(LINES[:n]) for n in [8, *cuts]]
    _same_as_held(tmp_path_factory.mktemp("w"), datas, [SW] * len(datas), loads)


def test_calls_on_both_sides_of_a_window_due(tmp_path: Path, loads: list[Any]) -> None:
    """Each call one record more: the invocation trigger's boundary is met both ways (a window due after
    the third complete invocation, none before it), with events to apply again after the first."""
    datas = [b"".join(LINES[:n]) for n in range(24, 44)]
    streamed = _same_as_held(tmp_path, datas, [SW] * len(datas), loads)
    quiet = [s for s in streamed if not _due(s)]
    assert quiet and len(quiet) < len(streamed)  # (both kinds)
    assert any(s[1] and s[1].get("events") for s in quiet)  # a quiet call under events made earlier


def test_a_first_call_with_nothing_due_never_holds_the_file(tmp_path: Path, loads: list[Any]) -> None:
    got = _same_as_held(tmp_path, [b"".join(LINES[:20])], [{**SW, "invocation_threshold": 50}], loads)
    assert not _due(got[0]) and got[0][-2]["next_event"]["due"] is False


def test_the_token_trigger_makes_its_event_streamed(tmp_path: Path, loads: list[Any]) -> None:
    """No window due by invocations, but the context over ρ × window: the token trigger's event, made
    without holding the file."""
    got = _same_as_held(tmp_path, [b"".join(LINES)], [{**SW, "invocation_threshold": 50, "window": 12_000}],
                        loads)
    assert _due(got[0]) and got[0][3] and got[0][1]["events"]


REAL = [SAMPLES / "openai-long.jsonl", SAMPLES / "anthropic-session.jsonl",  # (anthropic: acknowledgements)
        DATA / "anthropic" / "agent_session.jsonl", DATA / "codex" / "localpush-rollout-tools.jsonl",
        DATA / "synthetic" / "adk-long-events.jsonl"]  # (ADK: invocations by ids)


def test_real_fixtures_under_events_stream(tmp_path: Path, loads: list[Any]) -> None:
    """Each real format: events made (every complete invocation one), then a call with no window due (the
    records the events dropped merged back by index into what is gathered). The events are made streamed
    where the output is the context itself (not an agent's own log, which the held route writes as its
    compaction: the Codex log, the ADK events)."""
    made_events = []
    for k, path in enumerate(REAL):
        datas = [path.read_bytes()] * 2
        options = [{**SW, "window": 200_000, "invocation_threshold": 1, "overlap": 0},
                   {**SW, "window": 200_000, "invocation_threshold": 10_000}]
        log = path.parent.name in ("codex", "synthetic")
        got = _same_as_held(tmp_path / str(k), datas, options, loads, [log, False])
        assert _due(got[0]) and not _due(got[1]), path.name
        made_events.append(bool(got[0][1]["events"]))
    # (the Codex log's events would not make it smaller: it passes through, held)
    assert made_events == [True, True, True, False, True]


def _spied(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each streamed call's pass 1 started at a resume point."""
    return resumed_calls(monkeypatch)


LONG = jsonl([sys_msg("You are a coding agent."), *coding_session(40, tool_chars=1500)]).splitlines(
    keepends=True)


def test_a_quiet_call_resumes_with_what_the_last_one_gathered(tmp_path: Path, loads: list[Any],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Once a part settles past the events, the next quiet call's pass 1 starts there, taking up the
    invocations and split points the last call kept with its resume point; what it decides and writes is
    the held route's."""
    resumed = _spied(monkeypatch)
    cuts = [40, 44, 110, 130, 150]
    datas = [b"".join(LONG[:n]) for n in cuts]
    options = [{**SW, "invocation_threshold": 2}, *[{**SW, "invocation_threshold": 1_000}] * (len(cuts) - 1)]
    streamed = _same_as_held(tmp_path, datas, options, loads)
    assert streamed[0][1]["events"] and not any(_due(s) for s in streamed[1:])
    assert resumed == [False, False, False, True, True]


def test_default_and_quiet_calls_take_each_others_resume_points(tmp_path: Path, loads: list[Any],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A default call's resume point keeps nothing of the sliding window's: a quiet call after it reads
    every record (and keeps a point with what it gathered); a default call after a quiet one takes up the
    counts that point kept, and keeps one without them again."""
    resumed = _spied(monkeypatch)
    cuts = [40, 110, 130, 150, 170]
    datas = [b"".join(LONG[:n]) for n in cuts]
    quiet = {**SW, "invocation_threshold": 1_000}
    options = [{**SW, "invocation_threshold": 2}, {"window": 1_000_000}, quiet, {"window": 1_000_000}, quiet]
    _same_as_held(tmp_path, datas, options, loads)
    assert resumed == [False, False, False, True, False]
