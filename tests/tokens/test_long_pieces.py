"""Counting that never goes quadratic (issue 25 item 3): a text that may hold a pre-token longer than
``exact.LONG_PIECE`` is counted by tokens/bpe.py's heap merge instead of tiktoken, with tiktoken's counts.

The doubling tests of every counting path on these shapes are in tests/scan_cases.py (run by
tests/facts/test_linear_scans.py); here: the detector never misses a long pre-token, and the routed counts are
tiktoken's ``encode_ordinary`` lengths, on random runs and on the adversarial shapes.
"""

from __future__ import annotations

import random
from unittest import mock

import pytest
import scan_cases
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcompact.errors import InputError
from ctxcompact.tokens import bpe, exact

# runs of one class of character each: letters (Latin, CJK, with combining marks), digits, white space of
# several kinds, symbols, and the characters that end a symbol pre-token (\r, \n, /)
_ALPHABETS = ["a", "Z", "é", "日本", "e\u0301", "0", "7", " ", "\t", "\n", "\r\n", "\u3000", "\xa0", "-", "/",
              "_", "'s", "!?", "\x1c", "ü", "Ω", "\u0915\u093f"]
_RUNS = st.lists(st.tuples(st.sampled_from(_ALPHABETS), st.integers(1, 40)), min_size=1, max_size=12)


def _text(runs: list[tuple[str, int]]) -> str:
    return "".join(chars * k for chars, k in runs)


def _longest_piece(text: str, name: str = "o200k_base") -> int:
    counter = exact._bpe_counter(name)
    return max((len(p) for p in counter._findall(text)), default=0)


@settings(max_examples=400, deadline=None)
@given(_RUNS, st.sampled_from([4, 8, 16, 32]))
def test_the_detector_never_misses_a_long_piece(runs: list[tuple[str, int]], longest: int) -> None:
    text = _text(runs)
    for name in exact.ENCODINGS:
        if _longest_piece(text, name) > longest:
            assert exact.may_hold_long_piece(text, longest), (name, text)


def test_ordinary_text_is_not_taken_for_a_long_piece() -> None:
    prose = "The quick brown fox jumps over 13 lazy dogs; see src/app.py:42.\n" * 2000
    assert not exact.may_hold_long_piece(prose)
    assert exact.may_hold_long_piece(prose + "x" * (exact.LONG_PIECE + 1))
    assert not exact.may_hold_long_piece("y" * exact.LONG_PIECE)  # not longer than the limit: tiktoken's


@settings(max_examples=150, deadline=None)
@given(_RUNS)
def test_routed_counts_are_tiktokens(runs: list[tuple[str, int]]) -> None:
    text = _text(runs)
    with mock.patch.object(exact, "LONG_PIECE", 16):  # so that short texts take the heap merge
        for name in exact.ENCODINGS:
            enc = exact.get_encoding(name)
            assert exact.count_texts([text, "plain words", text[::-1]], name) == [
                len(enc.encode_ordinary(t)) for t in (text, "plain words", text[::-1])]


@pytest.mark.parametrize("name", exact.ENCODINGS)
@pytest.mark.parametrize(("shape", "make"), scan_cases.LONG_SHAPES,
                         ids=[shape for shape, _ in scan_cases.LONG_SHAPES])
def test_adversarial_shapes_count_as_tiktoken_does(name: str, shape: str, make: object) -> None:
    enc = exact.get_encoding(name)
    for n in (5_000, 60_000):
        text = make(n)  # type: ignore[operator]
        assert exact.may_hold_long_piece(text)
        mixed = "Output:\n" + text + "\nexit code 1 " + text[: n // 3]
        assert exact.count_texts([text, mixed], name) == [len(enc.encode_ordinary(t)) for t in (text, mixed)]
        assert exact.count_text(mixed, name) == len(enc.encode_ordinary(mixed))


def test_a_huge_run_of_white_space_is_counted_where_tiktoken_panics() -> None:
    enc = exact.get_encoding("o200k_base")
    # what tiktoken says of runs it can still split: a token per 128 spaces
    for k in (8, 800):
        assert len(enc.encode_ordinary(" " * (128 * k))) == k
    # about 900,000 spaces overflow its regex engine's stack (a pyo3 PanicException, a BaseException)
    assert exact.count_text(" " * (128 * 8_000), "o200k_base") == 8_000


def test_a_text_the_heap_merge_is_not_sure_of_goes_to_tiktoken() -> None:
    unsure = "\U000e0fff"  # unassigned in every Unicode version: bpe.py leaves it to tiktoken
    text = unsure + "x" * 20_000
    assert exact._bpe_counter("o200k_base").count(text) is None
    assert exact.count_text(text, "o200k_base") == len(exact.get_encoding().encode_ordinary(text))


def test_a_tiktoken_panic_is_a_clear_error_not_a_traceback() -> None:
    text = "\U000e0fff" + " " * 1_000_000  # unsure for bpe.py, and a run tiktoken's regex cannot take
    with pytest.raises(InputError, match="tiktoken cannot count a text of 1,000,001 characters"):
        exact.count_texts([text], "o200k_base")


def test_the_clis_counters_and_encodings_are_the_registrys() -> None:
    from click.testing import CliRunner

    from ctxcompact import plugins
    from ctxcompact.cli import cli

    assert exact.ENCODINGS == plugins.ENCODINGS
    out = CliRunner().invoke(cli, ["estimate", "--help"]).output
    for name in (*plugins.COUNTERS, *plugins.ENCODINGS):
        assert name in out
    done = CliRunner().invoke(cli, ["estimate", "-", "--exact", "bogus"], input="")
    assert done.exit_code == 2 and "tiktoken" in done.output and "openai" in done.output


def test_the_heap_merge_does_not_keep_long_pieces() -> None:
    counter = exact._bpe_counter("o200k_base")
    counter._memo.clear()
    assert counter.count("w" * 50_000 + " short words") is not None
    assert max(map(len, counter._memo)) <= 1024
    assert bpe.Counter is type(counter)


def test_a_random_long_word_in_a_transcript_counts_the_same_through_estimate() -> None:
    from ctxcompact import api
    from ctxcompact.options import Options

    rnd = random.Random(3)
    word = "".join(rnd.choice("abcdefghij") for _ in range(30_000))
    data = scan_cases._in_a_result(lambda n: word)(0)
    exact.get_encoding()  # loaded: the counts come from the routed path, not the small-input one
    report = api.estimate(data, Options(use_state=False, window=1_000_000))
    plain = api.estimate(data.replace(word.encode(), b"a b"), Options(use_state=False, window=1_000_000))
    assert report.exact is not None and plain.exact is not None
    enc = exact.get_encoding()
    assert report.exact - plain.exact == len(enc.encode_ordinary(word)) - len(enc.encode_ordinary("a b"))
