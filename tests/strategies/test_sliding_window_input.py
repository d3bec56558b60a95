"""The context the sliding window writes after making its events (strategies/sliding_window_input.py's
``render``) is the one the next call reads: the events applied to the records as read, then cleaned. The
held route used to apply them to the records already cleaned, so what cleaning did because of a record an
event drops stayed (found by bench/fuzz_routes.py): an answer it made for a call the event summarizes,
merged into the next request (Anthropic's user turn); an id it renamed because a dropped record used it
first. The streamed route reads the file again, so it already read the next call's context."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import SAMPLES, comparable_state

from ctxcompact import engine
from ctxcompact.options import Options

# a request; a result no call answers (plain text after cleaning: it makes the first invocation worth
# summarizing); a call never answered, whose made result cleaning merges into the next request
MERGED_ANSWER = [
    {"role": "user", "content": "Fix the failing test in src/b.py."},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_0",
                                  "content": "def a():\n    return 1\n" * 10}]},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "bash",
                                       "input": {"command": "pytest -q tests/test_b.py"}}]},
    {"role": "user", "content": "Go on, fix it."},
]
# openai-session's request, a result, then the answers, and at the end the call of that result (moved after
# it): cleaning renames the call's id (…_2) while the result is read first, not once the event drops it
SESSION = (SAMPLES / "openai-session.jsonl").read_bytes().splitlines()
RENAMED_ID = [orjson.loads(SESSION[i]) for i in (1, 8, 9, 15, 16, 17, 7)]
CALL_ID = b"call_HcJuZEzmCARLmtLvokwopQjQ"
CASES = {"merged-answer": (MERGED_ANSWER, 20_000, 0), "renamed-id": (RENAMED_ID, 2_000, 1)}


def _run(work: Path, hold: bool, data: bytes, opts: Options) -> tuple[Any, ...]:
    work.mkdir(exist_ok=True)
    path = work / "t.jsonl"
    path.write_bytes(data)
    r = engine.run(path, opts, output=work / "o.jsonl", warn=lambda _: None, hold=hold)
    return ((work / "o.jsonl").read_bytes(), comparable_state(Path(f"{path}.ctxstate.json")), r.compacted,
            r.tokens_after, r.exit_code)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("spaced", [False, True], ids=["compact", "spaced"])
def test_what_cleaning_did_for_a_dropped_record_goes_with_it_on_both_routes(tmp_path: Path, case: str,
                                                                            spaced: bool) -> None:
    lines, window, overlap = CASES[case]
    opts = Options(window=window, strategy="sliding-window", invocation_threshold=1, overlap=overlap)
    data = b"".join((orjson.dumps(o) if not spaced else orjson.dumps(o).replace(b'":', b'": ')) + b"\n"
                    for o in lines)
    held = _run(tmp_path / "W", True, data, opts)
    for f in (tmp_path / "W").iterdir():
        f.unlink()
    assert _run(tmp_path / "W", False, data, opts) == held  # (one folder: the path counts in no marker)
    written = held[0]
    assert isinstance(written, bytes) and held[2] is True
    if case == "merged-answer":
        assert b"Tool no response" not in written and b"toolu_1" not in written  # the call and its answer
        assert written.splitlines()[-1] == data.splitlines()[-1]  # the request kept as its line was read
    else:
        assert CALL_ID in written and CALL_ID + b"_2" not in written
    # what the next call reads, with the event in the state, is what was written
    assert _run(tmp_path / "W", True, data, opts)[0] == written


def test_what_an_event_after_the_request_dropped_is_in_the_held_view(tmp_path: Path) -> None:
    """anthropic-session's first call makes an event right after the request (its own records); cleaning
    merges that summary into the request, so the records it dropped were no longer found on it: the second
    call's held view missed them, and its event began after them where the streamed one's took them in."""
    lines = (SAMPLES / "anthropic-session.jsonl").read_bytes().splitlines(keepends=True)
    opts = Options(window=3_000, strategy="sliding-window")
    got = []
    for hold in (True, False):
        work = tmp_path / "W"
        for f in work.glob("*"):
            f.unlink()
        calls = [_run(work, hold, b"".join(lines[:end]), opts) for end in (5, 9)]
        got.append(calls)
    assert got[0] == got[1]
    events = got[0][1][1]["events"]
    assert [(e["start"], e["end"]) for e in events] == [(2, 4), (2, 8)]  # the second takes the first in
