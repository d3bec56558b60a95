"""The reader remembers which lines conform to their format's schema (by the line's bytes), so reading a
growing transcript again checks only the lines it has not seen; a bad line is checked, and reported, every
time."""

from __future__ import annotations

import orjson
import pytest

from ctxcompact.errors import InputError
from ctxcompact.formats import jsonl


@pytest.fixture(autouse=True)
def _fresh_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    """A memo of this test's own: the process-wide one is forgotten all at once when full, which an earlier
    test's many lines can bring about in the middle of one of these (the tests then depended on order)."""
    monkeypatch.setattr(jsonl, "_CONFORMING", set())


def _lines(n: int, tag: str) -> bytes:
    msgs = [{"role": "system", "content": "be brief"}]
    for i in range(n):
        msgs.append({"role": "user" if i % 2 == 0 else "assistant", "content": f"{tag} message {i} ✓"})
    return b"".join(orjson.dumps(m) + b"\n" for m in msgs)


def _checks(data: bytes) -> int:
    before = jsonl.schema_checks
    jsonl.read_transcript(data, "openai")
    return jsonl.schema_checks - before


def test_a_second_read_checks_only_the_new_lines() -> None:
    data = _lines(40, "memo-a")
    assert _checks(data) == 41
    assert _checks(data) == 0
    grown = data + orjson.dumps({"role": "user", "content": "memo-a one more"}) + b"\n"
    assert _checks(grown) == 1


def test_a_changed_line_is_checked_again() -> None:
    data = _lines(4, "memo-b")
    _checks(data)
    changed = data.replace(b"memo-b message 2", b"memo-b message two")
    assert _checks(changed) == 1


def test_a_bad_line_is_reported_every_time() -> None:
    bad = _lines(2, "memo-c") + orjson.dumps({"role": "user", "content": 5}) + b"\n"
    for _ in range(2):
        with pytest.raises(InputError) as exc:
            jsonl.read_transcript(bad, "openai")
        assert exc.value.problems[0].line == 4


def test_the_memory_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonl, "_CONFORMING_MAX", 8)
    _checks(_lines(30, "memo-d"))
    assert len(jsonl._CONFORMING) <= 8
