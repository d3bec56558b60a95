"""Reading a transcript's lines by offset while hashing them: the one pass in which the streamed route
proves the bytes a state knows (the settled prefix, the covered prefix) and reads what follows
(``streaming``, ``compaction_stream``)."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from .errors import InputError
from .reader import iter_lines_at


class Hashing:
    """A binary stream's ``readline`` that hashes (SHA-256) what it hands out and stops after ``limit``
    bytes (offsets from the file's start: a read that resumes begins at ``at``, with the hash of the bytes
    before). A line is hashed when the next is asked for, so the hash of the bytes before the line handed
    out last is there to copy (:meth:`before_last`)."""

    def __init__(self, stream: BinaryIO, limit: int | None = None, at: int = 0, hashed: Any = None) -> None:
        self.stream, self.limit, self.nbytes = stream, limit, at
        self.hash = hashed if hashed is not None else hashlib.sha256()
        self.last, self.last_at, self.lines = b"", at, 0  # lines: physical lines handed out (any last one)
        #: a last line without its newline: where it begins, and the hash of the bytes before
        self.unterminated: tuple[int, Any] | None = None

    def _take(self) -> None:
        if self.last:
            if not self.last.endswith(b"\n"):
                self.unterminated = (self.last_at, self.hash.copy())
            self.hash.update(self.last)
            self.last = b""

    def readline(self) -> bytes:
        self._take()
        if self.limit is not None:
            left = self.limit - self.nbytes
            chunk = self.stream.readline(left) if left > 0 else b""
        else:
            chunk = self.stream.readline()
        self.lines += 1 if chunk else 0
        self.last, self.last_at = chunk, self.nbytes
        self.nbytes += len(chunk)
        return chunk

    def copy(self, upto: int) -> Iterator[bytes]:
        """The bytes up to offset ``upto``, as they are, in chunks."""
        self._take()
        while self.nbytes < upto:
            chunk = self.stream.read(min(1 << 20, upto - self.nbytes))
            if not chunk:
                return
            self.hash.update(chunk)
            self.nbytes += len(chunk)
            yield chunk

    def before_last(self, offset: int) -> Any:
        """The hash of the bytes before ``offset`` if that is where the line handed out last begins."""
        return self.hash.copy() if self.last and self.last_at == offset else None

    def digest(self) -> bytes:
        self._take()
        return bytes(self.hash.digest())

    def whole_lines(self) -> tuple[int, bytes]:
        """(length, SHA-256) of the bytes read up to the last newline."""
        self._take()
        if self.unterminated is not None:
            return self.unterminated[0], self.unterminated[1].digest()
        return self.nbytes, self.hash.digest()


def lines_at(hashing: Hashing, at: int = 0, line: int = 1) -> Iterator[tuple[int, int, bytes]]:
    """The stream's lines with their offsets in the file, read from offset ``at`` (line number ``line``)."""
    if at == 0:
        yield from iter_lines_at(hashing)  # type: ignore[arg-type]
        return
    for lineno, offset, raw in iter_lines_at(hashing, line):  # type: ignore[arg-type]
        yield lineno, offset + at, raw


class Written:
    """The bytes a pass hands out, counted and hashed (SHA-256), so a later call can prove a file still
    starts with them (:func:`proven_prefix`); ``nbytes`` with ``hashed`` (their SHA-256 state): handed out
    before, not through it."""

    def __init__(self, nbytes: int = 0, hashed: Any = None) -> None:
        self.nbytes, self.hash = nbytes, hashed.copy() if hashed is not None else hashlib.sha256()

    def __call__(self, chunks: Iterator[bytes]) -> Iterator[bytes]:
        for chunk in chunks:
            self.nbytes += len(chunk)
            self.hash.update(chunk)
            yield chunk


def proven_prefix(path: Path | None, nbytes: int, sha256: str) -> BinaryIO | None:
    """``path`` opened at its start if it is a regular file whose first ``nbytes`` hash to ``sha256`` (hex);
    else None (no such file, another content, or a FIFO or device, which is never read)."""
    if path is None:
        return None
    try:  # O_NONBLOCK: a FIFO put at the path is never waited for in open(); fstat: what was opened
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        regular = False
    if not regular:
        os.close(fd)
        return None
    f = open(fd, "rb", buffering=0)  # noqa: SIM115 (returned open; unbuffered: the copy reads anew)
    try:
        h = hashlib.sha256()
        if sum(map(len, _hashed_read(f, nbytes, h))) == nbytes and h.hexdigest() == sha256:
            f.seek(0)
            return f
    except OSError:
        pass
    f.close()
    return None


def copy_prefix(f: BinaryIO, nbytes: int, sha256: str) -> Iterator[bytes]:
    """The first ``nbytes`` of ``f`` (proven by :func:`proven_prefix`), in chunks; an InputError if they are
    no longer those bytes (the file changed since: what they were written into is discarded)."""
    h, got = hashlib.sha256(), 0
    for chunk in _hashed_read(f, nbytes, h):
        got += len(chunk)
        yield chunk
    if got != nbytes or h.hexdigest() != sha256:
        raise InputError("the last output changed while it was read; run again")


def _hashed_read(f: BinaryIO, nbytes: int, h: Any) -> Iterator[bytes]:
    """Up to ``nbytes`` of ``f`` in 1 MiB chunks, each added to ``h`` as it is read."""
    left = nbytes
    while left > 0:
        chunk = f.read(min(1 << 20, left))
        if not chunk:
            return
        h.update(chunk)
        left -= len(chunk)
        yield chunk
