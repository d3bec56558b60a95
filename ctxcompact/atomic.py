"""Atomic file replacement: a reader sees either the old file or the complete new one, never a torn write.

The new content goes to a temporary file in the target's own directory (``os.replace`` is only atomic within
one file system), is flushed and fsynced, renamed over the target, and then the directory is fsynced so the
rename itself survives a crash. On any error, including an exception raised by the caller while streaming,
the temporary file is removed and the target is left exactly as it was.

Writing is two steps when two files must change together (``run``'s output and state,
docs/reference/safety.md#atomic-writes-output-and-state-together): :func:`stage` writes and fsyncs the
temporary file, so a full disk, a read-only or missing folder fails there with nothing visible;
:meth:`Staged.commit` renames it into place, and ``keep=True`` keeps the previous content (a hard link) so
that :meth:`Staged.undo` can put it back if the other file fails.

Temporary files are named ``.<target name>.<8 characters>.tmp``; a run killed mid-write leaves one behind,
and the next write of the same target removes those older than :data:`STALE_TEMP_S` (only that name
pattern, only regular files).

``atomic_write``/``atomic_writer`` raise the ``OSError`` of the failing call; :func:`stage` and
:func:`write_lines` (the one writer of every command's output) raise :class:`~ctxcompact.errors.OutputError`
naming the path (docs/reference/exit-codes.md#the-codes: 6).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from .errors import OutputError

__all__ = ["STALE_TEMP_S", "Staged", "Staging", "atomic_write", "atomic_writer", "is_special_file",
           "output_error", "stage", "sweep_stale_temps", "write_lines"]

_BytesLike = (bytes, bytearray, memoryview)

STALE_TEMP_S = 600.0
"""A temporary file of ours untouched for this long belongs to a dead run: a live writer writes and renames
it within one write (seconds), and the next write of the same target removes it."""

def atomic_write(
    path: str | os.PathLike[str], data: bytes | bytearray | memoryview | Iterable[bytes | memoryview]
) -> None:
    """Replace ``path`` with ``data`` (bytes, or an iterable of byte chunks or views) atomically.

    An iterable is consumed while writing, so a generator of output lines is never held in memory whole; if it
    raises, the target is untouched and the exception propagates.
    """
    with atomic_writer(path) as f:
        if isinstance(data, _BytesLike):
            f.write(data)
        else:
            for chunk in data:
                f.write(chunk)


def write_lines(lines: Iterable[bytes], output: str | os.PathLike[str] | BinaryIO, *,
                keep: bool = False, staging: Staging | None = None) -> Staged | None:
    """Write output lines to a path (atomically) or to a binary stream (flushed at the end): the one writer of
    every command's output. Any failure is an :class:`OutputError` naming the path (or stdout); a path is
    left as it was.

    For a regular file, returns the committed :class:`Staged` (with ``keep``, its ``undo`` restores the
    previous content); None for a stream or a device, which cannot be taken back. ``staging``: the output's
    temporary file, begun (:class:`Staging`: ``lines`` follow what it holds; a regular file's only)."""
    if isinstance(output, (str, os.PathLike)):
        path = Path(os.fspath(output))
        if staging is None and is_special_file(path):  # (a staging's target was a regular file)
            # a FIFO, a device, /dev/stdout: renaming a file over it would replace the node itself
            try:
                with open(path, "wb") as f:
                    _stream(lines, f)
            except OSError as exc:
                raise output_error(exc, "output", path) from None
            return None
        staged = stage(path, lines, what="output", staging=staging)
        try:
            staged.commit(keep=keep)
        except OSError as exc:
            staged.discard()
            raise output_error(exc, "output", path) from None
        return staged
    try:
        _stream(lines, output)
    except OSError as exc:
        raise output_error(exc, "output", None) from None
    return None


def _stream(lines: Iterable[bytes], f: BinaryIO) -> None:
    for line in lines:
        f.write(line)
    f.flush()


def output_error(exc: OSError, what: str, path: str | os.PathLike[str] | None) -> OutputError:
    """The error (exit 6) for an ``OSError`` while writing ``what`` (``output``, ``state``) to ``path``
    (None: stdout)."""
    code = exc.errno
    reason = {
        errno.EPIPE: "the reader closed the pipe",
        errno.ENOSPC: "no space left on the device",
        errno.EROFS: "the file system is read-only",
        errno.ENOTDIR: "a part of the path is not a folder",
        errno.EACCES: "permission denied",
        errno.EPERM: "permission denied",
    }.get(code or -1) or (exc.strerror or str(exc))
    where = "stdout" if path is None else os.fspath(path)
    return OutputError(f"cannot write the {what} to {where}: {reason}", errno=code)


class Staged:
    """The complete new content of ``target`` in a temporary file beside it, fsynced but not yet visible.

    ``commit`` renames it into place; ``discard`` removes it; after ``commit(keep=True)``, ``undo`` puts the
    previous content back (or removes the target if there was none) and ``forget`` drops the kept copy."""

    __slots__ = ("_kept", "_new", "committed", "directory", "target", "tmp")

    def __init__(self, target: Path, tmp: Path) -> None:
        self.target, self.tmp, self.directory = target, tmp, target.parent
        self.committed = False
        self._kept: Path | None = None  # a hard link to the previous content
        self._new = False  # the target did not exist before the commit

    def commit(self, *, keep: bool = False) -> None:
        if keep:
            self._new = not self.target.exists()
            if not self._new:
                kept = self.directory / _temp_name(self.target)
                try:
                    os.link(self.target, kept)
                    self._kept = kept
                except OSError:
                    self._kept = None  # no hard links here: undo cannot restore, it says so
        os.replace(self.tmp, self.target)
        self.committed = True
        _fsync_dir(self.directory)

    def discard(self) -> None:
        if not self.committed:
            with contextlib.suppress(OSError):
                self.tmp.unlink()
        self.forget()

    def undo(self) -> bool:
        """Restore what the target was before ``commit(keep=True)``; False when that is not possible."""
        if not self.committed:
            self.discard()
            return True
        try:
            if self._kept is not None:
                os.replace(self._kept, self.target)
                self._kept = None
            elif self._new:
                self.target.unlink()
            else:
                return False
        except OSError:
            return False
        _fsync_dir(self.directory)
        return True

    def forget(self) -> None:
        if self._kept is not None:
            with contextlib.suppress(OSError):
                self._kept.unlink()
            self._kept = None


class Staging:
    """:func:`stage`'s temporary file, open: the content may be written in parts and at different times
    (``run`` below the threshold: pass 1 writes the prefix it proves as it reads it, pass 2 the rest; see
    ``streaming.count_file``); :func:`stage` with ``staging`` writes the rest, fsyncs it and makes it a
    :class:`Staged`. Nothing is visible before the commit; :meth:`discard` removes it (a no-op once staged).
    Creating it is an OutputError naming ``path``; :meth:`write` raises the ``OSError``."""

    __slots__ = ("file", "target", "tmp")

    def __init__(self, path: str | os.PathLike[str], what: str = "output") -> None:
        self.target = _resolve(Path(os.fspath(path)))
        try:
            sweep_stale_temps(self.target)
            fd, tmp_name = _mkstemp(self.target)
        except OSError as exc:
            raise output_error(exc, what, path) from None
        self.tmp: Path | None = Path(tmp_name)
        with contextlib.suppress(OSError):
            os.fchmod(fd, _target_mode(self.target))
        self.file = os.fdopen(fd, "wb")  # (fd's only failure is not an fd: the call above just made it)

    @property
    def size(self) -> int:
        """The bytes written so far."""
        return self.file.tell()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.file.write(data)

    def staged(self) -> Staged:
        """The content complete: flushed, fsynced and closed (``OSError`` on failure: then discard it)."""
        assert self.tmp is not None
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()
        staged, self.tmp = Staged(self.target, self.tmp), None
        return staged

    def discard(self) -> None:
        if self.tmp is not None:
            with contextlib.suppress(OSError):
                self.file.close()
            with contextlib.suppress(OSError):
                self.tmp.unlink()
            self.tmp = None


def stage(path: str | os.PathLike[str], data: bytes | bytearray | memoryview | Iterable[bytes], *,
          what: str = "output", staging: Staging | None = None) -> Staged:
    """Write ``data`` to a temporary file beside ``path`` and fsync it; nothing is visible until
    :meth:`Staged.commit`. An ``OSError`` (full disk, read-only or missing folder) is an OutputError naming
    ``path`` as ``what``, with no temporary file left; an exception of the data's iterable propagates.
    ``staging``: the temporary file, begun (the data follows what it holds)."""
    staged = None
    try:
        staging = staging if staging is not None else Staging(path, what)
        try:
            if isinstance(data, _BytesLike):
                staging.write(data)
            else:
                for chunk in data:
                    staging.write(chunk)
            staged = staging.staged()
        except OSError as exc:
            raise output_error(exc, what, path) from None
    finally:
        if staged is None and staging is not None:
            staging.discard()
    assert staged is not None
    return staged


def _temp_name(target: Path) -> str:
    return f".{target.name}.{os.urandom(4).hex()}.tmp"


# tempfile.mkstemp's flags: a new file, never through a link, not inherited (os.open's default)
_TEMP_FLAGS = (os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0))


def _mkstemp(target: Path) -> tuple[int, str]:
    """A new temporary file beside ``target``, created 0600 (``tempfile.mkstemp``'s way, here: importing
    ``tempfile`` loads ``shutil``, ``random`` and the compression modules, ~5 ms of every hook's call)."""
    for _ in range(100):
        name = os.path.abspath(target.parent / _temp_name(target))
        try:
            return os.open(name, _TEMP_FLAGS, 0o600), name
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused temporary file name", str(target.parent))


def sweep_stale_temps(target: Path, max_age: float = STALE_TEMP_S) -> int:
    """Remove the temporary files of ``target`` that a killed run left: ``.<name>.<8 chars>.tmp`` beside it,
    regular files not modified for ``max_age`` seconds. Returns how many were removed; never raises for a
    file it could not remove."""
    cutoff = time.time() - max_age
    removed = 0
    try:
        entries = os.scandir(target.parent if str(target.parent) else ".")
    except OSError:
        return 0
    with entries:
        for entry in entries:
            if not is_temp_of(entry.name, target.name):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISREG(st.st_mode) and st.st_mtime < cutoff:
                    os.unlink(entry.path)
                    removed += 1
            except OSError:
                continue
    return removed


_TEMP_ID = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def is_temp_of(name: str, target: str) -> bool:
    """Whether ``name`` is a temporary file's of ``target`` (``.<target>.<8 of A-Za-z0-9_>.tmp``), by its
    parts: a pattern made per target was compiled anew by every write (~0.2 ms, three a hook's call)."""
    head = len(target) + 2
    return (len(name) == head + 12 and name.startswith(".") and name.endswith(".tmp")
            and name[1:head - 1] == target and name[head - 1] == "." and _TEMP_ID.issuperset(name[head:-4]))


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
    sweep_stale_temps(target)
    fd, tmp_name = _mkstemp(target)
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
    """Written in place, not replaced: a FIFO, a device or a socket (``/dev/null``, a pipe on
    ``/dev/stdout``), and a name for an open file (``/proc/<pid>/fd/N``, ``/dev/fd/N``, ``/dev/std*``), which
    no rename can replace. A regular file anywhere else (``/dev/shm/x.jsonl`` too) is replaced atomically.
    Whether it may be written at all is decided before (``paths.check_writes``, by device and inode)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return True
    except (OSError, ValueError):
        return False  # a new file
    return _FD_NAME.match(os.path.abspath(path)) is not None


_FD_NAME = re.compile(r"/(?:proc/[^/]+/fd/[0-9]+|dev/fd/[0-9]+|dev/std(?:in|out|err))\Z")


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
