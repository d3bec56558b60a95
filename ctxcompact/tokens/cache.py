"""Counts of input records by byte offset and content digest: what the pipeline counted of each line, so a
call counts only lines it has not seen (kept beside the state by ``state/cache.py``,
docs/concepts/state.md#the-count-cache); and the settled prefix: how many bytes of the input the last call
read whole and found good, with their SHA-256, so the next call proves them unchanged with one hash instead
of checking each line again (docs/concepts/state.md#the-settled-prefix); and where in that prefix a streaming
read may start, with what it carries over the bytes before (``streaming``'s resume point)."""

from __future__ import annotations

import hashlib
import marshal
import operator
import os
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, BinaryIO, cast

from .. import columns as cols
from ..model import Message, token_text

MAGIC = b"CTXCOUNTS9\n"
#: the formats read: this one; the one before it, whose resume point kept the call ids' ends 8 bytes an item
#: and their counts and names 4 (``call_ids.CallIds.read``: no widths said, those); the one before that,
#: whose columns were at least 4 bytes an item (the same layout: a column's width is written with it). An
#: older build ignores this one (a narrow column of the call ids would not be read as what it is)
READS = (MAGIC, b"CTXCOUNTS8\n", b"CTXCOUNTS7\n")
#: the columns written after the marshalled head, as they are in memory (:meth:`CountCache.chunks`)
_COLUMNS = ("offsets", "digests", "heuristic", "exact", "text_keys", "text_heuristic", "text_exact")
#: the bytes :meth:`CountCache.prove_stream` reads at once
PROVE_CHUNK = 1 << 20
_NONE = -1  # no exact count kept
#: the lines a call's fresh columns hold before they are written to its spill file (:class:`_Spill`): 16
#: bytes a line, so at most 1 MiB held however many lines a call reads
SPILL_LINES = 1 << 16
#: the bytes of a spilled column read back at once (a multiple of every width)
SPILL_CHUNK = 1 << 20
#: marshal's version for the head: 3 and later flag an object whose reference count is over 1 and write it
#: again as a back-reference, so the same values gave other bytes as the run's garbage was collected before
#: the save or after; 2 writes no references (any version reads it)
_HEAD_MARSHAL = 2


class _Spill:
    """The lines a call counted, written out as it reads (an unlinked temporary file beside the cache, gone
    with the process however it ends): each flush appends the four columns as they are in memory, at the
    width each had then; the save reads them back column by column, each item at the widest width its column
    reached (the width the column held whole in memory would have), so the file written is the same bytes."""

    __slots__ = ("count", "file", "first", "last", "segments", "size")

    def __init__(self, directory: str) -> None:
        import tempfile  # (only a call reading 65,536 new lines spills: a hook's next call loads none of it)

        self.file = tempfile.TemporaryFile(dir=directory, prefix=".ctxcounts.", suffix=".tmp")  # noqa: SIM115
        self.segments: list[list[tuple[int, int, int]]] = [[] for _ in range(4)]  # (at, nbytes, width)
        self.size = self.count = 0
        self.first = self.last = -1  # the first and last offsets written

    def write(self, columns: tuple[array[int], ...]) -> None:
        for k, column in enumerate(columns):
            view = memoryview(column).cast("B")
            self.file.write(view)
            self.segments[k].append((self.size, len(view), column.itemsize))
            self.size += len(view)
        self.file.flush()
        offsets = columns[0]
        self.first = offsets[0] if self.first < 0 else self.first
        self.last, self.count = offsets[-1], self.count + len(offsets)

    def width(self, k: int) -> int:
        return max(width for _, _, width in self.segments[k])

    def read(self, k: int, width: int) -> Iterator[bytes | memoryview]:
        """Column ``k``'s bytes as written, each item ``width`` bytes wide, in chunks."""
        fd = self.file.fileno()
        for at, nbytes, was in self.segments[k]:
            done = 0
            while done < nbytes:
                want = min(SPILL_CHUNK, nbytes - done)
                chunk = os.pread(fd, want, at + done)
                if len(chunk) != want:  # (a regular file reads whole; short: not what was written)
                    raise OSError(f"the count cache's spill file ended at {at + done + len(chunk)}")
                done += want
                yield chunk if was == width else _at_width(cols.from_bytes(chunk, was), width)


def _at_width(column: array[int], width: int) -> memoryview:
    """``column``'s bytes, each item ``width`` bytes wide (at least its own)."""
    return memoryview(column if column.itemsize == width else array(cols.BY_WIDTH[width], column)).cast("B")


class _Lines:
    """(digest, heuristic, exact) of input lines by offset: four columns sorted by offset, 16 bytes a line (a
    dict of tuples took ~170: a 100 MB file of small records is 760,000 lines; the offsets 4 bytes, the
    counts 2 each, wider once one needs it: ``columns``; the digests 8). Lines come in order of their
    offsets (appended); a line put again is changed in place; the few that come before the last one are kept
    in a dict beside (never an insertion into the columns: linear whatever the order).

    Every :data:`SPILL_LINES` lines the columns are written to a spill file (:meth:`spill`) and begun again,
    where the cache has a folder for one: a call holds a bounded part of them, and the save copies the rest
    from the file (:meth:`CountCache.chunks`). A spilled line is not looked up again (a miss: counted again,
    and put in ``late``); :meth:`columns` reads them back in memory where anything needs them whole."""

    __slots__ = ("digests", "exact", "heuristic", "late", "offsets", "spilled")

    def __init__(self) -> None:
        self.offsets, self.digests = cols.narrow(), array("q")
        self.heuristic, self.exact = cols.narrow(), cols.narrow()
        self.late: dict[int, tuple[int, int, int]] = {}
        self.spilled: _Spill | None = None

    def __len__(self) -> int:
        return len(self.offsets) + len(self.late) + (self.spilled.count if self.spilled is not None else 0)

    def get(self, offset: int) -> tuple[int, int, int] | None:
        o = self.offsets
        if o and offset <= o[-1]:
            i = bisect_left(o, offset)
            if o[i] == offset:
                return self.digests[i], self.heuristic[i], self.exact[i]
        return self.late.get(offset) if self.late else None

    def put(self, offset: int, hit: tuple[int, int, int]) -> None:
        o = self.offsets
        if offset > (o[-1] if o else self.spilled.last if self.spilled is not None else -1):
            self.offsets = cols.append(o, offset)
            self.digests.append(hit[0])
            self.heuristic = cols.append(self.heuristic, hit[1])
            self.exact = cols.append(self.exact, hit[2])
            return
        i = bisect_left(o, offset)
        if i < len(o) and o[i] == offset:
            self.digests[i] = hit[0]
            self.heuristic = cols.put(self.heuristic, i, hit[1])
            self.exact = cols.put(self.exact, i, hit[2])
        else:
            self.late[offset] = hit

    def spill(self, directory: str) -> bool:
        """Write the columns held to the spill file (made in ``directory`` the first time) and hold none:
        False, holding them still, where the file cannot be made or written."""
        try:
            if self.spilled is None:
                self.spilled = _Spill(directory)
            self.spilled.write((self.offsets, self.digests, self.heuristic, self.exact))
        except OSError:
            if self.spilled is not None and self.spilled.count:
                raise  # (a part is written already: the columns are not whole without it)
            self.spilled = None
            return False
        self.offsets, self.digests = cols.narrow(), array("q")
        self.heuristic, self.exact = cols.narrow(), cols.narrow()
        return True

    def held(self) -> tuple[array[int], ...]:
        return self.offsets, self.digests, self.heuristic, self.exact

    def unspill(self) -> None:
        """Read the spilled lines back in memory, before those held, and put the ``late`` ones again (some
        were spilled lines put again): the columns as if never spilled."""
        spilled, late = self.spilled, self.late
        if spilled is None:
            return
        whole = []
        for k, column in enumerate(self.held()):
            width = max(spilled.width(k), column.itemsize)
            got = cols.from_bytes(b"", width)
            for chunk in spilled.read(k, width):
                got.frombytes(chunk)
            whole.append(cols.join(got, column))
        self.offsets, self.digests, self.heuristic, self.exact = whole
        self.spilled, self.late = None, {}
        spilled.file.close()
        for offset in sorted(late):
            self.put(offset, late[offset])

    def columns(self) -> tuple[array[int], array[int], array[int], array[int]]:
        """The four columns, every line in order of offset."""
        self.unspill()
        if not self.late:
            return self.offsets, self.digests, self.heuristic, self.exact
        merged = sorted([*zip(self.offsets, self.digests, self.heuristic, self.exact, strict=True),
                         *((o, *hit) for o, hit in self.late.items())])
        offsets, digests, heuristic, exact = zip(*merged, strict=True)
        return cols.of(offsets), array("q", digests), cols.of(heuristic), cols.of(exact)


@dataclass(slots=True)
class CountCache:
    """The counts of input records by (offset, digest), for one set of counting options (``key``).

    ``load`` side: the arrays read from the last call (sorted by offset, looked up by bisection). ``fresh``:
    what this call counted or found, which is what the next call gets (records no longer in the context are
    dropped with it). ``counted`` and ``found`` are the instrumentation the tests read: how many records this
    call counted, and how many it took from the last call's counts instead."""

    key: tuple[Any, ...] = ()
    offsets: array[int] = field(default_factory=cols.narrow)
    digests: array[int] = field(default_factory=lambda: array("q"))
    heuristic: array[int] = field(default_factory=cols.narrow)
    exact: array[int] = field(default_factory=cols.narrow)
    fresh: _Lines = field(default_factory=lambda: _Lines())
    #: this call only: records with no line of their own (made or changed by the cleaner or a strategy), by
    #: the identity of their message, which is kept alive here so the identity stays its own
    made: dict[int, tuple[Any, int, int]] = field(default_factory=dict)
    #: the same records by what they count (:func:`content_key`), kept for the next call: a placeholder, a
    #: summary or a synthetic result made again from the same text is not counted again. Sorted arrays as
    #: loaded, and what this call used
    text_keys: array[int] = field(default_factory=lambda: array("q"))
    text_heuristic: array[int] = field(default_factory=lambda: array("q"))
    text_exact: array[int] = field(default_factory=lambda: array("q"))
    fresh_text: dict[int, tuple[int, int]] = field(default_factory=dict)
    counted: int = 0
    found: int = 0
    keep: bool = True  # False: looked up only (estimate streaming a file: nothing grows per record)
    #: the settled prefix the cache was kept with: its length in bytes and its SHA-256 (:meth:`settle`)
    settled: int = 0
    settled_sha256: bytes = b""
    #: this call: the input's first ``proven`` bytes are the settled prefix, unchanged (:meth:`prove`)
    proven: int = 0
    _hash: Any = None  # SHA-256 of the proven bytes, carried on by :meth:`settle` (one pass per call)
    #: where, within the settled prefix, a streaming pass 1 may start instead of at byte 0: the offset of
    #: the last part the cleaner settled, the SHA-256 of the bytes before it, and what the read carries over
    #: them (``streaming``'s resume point: marshal-able, opaque here). Proven with the settled prefix, by
    #: the same one pass (:meth:`prove_stream`); emptied with it by :meth:`use`
    resume_at: int = 0
    resume_sha256: bytes = b""
    resume: Any = None
    #: the resume point's columns (bytes-like: pass 1's counts before it, 2, 4 or 8 bytes a record, then the
    #: call ids it carries, ``call_ids.CallIds.kept``), written after
    #: the cache's own as they are in memory, not marshalled into the head (a copy, then marshal's growing
    #: buffer: ~2x their size at the end of a run). Opaque here too; kept and emptied with ``resume``
    resume_columns: list[Any] = field(default_factory=list)
    #: this call read the input from this offset on: the counts kept for lines before it stay (:meth:`commit`)
    kept_below: int = 0
    #: the folder this call's counted lines are spilled to as it reads (``_Lines.spill``: beside the cache's
    #: file, on its file system); None: held in memory (the message-list API's ``Session``, a test's cache)
    spill_dir: str | None = None

    @property
    def format(self) -> str | None:
        """The format the cache's lines were read as (its key's first part), None for an empty key."""
        return str(self.key[0]) if self.key else None

    def prove(self, data: bytes) -> int:
        """How many bytes at the start of ``data`` are the settled prefix, unchanged: its length when their
        SHA-256 is the one kept, else 0 (the whole input is read and checked as if new)."""
        n = self.settled
        h = hashlib.sha256()
        if 0 < n <= len(data):
            h.update(memoryview(data)[:n])
            if h.digest() != self.settled_sha256:
                n, h = 0, hashlib.sha256()
        else:
            n = 0
        self.proven, self._hash = n, h
        return n

    def prove_stream(self, stream: BinaryIO, also: int = 0,
                     copy: Callable[[memoryview], object] | None = None) -> tuple[Any, Any]:
        """:meth:`prove` on a file read from its start (in chunks, never whole), which also proves the resume
        point: the SHA-256 state at ``resume_at`` when the bytes before it are those it was kept with and
        the settled prefix is proven too, else None; and the SHA-256 state at ``also`` (a state's covered
        prefix, hashed in the same pass), None when the file is shorter. The stream is left anywhere.
        ``copy`` is given the bytes before the resume point as they are hashed, whether proven or not (the
        very bytes the hash there is of: ``streaming`` stages the output with them)."""
        n, at = self.settled, self.resume_at if self.resume is not None else 0
        h, got = hashlib.sha256(), 0
        at_hash = also_hash = settled_hash = None
        if not 0 < at <= n:
            at = 0
        points = sorted({p for p in (at, n, also) if p > 0})
        # one buffer read into again and again: a new 1 MB bytes a chunk cost its allocation and page faults
        # (~1.5 of ~9.5 ms for 10 MB), and this pass is what a resumed call does per byte of its prefix
        buffer = memoryview(bytearray(min(PROVE_CHUNK, points[-1]) if points else 0))
        readinto = cast(Any, stream).readinto  # (a file or BytesIO: typing's BinaryIO does not name it)
        for point in points:
            while got < point:
                read = readinto(buffer[:min(PROVE_CHUNK, point - got)])
                if not read:
                    break
                h.update(buffer[:read])
                if copy is not None and got < at:  # (a chunk ends at each point: this one ends by ``at``)
                    copy(buffer[:read])
                got += read
            if got != point:
                break
            if point == at and h.digest() == self.resume_sha256:
                at_hash = h.copy()
            if point == also:
                also_hash = h.copy()
            if point == n and h.digest() == self.settled_sha256:
                settled_hash = h.copy()
        if settled_hash is None:
            n, settled_hash, at_hash = 0, hashlib.sha256(), None
        self.proven, self._hash = n, settled_hash
        return at_hash, also_hash

    def settles_after(self, covered: int) -> bool:
        """Whether a call that read the input past its first ``covered`` bytes (a summary's prefix, not
        read) may settle what it read: the covered prefix was itself settled by an earlier call."""
        return covered == 0 or covered <= self.proven

    def settle(self, data: bytes, upto: int) -> None:
        """The input's first ``upto`` bytes are settled: the next call may take them as read and good if it
        proves them unchanged. Hashes only the bytes past the proven prefix when it is within them."""
        h = self._hash.copy() if self._hash is not None and self.proven <= upto else None
        if h is None:
            h, start = hashlib.sha256(), 0
        else:
            start = self.proven
        h.update(memoryview(data)[start:upto])
        self.settled, self.settled_sha256 = upto, h.digest()

    def settle_read(self, data: bytes, *, covered: int, good: bool) -> None:
        """After a call that read ``data`` past its first ``covered`` bytes (a summary's prefix, not read):
        settle every whole line when each line read was good (no problem, none dropped) and the covered
        prefix was itself settled by an earlier call; else nothing."""
        self.settle(data, data.rfind(b"\n") + 1 if good and self.settles_after(covered) else 0)

    def get_proven(self, offset: int) -> tuple[int, tuple[int, int | None]] | None:
        """(digest, counts) kept for the line at ``offset`` of the proven prefix: its bytes are those the
        digest was made of, so it is not made again."""
        hit = self.fresh.get(offset)
        if hit is None:
            i = bisect_left(self.offsets, offset)
            if i == len(self.offsets) or self.offsets[i] != offset:
                return None
            hit = (self.digests[i], self.heuristic[i], self.exact[i])
            if self.keep:
                self._keep(offset, hit)
            self.found += 1
        return hit[0], (hit[1], None if hit[2] == _NONE else hit[2])

    def use(self, key: tuple[Any, ...]) -> CountCache:
        """Begin a call counting with options ``key``: what the last call saw is looked up; a cache counted
        with other options is emptied (in place: a caller holding it keeps the one object)."""
        if key != self.key:
            self.key = key
            self.offsets, self.digests = cols.narrow(), array("q")
            self.heuristic, self.exact = cols.narrow(), cols.narrow()
            self.fresh = _Lines()
            self.text_keys, self.text_heuristic, self.text_exact = (array("q") for _ in range(3))
            self.fresh_text = {}
            self.settled, self.settled_sha256, self.proven, self._hash = 0, b"", 0, None
            self.resume_at, self.resume_sha256, self.resume, self.resume_columns = 0, b"", None, []
        self.commit()
        self.kept_below = 0
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
                self._keep(offset, hit)
            self.found += 1
        elif hit[0] != digest:
            return None
        return hit[1], (None if hit[2] == _NONE else hit[2])

    def get_made(self, message: Any) -> tuple[int, int | None] | None:
        hit = self.made.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1], (None if hit[2] == _NONE else hit[2])
        key = content_key(message)
        counts = self.fresh_text.get(key)
        if counts is None:
            i = bisect_left(self.text_keys, key)
            if i == len(self.text_keys) or self.text_keys[i] != key:
                return None
            counts = (self.text_heuristic[i], self.text_exact[i])
            self.found += 1
        if self.keep:
            self.fresh_text[key] = counts
            self.made[id(message)] = (message, *counts)
        return counts[0], (None if counts[1] == _NONE else counts[1])

    def put_made(self, message: Any, heuristic: int, exact: int | None) -> None:
        self.counted += 1
        if self.keep:
            self.made[id(message)] = (message, heuristic, _NONE if exact is None else exact)
            self.fresh_text[content_key(message)] = (heuristic, _NONE if exact is None else exact)

    def put(self, offset: int, digest: int, heuristic: int, exact: int | None) -> None:
        self.counted += 1
        if self.keep:
            self._keep(offset, (digest, heuristic, _NONE if exact is None else exact))

    def _keep(self, offset: int, hit: tuple[int, int, int]) -> None:
        fresh = self.fresh
        fresh.put(offset, hit)
        if len(fresh.offsets) >= SPILL_LINES and self.spill_dir is not None \
                and not fresh.spill(self.spill_dir):
            self.spill_dir = None  # (no spill file there: held in memory, as before)

    def _commit_text(self) -> None:
        if self.fresh_text:
            keys = sorted(self.fresh_text)
            self.text_keys = array("q", keys)
            self.text_heuristic = array("q", (self.fresh_text[k][0] for k in keys))
            self.text_exact = array("q", (self.fresh_text[k][1] for k in keys))
            self.fresh_text = {}

    def _below(self, first: int) -> int:
        """How many loaded lines stay: those before ``kept_below`` were not read this call (a streaming read
        resumed there), unless it saw a line before it too (``first``: the first offset it saw, -1: none):
        then what it saw is all."""
        below = bisect_left(self.offsets, self.kept_below) if self.kept_below > 0 else 0
        return 0 if 0 <= first < self.kept_below else below

    def commit(self) -> None:
        """What this call saw becomes what the next call looks up (read back from its spill file, if any)."""
        self._commit_text()
        if not self.fresh and not self._below(-1):
            return
        offsets, digests, heuristic, exact = self.fresh.columns()
        below = self._below(offsets[0] if offsets else -1)
        if below:
            offsets, digests = cols.join(self.offsets[:below], offsets), self.digests[:below] + digests
            heuristic = cols.join(self.heuristic[:below], heuristic)
            exact = cols.join(self.exact[:below], exact)
        self.offsets, self.digests, self.heuristic, self.exact = offsets, digests, heuristic, exact
        self.fresh = _Lines()
        self.kept_below = 0  # (merged: a commit again, as the save's or the next call's, keeps them all)

    @property
    def spilled(self) -> bool:
        """Part of what this call saw is in its spill file, not in memory (until a :meth:`commit`)."""
        return self.fresh.spilled is not None

    def to_bytes(self) -> bytes:
        return b"".join(self.chunks())

    def chunks(self) -> Iterator[bytes | memoryview]:
        """:meth:`to_bytes` in the pieces it joins, written one after the other: the magic, the SHA-256 of the
        rest, the head's length (8 bytes), the head (marshalled: the key, the columns' lengths and the
        widths of their items, the settled prefix, the resume point), then the columns' bytes as they are in
        memory, the resume point's last. Nothing is copied of the columns (16 bytes a line: 12 MB at 100 MB
        of small records, as much again for each copy); they must not change while the pieces are written.

        Lines this call spilled (``_Lines.spill``) are read from the spill file a chunk at a time, twice (the
        SHA-256 comes first), each item as wide as its column's widest: the bytes a commit would hold. They
        stay there (a later :meth:`commit` reads them back); unless some line is ``late`` (the columns are
        then merged whole, in memory, as before)."""
        if self.fresh.spilled is None or self.fresh.late:
            self.commit()
        self._commit_text()
        spilled, held = self.fresh.spilled, self.fresh.held()
        loaded = (self.offsets, self.digests, self.heuristic, self.exact)
        below = self._below(spilled.first) if spilled is not None else 0

        def line_column(k: int, width: int) -> Iterator[bytes | memoryview]:
            if spilled is None:
                yield memoryview(loaded[k]).cast("B")
                return
            yield _at_width(loaded[k][:below], width)
            yield from spilled.read(k, width)
            yield _at_width(held[k], width)

        widths = [c.itemsize for c in loaded] if spilled is None else [
            max(spilled.width(k), held[k].itemsize, loaded[k].itemsize if below else 0) for k in range(4)]
        items = [len(c) for c in loaded] if spilled is None else [
            below + spilled.count + len(c) for c in held]
        text_columns = [getattr(self, name) for name in _COLUMNS[4:]]
        texts = [memoryview(c).cast("B") for c in text_columns]
        resume = [memoryview(c).cast("B") for c in self.resume_columns]
        head = marshal.dumps({"key": list(self.key),
                              "lengths": [n * w for n, w in zip(items, widths, strict=True)]
                              + [len(c) for c in texts],
                              "widths": widths + [c.itemsize for c in text_columns],
                              "settled": self.settled, "settled_sha256": self.settled_sha256,
                              "resume_at": self.resume_at, "resume_sha256": self.resume_sha256,
                              "resume": self.resume, "resume_lengths": [len(c) for c in resume]},
                             _HEAD_MARSHAL)

        def body() -> Iterator[bytes | memoryview]:
            yield len(head).to_bytes(8, "little")
            yield head
            for k, width in enumerate(widths):
                yield from line_column(k, width)
            yield from texts
            yield from resume

        digest = hashlib.sha256()
        for piece in body():
            digest.update(piece)
        yield MAGIC
        yield digest.digest()
        yield from body()


def from_bytes(raw: bytes, key: tuple[Any, ...] | None) -> CountCache | None:
    """The cache in ``raw`` if it was counted with options ``key`` (None: whatever they were), else None."""
    if raw[:len(MAGIC)] not in READS or len(raw) < len(MAGIC) + 32:
        return None
    at = len(MAGIC) + 32
    view = memoryview(raw)  # (read in place: the columns are 16 bytes a line)
    if hashlib.sha256(view[at:]).digest() != raw[len(MAGIC):at]:
        return None
    try:
        n = int.from_bytes(view[at:at + 8], "little")
        entry = marshal.loads(view[at + 8:at + 8 + n])
        at += 8 + n
        if key is not None and entry["key"] != list(key):
            return None
        cache = CountCache(key=key if key is not None else tuple(entry["key"]))
        lengths, widths = entry["lengths"], entry["widths"]
        if len(lengths) != len(_COLUMNS) or len(widths) != len(_COLUMNS):
            return None
        resume: list[bytes] = []  # (copied: a view would keep the whole file's bytes alive)
        for k, length in enumerate([*lengths, *entry["resume_lengths"]]):
            if not isinstance(length, int) or length < 0 or at + length > len(raw):
                return None
            if k < len(_COLUMNS):
                setattr(cache, _COLUMNS[k], cols.from_bytes(view[at:at + length], widths[k]))
            else:
                resume.append(bytes(view[at:at + length]))
            at += length
        if at != len(raw):
            return None
        settled, sha = entry["settled"], entry["settled_sha256"]
        if isinstance(settled, int) and settled > 0 and isinstance(sha, bytes) and len(sha) == 32:
            cache.settled, cache.settled_sha256 = settled, sha
        at, sha = entry["resume_at"], entry["resume_sha256"]
        if isinstance(at, int) and 0 < at <= cache.settled and isinstance(sha, bytes) and len(sha) == 32:
            cache.resume_at, cache.resume_sha256, cache.resume = at, sha, entry["resume"]
            cache.resume_columns = resume
    except (ValueError, EOFError, TypeError, KeyError):
        return None
    n = len(cache.offsets)
    if not (len(cache.digests) == len(cache.heuristic) == len(cache.exact) == n):
        return None
    if not _increasing(cache.offsets):
        return None  # the lookup bisects: a cache not sorted by offset is not ours
    m = len(cache.text_keys)
    if not len(cache.text_heuristic) == len(cache.text_exact) == m or not _increasing(cache.text_keys):
        return None
    return cache


def _increasing(values: array[int]) -> bool:
    """Each value above the one before (compared in C: a hook's call loads the cache whole)."""
    return all(map(operator.lt, values, islice(values, 1, None)))


def content_key(message: Message) -> int:
    """What a message's counts are a function of (:func:`ctxcompact.model.token_text`: its texts, joined as
    the exact counter joins them, their number and the fixed cost of its binary parts), as 64 bits of
    BLAKE2b: the key of a record with no line of its own."""
    texts, fixed = token_text(message)
    h = hashlib.blake2b(f"{len(texts)}:{fixed}:".encode(), digest_size=8)
    h.update("\n".join(texts).encode("utf-8", "surrogatepass"))
    return int.from_bytes(h.digest(), "little", signed=True)
