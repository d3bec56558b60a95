"""The count cache keeps what a call counted in four columns sorted by offset (tokens/cache.py ``_Lines``),
not a dict of tuples: any order of puts and lookups answers as a dict does, and what the next call gets is
the same."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxcompact.tokens.cache import CountCache, from_bytes

_OPS = st.lists(st.tuples(st.sampled_from(["put", "get"]), st.integers(0, 40), st.integers(0, 3)),
                max_size=80)


@given(_OPS, st.booleans())
def test_any_order_of_puts_and_lookups_answers_as_a_dict(ops: list[tuple[str, int, int]],
                                                          loaded: bool) -> None:
    cache = CountCache(key=("openai",))
    model: dict[int, tuple[int, int, int]] = {}
    if loaded:  # a last call's counts, looked up and then kept as found
        before = CountCache(key=("openai",))
        for off in range(0, 40, 3):
            before.put(off, off % 4, off, off + 1)
        cache = from_bytes(before.to_bytes(), ("openai",)) or CountCache()
        cache.use(("openai",))
    old = {off: (off % 4, off, off + 1) for off in range(0, 40, 3)} if loaded else {}
    for op, off, digest in ops:
        if op == "put":
            cache.put(off, digest, off + digest, None if digest == 3 else digest)
            model[off] = (digest, off + digest, -1 if digest == 3 else digest)
        else:
            got = cache.get(off, digest)
            hit = model.get(off) or old.get(off)
            if hit is not None and off not in model and hit[0] == digest:
                model[off] = hit  # found: kept for the next call
            want = None if hit is None or hit[0] != digest else (hit[1], None if hit[2] == -1 else hit[2])
            assert got == want
    cache.commit()
    if not model:
        model = old  # a call that saw no line leaves the last one's
    assert list(cache.offsets) == sorted(model)
    assert [(d, h, e) for d, h, e in zip(cache.digests, cache.heuristic, cache.exact, strict=True)] == \
        [model[o] for o in sorted(model)]


def test_lines_counted_in_order_take_32_bytes_each() -> None:
    import tracemalloc

    cache = CountCache(key=("openai",))
    tracemalloc.start()
    try:
        for i in range(50_000):
            cache.put(1000 + 97 * i, (i * 2654435761) % (1 << 62), 40, 41)
        size, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert size / 50_000 < 40, size / 50_000  # a dict of tuples: ~170


def _texts(n: int) -> list[bytes]:
    import orjson

    return [orjson.dumps({"role": ("user", "assistant")[i % 2], "content": f"line {i}"}) + b"\n"
            for i in range(n)]


def test_a_large_transcripts_cache_is_read_past_the_fixed_limit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counted: list[int]) -> None:
    """The count cache grows with the transcript's records (~16 B a record of these lines with 4-byte
    offsets and 2-byte counts, ~50 with 8-byte ones), so its read bound grows with the transcript: with the
    fixed part made 16 KiB, a 2,500-record transcript's ~40 KB cache is still what the next call counts
    from (it counts only the appended records, by the routes that hold and that stream alike); a cache over
    the bound is never read."""
    from ctxcompact import engine
    from ctxcompact.options import Options
    from ctxcompact.state import cache as state_cache

    monkeypatch.setattr(state_cache, "STATE_FILE_LIMIT", 16 * 1024)
    for hold in (False, True):
        work = tmp_path / str(hold)
        work.mkdir()
        path, lines = work / "t.jsonl", _texts(2_505)
        path.write_bytes(b"".join(lines[:2_500]))
        opts = Options(window=10_000_000, state_path=work / "s.json")
        engine.run(path, opts, output=work / "o.jsonl", hold=hold, warn=lambda m: None)
        cache = Path(f"{opts.state_path}.counts")
        assert cache.stat().st_size > 2 * 16 * 1024  # over the fixed part alone, within the bound
        path.write_bytes(b"".join(lines))
        monkeypatch.setattr(state_cache, "_memo", {})  # the next call is another process: read from the file
        counted.clear()
        engine.run(path, opts, output=work / "o.jsonl", hold=hold, warn=lambda m: None)
        assert 0 < sum(counted) <= 10, (hold, sum(counted))  # the 5 appended (and what the cleaner made)
        assert state_cache.cache_limit(path.stat().st_size) == 16 * 1024 + 4 * path.stat().st_size

    reads: list[int] = []
    real = state_cache.read_regular
    monkeypatch.setattr(state_cache, "read_regular", lambda p, what, limit, **k: reads.append(limit)
                        or real(p, what, limit, **k))
    small = tmp_path / "small.jsonl"
    small.write_bytes(b"".join(_texts(3)))
    cache_of_small = tmp_path / "small.counts"
    cache_of_small.write_bytes((tmp_path / "True" / "s.json.counts").read_bytes())  # far over its bound
    assert state_cache.load_counts(cache_of_small, None, small.stat().st_size).key == ()  # empty: ignored
    assert reads == [16 * 1024 + 4 * small.stat().st_size]



def _resume_point(beside: list[object] | None) -> dict[str, object]:
    """A resume point as ``streaming`` keeps one, its objects made afresh (no constant of this file, which
    its code would hold): referenced by the point alone, unless also put in ``beside`` (as a live object of
    the run, or a garbage cycle not yet collected, may hold them)."""
    calls, chars, name = int("989"), int("221799"), "".join(["ba", "sh"])
    messages = {"system": int("1"), "tool": calls}
    if beside is not None:
        beside += [calls, chars, messages, name]
    return {"ids": {"names": [name], "given": calls},
            "totals": {"messages": messages, "tool_calls": calls, "chars": chars}}


def test_the_bytes_written_are_a_function_of_what_is_kept_not_of_who_else_holds_it() -> None:
    """marshal's versions 3 and 4 flag an object held elsewhere (its reference count over 1) and write it
    again as a back-reference: one head had other bytes as a garbage cycle holding the run's totals was
    collected before the save or after it (a spilled and a held cache of one log differed, once, under
    load). The head is written at version 2, with no references: the same values, the same bytes."""
    beside: list[object] = []
    caches = []
    for held in (None, beside):
        cache = CountCache(key=("openai", None))
        cache.put(0, 7, 3, None)
        cache.settled, cache.settled_sha256 = 10, b"\1" * 32
        cache.resume_at, cache.resume_sha256 = 5, b"\2" * 32
        cache.resume = _resume_point(held)
        caches.append(cache)
    assert len(beside) == 4  # (held while the second is written)
    raw = caches[0].to_bytes()
    assert raw == caches[1].to_bytes()
    loaded = from_bytes(raw, ("openai", None))
    assert loaded is not None and loaded.resume == caches[1].resume
