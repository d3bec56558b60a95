"""The bounded fact feed (``FactFeed(bounded=True)``, what a streamed compaction reads the records before
its window into) keeps what ``store.merge`` keeps of the typed requests (goals and rules) and of the errors,
not every one: merged with any earlier store merge leaves, its facts are :func:`gather`'s; and what it
holds of them does not grow with the session (docs/measurements/performance.md, memory at 100 MB)."""

from __future__ import annotations

import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcompact.facts import store
from ctxcompact.facts.gather import FactFeed, gather, goal_text
from ctxcompact.facts.store import Facts, merge
from ctxcompact.model import Message, Record, Role, TextBlock


def _typed(i: int, text: str) -> Record:
    return Record(index=i, line=i + 1, raw=None, data=None,
                  message=Message(role=Role.USER, blocks=[TextBlock(text)]))


def _text(goal: int, variant: int) -> str:
    """Requests: ``variant`` 0 is the words alone; others paste a different block around the same words
    (the same goal, another text), some with a rule."""
    words = f"task {goal}" + ("; never touch setup.py" if goal % 5 == 0 else "")
    return words if variant == 0 else f"{words}\n```\nlog {variant}\n```"


def _fed(records: list[Record]) -> FactFeed:
    feed = FactFeed(bounded=True)
    for rec in records:
        feed.feed(rec)
    return feed


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 2)), min_size=50, max_size=200), st.data())
def test_the_bounded_feed_keeps_what_the_merge_keeps_of_requests(typed: list[tuple[int, int]],
                                                                 data: st.DataObject) -> None:
    """With MAX_GOALS made small (so a few dozen requests pass the feed's bounds), the goals and rules of
    the bounded feed, merged with no earlier facts or with an earlier store of at most MAX_GOALS goals
    (among the latest typed, so merge skips them), are gather's; the latest request given or not: one of
    the texts typed (a goal's first text, dropped or kept) or another with their goal."""
    texts = st.sampled_from([*typed, *((g, 2 - v) for g, v in typed[-8:])])
    recent = st.sampled_from(typed[-12:])  # (what merge would take from the feed's last goals)
    latest = data.draw(st.one_of(st.none(), texts, recent))
    old_goals = data.draw(st.lists(st.one_of(recent, texts), max_size=3, unique=True))
    old_latest = data.draw(st.one_of(st.none(), recent, texts))
    records = [_typed(i, _text(*t)) for i, t in enumerate(typed)]
    request = _text(*latest) if latest is not None else None
    olds = [Facts(), Facts(goals=tuple(dict.fromkeys(goal_text(_text(*g)) for g in old_goals)),
                           latest_request=_text(*old_latest) if old_latest is not None else None)]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(store, "MAX_GOALS", 3)
        feed = _fed(records)
        assert feed.complete
        # what merge can take: the first goals and the last 2 × MAX_GOALS + 3 are gather's
        mine, full = feed.facts(request).facts.goals, gather(records, request).facts.goals
        assert mine[:3] == full[:3] and mine[-9:] == full[-9:] and set(mine) <= set(full)
        for old in olds:
            assert merge(old, feed.facts(request)) == merge(old, gather(records, request))


def test_the_bounded_feed_holds_a_bounded_number_of_requests() -> None:
    """Thousands of distinct requests, some typed again with another block pasted: the bounded feed holds
    the first few and the last ``2 × MAX_GOALS + 4`` goals (and a hash of each other), at n and 4n alike;
    merged, its facts are gather's, also where the latest request is the first text of a goal dropped (the
    goal then stands where it was typed again, among the last)."""
    held = []
    for n in (500, 2000):
        typed = [_text(i, 1) for i in range(n)] + [_text(i, 2) for i in range(0, n, 7)]
        typed.append(_text(7, 1))
        records = [_typed(i, t) for i, t in enumerate(typed)]
        feed = _fed(records)
        kept = feed.requests.kept
        assert feed.complete and len(kept) < 4 + 2 * (2 * store.MAX_GOALS + 4) and feed.requests.moved
        held.append(sum(sys.getsizeof(g) for g in kept))
        full = gather(records)
        assert len(full.facts.goals) == n  # (so the test can fail)
        assert full.facts.goals[-1] == "task 7\n [code block]"  # (the case above is met)
        for old in (Facts(), Facts(goals=("task 1", "task 9999"), latest_request="task 2")):
            assert merge(old, feed.facts()) == merge(old, full)
    assert held[1] < 1.2 * held[0]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 2)), max_size=30), st.data())
def test_the_goals_are_the_distinct_requests_but_the_latest(typed: list[tuple[int, int]],
                                                             data: st.DataObject) -> None:
    """The goals as the feed works them out (no bound) are the rule as written over the whole list: the
    goal text of every request but the latest, distinct, by first occurrence; the rules of every one."""
    from ctxcompact.facts.rules import rules_of

    texts = [_text(*t) for t in typed]
    latest = data.draw(st.one_of(st.none(), st.sampled_from(texts or ["x"]), st.just(_text(1, 2))))
    records = [_typed(i, t) for i, t in enumerate(texts)]
    facts = gather(records, latest).facts
    latest = latest or (texts[-1] if texts else None)
    assert facts.goals == tuple(dict.fromkeys(goal_text(t) for t in texts if t != latest))
    assert facts.rules == tuple(rules_of(texts))


def test_a_goal_whose_first_text_is_the_latest_stands_at_its_next_other_text() -> None:
    a, b = _text(1, 1), _text(1, 2)
    texts = [a, _text(2, 0), a, _text(3, 1), b, _text(4, 0), a]
    records = [_typed(i, t) for i, t in enumerate(texts)]
    assert gather(records).facts.goals == ("task 2", "task 3\n [code block]", "task 1\n [code block]",
                                           "task 4")
    assert gather(records[:4], a).facts.goals == ("task 2", "task 3\n [code block]")


