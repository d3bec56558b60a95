"""Ranges of input records, for the sliding window (strategies/sliding_window.py): which events a later one
hides, and the points a set of spans covers. Each answer is O(n log n): the pairwise versions made a long
session's first run quadratic (issue 26 item 10)."""

from __future__ import annotations

from collections.abc import Sequence

from .sliding_window_state import Event


def visible_events(events: Sequence[Event]) -> list[int]:
    """Indexes of the events no later event contains, ordered by where they start.

    From the last event back, each asks whether an event after it starts at or before its start and ends at
    or after its end: a prefix maximum of ends over the starts seen (a Fenwick tree), O(E log E) where
    comparing every pair took O(E²) per run (a long session's state holds thousands of events)."""
    starts = sorted({e.start for e in events})
    rank = {s: k + 1 for k, s in enumerate(starts)}
    tree = [-1] * (len(starts) + 1)  # prefix maximum of the ends of the events seen, by start rank
    keep: list[int] = []
    for i in range(len(events) - 1, -1, -1):
        e = events[i]
        k = rank[e.start]
        best, q = -1, k
        while q > 0:
            best = max(best, tree[q])
            q -= q & -q
        if best < e.end:
            keep.append(i)
        while k < len(tree):
            tree[k] = max(tree[k], e.end)
            k += k & -k
    return sorted(keep, key=lambda i: (events[i].start, events[i].end, i))


def union_points(spans: Sequence[tuple[int, int]]) -> set[int]:
    """Every point of the half-open ``[lo, hi)`` spans, each added once (adding every span's range is
    quadratic when many spans overlap: calls answered far from where they were made)."""
    points: set[int] = set()
    reach = -1
    for lo, hi in sorted(spans):
        lo = max(lo, reach)
        if lo < hi:
            points.update(range(lo, hi))
            reach = hi
    return points
