"""The call ids a reading carries from record to record: each id once, with how many calls of the parts the
cleaner settled had it (``clean_part.Carry``) and the tool name the first call with it gave (what a result
is named by: ``formats.base.link_result_name``). One entry a call, exact (ids compared byte for byte, never
by a hash alone), in a few flat buffers: the ids' bytes end to end, where each ends, its count and its
name's number, and an open-addressing index of entry numbers; ~40 bytes a call of 11 characters where the
two dicts over the ids' strings held ~170 (a 100 MB transcript of small records has 190,000 calls; the
strings also kept pymalloc's pools alive between each batch's short-lived objects). A streamed reading's
resume point keeps these buffers as columns of the count cache (:meth:`CallIds.kept`, :meth:`CallIds.read`),
the index too: an id's slot is found by the CRC-32 of its bytes, the same in every process (a str's own
hash is not), so the next call reads the index instead of making it anew, one probe an id in Python (0.6 s
at 190,000 calls, a cost of every hook call that grew with the session).
"""

from __future__ import annotations

import operator
import zlib
from array import array
from collections.abc import Sequence
from itertools import islice
from typing import Any

from . import columns as cols

_EMPTY = 0  # an index slot holding no entry (a slot holds its entry's number + 1)


def _key(call_id: str) -> bytes:
    return call_id.encode("utf-8", "surrogatepass")  # (any str: a lone surrogate stays itself)


class CallIds:
    """Call ids with a count (settled calls that had the id) and a name (the first call's tool) each."""

    __slots__ = ("counts", "data", "ends", "given", "index", "late", "name_numbers", "named", "names",
                 "recent")

    #: the ids looked up last kept by their str, at most this many (:attr:`recent`)
    RECENT = 256

    def __init__(self) -> None:
        self.data = bytearray()
        # columns of 2 bytes an item, wider once a value needs it (``columns``): the ends 4 bytes from 32 KiB
        # of ids on (8 past 2 GiB), the counts and the names' numbers 2 but for ids or names used 32,768 times
        self.ends = cols.narrow()  # entry e's id is data[ends[e - 1]:ends[e]] (from 0 for the first)
        self.counts = cols.narrow()
        self.named = cols.narrow()  # entry e's name is names[named[e] - 1]; 0: none given
        self.names: list[str] = []  # each tool name once
        self.name_numbers: dict[str, int] = {}
        self.index = array("i", bytes(4 * 8))  # a power of two long, at most half full
        self.given = 0  # names given so far
        #: the entries named after they were made (an id a renamed call took first, then a call of its own),
        #: with how many names were given before: a resume point does not carry a name given after it
        self.late: dict[int, int] = {}
        #: the entries of the ids looked up or made last, by the id: a call's id is asked for again soon
        #: (its name by its result, its count and the settled call by the cleaner), and a lookup in the index
        #: is ~10 k instructions in Python against a dict's few hundred. Bounded (forgotten all at once when
        #: full); entries never move, so a remembered one stays true
        self.recent: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.ends)

    def _slot(self, call_id: str, key: bytes | None = None) -> tuple[int, int]:
        """(slot, entry + 1) of ``call_id`` in the index; (the empty slot where it would go, 0) if it has
        none. By the CRC-32 of its bytes (the same in every process: the index is kept with a resume point),
        compared byte for byte against each entry found on the way."""
        index, data, ends = self.index, self.data, self.ends
        mask = len(index) - 1
        if key is None:
            key = _key(call_id)
        h = zlib.crc32(key)
        i, perturb = h & mask, h
        while True:
            e = index[i]
            if e == _EMPTY:
                return i, 0
            start = ends[e - 2] if e > 1 else 0
            if ends[e - 1] - start == len(key) and data.startswith(key, start):
                return i, e
            perturb >>= 5
            i = (5 * i + perturb + 1) & mask

    def _entry(self, call_id: str, make: bool) -> int:
        """The entry of ``call_id``, made if ``make`` (else -1 when there is none)."""
        recent = self.recent
        e = recent.get(call_id, -1)
        if e >= 0:
            return e
        if len(recent) >= self.RECENT:
            recent.clear()
        i, e = self._slot(call_id)
        if e:
            recent[call_id] = e - 1
            return e - 1
        if not make:
            return -1
        self.data += _key(call_id)
        self.ends = cols.append(self.ends, len(self.data))
        self.counts = cols.append(self.counts, 0)
        self.named = cols.append(self.named, 0)
        e = self.index[i] = len(self.ends)
        if 2 * e > len(self.index):
            self._index(2 * len(self.index))
        recent[call_id] = e - 1
        return e - 1

    def _index(self, size: int) -> None:
        """The index made anew, ``size`` slots (ValueError on an id twice)."""
        self.index = array("i", bytes(4 * size))
        data, start = memoryview(self.data), 0
        for e, end in enumerate(self.ends):
            key = bytes(data[start:end])
            slot, there = self._slot(key.decode("utf-8", "surrogatepass"), key)
            if there:
                raise ValueError("an id twice")
            self.index[slot] = e + 1
            start = end

    # -- the cleaner's carry -------------------------------------------------------------------------------
    def count(self, call_id: str) -> int:
        """How many calls of the settled parts had ``call_id``."""
        e = self._entry(call_id, False)
        return self.counts[e] if e >= 0 else 0

    def add_call(self, call_id: str) -> None:
        """One more settled call has ``call_id``."""
        e = self._entry(call_id, True)
        self.counts = cols.put(self.counts, e, self.counts[e] + 1)

    # -- the calls' names ----------------------------------------------------------------------------------
    def name(self, call_id: str) -> str | None:
        """The tool the first call with ``call_id`` named, None if no call with it was given."""
        e = self._entry(call_id, False)
        k = self.named[e] if e >= 0 else 0
        return self.names[k - 1] if k else None

    def give_name(self, call_id: str, name: str) -> None:
        """A call with ``call_id`` names tool ``name``: kept unless an earlier call with that id gave one."""
        made = len(self.ends)
        e = self._entry(call_id, True)
        if self.named[e]:
            return
        k = self.name_numbers.get(name)
        if k is None:
            self.names.append(name)
            k = self.name_numbers[name] = len(self.names)
        self.named = cols.put(self.named, e, k)
        if e < made:
            self.late[e] = self.given
        self.given += 1

    # -- a resume point ------------------------------------------------------------------------------------
    def copy(self) -> CallIds:
        other = CallIds()
        other.data, other.ends, other.counts = bytearray(self.data), self.ends[:], self.counts[:]
        other.named, other.names = self.named[:], list(self.names)
        other.name_numbers = dict(self.name_numbers)
        other.index, other.given, other.late = self.index[:], self.given, dict(self.late)
        return other

    def mark(self) -> tuple[int, int]:
        """Where a later reading may resume: the entries so far and the names given so far."""
        return len(self.ends), self.given

    def kept(self, mark: tuple[int, int]) -> tuple[dict[str, Any], list[memoryview]]:
        """What a reading resuming at ``mark`` (:meth:`mark`) starts with: the entries made before it, their
        counts now (the cleaner's carry settles nothing after the last mark) and the names given before it.
        The head (marshal-able: the names, the entries named after the mark, the widths of the ends, counts
        and names' numbers, :mod:`~ctxcompact.columns`) and five columns as views of
        the buffers, not copies (they must not change while they are written), the index's a copy without
        the entries made after the mark if there are any (a few: the calls of the parts not settled). An
        entry's probe only passes slots taken before it was placed (entries are placed in order, also when
        the index is made anew), so taking the later ones out leaves every earlier one where it is found."""
        n, given = mark
        size = self.ends[n - 1] if n else 0
        unnamed = sorted(e for e, at in self.late.items() if e < n and at >= given)
        widths = [c.itemsize for c in (self.ends, self.counts, self.named)]
        head = {"names": list(self.names), "unnamed": unnamed, "given": given, "widths": widths}
        index = self.index
        if n < len(self.ends):
            index, data = index[:], memoryview(self.data)
            for e in range(n, len(self.ends)):
                key = bytes(data[self.ends[e - 1] if e else 0:self.ends[e]])
                index[self._slot(key.decode("utf-8", "surrogatepass"), key)[0]] = _EMPTY
        kept = [memoryview(c).cast("B")[:c.itemsize * n] for c in (self.ends, self.counts, self.named)]
        return head, [memoryview(self.data)[:size], *kept, memoryview(index).cast("B")]

    @classmethod
    def read(cls, head: dict[str, Any], columns: Sequence[Any]) -> CallIds:
        """What :meth:`kept` gave, checked (raises ValueError, TypeError or KeyError on anything else)."""
        if len(columns) != 5:
            raise ValueError("not the call ids' columns")
        got = cls()
        got.data = bytearray(columns[0])
        # (the widths are not in what CTXCOUNTS8 and before kept: 8-byte ends, 4-byte counts and names)
        widths = head.get("widths", [8, 4, 4])
        if not isinstance(widths, list) or len(widths) != 3:
            raise ValueError("not the call ids' widths")
        got.ends, got.counts, got.named = (cols.from_bytes(c, w)
                                           for c, w in zip(columns[1:4], widths, strict=True))
        n = len(got.ends)
        names = [str(name) for name in head["names"]]
        if len(got.counts) != n or len(got.named) != n or len(set(names)) != len(names):
            raise ValueError("columns of unequal lengths")
        if n and (got.ends[-1] != len(got.data) or got.ends[0] < 0
                  or any(map(operator.gt, got.ends, islice(got.ends, 1, None)))):
            raise ValueError("ids out of order")
        if (n and min(got.counts) < 0) or (n and not 0 <= min(got.named) <= max(got.named) <= len(names)):
            raise ValueError("a count or a name out of range")
        for e in head["unnamed"]:
            if not 0 <= int(e) < n:
                raise ValueError("no such id")
            got.named[int(e)] = 0
        got.names, got.name_numbers = names, {name: k + 1 for k, name in enumerate(names)}
        got.given = int(head["given"])
        if n - got.named.count(0) != got.given:
            raise ValueError("names given and names kept differ")
        index = array("i")
        index.frombytes(columns[4])
        size = len(index)
        # each entry in exactly one of a power of two of slots, at most half full: every probe ends, at an
        # entry there is. Checked in C, not by probing each id again (that was the O(ids) Python cost of
        # every resumed call): where an entry is placed is trusted as the counts are, the cache's SHA-256
        # guarding a byte gone wrong; an id is still compared byte for byte wherever it is found
        taken = set(index)
        if size < 8 or size & (size - 1) or 2 * n > size or index.count(_EMPTY) != size - n \
                or len(taken) != n + 1 or min(taken) != _EMPTY or max(taken) != n:
            raise ValueError("not an index of the ids")
        got.index = index
        return got
