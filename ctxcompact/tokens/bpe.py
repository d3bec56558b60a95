"""Exact token counts of small inputs without building a tiktoken ``Encoding``
(docs/measurements/performance.md#a-hooks-call).

Building ``tiktoken.Encoding`` costs most of a small run: parsing the ~200k ranks (0.12 s) and the Rust
encoder's own set-up (0.15-0.27 s), for a 30 KB log that takes a few milliseconds to encode. This module
counts the same tokens in Python: the same split pattern (run by the ``regex`` module, which tiktoken itself
depends on), then tiktoken's byte-pair merge (``_byte_pair_merge`` in tiktoken's ``src/lib.rs``: merge the
adjacent pair of lowest rank, the leftmost on a tie, until no pair has a rank). The count is the number of
parts left, identical to ``len(encoding.encode_ordinary(text))`` (tests/tokens/test_tokens.py checks it
against tiktoken on random text and on every sample).

The ranks come from a cache file beside no input (``$CTXCOMPACT_CACHE_DIR``, else
``$XDG_CACHE_HOME/ctxcompact``, ``~/.cache/ctxcompact``): an open-addressing hash table (CRC-32 of the token
bytes, linear probing) that is used where it lies, so loading it costs a read and one SHA-256 instead of
building a 200k-entry dict. It is written atomically from the verified rank file (tokens/exact.py) the first
time the ranks are parsed, carries the rank file's pinned SHA-256 and its own, and is ignored (then rebuilt)
when either does not match.

Text this path is not sure of is left to tiktoken (:func:`count` returns None): a character the Python
``unicodedata`` tables (the oldest Unicode version among ``regex``, tiktoken and Python) do not assign, where
the ``\\p{…}`` classes of the two regex engines could disagree, or a lone surrogate.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import unicodedata
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import CtxCompactError
from ..paths import read_regular

TABLE_LIMIT = 64 * 1024 * 1024
"""The most read of a cached rank table (o200k's is about 5 MB)."""

_MAGIC = b"CTXBPE1" + (b"L" if sys.byteorder == "little" else b"B")
_HEADER = len(_MAGIC) + 32 + 32 + 12  # magic, rank file SHA-256, payload SHA-256, n, mask, blob length
_INF = 1 << 62

Lookup = Callable[[bytes], "int | None"]


def cache_dir() -> Path:
    """Where the rank tables are cached."""
    explicit = os.environ.get("CTXCOMPACT_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ctxcompact"


def table_path(name: str, ranks_sha256: str) -> Path:
    return cache_dir() / f"{name}-{ranks_sha256[:16]}.ranks"


class RankTable:
    """A token's rank by its bytes, from the cached hash table (no dict is built)."""

    __slots__ = ("_blob", "_mask", "_offs", "_ranks", "_slots")

    def __init__(self, data: bytes, n: int, mask: int, blob_len: int) -> None:
        view = memoryview(data)
        at = _HEADER
        size = mask + 1
        self._slots = view[at:at + 4 * size].cast("I")
        at += 4 * size
        self._offs = view[at:at + 4 * (n + 1)].cast("I")
        at += 4 * (n + 1)
        self._ranks = view[at:at + 4 * n].cast("I")
        at += 4 * n
        self._blob = data[at:at + blob_len]
        self._mask = mask

    def get(self, key: bytes) -> int | None:
        mask, slots, offs, blob = self._mask, self._slots, self._offs, self._blob
        h = zlib.crc32(key) & mask
        while True:
            k = slots[h]
            if k == 0:
                return None
            k -= 1
            if blob[offs[k]:offs[k + 1]] == key:
                return int(self._ranks[k])
            h = (h + 1) & mask


def build_table(ranks: dict[bytes, int], ranks_sha256: str) -> bytes:
    """The cache file for ``ranks``, parsed from the rank file whose pinned hash is ``ranks_sha256``."""
    from array import array

    n = len(ranks)
    size = 1
    while size < 2 * n + 1:
        size <<= 1
    mask = size - 1
    slots = array("I", bytes(4 * size))
    offs = array("I", [0])
    rank_arr = array("I")
    blob = bytearray()
    for k, (key, rank) in enumerate(ranks.items()):
        blob += key
        offs.append(len(blob))
        rank_arr.append(rank)
        h = zlib.crc32(key) & mask
        while slots[h]:
            h = (h + 1) & mask
        slots[h] = k + 1
    payload = slots.tobytes() + offs.tobytes() + rank_arr.tobytes() + bytes(blob)
    head = (_MAGIC + bytes.fromhex(ranks_sha256) + hashlib.sha256(payload).digest()
            + n.to_bytes(4, "little") + mask.to_bytes(4, "little") + len(blob).to_bytes(4, "little"))
    return head + payload


def load_table(path: Path, ranks_sha256: str) -> RankTable | None:
    """The cached table, or None when it is missing, unreadable, or fails either hash."""
    try:  # a FIFO, a device or an oversized file in the cache folder is no table (docs/reference/safety.md)
        data = read_regular(path, f"rank table {path}", TABLE_LIMIT)
    except (OSError, CtxCompactError):
        return None
    if len(data) < _HEADER or data[:len(_MAGIC)] != _MAGIC:
        return None
    at = len(_MAGIC)
    if data[at:at + 32] != bytes.fromhex(ranks_sha256):
        return None
    if hashlib.sha256(memoryview(data)[_HEADER:]).digest() != data[at + 32:at + 64]:
        return None
    at += 64
    n, mask, blob_len = (int.from_bytes(data[at + 4 * i:at + 4 * i + 4], "little") for i in range(3))
    if len(data) != _HEADER + 4 * (mask + 1) + 4 * (n + 1) + 4 * n + blob_len or (mask + 1) & mask:
        return None
    return RankTable(data, n, mask, blob_len)


def save_table(path: Path, ranks: dict[bytes, int], ranks_sha256: str) -> None:
    """Write the cache atomically; a cache that cannot be written is simply not kept."""
    from ..atomic import atomic_write

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, build_table(ranks, ranks_sha256))
    except OSError:
        pass


def _bpe_len(piece: bytes, get: Lookup) -> int:
    """How many tokens tiktoken's byte-pair merge makes of ``piece`` (a piece with no rank of its own).

    tiktoken merges the adjacent pair of lowest rank, the leftmost on a tie, until no pair has a rank. A
    scan for that pair after every merge is O(L²) in the piece's length (a run of 100k spaces: a minute);
    here the pairs wait in a heap keyed by (rank, start), which pops exactly that pair, and the parts are a
    linked list: O(L log L). A heap entry whose part has since merged, or whose pair has changed, is stale
    and skipped (its recorded end no longer matches the pair's).
    """
    import heapq

    n = len(piece)
    if n < 2:
        return n
    # a heap entry is one int, (rank, start, end) packed: ints are not tracked by the garbage collector,
    # whose passes over ever more tuples made the time grow faster than the piece
    seen: dict[bytes, int | None] = {}  # a long piece repeats its pairs (a run of one character: all alike)

    def rank_of(part: bytes) -> int | None:
        r = seen.get(part, -1)
        if r == -1:
            r = seen[part] = get(part)
        return r

    w = (n + 1).bit_length()
    wmask = (1 << w) - 1
    nxt = list(range(1, n + 1))  # the start of the part after the one starting at i (n: none)
    prv = list(range(-1, n))  # the start of the part before (-1: none)
    alive = [True] * n
    heap: list[int] = []
    for i in range(n - 1):
        r = rank_of(piece[i:i + 2])
        if r is not None:
            heap.append((((r << w) | i) << w) | (i + 2))
    heapq.heapify(heap)
    parts = n
    push, pop = heapq.heappush, heapq.heappop
    while heap:
        key = pop(heap)
        end = key & wmask
        i = (key >> w) & wmask
        if not alive[i]:
            continue
        j = nxt[i]
        if j >= n or nxt[j] != end:  # the pair changed since this entry was made
            continue
        alive[j] = False  # the part at i absorbs the part at j
        nxt[i] = end
        if end < n:
            prv[end] = i
        parts -= 1
        p = prv[i]
        if p >= 0:
            r = rank_of(piece[p:end])
            if r is not None:
                push(heap, (((r << w) | p) << w) | end)
        if end < n:
            e2 = nxt[end]
            r = rank_of(piece[i:e2])
            if r is not None:
                push(heap, (((r << w) | i) << w) | e2)
    return parts


def _sure(text: str) -> bool:
    """Whether both regex engines agree on every character's class: ASCII, or assigned in Python's tables."""
    if text.isascii():
        return True
    category = unicodedata.category
    return all(category(c) != "Cn" for c in set(text) if c > "\x7f")


class Counter:
    """Counts of one encoding: the split pattern, the rank lookup, and a memo of the pieces seen."""

    def __init__(self, pattern: str, get: Lookup) -> None:
        import regex

        self._findall: Callable[[str], list[str]] = regex.compile(pattern).findall
        self._get = get
        self._memo: dict[str, int] = {}

    def count(self, text: str) -> int | None:
        """``len(encode_ordinary(text))``, or None when this path is not sure of ``text``."""
        if not _sure(text):
            return None
        memo, get = self._memo, self._get
        n = 0
        try:
            for piece in self._findall(text):
                c = memo.get(piece)
                if c is None:
                    b = piece.encode("utf-8")
                    c = 1 if get(b) is not None else _bpe_len(b, get)
                    if len(memo) < 200_000 and len(piece) <= 1024:  # a long piece is not kept
                        memo[piece] = c
                n += c
        except UnicodeEncodeError:  # a lone surrogate: tiktoken replaces it, let it
            return None
        return n

    def count_all(self, texts: Sequence[str]) -> list[int] | None:
        out = []
        for t in texts:
            c = self.count(t)
            if c is None:
                return None
            out.append(c)
        return out


_counters: dict[str, Counter] = {}
_lock = threading.Lock()


def counter(name: str, pattern: str, ranks_sha256: str, parse: Callable[[], dict[bytes, int]]) -> Counter:
    """The counter of encoding ``name``: from the cached table, else from ``parse()`` (the verified ranks),
    writing the cache for the next process."""
    c = _counters.get(name)
    if c is not None:
        return c
    with _lock:
        c = _counters.get(name)
        if c is None:
            path = table_path(name, ranks_sha256)
            table = load_table(path, ranks_sha256)
            get: Any
            if table is not None:
                get = table.get
            else:
                ranks = parse()
                save_table(path, ranks, ranks_sha256)
                get = ranks.get
            c = _counters[name] = Counter(pattern, get)
    return c
