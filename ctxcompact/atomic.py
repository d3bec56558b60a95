"""Atomic file replacement: a reader sees either the old file or the complete new one, never a torn write.

The new content goes to a temporary file in the target's own directory (``os.replace`` is only atomic within
one file system), is flushed and fsynced, renamed over the target, and then the directory is fsynced so the
rename itself survives a crash. On any error, including an exception raised by the caller while streaming,
the temporary file is removed and the target is left exactly as it was.

Errors are the ``OSError`` of the failing call; callers turn them into the errors of ``errors.py``.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

__all__ = ["atomic_write", "atomic_writer", "is_special_file", "write_lines"]

_BytesLike = (bytes, bytearray, memoryview)


def atomic_write(
    path: str | os.PathLike[str], data: bytes | bytearray | memoryview | Iterable[bytes]
) -> None:
    """Replace ``path`` with ``data`` (bytes, or an iterable of byte chunks) atomically.

    An iterable is consumed while writing, so a generator of output lines is never held in memory whole; if it
    raises, the target is untouched and the exception propagates.
    """
    with atomic_writer(path) as f:
        if isinstance(data, _BytesLike):
            f.write(data)
        else:
            for chunk in data:
                f.write(chunk)


def write_lines(lines: Iterable[bytes], output: str | os.PathLike[str] | BinaryIO) -> None:
    """Write output lines to a path (atomically) or to a binary stream (flushed at the end): the one writer of
    every command's output."""
    if isinstance(output, (str, os.PathLike)):
        if is_special_file(Path(os.fspath(output))):
            # a FIFO, a device, /dev/stdout: renaming a file over it would replace the node itself
            with open(output, "wb") as f:
                write_lines(lines, f)
            return
        atomic_write(output, lines)
        return
    for line in lines:
        output.write(line)
    output.flush()


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """Context manager yielding a binary file; on a clean exit it atomically replaces ``path``.

    If the ``with`` body raises (or anything in flush/fsync/rename fails) the temporary file is deleted and
    ``path`` is not modified. The permission bits of an existing target are kept; a new file gets the usual
    ``0o666 & ~umask``. A symlink at ``path`` is followed, so the link stays and its target is replaced.
    """
    target = _resolve(Path(os.fspath(path)))
    directory = target.parent
    mode = _target_mode(target)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    tmp = Path(tmp_name)
    replaced = False
    try:
        # mkstemp creates 0600; give the temp file the final mode before the rename makes it visible.
        # Best effort: file systems without Unix modes (some network/FAT mounts) refuse fchmod.
        with contextlib.suppress(OSError):
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            fd = -1  # now owned (and closed) by f
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
        replaced = True
    finally:
        if not replaced:
            if fd >= 0:
                os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
    _fsync_dir(directory)


def is_special_file(path: Path) -> bool:
    if str(path).startswith(("/dev/", "/proc/")):
        return True
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False  # a new file


def _resolve(path: Path) -> Path:
    # Follow symlinks so that replacing writes through the link instead of turning it into a regular file.
    if path.is_symlink():
        return Path(os.path.realpath(path))
    return path


def _target_mode(target: Path) -> int:
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        return 0o666 & ~_umask()


def _umask() -> int:
    # Reading the umask via os.umask() briefly changes it (racy with threads); Linux exposes it read-only.
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    current = os.umask(0o022)
    os.umask(current)
    return current


def _fsync_dir(directory: Path) -> None:
    """Make the rename durable. Best effort: by now the new content is in place, so a file system that
    cannot fsync a directory (or a platform without O_DIRECTORY) must not turn success into an error."""
    flags = getattr(os, "O_DIRECTORY", None)
    if flags is None:
        return
    try:
        dfd = os.open(directory, os.O_RDONLY | flags)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(dfd)
    finally:
        os.close(dfd)
