"""A state with sections to apply again on the streamed route (issue 25): the masking an earlier ``--strategy
mask`` or ``--prune`` run left (placeholders by call id, thinking cleared, usage before it ignored) is
applied to each record as it is read (``strategies.reapply_each``: masking's own ``reapply``, a record at
a time), then cleaned, as ``context.build_context`` does; its fingerprint is proven in pass 1's SHA-256
pass. Outputs, states, reports and warnings are the held route's byte for byte. Sliding-window events need
the records around them: such a state stays held."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import SAMPLES, coding_session, jsonl, sys_msg

from ctxcompact import engine
from ctxcompact.errors import CtxCompactError
from ctxcompact.options import Options


def _state(path: Path) -> Any:
    if not path.exists():
        return None
    state = orjson.loads(path.read_bytes().replace(str(path.parent).encode(), b"W"))
    state["calibration"].pop("updated_at", None)
    for part in [*state.get("compactions", []), state.get("summary") or {}, state.get("masking") or {},
                 *state.get("events", [])]:
        for stamp in ("time", "duration_s", "created_at", "updated_at"):  # when, and how long: not what
            part.pop(stamp, None)
    return state



def _calls(work: Path, hold: bool, datas: list[bytes], options: list[dict[str, Any]],
           loads: list[Any]) -> list[tuple[Any, ...]]:
    """One ``run`` per input (the file rewritten with it, the state kept), with its own options; each
    result says whether that call held the file."""
    work.mkdir()
    path, out, got = work / "t.jsonl", work / "out.jsonl", []
    for data, kw in zip(datas, options, strict=True):
        path.write_bytes(data)
        loads.clear()
        said: list[str] = []
        try:
            r = engine.run(path, Options(**kw), output=out, warn=said.append, hold=hold)
        except CtxCompactError as exc:
            got.append(("error", type(exc).__name__, exc.exit_code, str(exc).replace(str(work), "W")))
            continue
        written = re.sub(rb'"timestamp":"[^"]*"', b'"timestamp":""', out.read_bytes())
        got.append((written.replace(str(work).encode(), b"W"), _state(Path(f"{path}.ctxstate.json")),
                    r.exit_code, r.compacted, r.tokens_before, r.tokens_after, r.warnings, said,
                    [str(x) for x in r.repairs], r.estimate.records, bool(loads)))
    return got


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
    """Masking, streamed calls (from the second on, from a resume point), masking again (more results,
    held), then streamed calls: the resume point kept under the first masking is not taken under the
    second (what it carries was counted with the first masking's placeholders)."""
    cuts = [70, 74, 78, 90, 94, 97]  # (a resume point is kept past 64 records)
    datas = [b"".join(LINES[:n]) for n in cuts]
    mask, call = {"window": 6_000, "strategy": "mask"}, {"window": 1_000_000}
    options = [mask, call, call, {**mask, "window": 4_000}, call, call]
    streamed = _calls(tmp_path / "s", False, datas, options, loads)
    assert [s[:-1] for s in streamed] == [h[:-1] for h in _calls(tmp_path / "h", True, datas, options, loads)]
    masked = [len(s[1]["masking"]["records"]) for s in streamed]
    assert masked[3] > masked[0] and [s[-1] for s in streamed] == [True, False, False, True, False, False]


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
    assert streamed[1][0] == "error" and streamed == _calls(tmp_path / "h", True, datas, options, loads)


def test_sliding_window_events_stay_held(tmp_path: Path, loads: list[Any]) -> None:
    """Events need the records around them (where a summary goes, what it dropped): held, as before."""
    datas = [b"".join(LINES[:n]) for n in CUTS[:3]]
    options = [{"window": 6_000, "strategy": "sliding-window"}, {"window": 6_000}, {"window": 6_000}]
    streamed = _calls(tmp_path / "s", False, datas, options, loads)
    if streamed[0][1].get("events"):
        assert all(s[-1] for s in streamed[1:])
    assert [s[:-1] for s in streamed] == [h[:-1] for h in _calls(tmp_path / "h", True, datas, options, loads)]
