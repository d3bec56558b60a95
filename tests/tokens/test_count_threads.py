"""Many characters are counted by one loop per core (``tokens.exact.count_texts``): the same counts, in the
same order, as one ``encode_ordinary`` per text; the heap merge's long pieces among them; the first failure
in the texts' order reported."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcompact.errors import InputError
from ctxcompact.tokens import exact


@pytest.fixture
def threaded(monkeypatch):
    monkeypatch.setattr(exact, "THREADS_FROM_CHARS", 0)
    monkeypatch.setattr(exact, "_threads", lambda: 3)
    monkeypatch.setattr(exact, "LONG_PIECE", 64)  # some texts take the heap merge
    return exact.get_encoding("o200k_base")


# the fixture only sets module values, the same for every example
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(max_size=120) | st.sampled_from(["", " " * 200, "ab" * 90, "x = 1\n" * 30]),
                max_size=40))
def test_threads_count_what_one_loop_counts(threaded, texts):
    enc = threaded
    assert exact.count_texts(texts, enc) == [len(enc.encode_ordinary(t)) for t in texts]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 50), max_size=30), st.integers(1, 5))
def test_chunks_keep_every_text_in_order(sizes, k):
    todo = [i for i, n in enumerate(sizes) if n % 3]
    chunks = exact._chunks(todo, sizes, k)
    assert [i for c in chunks for i in c] == todo
    assert len(chunks) <= k and all(chunks) == bool(todo)


def test_the_first_failure_in_order_is_raised(threaded, monkeypatch):
    enc = threaded

    def encode_len(e, text):
        if text.startswith("bad"):
            raise InputError(f"cannot count {text}")
        return len(e.encode_ordinary(text))

    monkeypatch.setattr(exact, "_encode_len", encode_len)
    texts = ["fine"] * 10 + ["bad 1"] + ["fine"] * 10 + ["bad 2"] + ["fine"] * 10
    with pytest.raises(InputError, match="bad 1"):
        exact.count_texts(texts, enc)


def test_few_characters_stay_in_one_thread(monkeypatch):
    enc = exact.get_encoding("o200k_base")
    started = []
    real = exact.threading.Thread

    class Spy(real):  # type: ignore[misc, valid-type]
        def start(self):
            started.append(self)
            super().start()

    monkeypatch.setattr(exact.threading, "Thread", Spy)
    monkeypatch.setattr(exact, "_threads", lambda: 2)
    exact.count_texts(["short text"] * 10, enc)
    assert started == []
    exact.count_texts(["many words here " * 1000] * 20, enc)  # 320,000 characters
    assert len(started) == 1
