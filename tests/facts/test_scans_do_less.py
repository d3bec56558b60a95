"""The fact scans of a compaction do less for the same facts (docs/measurements/performance-log.md,
branch `cmp6`): C-fast hints rule texts out before a regex scan (never one a match was in),
``shorten`` collapses only a long text's start, and what two tests asked of one record is worked out once
(counts of calls, not times)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcompact.facts import handoff, identifiers, outcomes, rules
from ctxcompact.facts.gather import FactFeed
from ctxcompact.facts.seen import Seen
from ctxcompact.facts.text import ODD_CASE, may_hold, shorten
from ctxcompact.model import Message, Origin, Record, Role, TextBlock, ToolCall, ToolResult
from ctxcompact.strategies.conversation import Reader

# the hints' words, and characters re.I folds to ASCII letters (ſ is s, ı and İ are i, K is k)
_PIECES = st.sampled_from([
    "never", "Don't", "don’t", "do not", "MUST", "always", "only", "avoid", "make sure", "ensure",
    "shouldn't", "no need to", "stop", "keep", "prefer", "is", "IS", "are", "was", "were", "means", "not",
    "it's", "that’s", "fixed", "ed", "ing", "ſ", "ı", "İ", "\u212a", "é", "A", "7", "@", "x", " ", "\n", ".",
    "'", "’", "-",
])
_TEXTS = st.lists(_PIECES, max_size=25).map("".join) | st.text(max_size=60)


def _ruled_out_only_without_a_match(text: str) -> None:
    if not may_hold(text, rules._RULE_HINTS):
        assert rules._RULE_WORDS.search(text) is None
    if not may_hold(text, rules._STATEMENT_HINTS):
        assert rules._STATEMENT.search(text) is None
    assert identifiers._may_name(text) or re.search(r"[A-Z0-9@]", text) is None


@settings(max_examples=25, deadline=None)
@given(_TEXTS)
def test_a_hint_never_rules_out_a_text_with_a_match(text: str) -> None:
    _ruled_out_only_without_a_match(text)


@pytest.mark.parametrize("text", [
    "please ſtop that", "ıs it", "İS IT", "it ſeems it'ſ so", "NEVER", "Do Not", "mean", "\u212aeep it",
    "a1", "@x", "Élan", "", "   ", "prose in lower case",
])
def test_the_hints_edges(text: str) -> None:
    _ruled_out_only_without_a_match(text)


def test_the_hints_rule_out_plain_prose() -> None:
    prose = "test value call state module line file token result"
    assert not may_hold(prose, rules._RULE_HINTS) and not may_hold(prose, rules._STATEMENT_HINTS)
    assert not identifiers._may_name(prose)
    assert may_hold("please ſtop", ("xyz",))  # an odd-case character: the regex decides
    assert ODD_CASE == ("\u0130", "\u0131", "\u017f")


def _collapsed(text: str, limit: int) -> str:
    """shorten as it was: the whole text collapsed, then cut."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: max(0, limit - 1)].rstrip() + "…"


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(["ab", "c", " ", "  ", "\n\n\n", "\t", ".", "x" * 30, " " * 50]),
                max_size=40).map("".join), st.integers(-2, 60))
def test_shorten_is_the_whole_text_collapsed(text: str, limit: int) -> None:
    assert shorten(text, limit) == _collapsed(text, limit)


@pytest.mark.parametrize(("text", "limit"), [
    ("", 5), (" " * 100, 5), ("a" + " " * 100 + "b", 3), ("word " * 10, 10), ("word " * 10, 49),
    ("word " * 10, 50), ("a b", 0), ("a b", -1), ("x" * 20, 19), ("x" * 20, 20), ("ab " + " " * 9 + "cd", 4),
])
def test_shorten_edges(text: str, limit: int) -> None:
    assert shorten(text, limit) == _collapsed(text, limit)


class _Counting:
    """A compiled pattern whose ``search`` calls are counted."""

    def __init__(self, rx: re.Pattern[str]) -> None:
        self.rx, self.searches = rx, 0

    def search(self, text: str, *args: Any) -> re.Match[str] | None:
        self.searches += 1
        return self.rx.search(text, *args)


def test_rules_scan_no_text_the_hints_rule_out(monkeypatch: pytest.MonkeyPatch) -> None:
    words, said = _Counting(rules._RULE_WORDS), _Counting(rules._STATEMENT)
    monkeypatch.setattr(rules, "_RULE_WORDS", words)
    monkeypatch.setattr(rules, "_STATEMENT", said)
    long_text = "test value call state module line file token result. " * 40  # no rule word
    assert rules.rules_in_text(long_text) == [] and words.searches == 0
    short = "token file agent\nfunction return the module build line check"  # a short message: no statement
    assert rules.rules_in_text(short) == [] and words.searches == 0 and said.searches == 0
    assert rules.rules_in_text("Never push to main. The cache is stale.") == [
        "Never push to main.", "The cache is stale."]
    assert words.searches >= 1 and said.searches >= 1


def _rec(i: int, role: Role, blocks: list[Any]) -> Record:
    return Record(index=i, line=i + 1, raw=None, data={}, message=Message(role, blocks), origin=Origin.INPUT)


def _session(turns: int) -> list[Record]:
    recs: list[Record] = []
    for t in range(turns):
        n = len(recs)
        recs += [_rec(n, Role.USER, [TextBlock(f"Please fix the build, step {t}.")]),
                 _rec(n + 1, Role.ASSISTANT, [ToolCall(f"c{t}", "bash", '{"command": "make"}',
                                                       {"command": "make"})]),
                 _rec(n + 2, Role.TOOL, [ToolResult(f"c{t}", [TextBlock("ok")])]),
                 _rec(n + 3, Role.ASSISTANT, [TextBlock(f"It is fixed now and UserCache works {t}.")])]
    return recs


def test_the_reader_asks_each_record_once_whether_it_is_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"noise": 0}
    noise = handoff._is_noise

    def counted(rec: Record) -> bool:
        calls["noise"] += 1
        return noise(rec)
    monkeypatch.setattr(handoff, "_is_noise", counted)
    records = _session(5)
    reader = Reader(hold=False)
    for rec in records:
        reader.add(rec)
    assert calls["noise"] == len(records)  # (status_stops and flight_skips each asked it: twice)
    assert handoff.stops_and_skips(records[1]) == (handoff.status_stops(records[1]),
                                                   handoff.flight_skips(records[1]))


def test_the_feed_reads_a_claim_once_and_the_prose_names_once(monkeypatch: pytest.MonkeyPatch) -> None:
    counts = {"claims": 0, "names": 0}
    claims, names = outcomes.claims_resolution, identifiers.names_in

    def claims_counted(text: str) -> bool:
        counts["claims"] += 1
        return claims(text)

    def names_counted(text: str) -> set[str]:
        counts["names"] += 1
        return names(text)
    monkeypatch.setattr(outcomes, "claims_resolution", claims_counted)
    monkeypatch.setattr(identifiers, "names_in", names_counted)
    records = _session(4)
    feed = FactFeed(bounded=True)
    for rec in records:
        feed.feed(Seen(rec))
    facts = feed.facts()
    # the evidence scan reads the assistant's messages up to the first that claims a fix (the first call's,
    # then "It is fixed now"), not the 8 of them; the error scan reads none (no error is open)
    assert counts["claims"] == 2
    # names: each typed request, each assistant text and each result once, each call's one argument once
    assert counts["names"] == len(records)
    assert facts.claimed_fixed and facts.facts.commands


# "N failed" / "N errors" with the digit read before the look-behind (outcomes._ERROR_PARTS): the same spans
# as the pattern that opened on ``\b``
_OLD_COUNTED = re.compile(r"\b[1-9]\d* (?:failed|errors?)\b", re.M)
_COUNTED = next(re.compile(p, re.M) for hints, p in outcomes._ERROR_PARTS if " failed" in hints)
_COUNTED_BITS = st.sampled_from(["1", "2", "0", "10", "٣", " failed", " errors", " error", " ", "\n", "a",
                                 "_", "é", ".", "-", "x1 failed", "3 failedx", "(2 errors)"])


@settings(max_examples=600, deadline=None)
@given(st.lists(_COUNTED_BITS, max_size=12).map("".join) | st.text(max_size=40))
def test_counted_failures_match_as_with_a_word_boundary_first(text: str) -> None:
    assert [m.span() for m in _COUNTED.finditer(text)] == [m.span() for m in _OLD_COUNTED.finditer(text)]


def test_counted_failures_edges() -> None:
    for text in ("1 failed", "a1 failed", "_1 failed", "é1 failed", " 12 errors.", "x\n3 error", "0 failed"):
        assert [m.span() for m in _COUNTED.finditer(text)] == [m.span() for m in _OLD_COUNTED.finditer(text)]
    assert _COUNTED.search("a1 failed") is None and _COUNTED.search("-1 failed") is not None
