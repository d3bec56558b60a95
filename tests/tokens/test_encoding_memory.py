"""What stays alive once tiktoken counts (docs/measurements/performance-log.md, branch `mem6`): the Rust
encoder holds its own copy of the ranks, so the dict they were parsed into (o200k's: ~26 MB traced) is let go,
and so is the pure counter's table and memo. Pins the tiktoken behaviour this relies on: its encoder does not
read the dict after it is built (the counts stay tiktoken's own), and an Encoding still pickles."""

from __future__ import annotations

import gc
import pickle
import tracemalloc
from collections.abc import Iterator

import pytest

from ctxcompact.tokens import bpe, exact

NAME = "cl100k_base"  # (the other encoding: the suite's runs load o200k, which stays as it is)

TEXTS = ["hello world", "Ünïcödé and 漢字 and emoji 🎉🎉", "def f(x):\n    return x  # ok\n\n\n",
         " " * 50 + "tabs\t\tand   spaces", "<|endoftext|> is ordinary text", "a" * 3000 + "b" * 17]


@pytest.fixture
def fresh() -> Iterator[None]:
    """``NAME`` not loaded in this process for the test, and as it was after."""
    kept = exact._cache.pop(NAME, None)
    try:
        yield
    finally:
        exact._cache.pop(NAME, None)
        if kept is not None:
            exact._cache[NAME] = kept


def test_the_ranks_and_the_pure_counter_are_let_go_once_tiktoken_counts(fresh: None) -> None:
    exact._bpe_counter(NAME).count("warm the pure counter")  # its table and memo, as a small input left them
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        enc = exact.get_encoding(NAME)
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 2_000_000, f"{kept:,} B kept"  # 12 MB while the Encoding kept the dict (o200k's: 26)
    assert NAME not in bpe._counters  # and the pure counter (its table: made before the trace began)
    assert exact.count_texts(["make it again for a long piece " + "x" * 5000], NAME)[0] > 0
    assert NAME in bpe._counters  # (a long piece is the pure counter's: made again from the cached table)
    assert enc is exact.get_encoding(NAME)


def test_the_encoder_counts_as_tiktoken_with_its_dict_kept(fresh: None) -> None:
    import tiktoken

    pattern, special = exact._SPEC[NAME]
    whole = tiktoken.Encoding(name=NAME, pat_str=pattern, special_tokens=dict(special),
                              mergeable_ranks=exact.parse_ranks(exact._read_ranks_file(NAME)))
    enc = exact.get_encoding(NAME)
    for text in TEXTS:
        assert enc.encode_ordinary(text) == whole.encode_ordinary(text), text
    assert enc.decode(enc.encode_ordinary(TEXTS[1])) == TEXTS[1]
    assert enc.max_token_value == whole.max_token_value


def test_an_encoding_pickles_by_name(fresh: None) -> None:
    enc = exact.get_encoding(NAME)
    assert pickle.loads(pickle.dumps(enc)) is enc


def test_the_ranks_are_parsed_a_chunk_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    data = exact._read_ranks_file(NAME)
    whole = exact.parse_ranks(data)
    some, cut = data[:data.index(b"\n", 200_000) + 1], data.index(b"\n", 5_000) + 1
    assert len(whole) == 100_256 and whole[b"!"] == 0
    for chunk in (1, 17, 4096):  # a chunk ends at the end of a line past it, whatever the size
        monkeypatch.setattr(exact, "PARSE_CHUNK", chunk)
        got = exact.parse_ranks(some)
        assert list(got.items()) == list(whole.items())[:len(got)] and len(got) > 10_000
    with pytest.raises(exact.UsageError, match="without its rank"):
        exact.parse_ranks(data[:cut] + b"IQ==\n" + data[cut:])


def test_parsing_the_ranks_holds_one_chunks_fields_at_a_time() -> None:
    data = exact._read_ranks_file(NAME)
    gc.collect()
    tracemalloc.start()
    try:
        ranks = exact.parse_ranks(data)
        kept, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(ranks) == 100_256
    # the whole file's fields (200k bytes objects for cl100k) beside the dict: a peak of 2.1x what is kept
    assert peak < 1.3 * kept, f"peak {peak:,} B for {kept:,} B kept"
