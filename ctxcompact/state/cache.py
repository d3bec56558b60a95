"""The count cache beside the state (docs/concepts/state.md#the-count-cache): what the pipeline counted of
each input record, keyed by the record's byte offset and a digest of its bytes, so the next call counts only
records it has not seen (every format, whatever the cleaner repairs: a repaired or made record is counted
fresh, it has no line of its own).

``<state>.counts`` holds, for the counting options (format, encoding), four arrays sorted by offset: the
offsets, the 64-bit BLAKE2b digests of the lines, the heuristic counts and the exact counts. It is written
atomically and only under the state's lock, after the state. A cache that does not match (other options,
another version, unreadable, corrupt) is ignored and rebuilt: it is never an error; a record whose digest
differs (a rewritten line) is simply counted again. The state alone decides whether the transcript is the
one it belongs to (exit 3).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..atomic import atomic_write
from ..errors import CtxCompactError
from ..paths import STATE_FILE_LIMIT, read_regular
from ..tokens.cache import CountCache, from_bytes


def cache_path(state_path: str | os.PathLike[str]) -> Path:
    return Path(f"{os.fspath(state_path)}.counts")


# In one process (a library caller's hook), the cache each file was last written with: the next call skips
# reading and checking it while the file is still the one this process wrote.
_memo: dict[str, tuple[tuple[int, int, int], CountCache]] = {}


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def cache_limit(input_bytes: int) -> int:
    """The most bytes a count cache of an ``input_bytes`` transcript is read up to: it grows with the
    transcript's records (~20 B a record of 35 B lines, ~0.3 B a byte of ~130 B records), so a fixed limit
    would drop a large transcript's cache on every call; past this bound it is not ours, and ignored."""
    return STATE_FILE_LIMIT + 4 * max(0, input_bytes)


def load_counts(path: Path, key: tuple[Any, ...] | None, input_bytes: int) -> CountCache:
    """The cache kept at ``path`` for options ``key`` of a transcript of ``input_bytes``, or an empty one
    (missing, foreign, corrupt, or over :func:`cache_limit`).

    ``key`` None: the cache whatever options it was counted with, not yet begun (the caller proves its
    settled prefix before reading the input, then calls ``use`` with the options it counts with)."""
    memo = _memo.get(str(path))
    if memo is not None and memo[0] == _stamp(path) and (key is None or memo[1].key == key):
        return memo[1] if key is None else memo[1].use(key)
    try:  # a link, FIFO or device is never read (docs/reference/safety.md); a cache over the limit is ignored
        raw = read_regular(path, f"count cache {path}", cache_limit(input_bytes), follow=False)
    except (OSError, CtxCompactError):
        raw = b""
    cache = (from_bytes(raw, key) if raw else None) or CountCache(key=key or ())
    cache.spill_dir = os.fspath(path.parent)  # what this call counts goes to a file there as it reads
    return cache


def save_counts(path: Path, cache: CountCache) -> None:
    """Keep what this call counted for the next one; a cache that cannot be written is simply not kept."""
    if path.is_symlink() or (path.exists() and not path.is_file()):
        return  # never written through a link or over a FIFO or device (paths.check_side_files refuses them)
    try:
        atomic_write(path, cache.chunks())  # (not joined: the body is not copied)
        stamp = _stamp(path)
        if stamp is not None and not cache.spilled:
            _memo[str(path)] = (stamp, cache)
        else:  # (a spilled cache would be read back in memory whole: the next call reads the file)
            _memo.pop(str(path), None)
    except (OSError, ValueError):
        _memo.pop(str(path), None)
