"""``run --strategy sliding-window`` making its events without holding the file (issue 25 item 2): the
planner's code is the held route's, reading ``sliding_window_input.Streamed`` instead of ``HeldInput`` (the
records of a window read again by sweeps over the file, the heuristic tokens, anchors and owners kept as
integers, a rendering counted as read). Each planner path is taken streamed and gives the held route's
output, state, exit code, warnings and report keys: the invocation trigger, the token trigger, inside the
latest request, trimming the work in flight; and the file is never held (``InputData.load``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import assistant, coding_session, jsonl, runs_on_one_file, sys_msg, tool, user
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcompact.strategies import sliding_window, sliding_window_input

SW = {"strategy": "sliding-window", "invocation_threshold": 3, "overlap": 1}


def _paths(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The planner paths each call takes (the functions of strategies/sliding_window.py it runs)."""
    taken: list[str] = []
    for name in ("_token_event", "_inside_latest", "_trim_in_flight"):
        real = getattr(sliding_window, name)
        monkeypatch.setattr(sliding_window, name,
                            lambda *a, _n=name, _r=real, **k: taken.append(_n) or _r(*a, **k))
    return taken


def _keys(r: Any) -> tuple[Any, ...]:
    return r.estimate.would_compact, r.estimate.extras.get("sliding_window")


def _streamed_as_held(work: Path, datas: list[bytes], options: list[dict[str, Any]],
                      loads: list[Any]) -> list[tuple[Any, ...]]:
    """Both routes' answers, the same; the streamed calls never held the file."""
    streamed = runs_on_one_file(work / "s", False, datas, options, loads, _keys)
    held = runs_on_one_file(work / "h", True, datas, options, loads, _keys)
    assert [s[:-1] for s in streamed] == [h[:-1] for h in held]
    assert [s[-1] for s in streamed] == [False] * len(datas)  # (held: True for each)
    return streamed


LINES = jsonl([sys_msg("You are a coding agent."), *coding_session(30, tool_chars=1500)]).splitlines(
    keepends=True)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=4),
       st.sampled_from([1_000_000, 14_000]))
def test_any_split_of_appends_gives_the_held_output(tmp_path_factory: Any, loads: list[Any],
                                                    splits: list[int], window: int) -> None:
    """The session grown in any split, a call after each append, with the invocation trigger alone or the
    token trigger too: every call streamed, every answer the held route's."""
    cuts = sorted({min(8 + sum(splits[: i + 1]), len(LINES)) for i in range(len(splits))})
    datas = [b"".join(LINES[:n]) for n in [8, *cuts]]
    _streamed_as_held(tmp_path_factory.mktemp("w"), datas, [{**SW, "window": window}] * len(datas), loads)


def test_the_invocation_trigger_from_scratch_with_roll_ups(tmp_path: Path, loads: list[Any],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A first run over the whole session makes every event at once, and rolls them up (a window read
    again from the first event: the sweep starts over)."""
    taken = _paths(monkeypatch)
    got = _streamed_as_held(tmp_path, [b"".join(LINES)], [{**SW, "window": 30_000}], loads)
    events = got[0][1]["events"]
    assert len(events) >= 5 and any(e["start"] < events[i - 1]["start"] for i, e in enumerate(events) if i)
    assert taken == []  # (the invocation trigger alone)


def test_the_token_trigger(tmp_path: Path, loads: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    taken = _paths(monkeypatch)
    got = _streamed_as_held(tmp_path, [b"".join(LINES)], [{**SW, "invocation_threshold": 100,
                                                            "window": 14_000}], loads)
    assert got[0][3] and got[0][1]["events"] and "_token_event" in taken


def _one_request(calls: int, chars: int, last: int, turn: int = 0) -> bytes:
    """One request and a long run of tool calls after it (a Codex-like session), the last result ``last``
    characters (the work in flight), its turn ``turn`` assistant lines before the call."""
    msgs: list[dict[str, Any]] = [sys_msg("You are a coding agent."), user("please fix every failing test")]
    for i in range(calls):
        if i == calls - 1:
            msgs += [assistant(f"Thinking it over, part {k}: " + "y " * 300) for k in range(turn)]
        msgs.append(assistant(f"Step {i}: running the tests again.",
                              [(f"call_{i}", "bash", {"command": f"pytest tests/test_{i}.py"})]))
        size = last if i == calls - 1 else chars
        msgs.append(tool(f"call_{i}", f"FAILED tests/test_{i}.py::test_x - assert {i} == 0\n" + "x " * size))
    return jsonl(msgs)


def test_inside_the_latest_request(tmp_path: Path, loads: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """One request over the trigger: its older records summarized after it (where the work in flight
    begins, read from the view's tail)."""
    taken = _paths(monkeypatch)
    got = _streamed_as_held(tmp_path, [_one_request(40, 600, 600)], [{**SW, "window": 12_000}], loads)
    events = got[0][1]["events"]
    assert "_inside_latest" in taken and events and events[-1]["first_invocation"] == 1 == \
        events[-1]["last_invocation"]


def test_trimming_the_work_in_flight(tmp_path: Path, loads: list[Any],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Still over with everything before the work in flight summarized: its result is trimmed (and kept so
    in the state's masking)."""
    taken = _paths(monkeypatch)
    for turn in (0, 3):  # (3: the turn in flight begins lines before its call)
        got = _streamed_as_held(tmp_path / str(turn), [_one_request(30, 300, 9_000, turn)],
                                [{**SW, "window": 12_000}], loads)
        assert "_trim_in_flight" in taken and got[0][1].get("masking")


def test_a_rendering_over_the_window_is_made_on_the_held_route(tmp_path: Path, loads: list[Any]) -> None:
    """What the streamed rendering does not hold (over the window) the held route makes: the same answer,
    the file held after the streamed try."""
    datas, options = [_one_request(30, 300, 60_000)], [{**SW, "window": 12_000}]
    streamed = runs_on_one_file(tmp_path / "s", False, datas, options, loads, _keys)
    held = runs_on_one_file(tmp_path / "h", True, datas, options, loads, _keys)
    assert streamed == held and streamed[0][-1] is True


REAL = [Path(__file__).parents[2] / "samples" / n for n in ("openai-long.jsonl", "anthropic-session.jsonl",
                                                                 "openai-session.jsonl")]


@pytest.mark.parametrize("path", REAL, ids=[p.stem for p in REAL])
def test_real_fixtures(tmp_path: Path, loads: list[Any], path: Path) -> None:
    """Real sessions (anthropic: the acknowledgements after a summary), events by invocations then by
    tokens, then a call after more events are due."""
    data = path.read_bytes()
    lines = data.splitlines(keepends=True)
    datas = [b"".join(lines[: len(lines) * 2 // 3]), data, data]
    options = [{**SW, "invocation_threshold": 1, "overlap": 0, "window": 200_000},
               {**SW, "invocation_threshold": 1, "overlap": 0, "window": 200_000},
               {**SW, "invocation_threshold": 100, "window": 8_000}]
    got = _streamed_as_held(tmp_path, datas, options, loads)
    assert got[1][1]["events"] and len(got[1][1]["events"]) >= len(got[0][1]["events"])


def test_the_sweep_reads_each_window_once_in_order(tmp_path: Path, loads: list[Any],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The records a window needs are read again by one sweep going forward: a first run reads the file
    a bounded number of times, not once per event (what would make a long session's first run quadratic)."""
    sweeps: list[int] = []
    real = sliding_window_input.Streamed._view

    def counted(self: Any) -> Any:
        sweeps.append(1)
        return real(self)

    monkeypatch.setattr(sliding_window_input.Streamed, "_view", counted)
    got = _streamed_as_held(tmp_path, [b"".join(LINES)], [{**SW, "window": 1_000_000}], loads)
    assert len(got[0][1]["events"]) >= 8 and 1 <= len(sweeps) <= 3
