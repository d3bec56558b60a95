"""tokens/bpe.py splits text with the standard library's ``re`` on a classified copy of it: the pieces are the
``regex`` module's on tiktoken's own pattern, for both encodings; the pure path's work budget hands a costly
text to tiktoken; a damaged rank table is rebuilt, never used."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcompact.tokens import bpe, exact

# the characters where the two engines could part: White_Space beyond ASCII and the ASCII controls that are
# not, ſ (the contractions' s, case-insensitively), every letter class, marks, numbers of other scripts, the
# former and present stand-ins (private use, C1 controls), CJK, an emoji, and the characters whose class
# changed after Unicode 14
_TRICKY = ("\x85\xa0\u1680\u2000\u200a\u200b\u2028\u2029\u202f\u205f\u3000\x1c\x1f\x0b\x0c\r\n\t ſKkSs'"
           "AaZz09ǅʰªÀàΔδ\u0301\u0903\u20dd٣Ⅻ½中文😀\ue000\ue005\ue008\uf8ff\x80\x85\x87\x88\x9f"
           "ʕ\U0001171e"
           "'sdtmlvreSDTMLVRE.,;:!?-_/\\\"")
_TEXT = (st.text(st.characters(blacklist_categories=("Cs",)), max_size=60)
         | st.text(alphabet=_TRICKY, max_size=60)
         | st.text(st.characters(min_codepoint=0x80, max_codepoint=0x3000, blacklist_categories=("Cs",)),
                   max_size=40))


@pytest.fixture(scope="module", params=exact.ENCODINGS)
def split(request):
    name = request.param
    pattern = exact._SPEC[name][0]
    return bpe.Counter(pattern, lambda b: None), regex.compile(pattern)


@settings(max_examples=400, deadline=None)
@given(text=_TEXT)
def test_the_split_is_the_regex_modules(split, text: str) -> None:
    counter, engine = split
    pieces = counter._findall(text)
    unsure = any(unicodedata.category(c) == "Cn" or c in bpe._CHANGED for c in text)
    if pieces is None:
        assert unsure  # only a character the tables may disagree on is left to tiktoken
    else:
        assert not unsure and pieces == engine.findall(text)


def test_every_character_class_in_context(split) -> None:
    """Each character of the first planes' assigned ones (every 5th) in the contexts where its class
    decides the split: after a letter, before an upper-case one, after an apostrophe, around spaces."""
    counter, engine = split
    contexts = ("a{}b", "{}A", "A{}a", "x'{}", "'{}{}", "1{}2", "{} \n", " {}  x", "{}'s", "DON'{}")
    for cp in range(0x80, 0x20000, 5):
        c = chr(cp)
        if unicodedata.category(c) in ("Cn", "Cs") or c in bpe._CHANGED:
            continue
        for form in contexts:
            text = form.format(c, c)
            assert counter._findall(text) == engine.findall(text), (hex(cp), form)


_ASCII = "".join(map(chr, range(128)))


@settings(max_examples=200, deadline=None)
@given(ascii_text=st.text(alphabet=_ASCII + "  aaaa", min_size=200, max_size=600),
       beyond=st.lists(st.tuples(st.integers(0, 600), st.text(alphabet=_TRICKY, min_size=1, max_size=3)),
                       max_size=4))
def test_a_mostly_ascii_text_splits_as_the_regex_module(split, ascii_text: str,
                                                        beyond: list[tuple[int, str]]) -> None:
    """A text with a few characters beyond ASCII has only those runs translated and only the pieces that
    hold one sliced back (bpe.SPARSE_SHIFT): its pieces are still the regex module's, and they are the
    text's own characters, not the stand-ins."""
    counter, engine = split
    text = ascii_text
    for at, run in beyond:
        text = text[:at] + run + text[at:]
    found = bpe._classify(text)
    if any(c in bpe._CHANGED for c in text):
        assert found is None and counter._findall(text) is None
        return
    assert found is not None and found[1] == (len(text.encode("utf-8", "surrogatepass")) - len(text)
                                             <= len(text) >> bpe.SPARSE_SHIFT)
    assert found[0] == "".join(bpe._stand_in.get(ord(c), c) if not c.isascii() else c  # type: ignore[misc]
                               for c in text)
    assert counter._findall(text) == engine.findall(text)


def test_a_mostly_ascii_text_takes_the_runs_path() -> None:
    """The sparse path is taken where it should be, and gives back the text's own characters."""
    counter = bpe.Counter(exact._SPEC["o200k_base"][0], lambda b: None)
    text = "drwxr-xr-x 12 src/queue.py\n" * 20 + "Let me check δelta 😀 ſo, déjà vu.\n" + "x = 1\n" * 20
    found = bpe._classify(text)
    assert found is not None and found[1]
    pieces = counter._findall(text)
    assert pieces is not None and "".join(pieces) == text
    assert [p for p in pieces if not p.isascii()] == [" δelta", " 😀", " ſo", " déjà"]
    dense = "δ" * 40 + " x"
    found = bpe._classify(dense)
    assert found is not None and not found[1] and "".join(counter._findall(dense) or []) == dense


def test_the_translation_writes_out_every_class() -> None:
    for name in exact.ENCODINGS:
        out = bpe.translate(exact._SPEC[name][0])
        assert "\\p" not in out and "\\s" not in out and "\\S" not in out
    with pytest.raises(ValueError):
        bpe.translate(r"[^\S]")


def test_the_work_budget_hands_a_costly_text_to_tiktoken() -> None:
    """CJK without spaces is merged piece by piece (~30x the work of a word seen before): past the budget
    the pure path gives up, whatever the number of characters."""
    counter = exact._bpe_counter("o200k_base")
    cjk = "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(2000))
    start = counter.work
    first = counter.count_all([cjk, "after it " * 10], budget=start + len(cjk) + 100)
    # the text that passed the budget keeps its count; what comes after it is left to tiktoken
    assert first[1] is None and first[0] is not None and first[0] == counter.count(cjk)
    assert counter.count_all([cjk], budget=counter.work + len(cjk) - 1) == [None]  # not begun past it
    assert counter.work - start >= bpe.MERGE_COST * len(cjk)  # merged bytes weigh more than characters
    words = "the same words again and again " * 100
    before = counter.work
    assert None not in counter.count_all([words], budget=before + 10 * len(words))
    assert counter.work - before < 2 * len(words)  # pieces seen before cost a character each


def test_a_text_counted_past_the_budget_is_not_counted_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pure path passes its budget while counting a text: that count is kept and only the texts after
    it go to tiktoken (before, every count was thrown away and the costly text counted twice)."""
    name = "cl100k_base"
    counter = exact._bpe_counter(name)
    monkeypatch.setattr(exact, "_cache", {k: v for k, v in exact._cache.items() if k != name})
    monkeypatch.setattr(exact, "PURE_MAX_WORK", counter.work + 20_000)
    costly = "ok\n" + "\n" * 5_000 + "FAILED"  # one long piece: merged, weighs MERGE_COST a byte
    rest = ["after it " * 500, "and more"]  # more characters than the budget has left after the costly text
    seen: list[str] = []
    real = counter.count
    monkeypatch.setattr(counter, "count", lambda t: (seen.append(t), real(t))[1])
    got = exact.count_texts([costly, *rest], name)
    want = [len(exact._resolve(name).encode_ordinary(t)) for t in (costly, *rest)]
    assert got == want
    assert seen.count(costly) == 1


def test_a_damaged_rank_table_is_rebuilt_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = "cl100k_base"
    sha = exact.EXPECTED_SHA256[name]
    monkeypatch.setenv("CTXCOMPACT_CACHE_DIR", str(tmp_path))
    path = bpe.table_path(name, sha)
    parse_calls = []

    def parse() -> dict[bytes, int]:
        parse_calls.append(1)
        return exact.parse_ranks(exact._read_ranks_file(name))

    def fresh() -> bpe.Counter:
        bpe._counters.pop(name, None)
        return bpe.counter(name, exact._SPEC[name][0], sha, parse)

    try:
        good = fresh()
        assert parse_calls == [1] and path.is_file()
        want = good.count("hello wörld, ſome text")
        whole = path.read_bytes()
        for damaged in (whole[: len(whole) // 2], whole[:-1], whole + b"\0", b""):
            path.write_bytes(damaged)  # truncated, one byte short, one too many, empty
            assert bpe.load_table(path, sha) is None
            assert fresh().count("hello wörld, ſome text") == want
            assert path.read_bytes() == whole  # written again, whole
        assert len(parse_calls) == 5  # each damaged table made the counter parse the ranks again
        assert fresh().count("hello") is not None and len(parse_calls) == 5  # the rebuilt one is used
    finally:
        bpe._counters.pop(name, None)


@pytest.mark.parametrize("name", exact.ENCODINGS)
def test_where_re_cannot_take_the_pattern_the_regex_module_splits_and_counts_alike(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Python 3.10's ``re`` rejects the translated pattern (no possessive quantifiers): the counter falls back
    to the ``regex`` module on tiktoken's own pattern, unclassified, and counts as tiktoken does."""
    def rejected(pattern: str) -> str:
        return pattern + "(?"  # an error for ``re``, as a possessive quantifier is on 3.10

    monkeypatch.setattr(bpe, "translate", rejected)
    ranks = exact._bpe_counter(name)._memo._get
    counter = bpe.Counter(exact._SPEC[name][0], ranks)
    assert not counter._classify
    enc = exact.get_encoding(name)
    texts = ["plain words, and numbers 12345", "don't  stop\n\n\nFAILED", "中文 text 😀 ǅa", "ſ\u00a0K" * 30,
             " " * 500 + "x", "\t\r\n" * 40]
    for text in texts:
        assert counter.count(text) == len(enc.encode_ordinary(text)), text
