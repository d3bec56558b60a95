"""The count cache's lines spilled to a file as pass 1 reads (``tokens.cache._Spill``): a run holds a bounded
part of them, writes the same bytes as when it held them all, and a save that fails leaves the last cache as
it was (docs/concepts/state.md#the-count-cache)."""

from __future__ import annotations

import gc
import os
import tracemalloc
from pathlib import Path

import pytest
from helpers import tool_loop_log
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcompact import engine
from ctxcompact.options import Options
from ctxcompact.state import cache as state_cache
from ctxcompact.state.cache import cache_path, save_counts
from ctxcompact.tokens import cache as tokens_cache
from ctxcompact.tokens.cache import CountCache, from_bytes

KEY = ("openai", "o200k_base")


def _run(path: Path, state: Path, window: int = 20_000, exact: str = "none") -> None:
    engine.run(path, Options(window=window, exact=exact, state_path=state), output=path.with_suffix(".out"),
               hold=False, warn=lambda m: None)


def _spy_saves(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bool, int]]:
    """(spilled, lines held in memory) of each cache saved."""
    saved: list[tuple[bool, int]] = []
    save = state_cache.save_counts

    def spy(path: Path, cache: CountCache) -> None:
        saved.append((cache.spilled, len(cache.fresh.offsets)))
        save(path, cache)

    for module in ("route_file", "route_held"):
        monkeypatch.setattr(f"ctxcompact.{module}.save_counts", spy)
    return saved


@pytest.mark.parametrize("window", [20_000, 1_000_000_000], ids=["compacting", "below the threshold"])
def test_pass_1_holds_a_bounded_part_of_the_lines_and_writes_the_same_cache(
        window: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tool_loop_log(tmp_path / "log.jsonl", 3_000)
    _run(path, tmp_path / "held.json", window)  # every line held: the bytes a run wrote before spilling
    held = cache_path(tmp_path / "held.json").read_bytes()
    monkeypatch.setattr(tokens_cache, "SPILL_LINES", 256)
    saved = _spy_saves(monkeypatch)
    _run(path, tmp_path / "spilled.json", window)
    assert saved == [(True, saved[0][1])] and saved[0][1] < 256  # (~3,000 lines read)
    assert cache_path(tmp_path / "spilled.json").read_bytes() == held
    assert path.with_suffix(".out").exists()
    assert not [p.name for p in tmp_path.iterdir() if ".ctxcounts." in p.name or p.name.endswith(".tmp")]


def _put_peak(n: int, directory: str | None) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        cache = CountCache(key=KEY, spill_dir=directory)
        for i in range(n):
            cache.put(100 * i, i * 7919, i % 50, i % 60)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_lines_counted_cost_no_memory_per_line_once_spilled(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # 16 bytes a line held to the save (~120 MB at 1 GB of small records) before they were spilled
    monkeypatch.setattr(tokens_cache, "SPILL_LINES", 1_024)
    n = 5_000
    grew = (_put_peak(4 * n, str(tmp_path)) - _put_peak(n, str(tmp_path))) / (3 * n)
    assert grew < 2, f"{grew:.1f} B a line"
    held = (_put_peak(4 * n, None) - _put_peak(n, None)) / (3 * n)
    assert held > 12, f"{held:.1f} B a line"  # (the measure sees the columns where they are held)


def test_a_save_that_fails_leaves_the_last_cache_as_it_was(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    path = tool_loop_log(tmp_path / "log.jsonl", 1_500)
    state = tmp_path / "s.json"
    _run(path, state, 1_000_000_000)  # (below the threshold: no covered prefix, the next reads all lines)
    kept = cache_path(state).read_bytes()
    monkeypatch.setattr(tokens_cache, "SPILL_LINES", 128)

    def broken(self: object, k: int, width: int) -> object:
        yield b"\0" * (2 * width)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tokens_cache._Spill, "read", broken)
    with path.open("ab") as f:  # (a line more: this run's cache differs from the last)
        f.write(b'{"role": "user", "content": "and now?"}\n')
    _run(path, state, 1_000_000_000, "tiktoken")  # (other counts: every line counted again, and spilled)
    assert cache_path(state).read_bytes() == kept
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["log.jsonl", "log.out", "s.json", "s.json.counts", "s.json.lock"])


def test_a_save_interrupted_leaves_the_last_cache_as_it_was(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    cache = CountCache(key=KEY, spill_dir=str(tmp_path))
    monkeypatch.setattr(tokens_cache, "SPILL_LINES", 64)
    for i in range(1_000):
        cache.put(10 * i, i, 1, 2)
    path = tmp_path / "s.json.counts"
    path.write_bytes(b"the last cache")

    def interrupted(self: object, k: int, width: int) -> object:
        yield b"\0" * (2 * width)
        raise KeyboardInterrupt

    monkeypatch.setattr(tokens_cache._Spill, "read", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save_counts(path, cache)
    assert path.read_bytes() == b"the last cache"
    assert os.listdir(tmp_path) == ["s.json.counts"]


_offsets = st.lists(st.integers(0, 3) | st.integers(-3, -1), min_size=0, max_size=120)


@settings(max_examples=60, deadline=None)
@given(steps=_offsets, counts=st.lists(st.integers(-1, 70_000) | st.just(1 << 33), min_size=1, max_size=8),
       spill=st.sampled_from([1, 2, 5, 64]), below=st.integers(0, 40))
def test_spilled_lines_give_the_bytes_held_lines_give(tmp_path_factory: pytest.TempPathFactory,
                                                      steps: list[int], counts: list[int], spill: int,
                                                      below: int) -> None:
    """Lines in order, some put again (a step back: a late line or one spilled already), counts needing
    2, 4 or 8 bytes, a loaded part kept below a resume point: the same file spilled or held, and the same
    columns once committed."""
    directory = str(tmp_path_factory.mktemp("spill"))
    loaded = CountCache(key=KEY)
    for i in range(30):
        loaded.put(1_000 * i, -i, i, i)
    loaded.commit()
    raw = loaded.to_bytes()
    caches = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tokens_cache, "SPILL_LINES", spill)
        for directory_or_none in (None, directory):
            cache = from_bytes(raw, KEY)
            assert cache is not None
            cache.spill_dir = directory_or_none
            cache.use(KEY)
            cache.kept_below = 1_000 * below
            offset = 1_000 * below + 7
            for step in steps:
                offset = max(0, offset + 40_000 * step)
                # (one line's counts at an offset, as in a call: put again, the same)
                value = counts[offset // 1_000 % len(counts)]
                cache.put(offset, offset, value, counts[(offset + 1) % len(counts)] if value % 3 else -1)
            caches.append(cache)
        held, spilled = caches
        assert spilled.to_bytes() == held.to_bytes()
        spilled.commit()
        held.commit()
    assert (spilled.offsets, spilled.digests, spilled.heuristic, spilled.exact) == (
        held.offsets, held.digests, held.heuristic, held.exact)
