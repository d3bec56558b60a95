"""The context with the sliding window's events applied (strategies/events.py) is the one the next call
reads: the events applied before cleaning. On the held route they are applied to the cleaned records, where
cleaning may have merged its answer to a call into the next message (Anthropic's user turn); with the call
summarized, that answer goes too, as it does on the streamed route (found by bench/fuzz_routes.py)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from helpers import comparable_state

from ctxcompact import engine
from ctxcompact.options import Options

# a request; a result no call answers (plain text after cleaning: it makes the first invocation worth
# summarizing); a call never answered, whose made result cleaning merges into the next request
LINES = [
    {"role": "user", "content": "Fix the failing test in src/b.py."},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_0",
                                  "content": "def a():\n    return 1\n" * 10}]},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "bash",
                                       "input": {"command": "pytest -q tests/test_b.py"}}]},
    {"role": "user", "content": "Go on, fix it."},
]
OPTS = Options(window=20_000, strategy="sliding-window", invocation_threshold=1, overlap=0)


def _run(work: Path, hold: bool, data: bytes) -> tuple[object, ...]:
    work.mkdir(exist_ok=True)
    path = work / "t.jsonl"
    path.write_bytes(data)
    r = engine.run(path, OPTS, output=work / "o.jsonl", warn=lambda _: None, hold=hold)
    return ((work / "o.jsonl").read_bytes(), comparable_state(Path(f"{path}.ctxstate.json")), r.compacted,
            r.tokens_after, r.exit_code)


@pytest.mark.parametrize("spaced", [False, True], ids=["compact", "spaced"])
def test_an_answer_made_for_a_summarized_call_goes_with_it_on_both_routes(tmp_path: Path,
                                                                          spaced: bool) -> None:
    data = b"".join((orjson.dumps(o) if not spaced else orjson.dumps(o).replace(b'":', b'": ')) + b"\n"
                    for o in LINES)
    held = _run(tmp_path / "held", True, data)
    assert held == _run(tmp_path / "streamed", False, data)
    written = held[0]
    assert isinstance(written, bytes) and held[2] is True
    assert b"Tool no response" not in written and b"toolu_1" not in written  # the call and its answer gone
    assert written.splitlines()[-1] == data.splitlines()[-1]  # the request kept as its line was read
    # what the next call reads, with the event in the state, is what was written
    assert _run(tmp_path / "held", True, data)[0] == written
