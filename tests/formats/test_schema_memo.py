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


def _digests(monkeypatch: pytest.MonkeyPatch, remember: bool) -> tuple[int, int]:
    """(lines hashed, lines checked) of 41 lines parsed as a streamed reading parses them."""
    from ctxcompact.formats import get_format

    hashed = []
    digest = jsonl.line_digest
    monkeypatch.setattr(jsonl, "line_digest", lambda raw: hashed.append(raw) or digest(raw))
    fmt, before = get_format("openai"), jsonl.schema_checks
    for i, raw in enumerate(_lines(40, "memo-e").splitlines()):
        assert jsonl.parse_record(fmt, orjson.loads(raw), i, i + 1, raw, 0, True, None, remember) is not None
    return len(hashed), jsonl.schema_checks - before


def test_a_reader_that_keeps_nothing_hashes_no_line_while_the_memo_is_empty(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The command line's `run` keeps nothing (it never reads the line again in its process): with nothing
    kept before either, no lookup can answer, so no line is hashed for one."""
    assert _digests(monkeypatch, remember=False) == (0, 41)
    assert not jsonl._CONFORMING


def test_a_reader_that_keeps_nothing_still_asks_a_memo_that_holds_lines(
        monkeypatch: pytest.MonkeyPatch) -> None:
    jsonl.read_transcript(_lines(40, "memo-e"), "openai")  # (an earlier reader kept them)
    assert _digests(monkeypatch, remember=False) == (41, 0)
    assert _digests(monkeypatch, remember=True) == (41, 0)
