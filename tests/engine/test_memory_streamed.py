"""What a streamed ``run`` with a state holds per record (docs/measurements/performance-log.md): the count
cache keeps 32 bytes a line, pass 1's counts 8 bytes a record each, the fact feed a hash per call looked up.
Peak traced memory on N and 4N lines of a tool loop, compacting and passing through; before, a run with a
state grew by ~210 bytes a record (the count cache's dict of tuples, the ids looked up as strings)."""

from __future__ import annotations

import gc
import tracemalloc
from array import array
from pathlib import Path

import pytest
from helpers import tool_loop_log
from hypothesis import given
from hypothesis import strategies as st

from ctxcompact import engine
from ctxcompact.facts.calls import CallsSoFar, Hashes
from ctxcompact.options import Options
from ctxcompact.state.cache import save_counts
from ctxcompact.tokens.cache import CountCache, from_bytes


def _peak(path: Path, window: int) -> int:
    for p in path.parent.glob(f"{path.name}.ctxstate*"):
        p.unlink()  # each run from no state: it writes the state and the count cache
    gc.collect()
    tracemalloc.start()
    try:
        engine.run(path, Options(window=window, exact="none"), output=path.with_suffix(".out"), hold=False,
                   warn=lambda m: None)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("window", [20_000, 1_000_000_000], ids=["compacting", "below the threshold"])
def test_a_run_with_a_state_grows_by_little_per_record(window: int, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxcompact import stream_totals

    # pass 1's batches of 256 records, not 4,096 (test_run_streamed's small_batches): the smaller file holds
    # a whole batch at its peak as the larger one does, at 2,001 records
    monkeypatch.setattr(stream_totals.Totals, "BATCH_RECORDS", 256)
    n = 2_001
    small, big = tool_loop_log(tmp_path / "small.jsonl", n), tool_loop_log(tmp_path / "big.jsonl", 4 * n)
    _peak(tool_loop_log(tmp_path / "fewer.jsonl", n // 3), window)  # warm: imports, patterns, caches
    grew = (_peak(big, window) - _peak(small, window)) / (3 * n)
    # ~25-40 now; 210 with the dict of tuples, ~1,000 and more if the records were kept
    assert grew < 120, f"{grew:.0f} B per record"


@given(st.lists(st.text(max_size=6), max_size=3000), st.lists(st.text(max_size=6), max_size=50))
def test_hashed_ids_never_forget_one(added: list[str], other: list[str]) -> None:
    seen = Hashes()
    for i, key in enumerate(added):
        seen.add(key)
        assert key in seen and added[i // 2] in seen  # across the merges into the sorted array
    assert all(key in seen for key in added)
    assert all(key not in seen for key in other if key not in added)  # (a collision of 64-bit hashes aside)


@given(st.lists(st.integers(-40, 40) | st.integers(-(1 << 63), (1 << 63) - 1), max_size=400),
       st.sampled_from([1, 3, 50]), st.sampled_from([1, 2, 7]))
def test_hashes_merged_in_place_stay_sorted_and_whole(added: list[int], floor: int, step: int) -> None:
    with pytest.MonkeyPatch.context() as mp:  # (merges often, moved a few items at a time)
        mp.setattr(Hashes, "FLOOR", floor)
        mp.setattr(Hashes, "STEP", step)
        seen = Hashes()
        for h in added:
            seen.add_hash(h)
        assert list(seen.old) == sorted(seen.old)
        assert set(seen.old) | seen.new == set(added)
        assert all(seen.has_hash(h) for h in added)


def _hashes_peak(n: int) -> int:
    keys = [f"call_{i:08d}" for i in range(n)]  # (made before: the strings are not the set's)
    gc.collect()
    tracemalloc.start()
    try:
        seen = Hashes()
        for key in keys:
            seen.add(key)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_hash_costs_little_more_than_its_8_bytes_at_the_peak() -> None:
    # the fact feed keeps a hash per call looked up and two per request dropped from the goals: on a tool
    # loop of small records the largest growth of a compacting run. A set of int objects merged at a
    # quarter of the array, into a second array, held ~25-31 bytes a hash at the peak; ~12 merged in place
    n = 40_000
    grew = (_hashes_peak(4 * n) - _hashes_peak(n)) / (3 * n)
    assert grew < 16, f"{grew:.1f} B a hash"


def test_a_call_looked_up_then_given_again_is_seen_past_the_merges() -> None:
    from ctxcompact.model import ToolCall

    index = CallsSoFar(forget=True)
    for i in range(5_000):  # the looked-up ids outgrow the recent set: most are in the sorted array
        index.add([ToolCall(f"c{i}", "bash", "{}")])  # (a record's calls, as Seen walked them)
        assert index.get(f"c{i}") is not None
        index.answered()
    assert index.exact
    index.add([ToolCall("c17", "bash", "{}")])  # an id used again
    assert not index.exact


def _filled_cache(n: int) -> CountCache:
    """A count cache of ``n`` lines, committed."""
    cache = CountCache(key=("openai", "o200k_base"))
    for i in range(n):
        cache.put(100 * i, i * 7919, i % 50, i % 60)
    cache.commit()
    return cache


def _traced_save(path: Path, cache: CountCache) -> int:
    """Bytes the traced heap grew by at its peak while ``cache`` was saved to ``path``."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        save_counts(path, cache)
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def test_the_count_cache_is_written_without_copies_of_its_columns(tmp_path: Path) -> None:
    # 32 bytes a line: at 100 MB of small records the columns are 24 MB, and each copy of them (as bytes,
    # marshalled, the file's bytes joined) was as much again at the run's end
    n = 100_000
    cache = _filled_cache(n)
    path = tmp_path / "s.json.counts"
    grew = _traced_save(path, cache)
    assert grew < 4 * n, f"{grew / n:.0f} B a line"  # the columns written as they are; 64 B a line before
    assert path.read_bytes() == cache.to_bytes()
    loaded = from_bytes(path.read_bytes(), ("openai", "o200k_base"))
    assert loaded is not None
    assert (loaded.offsets, loaded.digests, loaded.heuristic, loaded.exact) == (
        cache.offsets, cache.digests, cache.heuristic, cache.exact)


def test_the_resume_points_counts_are_columns_of_the_count_cache(tmp_path: Path) -> None:
    # pass 1's counts before the resume point (8 bytes a record each) were marshalled into the cache's head:
    # a copy of them, then marshal's growing buffer (~2x), at the run's end, where the peak is
    n = 100_000
    cache = _filled_cache(n)
    cache.settled, cache.settled_sha256 = 100 * n, b"s" * 32
    cache.resume_at, cache.resume_sha256 = 100, b"r" * 32
    counts = [array("q", range(n)), array("q", range(0, 2 * n, 2))]
    cache.resume = {"totals": {"exact": True}, "calls": {"c1": 1}}
    cache.resume_columns = [memoryview(c).cast("B") for c in counts]
    path = tmp_path / "s.json.counts"
    grew = _traced_save(path, cache)
    assert grew < 4 * n, f"{grew / n:.0f} B a line"  # over 32 with the counts marshalled
    loaded = from_bytes(path.read_bytes(), ("openai", "o200k_base"))
    assert loaded is not None and loaded.resume == cache.resume
    assert loaded.resume_columns == [c.tobytes() for c in counts]
    assert from_bytes(path.read_bytes()[:-1], None) is None  # (the columns are hashed and measured too)


def test_a_run_keeps_its_resume_points_counts_as_columns(tmp_path: Path) -> None:
    path = tool_loop_log(tmp_path / "log.jsonl", 2_000)
    state = tmp_path / "s.json"
    for exact, columns in (("tiktoken", 2), ("none", 1)):
        engine.run(path, Options(window=1_000_000_000, exact=exact, state_path=state),
                   output=tmp_path / "out.jsonl", hold=False, warn=lambda m: None)
        loaded = from_bytes((tmp_path / "s.json.counts").read_bytes(), None)
        assert loaded is not None and loaded.resume is not None
        # pass 1's counts (2 bytes a record: as narrow as the counts allow), then the call ids' five columns
        # (CallIds.kept: the index last)
        assert len(loaded.resume_columns) == columns + 5
        assert len(loaded.resume_columns[0]) > 2 * 1_900
        counts = loaded.resume_columns[:columns]
        assert loaded.resume["totals"]["widths"] == [2] * columns
        assert all(len(c) == len(counts[0]) for c in counts)
        assert set(loaded.resume["totals"]) & {"heuristic", "counts"} == set()  # (no counts in the head)
        assert set(loaded.resume) & {"calls", "names"} == set()  # (no call ids in the head either)
