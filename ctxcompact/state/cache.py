"""The count cache beside the state (docs/concepts/state.md#the-state-file): what ``run`` counted of the
transcript so far, so the next call on the grown file walks only the appended bytes.

``<state>.counts`` holds the walk's snapshot (tokens/fast.py ``walk_bytes``: per-message counts, usage
points, the call ids and the walk's position) with the counted prefix's byte length and SHA-256, and the
options the counts depend on (format, encoding). It is written atomically and only under the state's lock,
after the state. A cache that does not match (another prefix, other options, another version, unreadable,
corrupt) is ignored and rebuilt: it is never an error; the state alone decides whether the transcript is
the one it belongs to (exit 3).
"""

from __future__ import annotations

import hashlib
import marshal
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..atomic import atomic_write
from ..errors import CtxCompactError
from ..paths import STATE_FILE_LIMIT, read_regular

_MAGIC = b"CTXCOUNTS1\n"


def cache_path(state_path: str | os.PathLike[str]) -> Path:
    return Path(f"{os.fspath(state_path)}.counts")


# In one process (a library caller's hook), the last snapshot each cache file was written with, with the
# bytes it counted and their SHA-256 so far: the next call compares bytes (memcmp) instead of reading the
# cache and hashing the prefix again. Used only while the cache file is still the one this process wrote.
_memo: dict[str, tuple[tuple[int, int, int], tuple[Any, ...], bytes, dict[str, Any], Any]] = {}


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def load_counts(path: Path, data: bytes, key: tuple[Any, ...]) -> tuple[dict[str, Any] | None, Any]:
    """(the snapshot of a prefix of ``data`` counted with options ``key``, or None; the SHA-256 of that
    prefix so far, to go on with)."""
    none = (None, None)
    memo = _memo.get(str(path))
    if memo is not None:
        stamp, mkey, prefix, snap, hasher = memo
        if stamp == _stamp(path) and mkey == key and data.startswith(prefix):
            return snap, hasher.copy()
    try:  # a link, FIFO or device is never read (docs/reference/safety.md); a cache over the limit is ignored
        raw = read_regular(path, f"count cache {path}", STATE_FILE_LIMIT + len(data), follow=False)
    except (OSError, CtxCompactError):
        return none
    if not raw.startswith(_MAGIC) or len(raw) < len(_MAGIC) + 32:
        return none
    body = raw[len(_MAGIC) + 32:]
    if hashlib.sha256(body).digest() != raw[len(_MAGIC):len(_MAGIC) + 32]:
        return none
    try:
        entry = marshal.loads(body)
        snap = entry["snapshot"]
        size = snap["bytes"]
        if entry["key"] != list(key) or not 0 < size <= len(data) or data[size - 1:size] != b"\n":
            return none
        hasher = hashlib.sha256(memoryview(data)[:size])
        if hasher.hexdigest() != entry["sha256"]:
            return none  # the prefix was rewritten
    except (ValueError, EOFError, TypeError, KeyError, IndexError):
        return none
    return (snap, hasher) if isinstance(snap, dict) else none


def save_counts(path: Path, data: bytes, key: tuple[Any, ...], snapshot: dict[str, Any] | None,
                hasher: Any = None, hashed: int = 0) -> None:
    """Keep ``snapshot`` (the counts of all of ``data``) for the next run; a cache that cannot be written is
    simply not kept. ``hasher``: the SHA-256 of the first ``hashed`` bytes (what :func:`load_counts`
    checked), to go on from."""
    if path.is_symlink() or (path.exists() and not path.is_file()):
        return  # never written through a link or over a FIFO or device (paths.check_side_files refuses them)
    try:
        if snapshot is None:
            _memo.pop(str(path), None)
            path.unlink(missing_ok=True)
            return
        if hasher is None:
            hasher = hashlib.sha256(data)
        else:
            hasher.update(memoryview(data)[hashed:])
        body = marshal.dumps({"key": list(key), "sha256": hasher.hexdigest(), "snapshot": snapshot})
        atomic_write(path, _MAGIC + hashlib.sha256(body).digest() + body)
        stamp = _stamp(path)
        if stamp is not None:
            _memo[str(path)] = (stamp, key, data, snapshot, hasher)
    except (OSError, ValueError):
        _memo.pop(str(path), None)


@dataclass(slots=True)
class HeldCounts:
    """The count cache held in memory, for a caller that keeps no state file (``ctxcompact.Session()``): the
    last snapshot, the options it was counted with and the bytes it counted (compared, not hashed)."""

    key: tuple[Any, ...] | None = None
    data: bytes = b""
    snapshot: dict[str, Any] | None = None

    def load(self, data: bytes, key: tuple[Any, ...]) -> dict[str, Any] | None:
        if self.snapshot is None or self.key != key or not data.startswith(self.data):
            return None
        return self.snapshot

    def save(self, data: bytes, key: tuple[Any, ...], snapshot: dict[str, Any] | None) -> None:
        self.key, self.data, self.snapshot = key, data, snapshot
