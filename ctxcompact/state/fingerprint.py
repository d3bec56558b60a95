"""The fingerprint of the covered prefix: the only place that hashes the input
(docs/concepts/state.md#the-state-file).

A state covers the first records of a transcript; those records are the first ``nbytes`` bytes of the input,
whose SHA-256 the state keeps. A run on an input whose prefix changed stops with exit 3 instead of silently
dropping records the summary never saw."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO, TypeAlias

from ..errors import InputError, StateError
from ..paths import open_input
from .model import Fingerprint, State

if TYPE_CHECKING:
    from .compacted import TokenCache

_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class HashedFile:
    """A file whose first ``nbytes`` bytes a run read (in both passes of a streamed run) and hashed:
    ``digest``, their SHA-256. The fingerprint of those bytes is that hash, with no read; of a shorter
    prefix, one read that also proves the file still begins with those bytes (InputError otherwise), so
    the prefix fingerprinted is the one the run worked on."""

    path: str | os.PathLike[str]
    nbytes: int
    digest: bytes


Source: TypeAlias = str | os.PathLike[str] | bytes | bytearray | memoryview | BinaryIO | HashedFile


def _read_chunks(source: Source, nbytes: int, chunk_size: int) -> Iterator[bytes]:
    assert not isinstance(source, HashedFile)  # (_hashed_prefix reads it)
    """Up to ``nbytes`` bytes of ``source`` in chunks (fewer if it is shorter)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        view = memoryview(source)[:nbytes]
        for i in range(0, len(view), chunk_size):
            yield bytes(view[i:i + chunk_size])
        return
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            yield from _read_chunks(f, nbytes, chunk_size)
        return
    left = nbytes
    while left > 0:
        chunk = source.read(min(chunk_size, left))
        if not chunk:
            return
        left -= len(chunk)
        yield chunk


def _hash_prefix(source: Source, nbytes: int, chunk_size: int = _CHUNK) -> tuple[str, int]:
    if nbytes < 0:
        raise ValueError("nbytes must be >= 0")
    if isinstance(source, HashedFile):
        return _hashed_prefix(source, nbytes, chunk_size), nbytes
    h = hashlib.sha256()
    seen = 0
    for chunk in _read_chunks(source, nbytes, chunk_size):
        h.update(chunk)
        seen += len(chunk)
    return h.hexdigest(), seen


def _hashed_prefix(source: HashedFile, nbytes: int, chunk_size: int) -> str:
    """The SHA-256 (hex) of the first ``nbytes`` bytes of ``source``'s file, which must still begin with
    the ``source.nbytes`` bytes the run hashed: one read of them, the prefix's hash taken on the way."""
    if nbytes > source.nbytes:
        raise ValueError("a fingerprint of more than the run read")
    if nbytes == source.nbytes:
        return source.digest.hex()
    h = hashlib.sha256()
    prefix: str | None = None
    seen = 0
    with open_input(source.path) as stream:
        for chunk in _read_chunks(stream, source.nbytes, chunk_size):
            if prefix is None and seen + len(chunk) >= nbytes:
                h.update(chunk[:nbytes - seen])
                prefix = h.hexdigest()
                h.update(chunk[nbytes - seen:])
            else:
                h.update(chunk)
            seen += len(chunk)
    if prefix is None or seen != source.nbytes or h.digest() != source.digest:
        raise InputError(f"{source.path} changed while it was read; run again")
    return prefix


def line_end(source: Source, at: int, *, chunk_size: int = 1 << 12) -> int:
    """Where the line holding byte ``at - 1`` of ``source`` ends: after its newline, or at the end of the
    input (of the bytes a :class:`HashedFile` run read). A file is read from ``at`` only, up to the newline:
    a fingerprint through a record of a file the run did not hold (strategies.sliding_window)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source) if isinstance(source, memoryview) else source
        nl = data.find(b"\n", at)
        return len(data) if nl < 0 else nl + 1
    if isinstance(source, HashedFile):
        path, limit = source.path, source.nbytes
    elif isinstance(source, (str, os.PathLike)):
        path, limit = source, os.path.getsize(source)
    else:
        raise TypeError("line_end reads bytes or a file")
    with open_input(path) as stream:
        stream.seek(at)
        pos = at
        while pos < limit:
            chunk = stream.read(min(chunk_size, limit - pos))
            if not chunk:
                break
            nl = chunk.find(b"\n")
            if nl >= 0:
                return pos + nl + 1
            pos += len(chunk)
    return min(pos, limit)


def prefix_fingerprint(path_or_stream: Source, nbytes: int, *, chunk_size: int = _CHUNK) -> str:
    """SHA-256 (hex) of the first ``nbytes`` bytes of a file, an open binary stream (read from its current
    position) or a bytes object, streamed in chunks so large transcripts are not held in memory.

    StateError when the input has fewer than ``nbytes`` bytes: a hash of less than was asked for would
    silently compare unequal (or, worse, equal to the hash of a shorter prefix)."""
    digest, seen = _hash_prefix(path_or_stream, nbytes, chunk_size)
    if seen < nbytes:
        raise StateError(f"the input has only {seen} bytes, fewer than the {nbytes} to fingerprint")
    return digest


def make_fingerprint(source: Source, *, records: int, nbytes: int, format: str,
                     system_lines: Iterable[tuple[int, int]] = (),
                     tokens: TokenCache | None = None, lines: int | None = None,
                     history: bool | None = None) -> Fingerprint:
    """The fingerprint of the first ``records`` records, which are the first ``nbytes`` bytes (``lines``
    physical lines) of ``source`` (the input as read: a path, bytes or a stream at its start).
    ``history``: :attr:`Fingerprint.history`."""
    return Fingerprint(records=records, nbytes=nbytes, sha256=prefix_fingerprint(source, nbytes),
                       format=format, tokens=tokens, system_lines=[(int(o), int(n)) for o, n in system_lines],
                       lines=lines, history=history)


def check_fingerprint(state: State, input_path_or_bytes: Source, *, format: str | None = None,
                      state_path: str | os.PathLike[str] | None = None,
                      hashed: tuple[str, int] | None = None) -> None:
    """StateError unless the input still starts with the prefix the state covers.

    An input that only grew passes; one that is shorter than the covered prefix, or whose prefix bytes
    changed, does not (exit 3). ``format``, when given, must match the fingerprint's format too.
    ``hashed``: (SHA-256 in hex, bytes hashed) of the input's first ``nbytes`` bytes, when a pass over the
    input already took it (``streaming``: the prefix is hashed once per call)."""
    fp = state.fingerprint
    who = f"the state {os.fspath(state_path)}" if state_path is not None else "the state"
    if fp.nbytes == 0 and fp.records == 0:
        return  # nothing covered yet: any transcript fits
    prefix = f"{who} does not belong to this transcript"
    fix = "use --reset-state to start over"
    if format is not None and fp.format and format != fp.format:
        raise StateError(f"{prefix}: it was made for a {fp.format} transcript, this one is {format}; {fix}")
    try:
        digest, seen = hashed if hashed is not None else _hash_prefix(input_path_or_bytes, fp.nbytes)
    except OSError as exc:
        name = os.fspath(input_path_or_bytes) if isinstance(input_path_or_bytes, (str, os.PathLike)) else "-"
        raise InputError(f"cannot read input {name}: {exc.strerror or exc}") from None
    if seen < fp.nbytes:
        raise StateError(f"{prefix}: it covers the first {fp.records} records ({fp.nbytes} bytes) but the "
                         f"input has only {seen} bytes; {fix}")
    if digest != fp.sha256:
        raise StateError(f"{prefix}: the first {fp.records} records changed; {fix}")

