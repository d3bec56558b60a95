"""Counts kept 2 bytes a record (``columns``): pass 1's (``stream_totals.Totals``), the count cache's and the
resume point's; a record over 2**15 tokens widens its column to 4 bytes, one over 2**31 to 8, whole, and is
kept and read back exactly. The cache's format says each column's width (``CTXCOUNTS9``; ``CTXCOUNTS8``, whose
resume point kept the call ids' columns 8 and 4 bytes an item, and ``CTXCOUNTS7``, the same layout with
columns of 4 or 8 bytes, are still read): a cache of an older format is ignored and rebuilt
once, never misread (docs/concepts/state.md#the-count-cache)."""

from __future__ import annotations

import dataclasses
import hashlib
import marshal
from array import array
from pathlib import Path
from typing import Any

import pytest
from helpers import tool_loop_log
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcompact import columns as cols
from ctxcompact import engine, stream_totals
from ctxcompact.budget import make_budget
from ctxcompact.model import Message, Role, TextBlock
from ctxcompact.options import Options
from ctxcompact.state.cache import cache_path, load_counts
from ctxcompact.tokens.cache import MAGIC, CountCache, from_bytes
from ctxcompact.tokens.counts import Counts

BIG = 1 << 40  # tokens of no record of this world, but a column must hold it
COUNTS = st.integers(min_value=-1, max_value=(1 << 31) - 1) | st.sampled_from([BIG, 1 << 31, -(1 << 31) - 1])


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(COUNTS, max_size=20), max_size=6), st.lists(COUNTS, max_size=5))
def test_a_column_holds_what_it_is_given_and_is_wide_only_if_it_must(batches: list[list[int]],
                                                                      tail: list[int]) -> None:
    column = cols.narrow()
    for batch in batches:
        column = cols.extend(column, batch)
    for value in tail:
        column = cols.append(column, value)
    flat = [v for batch in batches for v in batch] + tail
    assert list(column) == flat
    assert column.itemsize == max((array(cols.code_for(v)).itemsize for v in flat), default=2)
    assert (column.itemsize == 2) == all(cols.fits(v) for v in flat)
    joined = cols.join(cols.of(flat[:3]), column)
    assert list(joined) == flat[:3] + flat
    assert joined.itemsize == max(cols.of(flat[:3]).itemsize, column.itemsize)
    raw = memoryview(column).cast("B")
    assert cols.from_bytes(raw, column.itemsize) == column
    with pytest.raises(ValueError):
        cols.from_bytes(raw, 3)


def test_the_count_cache_keeps_a_count_over_2_to_the_31(tmp_path: Path) -> None:
    cache = CountCache(key=("openai", "o200k_base"))
    for i in range(100):
        cache.put(10 * i, i, i, i + 1)
    cache.commit()
    # as narrow as the values allow (2 bytes here; 4 for the offsets of a file over 32 KiB); the digests 8
    assert (cache.offsets.itemsize, cache.heuristic.itemsize, cache.exact.itemsize) == (2, 2, 2)
    loaded = from_bytes(cache.to_bytes(), cache.key)
    assert loaded is not None
    loaded.use(cache.key)
    loaded.kept_below = 500  # a streamed read resumed there: the lines before it stay, narrow
    loaded.put(500, 50, BIG, BIG + 1)  # a line read again, now over 2**31
    loaded.put(2000, 7, 3, BIG)
    loaded.put(BIG, 8, 1, 1)  # a line past 2 GiB of input
    loaded.commit()
    assert loaded.exact.itemsize == loaded.heuristic.itemsize == loaded.offsets.itemsize == 8
    again = from_bytes(loaded.to_bytes(), cache.key)  # (to_bytes commits again: nothing is lost by it)
    assert again is not None
    assert list(again.exact) == [*range(1, 51), BIG + 1, BIG, 1]
    assert list(again.heuristic) == [*range(50), BIG, 3, 1]
    assert list(again.offsets) == [*range(0, 500, 10), 500, 2000, BIG]
    assert again.get(2000, 7) == (3, BIG) and again.get(0, 0) == (0, 1) and again.get(BIG, 8) == (1, 1)
    fresh = CountCache(key=cache.key)  # a line put again in place, over 2**31 (the columns in memory)
    fresh.put(0, 1, 2, 3)
    fresh.put(10, 1, 2, 3)
    fresh.put(0, 1, BIG, None)
    assert fresh.get(0, 1) == (BIG, None) and fresh.get(10, 1) == (2, 3)


def test_pass_1s_counts_and_the_resume_points_keep_a_count_over_2_to_the_31(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """(A record of 2**40 tokens mocked: pass 1 is given its counts, not a file of terabytes.)"""
    given_counts = [5, BIG, 7, 1, 2, 3, 4, 5, 6]  # each record's heuristic count in turn; exact: twice

    def count_records(part, opts, cache=None):  # type: ignore[no-untyped-def]
        got = [given_counts.pop(0) for _ in part]
        return Counts(got, [2 * c for c in got], "o200k_base")

    monkeypatch.setattr(stream_totals, "count_records", count_records)
    totals = stream_totals.Totals("openai", Options(), make_budget(100_000, None, None), None)
    from ctxcompact.formats.base import new_record
    from ctxcompact.model import Origin

    def part() -> list:  # type: ignore[type-arg]
        return [new_record(Message(Role.USER, [TextBlock("x")]), Origin.INPUT) for _ in range(3)]

    totals.add(part())
    totals.flush()
    assert totals.heuristic.itemsize == 8 and list(totals.heuristic) == [5, BIG, 7]
    totals.add(part())
    totals.mark()
    totals.add(part())
    totals.flush()
    kept = totals.kept()
    assert kept is not None
    sums, views = kept
    assert sums["widths"] == [8, 8]
    read = stream_totals.Totals.read(sums, [bytes(v) for v in views], exact=True)
    assert list(read["heuristic"]) == [5, BIG, 7, 1, 2, 3]
    assert list(read["exact"]) == [10, 2 * BIG, 14, 2, 4, 6]
    assert list(totals.heuristic) == [5, BIG, 7, 1, 2, 3, 4, 5, 6]  # (the mark: after the first six)
    with pytest.raises(ValueError):
        stream_totals.Totals.read({**sums, "widths": [4, 8]}, [bytes(v) for v in views], exact=True)
    narrow = stream_totals.Totals("openai", Options(), make_budget(100_000, None, None), None)
    narrow.take(read)
    assert list(narrow.heuristic) == list(read["heuristic"])
    given_counts.extend([9, 9, 9])
    narrow.add(part())
    narrow.flush()
    assert list(narrow.exact)[-3:] == [18, 18, 18] and narrow.exact.itemsize == 8  # type: ignore[union-attr]


def _v6(cache: CountCache) -> bytes:
    """``cache`` as the format before this one wrote it (CTXCOUNTS6: no widths, 8-byte columns, the call ids
    and names as dicts in the resume point)."""
    names = ("offsets", "digests", "heuristic", "exact", "text_keys", "text_heuristic", "text_exact")
    columns = [array("q", getattr(cache, n)).tobytes() for n in names]
    resume = {**(cache.resume or {}), "v": 3, "calls": {"call_1": 1}, "names": {"call_1": "bash"}}
    head = marshal.dumps({"key": list(cache.key), "lengths": [len(c) for c in columns],
                          "settled": cache.settled, "settled_sha256": cache.settled_sha256,
                          "resume_at": cache.resume_at, "resume_sha256": cache.resume_sha256,
                          "resume": resume, "resume_lengths": []})
    body = len(head).to_bytes(8, "little") + head + b"".join(columns)
    return b"CTXCOUNTS6\n" + hashlib.sha256(body).digest() + body


def test_a_cache_of_the_older_format_is_ignored_and_rebuilt_once(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxcompact.state import cache as state_cache
    from ctxcompact.tokens import counts as counts_mod

    path = tool_loop_log(tmp_path / "t.jsonl", 300)
    state = tmp_path / "s.json"
    opts = Options(window=1_000_000_000, exact="none", state_path=state)
    engine.run(path, opts, output=tmp_path / "o.jsonl", hold=False, warn=lambda m: None)
    kept = cache_path(state)
    new = from_bytes(kept.read_bytes(), None)
    assert new is not None and new.resume is not None and kept.read_bytes().startswith(MAGIC)
    old = _v6(new)
    assert from_bytes(old, None) is None  # never read as this format
    patched = old.replace(b"CTXCOUNTS6\n", b"CTXCOUNTS7\n", 1)  # nor if it said it were (no widths)
    assert from_bytes(patched, None) is None
    hashed: list[bytes] = []
    real = counts_mod.line_digest
    monkeypatch.setattr(counts_mod, "line_digest", lambda raw: hashed.append(raw) or real(raw))
    for body, counted in ((old, len(new.offsets)), (None, 0)):  # rebuilt once: the next counts nothing again
        if body is not None:
            kept.write_bytes(body)
        state_cache._memo.clear()
        hashed.clear()
        engine.run(path, opts, output=tmp_path / "o.jsonl", hold=False, warn=lambda m: None)
        assert len(hashed) == counted
        assert kept.read_bytes().startswith(MAGIC)
    loaded = load_counts(kept, ("openai", None), path.stat().st_size)
    assert list(loaded.offsets) == list(new.offsets) and list(loaded.heuristic) == list(new.heuristic)


def _old_ids(cache: CountCache, n: int) -> tuple[dict[str, Any], list[Any]]:
    """The resume point's call ids as CTXCOUNTS8 and before kept them: no widths said, the ends 8 bytes an
    item, the counts and the names' numbers 4 (``n``: pass 1's columns before them)."""
    assert cache.resume is not None
    ids = dict(cache.resume["ids"])
    widths = ids.pop("widths")
    data, *middle, index = cache.resume_columns[n:]
    old = [array(code, cols.from_bytes(c, w)) for code, c, w in zip("qii", middle, widths, strict=True)]
    return {**cache.resume, "ids": ids}, [data, *old, index]


def _v7(cache: CountCache) -> bytes:
    """``cache`` as the format two before this one wrote it (CTXCOUNTS7: the same layout, the offsets and
    counts 4 bytes an item at the least, the resume point's counts too, the call ids as CTXCOUNTS8's)."""
    four = {name: cols.extend(array("i"), getattr(cache, name)) for name in ("offsets", "heuristic", "exact")}
    old = CountCache(key=cache.key, digests=cache.digests, text_keys=cache.text_keys,
                     text_heuristic=cache.text_heuristic, text_exact=cache.text_exact,
                     settled=cache.settled, settled_sha256=cache.settled_sha256, resume_at=cache.resume_at,
                     resume_sha256=cache.resume_sha256, **four)
    assert cache.resume is not None
    totals = cache.resume["totals"]
    n = len(totals["widths"])
    resume, ids = _old_ids(cache, n)
    old.resume = {**resume, "totals": {**totals, "widths": [4] * n}}
    old.resume_columns = [cols.extend(array("i"), cols.from_bytes(c, w))
                          for c, w in zip(cache.resume_columns[:n], totals["widths"], strict=True)]
    old.resume_columns += ids
    chunks = list(old.chunks())
    assert chunks[0] == MAGIC
    return b"CTXCOUNTS7\n" + b"".join(bytes(c) for c in chunks[1:])


def _v8(cache: CountCache) -> bytes:
    """``cache`` as the format before this one wrote it (CTXCOUNTS8: the call ids' ends 8 bytes an item, their
    counts and names' numbers 4, no widths said)."""
    old = CountCache(**{f.name: getattr(cache, f.name) for f in dataclasses.fields(CountCache)})
    n = len(cache.resume["totals"]["widths"]) if cache.resume is not None else 0
    old.resume, ids = _old_ids(cache, n)
    old.resume_columns = [*cache.resume_columns[:n], *ids]
    chunks = list(old.chunks())
    assert chunks[0] == MAGIC
    return b"CTXCOUNTS8\n" + b"".join(bytes(c) for c in chunks[1:])


def test_a_cache_of_the_format_before_is_still_read_and_resumed_from(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:

    path = tool_loop_log(tmp_path / "t.jsonl", 300)
    state = tmp_path / "s.json"
    opts = Options(window=1_000_000_000, state_path=state)
    engine.run(path, opts, output=tmp_path / "o.jsonl", hold=False, warn=lambda m: None)
    kept = cache_path(state)
    new = from_bytes(kept.read_bytes(), None)
    assert new is not None and new.resume is not None and new.resume["ids"]["widths"] == [2, 2, 2]
    old = from_bytes(_v8(new), None)  # what the build before this one wrote (CTXCOUNTS8) reads as it was
    assert old is not None and old.resume is not None and "widths" not in old.resume["ids"]
    n = len(new.resume["totals"]["widths"])
    assert len(old.resume_columns[n + 1]) == 4 * len(new.resume_columns[n + 1])  # (the ends: 8 bytes, 2)
    _resumes_from(_v8(new), path, opts, kept, tmp_path / "o.jsonl", monkeypatch)
    assert kept.read_bytes().startswith(MAGIC)


def test_a_cache_of_4_byte_columns_is_still_read_and_resumed_from(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:

    path = tool_loop_log(tmp_path / "t.jsonl", 300)
    state = tmp_path / "s.json"
    opts = Options(window=1_000_000_000, state_path=state)
    engine.run(path, opts, output=tmp_path / "o.jsonl", hold=False, warn=lambda m: None)
    kept = cache_path(state)
    new = from_bytes(kept.read_bytes(), None)
    assert new is not None and new.resume is not None and new.offsets.itemsize == 4  # (a file over 32 KiB)
    assert new.heuristic.itemsize == new.exact.itemsize == 2
    old = from_bytes(_v7(new), None)  # what the build before this one wrote (CTXCOUNTS7) reads as it was
    ids = {k: v for k, v in new.resume["ids"].items() if k != "widths"}
    assert old is not None and old.heuristic.itemsize == 4 and old.resume == {
        **new.resume, "ids": ids, "totals": {**new.resume["totals"], "widths": [4, 4]}}
    assert (old.offsets, old.digests, old.heuristic, old.exact) == (new.offsets, new.digests, new.heuristic,
                                                                   new.exact)  # (arrays equal by value)
    _resumes_from(_v7(new), path, opts, kept, tmp_path / "o.jsonl", monkeypatch)
    again = from_bytes(kept.read_bytes(), None)
    assert again is not None and kept.read_bytes().startswith(MAGIC) and again.heuristic.itemsize == 4


def _resumes_from(old_cache: bytes, path: Path, opts: Options, kept: Path, output: Path,
                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A hook's next call, with ``old_cache`` (an older build's count cache) in place, resumes from it: only
    the lines after its resume point are hashed, and the output grows by what was appended."""
    from ctxcompact.state import cache as state_cache
    from ctxcompact.tokens import counts as counts_mod

    kept.write_bytes(old_cache)
    state_cache._memo.clear()
    hashed: list[bytes] = []
    real = counts_mod.line_digest
    monkeypatch.setattr(counts_mod, "line_digest", lambda raw: hashed.append(raw) or real(raw))
    before = output.read_bytes()
    with path.open("ab") as f:  # a few records appended
        f.write(b'{"role":"user","content":"and one more thing"}\n')
    engine.run(path, opts, output=output, hold=False, warn=lambda m: None)
    assert len(hashed) <= 3
    assert output.read_bytes().startswith(before[:-200])
