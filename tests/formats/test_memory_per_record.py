"""Memory per record (issue 19): what a parsed record costs beyond its line, and the shared empty meta."""

from __future__ import annotations

import dataclasses
import io
import tracemalloc

import pytest

from ctxcompact.formats import read_transcript
from ctxcompact.model import NO_META, Record

PAIR = b'{"role":"user","content":"hi"}\n{"role":"assistant","content":"ok"}\n'


def test_a_tiny_line_costs_under_900_bytes_at_the_peak_of_reading() -> None:
    """20,000 lines of 32 bytes: decoded JSON + raw bytes + model, ~835 B a record at the peak (985 before
    issue 19, when a fresh meta dict, an offsets dict and the decoded tuples were all held at the peak)."""
    data = PAIR * 10_000
    tracemalloc.start()
    try:
        result = read_transcript(io.BytesIO(data), "auto", schema=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(result.transcript.records) == 20_000
    assert peak / 20_000 < 900, f"{peak / 20_000:.0f} B per record"


def test_records_without_meta_share_one_read_only_dict() -> None:
    a = Record(index=0, line=1, raw=b"{}", data={})
    b = Record(index=1, line=2, raw=b"{}", data={})
    assert a.meta is b.meta is NO_META and a.meta == {} and not a.meta
    with pytest.raises(TypeError, match="shared when empty"):
        a.meta["x"] = 1
    with pytest.raises(TypeError):
        a.meta.update(x=1)
    c = dataclasses.replace(a, meta={**a.meta, "x": 1})  # the way to give a record facts
    assert c.meta == {"x": 1} and NO_META == {}
