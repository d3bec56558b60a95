"""The faster forms of three leaf scans of the facts find exactly what the patterns they replace found:
``outcomes.error_in`` (each alternative of ``_ERROR_LINE`` searched only where its substrings are) and the
first-letter look-aheads of ``rules._RULE_WORDS`` and ``outcomes._RESOLVED_WORDS``."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcompact.facts import outcomes, rules

_OLD_RULE_WORDS = re.compile(rules._RULE_WORDS.pattern.replace(r"\b(?=[ndmaoeskp])", r"\b", 1), re.I)
_OLD_RESOLVED = re.compile(outcomes._RESOLVED_WORDS.pattern.replace(r"\b(?=[frnatpwisg])", r"\b", 1), re.I)

# pieces of every alternative, and characters that fold to ASCII letters under re.I (ſ is s, K is k)
_PIECES = st.sampled_from([
    "Traceback (most recent call last)", "ValueError", "Exception", "error", "ERROR", "fatal", "FATAL", ":",
    "[E1]", "FAILED", " 3 failed", " 1 errors", " error", "exit code 2", "exited with status 1",
    "Exit code 4",
    "command not found", "No such file or directory", "npm ERR!", "panicked at", "pkg failed:", "x.y-z",
    " ", "\n", "\t", "0", "9", "a", "_", ".", "never", "Don't", "do not", "MUST", "always", "only", "avoid",
    "make sure", "ensure", "should not", "no need to", "stop", "keep", "prefer", "fixed", "resolved",
    "now passes", "all 3 tests passed", "tests pass", "passing", "works now", "now works", "is working",
    "succeeded", "green", "ſ", "\u212a", "İ", "é", "x", "N", "'", "’",
])
_TEXTS = st.lists(_PIECES, max_size=25).map("".join) | st.text(max_size=60)


@settings(max_examples=1000, deadline=None)
@given(_TEXTS)
def test_error_in_is_the_whole_pattern(text):
    assert outcomes.error_in(text) == (outcomes._ERROR_LINE.search(text) is not None)


@settings(max_examples=1000, deadline=None)
@given(_TEXTS)
def test_first_letter_look_aheads_find_the_same(text):
    spans = lambda rx: [m.span() for m in rx.finditer(text)]  # noqa: E731
    assert spans(rules._RULE_WORDS) == spans(_OLD_RULE_WORDS)
    assert spans(outcomes._RESOLVED_WORDS) == spans(_OLD_RESOLVED)


def test_the_parts_make_the_pattern():
    assert outcomes._ERROR_LINE.pattern == "|".join(p for _, p in outcomes._ERROR_PARTS)
    assert outcomes.error_in("x\n  ValueError: bad") and outcomes.error_in("2 failed, 3 passed")
    assert not outcomes.error_in("all good\nno problems")
    assert rules._RULE_WORDS.search("please ſtop that")  # ſ folds to s under re.I, in both forms
    assert _OLD_RULE_WORDS.search("please ſtop that")
