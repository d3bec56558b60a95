"""Pass 2 after a resume point whose records are not the input's bytes (a state's sliding-window events or
masking made them): the bytes the last call wrote before it are copied from the output this call replaces,
if it still starts with them (``streaming.written_lines``, ``hashed_lines.proven_prefix``), instead of the
records being read, cleaned and written again. The output is the held route's byte for byte, whatever
became of the last output (edited, cut, removed, another path, a FIFO)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import coding_session, jsonl, sys_msg

from ctxcompact import engine, hashed_lines, streaming
from ctxcompact.errors import InputError
from ctxcompact.options import Options

LINES = jsonl([sys_msg("You are a coding agent."), *coding_session(40, tool_chars=1500)]).splitlines(
    keepends=True)
SW = {"strategy": "sliding-window", "invocation_threshold": 2, "overlap": 1, "window": 6_000}
# (a part settles past the last event's range from 64 records on: the calls from the fourth resume there)
CUTS = [40, 44, 110, 120, 130, len(LINES)]


def _calls(work: Path, first: dict[str, Any], hold: bool, between: Callable[[Path], None] = lambda out: None,
           later: list[dict[str, Any]] | None = None, again: bool = True) -> list[tuple[bytes, bytes]]:
    """The first call with ``first``, then calls on the grown session (default, or ``later``'s options;
    ``between`` done to the output before each): (output, what ``RunResult.lines()`` gives again) of each."""
    work.mkdir()
    path, out, got = work / "t.jsonl", work / "out.jsonl", []
    options = [first, *(later or [{"window": 1_000_000}] * (len(CUTS) - 1))]
    for i, (n, kw) in enumerate(zip(CUTS, options, strict=True)):
        path.write_bytes(b"".join(LINES[:n]))
        if i:
            between(out)
        r = engine.run(path, Options(**kw), output=out, warn=lambda m: None, hold=hold)
        got.append((out.read_bytes(), b"".join(r.lines()) if again else b""))
    return got


@pytest.fixture
def copies(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The bytes each pass 2 copied from the last output (one entry a copy)."""
    seen: list[int] = []
    real = streaming.copy_prefix

    def spy(f: Any, nbytes: int, sha256: str) -> Any:
        seen.append(nbytes)
        return real(f, nbytes, sha256)

    monkeypatch.setattr(streaming, "copy_prefix", spy)
    return seen


@pytest.mark.parametrize("first", [SW, {"strategy": "mask", "window": 6_000}], ids=["events", "masking"])
def test_resumed_calls_copy_what_the_last_one_wrote(first: dict[str, Any], tmp_path: Path, copies: list[int],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[int] = []
    real = streaming.parse_record
    monkeypatch.setattr(streaming, "parse_record", lambda *a: parsed.append(1) or real(*a))
    streamed = _calls(tmp_path / "s", first, False)
    held = _calls(tmp_path / "h", first, True)
    assert [s[0] for s in streamed] == [h[0] for h in held]
    assert [s[1] for s in streamed] == [s[0] for s in streamed]  # (lines() again: the same bytes)
    assert len(copies) == 3 * 2 and all(n > 0 for n in copies)  # (the last three calls, lines() too)
    parsed.clear()
    out = tmp_path / "s" / "out.jsonl"
    engine.run(tmp_path / "s" / "t.jsonl", Options(window=1_000_000), output=out, warn=lambda m: None)
    # both passes from the resume point: not every record read again (the whole is len(LINES) records)
    assert 0 < len(parsed) < len(LINES) and out.read_bytes() == held[-1][0]


def _edit(out: Path) -> None:
    data = bytearray(out.read_bytes())
    data[50] ^= 1  # (in the system message: before any resume point)
    out.write_bytes(bytes(data))


def _cut(out: Path) -> None:
    out.write_bytes(out.read_bytes()[:1000])


@pytest.mark.parametrize("between", [_edit, _cut, Path.unlink], ids=["edited", "cut", "removed"])
def test_a_last_output_that_changed_is_not_copied(between: Callable[[Path], None], tmp_path: Path,
                                                  copies: list[int]) -> None:
    """What the last call wrote is not there to copy: the records are read again, the same output."""
    streamed = _calls(tmp_path / "s", SW, False, between, again=False)
    assert [s[0] for s in streamed] == [h[0] for h in _calls(tmp_path / "h", SW, True)] and not copies


def test_a_call_under_other_options_copies_nothing(tmp_path: Path, copies: list[int]) -> None:
    """``--keep-trailing-results`` changes what the same records are written as: what a call under it wrote
    is copied by the next under it, not by one without it (nor the other way round)."""
    keep, call = {"window": 1_000_000, "keep_trailing_results": True}, {"window": 1_000_000}
    later = [call, call, keep, keep, call]  # (resumed from the fourth call on)
    streamed = _calls(tmp_path / "s", SW, False, later=later)
    assert [s[0] for s in streamed] == [h[0] for h in _calls(tmp_path / "h", SW, True, later=later)]
    assert len(copies) == 2  # (the fifth call and its lines() again)


def test_the_prefix_is_proven_before_it_is_read_and_again_as_it_is_copied(tmp_path: Path) -> None:
    f = tmp_path / "o"
    f.write_bytes(b"abcdef")
    sha = hashlib.sha256(b"abcd").hexdigest()
    assert hashed_lines.proven_prefix(tmp_path / "none", 4, sha) is None
    assert hashed_lines.proven_prefix(f, 4, hashlib.sha256(b"abce").hexdigest()) is None
    assert hashed_lines.proven_prefix(f, 7, sha) is None  # (shorter than the prefix)
    opened = hashed_lines.proven_prefix(f, 4, sha)
    assert opened is not None
    with opened:
        f.write_bytes(b"abXdef")  # (rewritten in place after the proof)
        with pytest.raises(InputError, match="changed while it was read"):
            b"".join(hashed_lines.copy_prefix(opened, 4, sha))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert hashed_lines.proven_prefix(fifo, 0, hashlib.sha256(b"").hexdigest()) is None  # (never opened)
