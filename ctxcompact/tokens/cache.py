"""Counts of input records by byte offset and content digest: what the pipeline counted of each line, so a
call counts only lines it has not seen (kept beside the state by ``state/cache.py``,
docs/concepts/state.md#the-count-cache)."""

from __future__ import annotations

import hashlib
import marshal
from array import array
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any

MAGIC = b"CTXCOUNTS2\n"
_NONE = -1  # no exact count kept


def line_digest(raw: bytes) -> int:
    """The content key of one line: 64 bits of BLAKE2b, as a signed integer (an ``array('q')`` item)."""
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "little", signed=True)


@dataclass(slots=True)
class CountCache:
    """The counts of input records by (offset, digest), for one set of counting options (``key``).

    ``load`` side: the arrays read from the last call (sorted by offset, looked up by bisection). ``fresh``:
    what this call counted or found, which is what the next call gets (records no longer in the context are
    dropped with it). ``counted`` and ``found`` are the instrumentation the tests read: how many records this
    call counted, and how many it took from the last call's counts instead."""

    key: tuple[Any, ...] = ()
    offsets: array[int] = field(default_factory=lambda: array("q"))
    digests: array[int] = field(default_factory=lambda: array("q"))
    heuristic: array[int] = field(default_factory=lambda: array("q"))
    exact: array[int] = field(default_factory=lambda: array("q"))
    fresh: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    #: this call only: records with no line of their own (made or changed by the cleaner or a strategy), by
    #: the identity of their message, which is kept alive here so the identity stays its own
    made: dict[int, tuple[Any, int, int]] = field(default_factory=dict)
    counted: int = 0
    found: int = 0
    keep: bool = True  # False: looked up only (estimate streaming a file: nothing grows per record)

    def use(self, key: tuple[Any, ...]) -> CountCache:
        """Begin a call counting with options ``key``: what the last call saw is looked up; a cache counted
        with other options is emptied (in place: a caller holding it keeps the one object)."""
        if key != self.key:
            self.key = key
            self.offsets, self.digests, self.heuristic, self.exact = (array("q") for _ in range(4))
            self.fresh = {}
        self.commit()
        self.made = {}
        self.counted = self.found = 0
        self.keep = True  # an estimate before may have looked it up only (the in-process memo)
        return self

    def get(self, offset: int, digest: int) -> tuple[int, int | None] | None:
        """(heuristic, exact or None) of the line at ``offset`` with ``digest``, if counted before."""
        hit = self.fresh.get(offset)
        if hit is None:
            i = bisect_left(self.offsets, offset)
            if i == len(self.offsets) or self.offsets[i] != offset or self.digests[i] != digest:
                return None
            hit = (self.digests[i], self.heuristic[i], self.exact[i])
            if self.keep:
                self.fresh[offset] = hit
            self.found += 1
        elif hit[0] != digest:
            return None
        return hit[1], (None if hit[2] == _NONE else hit[2])

    def get_made(self, message: Any) -> tuple[int, int | None] | None:
        hit = self.made.get(id(message))
        if hit is None or hit[0] is not message:
            return None
        return hit[1], (None if hit[2] == _NONE else hit[2])

    def put_made(self, message: Any, heuristic: int, exact: int | None) -> None:
        self.counted += 1
        if self.keep:
            self.made[id(message)] = (message, heuristic, _NONE if exact is None else exact)

    def put(self, offset: int, digest: int, heuristic: int, exact: int | None) -> None:
        self.counted += 1
        if self.keep:
            self.fresh[offset] = (digest, heuristic, _NONE if exact is None else exact)

    def commit(self) -> None:
        """What this call saw becomes what the next call looks up."""
        if not self.fresh:
            return
        offsets = sorted(self.fresh)
        self.offsets = array("q", offsets)
        self.digests = array("q", (self.fresh[o][0] for o in offsets))
        self.heuristic = array("q", (self.fresh[o][1] for o in offsets))
        self.exact = array("q", (self.fresh[o][2] for o in offsets))
        self.fresh = {}

    def to_bytes(self) -> bytes:
        self.commit()
        body = marshal.dumps({"key": list(self.key), "offsets": self.offsets.tobytes(),
                              "digests": self.digests.tobytes(), "heuristic": self.heuristic.tobytes(),
                              "exact": self.exact.tobytes()})
        return MAGIC + hashlib.sha256(body).digest() + body


def from_bytes(raw: bytes, key: tuple[Any, ...]) -> CountCache | None:
    if not raw.startswith(MAGIC) or len(raw) < len(MAGIC) + 32:
        return None
    body = raw[len(MAGIC) + 32:]
    if hashlib.sha256(body).digest() != raw[len(MAGIC):len(MAGIC) + 32]:
        return None
    try:
        entry = marshal.loads(body)
        if entry["key"] != list(key):
            return None
        cache = CountCache(key=key)
        for name in ("offsets", "digests", "heuristic", "exact"):
            getattr(cache, name).frombytes(entry[name])
    except (ValueError, EOFError, TypeError, KeyError):
        return None
    n = len(cache.offsets)
    if not (len(cache.digests) == len(cache.heuristic) == len(cache.exact) == n):
        return None
    if any(cache.offsets[i] >= cache.offsets[i + 1] for i in range(n - 1)):
        return None  # the lookup bisects: a cache not sorted by offset is not ours
    return cache
