"""``facts.identifiers.names_in`` skips the scans a text cannot match (no ``://``, no capital, digit or ``@``,
no ``/``) and finds paths with a pattern that opens on its first character: it must find exactly what the
three scans over every text found (the reference below is names_in as it was)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcompact.facts import identifiers
from ctxcompact.facts.identifiers import MAX_NAME_CHARS, MAX_URL_CHARS, names_in

_OLD_PATH = re.compile(r"(?<![\w.~/-])(?:~|/)[\w.@+-]*(?:/[\w.@+-]+)+")
# _NAME without the look-ahead that skips the runs of word characters no name starts (each alternative tried
# at every run)
_OLD_NAME = re.compile(identifiers._NAME.pattern.replace(r"(?=[a-z-]*+[A-Z\d@])", "", 1))


def _reference(text: str) -> set[str]:
    text = identifiers._URL.sub(" ", text)
    found = {m.group(1) for m in _OLD_NAME.finditer(text) if 3 <= len(m.group(1)) <= MAX_NAME_CHARS}
    found.update(p.rstrip(".") for p in _OLD_PATH.findall(text)
                 if p.count("/") >= 2 and len(p) <= MAX_URL_CHARS)
    return found


# the characters every pattern turns on, and words that make names, paths and URLs
_PIECES = st.sampled_from(["a", "Z", "7", "@", "/", "~", ".", "-", "_", "$", " ", "\n", ":", "//", "://",
                           "https://x.io/a", "fooBar", "API_KEY", "v1.2.3", "deadbeef1", "@s/p", "~/d/e",
                           "/usr/lib", "é", "中", "x-1", "+", "'", "\"", ")", "Ab"])


@settings(max_examples=600, deadline=None)
@given(st.lists(_PIECES, max_size=30).map("".join) | st.text(max_size=80))
def test_names_in_finds_what_every_scan_found(text):
    assert names_in(text) == _reference(text)


# what each alternative of _NAME turns on, and what comes before its first capital, digit or "@"
_NAME_PIECES = st.sampled_from([
    "a", "f", "v", "z", "A", "Z", "0", "7", "@", "-", "_", ".", "/", "$", " ", "\n", "é", "É", "١", "٢", "ß",
    "API_KEY", "fooBar", "FooBar", "v1.2.3", "1.2.3-rc.1", "spotter-0p7.2", "deadbeef1", "abc1234", "@s/p",
    "x-1", "ab-cd", "-1"])


@settings(max_examples=1000, deadline=None)
@given(st.lists(_NAME_PIECES, max_size=24).map("".join) | st.text(max_size=60))
def test_the_name_pattern_finds_what_it_found_without_its_look_ahead(text):
    new = [(m.start(), m.group(1)) for m in identifiers._NAME.finditer(text)]
    assert new == [(m.start(), m.group(1)) for m in _OLD_NAME.finditer(text)]


def test_the_look_ahead_edges():
    # a name whose first capital or digit comes after lowercase letters and dashes, a Unicode digit's version
    for text in ("fooBar", "ab-cd-e1", "abcdef1", "v1.2.3", "١.٢.٣", "@a/b", "FOO_BAR", "x fooBar.", "-a1"):
        assert [m.group(1) for m in identifiers._NAME.finditer(text)] == [
            m.group(1) for m in _OLD_NAME.finditer(text)]
    assert identifiers._NAME.search("x abc-d1.2 y").group(1) == "abc-d1.2"
    assert identifiers._NAME.search("a_b1") is None and _OLD_NAME.search("a_b1") is None


def test_the_skips():
    assert names_in("all lower case prose, no names here") == set()
    assert names_in("see ~/src/app and /usr/lib/x.so.") == {"~/src/app", "/usr/lib/x.so"}
    assert names_in("at https://example.com/a/b fooBar") == {"fooBar"}
    assert names_in("a/b/c") == _reference("a/b/c") == set()
