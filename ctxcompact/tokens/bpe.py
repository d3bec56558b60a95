"""Exact token counts of small inputs without building a tiktoken ``Encoding``
(docs/measurements/performance.md#a-hooks-call).

Building ``tiktoken.Encoding`` costs most of a small run: parsing the ~200k ranks (0.12 s) and the Rust
encoder's own set-up (0.15-0.27 s), for a 30 KB log that takes a few milliseconds to encode. This module
counts the same tokens in Python: the same split pattern, then tiktoken's byte-pair merge
(``_byte_pair_merge`` in tiktoken's ``src/lib.rs``: merge the adjacent pair of lowest rank, the leftmost on a
tie, until no pair has a rank). The count is the number of
parts left, identical to ``len(encoding.encode_ordinary(text))`` (tests/tokens/test_tokens.py checks it
against tiktoken on random text and on every sample).

The ranks come from a cache file beside no input (``$CTXCOMPACT_CACHE_DIR``, else
``$XDG_CACHE_HOME/ctxcompact``, ``~/.cache/ctxcompact``): an open-addressing hash table (CRC-32 of the token
bytes, linear probing) that is used where it lies, so loading it costs a read and one SHA-256 instead of
building a 200k-entry dict. It is written atomically from the verified rank file (tokens/exact.py) the first
time the ranks are parsed, carries the rank file's pinned SHA-256 and its own, and is ignored (then rebuilt)
when either does not match. Its own is checked once per table, not per process (:func:`load_table`'s stamp).

The split pattern runs on the standard library's ``re`` (about 4x faster here than the ``regex`` module,
whose import alone costs ~18 ms), which has no ``\\p{…}`` classes. So the pattern is matched against a
classified copy of the text (:func:`classify`): each character beyond ASCII replaced by a stand-in
of its class (``unicodedata``: Lu, Ll, Lt, Lm, Lo, M, N, White_Space, other), and :func:`translate` writes
each class as its ASCII members and its stand-in. The copy has the text's length, so the pieces are the
text's slices at the same places. Python 3.10's ``re`` has no possessive quantifiers (cl100k's pattern uses
them): there, that pattern runs on ``regex`` as it is.

Text this path is not sure of is left to tiktoken (:func:`count` returns None): a character the Python
``unicodedata`` tables (the oldest Unicode version among ``regex``, tiktoken and Python) do not assign or
class differently from later versions, where the ``\\p{…}`` classes of the engines could disagree, or a lone
surrogate.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import threading
import time
import unicodedata
import zlib
from collections.abc import Callable, Sequence
from itertools import accumulate, compress, repeat
from operator import not_
from pathlib import Path
from typing import Any

from ..errors import CtxCompactError
from ..paths import cache_dir, read_regular

TABLE_LIMIT = 64 * 1024 * 1024
"""The most read of a cached rank table (o200k's is about 5 MB)."""

_MAGIC = b"CTXBPE1" + (b"L" if sys.byteorder == "little" else b"B")
_HEADER = len(_MAGIC) + 32 + 32 + 12  # magic, rank file SHA-256, payload SHA-256, n, mask, blob length
_INF = 1 << 62

Lookup = Callable[[bytes], "int | None"]


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


SETTLED_NS = 2_000_000_000
"""How long a table must have been left unchanged (its ctime) before its check is vouched for by a stamp:
longer than any file system's timestamp granularity, so a change made after the stamp always shows."""


def stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".ok")


def _stamp(st: os.stat_result, digest: bytes) -> bytes:
    """What a table's stamp holds: the file's identity, size and times when its payload's SHA-256 was
    checked, and that digest."""
    return _MAGIC + b"%d %d %d %d %d " % (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns,
                                          st.st_ctime_ns) + digest


def _vouched(path: Path, st: os.stat_result, digest: bytes) -> bool:
    """True when the table's stamp says this very file, unchanged since (same inode, size, mtime and ctime:
    no write, truncation, ``utime`` or replacement leaves its ctime as it was), was checked whole."""
    try:
        return read_regular(stamp_path(path), "rank table stamp", 256) == _stamp(st, digest)
    except (OSError, CtxCompactError):
        return False


def _vouch(path: Path, st: os.stat_result, digest: bytes) -> None:
    """Stamp a table just checked whole, if it has been unchanged for :data:`SETTLED_NS`: a table changed
    within the timestamp granularity of the stamp's own making could keep the times the stamp records."""
    if time.time_ns() - max(st.st_ctime_ns, st.st_mtime_ns) < SETTLED_NS:
        return
    from ..atomic import atomic_write

    with contextlib.suppress(OSError):
        atomic_write(stamp_path(path), _stamp(st, digest))


def load_table(path: Path, ranks_sha256: str) -> RankTable | None:
    """The cached table, or None when it is missing, unreadable, or fails either hash.

    The payload's SHA-256 (~3.4 ms of 5 MB) is taken once per table, not per process: a stamp beside it
    (:func:`stamp_path`) records the file's status when its hash was checked, and a table whose status,
    taken after this read, is the stamp's is not hashed again (any later change shows in its ctime)."""
    st: list[os.stat_result] = []
    try:  # a FIFO, a device or an oversized file in the cache folder is no table (docs/reference/safety.md)
        data = read_regular(path, f"rank table {path}", TABLE_LIMIT, stat_after=st)
    except (OSError, CtxCompactError):
        return None
    if len(data) < _HEADER or data[:len(_MAGIC)] != _MAGIC:
        return None
    at = len(_MAGIC)
    if data[at:at + 32] != bytes.fromhex(ranks_sha256):
        return None
    digest = data[at + 32:at + 64]
    at += 64
    n, mask, blob_len = (int.from_bytes(data[at + 4 * i:at + 4 * i + 4], "little") for i in range(3))
    if len(data) != _HEADER + 4 * (mask + 1) + 4 * (n + 1) + 4 * n + blob_len or (mask + 1) & mask:
        return None
    if not _vouched(path, st[0], digest):
        if hashlib.sha256(memoryview(data)[_HEADER:]).digest() != digest:
            return None
        _vouch(path, st[0], digest)
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


WHITE_SPACE = "\t-\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
"""Unicode's White_Space as a character-class body: tiktoken's ``\\s`` (Python's ``isspace`` also takes
\\x1c-\\x1f)."""

MERGE_COST = 30
"""A byte merged by :func:`_bpe_len` (a piece not seen before and not a token) costs about as much as this
many characters split and looked up (docs/measurements/performance.md#a-hooks-call)."""

# Each character beyond ASCII stands, in the classified text, for a stand-in of its class: a C1 control
# (\x80-\x88), since every character beyond ASCII of the text is replaced, a stand-in cannot be mistaken for
# itself; below U+0100 the pattern's classes compile as bitmaps (~1 ms less per process than private-use ones)
_CLASS_OF = {"Lu": "\x80", "Ll": "\x81", "Lt": "\x82", "Lm": "\x83", "Lo": "\x84", "Mn": "\x85",
             "Mc": "\x85", "Me": "\x85", "Nd": "\x86", "Nl": "\x86", "No": "\x86"}
_SPACE, _OTHER = "\x87", "\x88"
_KEEP = "\u017f"  # ſ (Ll) stays itself: it matches the contractions' s case-insensitively, in both engines
_MEMBERS = {"L": "A-Za-z\x80-\x84\u017f", "Lu": "A-Z\x80", "Ll": "a-z\x81\u017f", "Lt": "\x82",
            "Lm": "\x83", "Lo": "\x84", "M": "\x85", "N": "0-9\x86"}
_WHITE = "\t-\r " + _SPACE
_NON_ASCII_WHITE = frozenset(c for c in "\x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000"
                             + "".join(map(chr, range(0x2000, 0x200B))))
# Characters whose category changed after Unicode 14 (Python 3.11's tables; found against regex 2026.11's):
# the engines may class them apart, so a text holding one is left to tiktoken, like an unassigned one
_CHANGED = frozenset("\u0295\U0001171e")


def translate(pattern: str) -> str:
    """``pattern`` (tiktoken's, for the ``regex`` module) for ``re`` on a classified text (:func:`classify`):
    each ``\\p{X}`` as the ASCII members of X and its stand-in, ``\\s`` and ``\\S`` as White_Space."""
    out: list[str] = []
    in_class = False
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            kind = pattern[i + 1]
            if kind == "p":
                close = pattern.index("}", i)
                body = _MEMBERS[pattern[i + 3:close]]
                i = close + 1
            elif kind in "sS":
                if in_class and kind == "S":
                    raise ValueError(f"cannot translate \\S inside a class: {pattern!r}")
                body = _WHITE
                i += 2
            else:
                out.append(pattern[i:i + 2])
                i += 2
                continue
            out.append(body if in_class else ("[^" if kind == "S" else "[") + body + "]")
            continue
        if c == "[" and not in_class:
            in_class = True
        elif c == "]" and in_class:
            in_class = False
        out.append(c)
        i += 1
    return "".join(out)


# str.translate's table: a character beyond ASCII -> its stand-in. ASCII maps to itself in it too: a code
# the table lacks costs str.translate a raised and caught LookupError, so an ASCII-heavy text with a few
# characters beyond ASCII translated ~3x slower without them.
_stand_in: dict[int, str | int] = {i: i for i in range(128)}


def classify(text: str) -> str | None:
    """``text`` with each character beyond ASCII replaced by its class's stand-in (same length, so a piece
    of it is the piece of ``text`` at the same place), or None when this path is not sure of ``text``: a
    character Python's tables do not assign (where the ``\\p{…}`` classes of the engines, of several Unicode
    versions, could disagree) or one whose class changed since."""
    found = _classify(text)
    return found[0] if found is not None else None


def _classify(text: str) -> tuple[str, bool] | None:
    """:func:`classify`'s copy, and whether ``text`` is mostly ASCII (then only its runs beyond ASCII were
    looked at: see :data:`SPARSE_SHIFT`)."""
    table = _stand_in
    category = unicodedata.category
    sparse = len(text.encode("utf-8", "surrogatepass")) - len(text) <= len(text) >> SPARSE_SHIFT
    parts = _runs_beyond_ascii(text) if sparse else [text]  # [ASCII, a run beyond it, ASCII, ...]
    beyond = parts[1::2] if sparse else parts
    for c in set("".join(beyond)):
        if ord(c) not in table:
            cat = category(c)
            if cat == "Cn" or c in _CHANGED:
                return None
            table[ord(c)] = (_SPACE if c in _NON_ASCII_WHITE else c if c in _KEEP
                             else _CLASS_OF.get(cat, _OTHER))
    if not sparse:
        return text.translate(table), False
    parts[1::2] = map(str.translate, beyond, repeat(table, len(beyond)))
    return "".join(parts), True


SPARSE_SHIFT = 5
"""A text whose UTF-8 bytes beyond its length are at most 1/2**SPARSE_SHIFT of it is mostly ASCII, which
stands for itself: only its runs beyond ASCII are translated (``str.translate`` of a text beyond ASCII looks
each of its characters up in the table, ~400 instructions a character), and only its pieces beyond ASCII
are sliced back from it (:meth:`Counter._findall`). A text with more pays both for every character, in C."""


def _runs_beyond_ascii(text: str) -> list[str]:
    """``text`` split around its runs of characters beyond ASCII (``re.split`` with the run as a group)."""
    global _split_runs
    if _split_runs is None:  # (compiled on first use: most texts are ASCII, and never classified)
        import re

        _split_runs = re.compile(r"([^\x00-\x7f]+)").split
    return _split_runs(text)


_split_runs: Callable[[str], list[str]] | None = None


class Counter:
    """Counts of one encoding: the split pattern, the rank lookup, and a memo of the pieces seen."""

    def __init__(self, pattern: str, get: Lookup) -> None:
        import re

        try:
            self._split: Callable[[str], list[str]] = re.compile(translate(pattern)).findall
            self._classify = True
        except re.error:  # Python 3.10's re has no possessive quantifiers: the regex module, as it is
            import regex

            self._split = regex.compile(pattern).findall
            self._classify = False
        self._memo = _Memo(get)
        self.chars = 0  # the characters counted

    @property
    def work(self) -> int:
        """What this counter has done, in characters split and looked up (a byte merged counts MERGE_COST)."""
        return self.chars + MERGE_COST * self._memo.merged

    def _findall(self, text: str) -> list[str] | None:
        """The pre-tokens of ``text`` (tiktoken's split), or None when this path is not sure of ``text``."""
        if text.isascii() or not self._classify:
            if not text.isascii() and classify(text) is None:
                return None
            return self._split(text)
        found = _classify(text)
        if found is None:
            return None
        classified, sparse = found
        pieces = self._split(classified)
        ends = list(accumulate(map(len, pieces)))
        if (ends[-1] if ends else 0) != len(text):  # the pattern covers every character; never trust less
            return None
        if not sparse:
            return list(map(text.__getitem__, map(slice, [0, *ends[:-1]], ends)))
        # a piece of ASCII is the text's own (ASCII stands for itself in the classified copy): only the
        # others, with a stand-in, are sliced back from the text at the same place
        for i in compress(range(len(pieces)), map(not_, map(str.isascii, pieces))):
            pieces[i] = text[ends[i] - len(pieces[i]):ends[i]]
        return pieces

    def count(self, text: str) -> int | None:
        """``len(encode_ordinary(text))``, or None when this path is not sure of ``text``."""
        pieces = self._findall(text)
        if pieces is None:
            return None
        self.chars += len(text)
        try:
            return sum(map(self._memo.__getitem__, pieces))
        except UnicodeEncodeError:  # a lone surrogate: tiktoken replaces it, let it
            return None

    def count_all(self, texts: Sequence[str], budget: int | None = None) -> list[int | None]:
        """The count of each text; None for a text this path is not sure of, and for the texts left when
        :attr:`work` with their characters (the least they can cost) would pass ``budget``. A count
        finished past the budget (a text that merged much) is kept: throwing it away would pay for the text
        twice, and loading tiktoken for a few short texts after it costs more than counting them here."""
        out: list[int | None] = []
        left = sum(map(len, texts))
        for t in texts:
            if budget is not None and self.work + left > budget:
                out.extend([None] * (len(texts) - len(out)))
                break
            out.append(self.count(t))
            left -= len(t)
        return out


class _Memo(dict[str, int]):
    """A piece's token count by the piece; a miss (``__missing__``) merges it. Looked up from C
    (``map(memo.__getitem__, pieces)``), a piece seen before costs no Python frame."""

    def __init__(self, get: Lookup) -> None:
        super().__init__()
        self._get = get
        self.merged = 0  # bytes given to _bpe_len

    def __missing__(self, piece: str) -> int:
        get = self._get
        b = piece.encode("utf-8")
        if get(b) is not None:
            c = 1
        else:
            c = _bpe_len(b, get)
            self.merged += len(b)
        if len(self) < 200_000 and len(piece) <= 1024:  # a long piece is not kept
            self[piece] = c
        return c


_counters: dict[str, Counter] = {}


def work_done(name: str) -> int:
    """:attr:`Counter.work` of encoding ``name``'s counter in this process (0 before it is made)."""
    c = _counters.get(name)
    return c.work if c is not None else 0
_lock = threading.Lock()


def forget(name: str) -> None:
    """Let encoding ``name``'s counter go (its table and memo): tiktoken's Encoding counts from now on, and
    :func:`counter` makes it again if a text needs it."""
    with _lock:
        _counters.pop(name, None)


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
