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


def _reference(text: str) -> set[str]:
    text = identifiers._URL.sub(" ", text)
    found = {m.group(1) for m in identifiers._NAME.finditer(text) if 3 <= len(m.group(1)) <= MAX_NAME_CHARS}
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


def test_the_skips():
    assert names_in("all lower case prose, no names here") == set()
    assert names_in("see ~/src/app and /usr/lib/x.so.") == {"~/src/app", "/usr/lib/x.so"}
    assert names_in("at https://example.com/a/b fooBar") == {"fooBar"}
    assert names_in("a/b/c") == _reference("a/b/c") == set()
