"""The byte scan for the last compact_boundary (formats/claude_code_stream ``StreamFinish._scan``) finds what
reading the lines one by one finds, whatever the chunk size, the start and the limit: lines shorter and
longer than a chunk, the mark split across chunks, the mark in a line that is no boundary."""

from __future__ import annotations

import io

import orjson
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxcompact.formats.claude_code_stream import _MARK, StreamFinish, _is_boundary

_LINES = [
    orjson.dumps({"type": "system", "subtype": "compact_boundary", "uuid": "b"}),
    orjson.dumps({"type": "system", "subtype": "compact_boundary", "uuid": "b", "pad": "x" * 40}),
    orjson.dumps({"type": "user", "message": {"content": "about compact_boundary"}}),
    orjson.dumps({"type": "user", "message": {"content": "y" * 50}}),
    orjson.dumps({"type": "system", "subtype": "compact_boundary", "isSidechain": True, "uuid": "s"}),
    b"",
    b"not json compact_boundary",
]


def _reference(data: bytes, at: int, limit: int | None) -> int | None:
    found, pos = None, at
    for line in data[at:limit].split(b"\n"):
        if _MARK in line and _is_boundary(line):
            found = pos
        pos += len(line) + 1
    return found


@settings(max_examples=25, deadline=None)
@example([_LINES[0]], False, 1, 0, None)  # (a line longer than a chunk while shorter than the mark's tail)
@example([_LINES[3], _LINES[1]], True, 7, 0, 3)
@given(st.lists(st.sampled_from(_LINES), max_size=12), st.booleans(), st.integers(1, 40),
       st.integers(0, 30), st.one_of(st.none(), st.integers(0, 60)))
def test_the_scan_finds_the_last_boundary_line_by_line(lines: list[bytes], ended: bool, size: int, at: int,
                                                       cut: int | None) -> None:
    data = b"\n".join(lines) + (b"\n" if ended else b"")
    at = min(at, len(data))
    # (a resume point and pass 1's limit are at line starts and ends)
    starts = [0] + [i + 1 for i, b in enumerate(data) if b == 0x0A]
    at = max(s for s in starts if s <= at)
    limit = None if cut is None else max(at, len(data) - cut)
    finish = StreamFinish()
    finish._scan(io.BytesIO(data), at, limit, size)
    assert finish.boundary == _reference(data, at, limit)
    assert finish.met == (finish.boundary is None)


def test_a_boundary_longer_than_many_chunks_is_found() -> None:
    long = orjson.dumps({"type": "system", "subtype": "compact_boundary", "content": "a" * 5000})
    data = b'{"type": "user"}\n' + long + b"\n" + b"z" * 3000 + b"\n"
    finish = StreamFinish()
    finish._scan(io.BytesIO(data), 0, None, 64)
    assert finish.boundary == data.index(b"\n") + 1
