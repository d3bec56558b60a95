"""What a person typed, as the fact feed keeps it (:class:`Requests`): the user's rules, worked out per
request as it comes, and the goals, the distinct requests by first occurrence
(docs/concepts/summary.md#what-a-summary-keeps).

A long session types thousands of requests; ``store.merge`` keeps of the goals the first and the last
``MAX_GOALS - 1``. The bounded feed (``FactFeed(bounded=True)``) keeps so many of each end that the merge with
any earlier store of at most ``MAX_GOALS`` goals (what merge leaves) is the same, and the goals between as
64-bit hashes (``calls.Hashes``), so a request typed again is known not to be new."""

from __future__ import annotations

import re

from . import store
from .calls import Hashes
from .rules import rules_in_text

GOAL_CHARS = 2000  # a goal's length kept in the store (the summary may show less)
_FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)


def goal_text(text: str) -> str:
    """A request as a goal, its lines as the user wrote them: pasted code blocks and logs replaced by a
    marker, length capped."""
    text = (_FENCE.sub(" [code block] ", text) if "```" in text else text).strip()
    return text if len(text) <= GOAL_CHARS else text[:GOAL_CHARS - 1].rstrip() + "…"


class Requests:
    """The typed texts fed in order (``add``); ``goals(latest)`` and ``rules`` as :func:`.gather.gather`
    reads them from the whole list: the goals are ``goal_text`` of every text but ``latest``, distinct, by
    first occurrence; the rules, :func:`.rules.rules_of` of every text.

    A goal is kept as ``[n of its first text, hash of that text, n of its first other text or -1]``: the
    latest request is no goal, but another text with the same goal (a different code block pasted around
    the same words) is, at its own place. ``bounded``: past ``FIRST`` + 2 × ``last()`` goals, those between
    the first ``FIRST`` and the last ``last_kept()`` go (their hashes kept); a goal gone whose first text
    turns out to be the latest request may come back at its second text's place (``moved``: kept for the
    goals gone that were typed again with another text, while that place may be among the last)."""

    FIRST = 4  # the first goal is the task; merge skips one an earlier store has and the latest request

    def __init__(self, bounded: bool = False) -> None:
        self.bounded = bounded
        self.n = 0  # texts added
        self.last: str | None = None  # the last text added
        self.rules: dict[str, None] = {}  # every rule, in order (never dropped: store.merge keeps them all)
        self.kept: dict[str, list[int]] = {}  # goal -> [n, hash of its text, n of another text or -1]
        self.gone = Hashes()  # the goals dropped
        self.gone_texts = Hashes()  # the first text of each goal dropped
        self.moved: dict[int, int] = {}  # hash of a goal dropped -> n of its first other text
        self.settled = Hashes()  # the goals dropped whose first other text was seen

    @staticmethod
    def last_kept() -> int:
        """How many of the latest goals merge may need: its last ``MAX_GOALS - 1``, past the at most
        ``MAX_GOALS + 1`` an earlier store holds (its goals and latest request) and the latest request."""
        return 2 * store.MAX_GOALS + 4  # (read when asked: tests make the cap small)

    def add(self, text: str) -> None:
        n, self.n, self.last = self.n, self.n + 1, text
        for rule in rules_in_text(text):
            self.rules.setdefault(rule)
        goal = goal_text(text)
        found = self.kept.get(goal)
        if found is not None:
            if found[2] < 0 and hash(text) != found[1]:
                found[2] = n
            return
        if self.bounded and goal in self.gone:
            h = hash(goal)
            if not self.settled.has_hash(h) and not self.gone_texts.has_hash(hash(text)):
                self.settled.add_hash(h)  # (its first other text: a later one is not)
                self.moved[h] = n
            return
        self.kept[goal] = [n, hash(text), -1]
        if self.bounded and len(self.kept) >= self.FIRST + 2 * self.last_kept():
            self._trim()

    def _trim(self) -> None:
        goals = list(self.kept.items())
        tail = self.last_kept()
        for goal, (_n, first, other) in goals[self.FIRST:-tail]:
            self.gone.add(goal)
            self.gone_texts.add_hash(first)
            if other >= 0:
                self.settled.add(goal)
                self.moved[hash(goal)] = other
        self.kept = dict(goals[:self.FIRST] + goals[-tail:])
        # a goal gone that comes back before the first kept at the end has all of those after it: never
        # among the last merge keeps
        since = goals[-tail][1][0]
        self.moved = {h: n for h, n in self.moved.items() if n >= since}

    def goals(self, latest: str | None) -> tuple[str, ...]:
        """The goals, but ``latest``: in order of their first text other than ``latest``."""
        if latest is None:
            return tuple(self.kept)
        mine, h = goal_text(latest), hash(latest)
        placed: list[tuple[int, str]] = []
        for goal, (n, first, other) in self.kept.items():
            if goal == mine and first == h:
                n = other  # its first text is the latest request: it stands at its next one, if any
            if n >= 0:
                placed.append((n, goal))
        if mine not in self.kept and self.bounded and self.gone_texts.has_hash(h) and mine in self.gone:
            n = self.moved.get(hash(mine), -1)
            if n >= 0:
                placed.append((n, mine))
        placed.sort()
        return tuple(goal for _, goal in placed)
