"""What ctxcompact may write, and how it reads files it did not write
(docs/reference/safety.md#files-it-never-touches,
docs/reference/safety.md#atomic-writes-output-and-state-together).

One rule for every file any command writes (``-o``, the state, its lock, its count cache, ``eval --html``):
it must not be a file the command reads (the transcript, ``--todos``, ``--probes``, ``--config``) nor
another file it writes. Paths are compared by what they *are*: the device and inode of the existing file
(``./in.jsonl``, a symbolic or hard link, ``/proc/self/fd/3``, ``/dev/fd/3``, ``/dev/stdin``, a bind mount,
anything under ``/dev/shm``), and where a file does not exist yet, by where it would be. No folder is created
implicitly: a missing one is a usage error, before any work (:func:`check_writes`, exit 2).

The state's side files (the state, ``<state>.lock``, ``<state>.counts``) are refused when they are symbolic
links or exist as anything but a regular file (:func:`check_side_files`, exit 3): the state is rewritten by
renaming over it, writing through a link someone else planted replaces a file the user never named, and a
FIFO or a device would block or never end.

Every read of a file ctxcompact did not write is bounded: a side file (:func:`read_side_file`,
:func:`read_regular`) is a regular file under a size limit; a transcript path that is a FIFO or a device is
read up to :data:`STREAM_INPUT_LIMIT` (:func:`read_input`; a FIFO the streamed routes read is copied to a
spool file by the same rules, :func:`spooled_fifo`), and a FIFO with no writer is empty, never a hang.

``--state-dir`` (docs/concepts/state.md#the-state-folder) puts the states in one folder instead of beside
their inputs: :func:`state_path_in` names each after its input, with a digest of the input's real path so
that two inputs of the same name in different folders never share a state.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import BinaryIO

from .errors import CtxCompactError, StateError, UsageError

__all__ = ["SIDE_FILE_LIMIT", "STATE_FILE_LIMIT", "STREAM_INPUT_LIMIT", "cache_dir", "check_paths",
           "check_side_files", "check_state_path", "check_writes", "file_identity", "is_fifo", "open_input",
           "read_input", "read_regular", "read_side_file", "same_file", "side_files", "spooled",
           "spooled_fifo", "state_path_in", "stdin_path"]

SIDE_FILE_LIMIT = 4 * 1024 * 1024
"""The most ctxcompact reads of a file that is not the transcript (``--todos``, ``--probes``, the config):
4 MiB (docs/reference/safety.md#bounded-reads: a larger one is a usage error, exit 2)."""

STATE_FILE_LIMIT = 64 * 1024 * 1024
"""The most ctxcompact reads of a state or count cache: 64 MiB (a state is a few KB; a larger one is not
one ctxcompact wrote: exit 3)."""

STREAM_INPUT_LIMIT = 256 * 1024 * 1024
"""The most ctxcompact reads from a transcript path that is a FIFO or a device (``/dev/zero`` never ends):
256 MiB, then a usage error (exit 2). Stdin (``-``) is a stream: copied to a private temporary file that the
streamed routes read like any file (:func:`spooled`), or read whole where the held route reads it; a FIFO too
(:func:`spooled_fifo`), within this bound; a regular file is read whole where it is held."""

SPOOL_CHUNK = 1 << 20
"""Stdin is copied to its spool file this many bytes at a time: all of it a run holds while copying."""

Named = tuple[str, "Path | None"]
"""A file a command reads or writes, with what it is (``input``, ``output``, ``state``, ``--todos``…)."""

_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def stdin_path() -> Path:
    """The name of what stdin is (``/dev/stdin``): comparing it finds ``run - -o in.jsonl < in.jsonl``."""
    return Path("/dev/stdin")


def cache_dir() -> Path:
    """The user's cache folder of ctxcompact, beside no input: ``$CTXCOMPACT_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/ctxcompact``, ``~/.cache/ctxcompact`` (the rank tables, the compiled schema checks)."""
    explicit = os.environ.get("CTXCOMPACT_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ctxcompact"


def file_identity(path: str | os.PathLike[str]) -> tuple[int, int] | None:
    """(device, inode) of the file ``path`` names, links and ``/proc/self/fd/N`` followed; None when it does
    not exist (or cannot be reached)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino)


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """True when ``a`` and ``b`` are the same file: by device and inode when both exist, else by where they
    would be (links in the folders resolved)."""
    ia, ib = file_identity(a), file_identity(b)
    if ia is not None and ib is not None:
        return ia == ib
    if ia is not None or ib is not None:
        return False  # one exists, the other does not: two files
    return os.path.realpath(a) == os.path.realpath(b)


def _written_in_place(path: Path) -> bool:
    """A FIFO, a device or a socket: written where it is, so nothing is replaced by writing it."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def _folder_exists(path: Path, what: str) -> None:
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise UsageError(f"the folder of the {what} {path} does not exist; create it first "
                         "(ctxcompact creates no folders)")


def check_writes(writes: Sequence[Named], reads: Iterable[Named] = ()) -> None:
    """UsageError (exit 2) unless every file in ``writes`` is neither a file in ``reads`` nor another file in
    ``writes``, and the folder of each exists. The one check of every file any command writes; entries whose
    path is None are skipped. A FIFO or a device (``/dev/null``, a pipe on ``/dev/stdout``) is written in
    place and replaces nothing: it is not compared."""
    # "-" is stdin: what it is (a file redirected with <) is compared like any other
    read_list = [(what, stdin_path() if os.fspath(p) == "-" else Path(p))
                 for what, p in reads if p is not None]
    done: list[tuple[str, Path]] = []
    for what, p in writes:
        if p is None:
            continue
        path = Path(p)
        if not _written_in_place(path):
            for other, q in read_list:
                if same_file(path, q):
                    raise UsageError(f"the {what} {path} is the {other} {q}: ctxcompact never overwrites "
                                     f"a file it reads; write the {what} to another file")
            for other, q in done:
                if same_file(path, q):
                    raise UsageError(f"the {what} {path} is the {other} {q}: give the {what} another file")
            _folder_exists(path, what)
        done.append((what, path))


def side_files(state: Path) -> list[tuple[str, Path]]:
    """The files a state at ``state`` consists of: the state, its lock, its count cache."""
    text = os.fspath(state)
    return [("state", Path(text)), ("state lock", Path(text + ".lock")),
            ("count cache", Path(text + ".counts"))]


def check_paths(*, input: Path | None, output: Path | None, state: Path | None,
                reads: Iterable[Named] = ()) -> None:
    """:func:`check_writes` for a command that reads ``input`` (``-``: stdin) and ``reads``, and writes
    ``output`` and the state with its side files."""
    writes: list[Named] = [("output", output)]
    if state is not None:
        writes.extend(side_files(state))
    check_writes(writes, [("input", input), *reads])


def check_side_files(state: Path) -> None:
    """StateError (exit 3) when the state, its lock or its count cache is a symbolic link, or exists as
    anything but a regular file (see the module docstring): the same rule for every side file."""
    for what, path in side_files(state):
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise StateError(f"cannot use the {what} {path}: {exc.strerror or exc}") from None
        if stat.S_ISLNK(st.st_mode):
            real = os.path.realpath(path)
            hint = (f" If that file is really the state, name it: --state {real}" if what == "state"
                    else f" Remove the link {path} (ctxcompact makes the file itself).")
            raise StateError(f"{path} is a symbolic link (to {real}); ctxcompact does not write its "
                             f"{what} through a link.{hint}")
        if not stat.S_ISREG(st.st_mode):
            raise StateError(f"the {what} {path} is not a regular file ({_kind(st.st_mode)}); ctxcompact "
                             "reads and writes only regular files there")


check_state_path = check_side_files  # the name callers used before the count cache joined the rule


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_regular(path: str | os.PathLike[str], what: str, limit: int, *,
                 error: type[CtxCompactError] = UsageError, follow: bool = True,
                 private: bool = False, stat_after: list[os.stat_result] | None = None) -> bytes:
    """The bytes of the regular file ``path`` (``what`` names it in messages), at most ``limit`` of them;
    anything else (a FIFO, a device, a folder; a link when not ``follow``; when ``private``, a file another
    user owns or may write) or a larger file raises ``error`` before any read. An ``OSError`` of opening the
    file propagates (the caller decides whether a missing file matters). ``stat_after`` receives the file's
    status taken after the read (a change made while reading shows in its times)."""
    # O_NONBLOCK: opening a FIFO with no writer would block in open() itself; it changes nothing for a file
    flags = os.O_RDONLY | _NONBLOCK | (0 if follow else _NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if not follow and os.path.islink(path):
            raise error(f"{what}: a symbolic link; ctxcompact does not follow a link there") from None
        raise exc from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{what}: not a regular file ({_kind(st.st_mode)}; it cannot be read as one)")
        if st.st_size > limit:
            raise error(f"{what}: {st.st_size:,} bytes, over the {limit:,}-byte limit of such a file")
        if private and hasattr(os, "geteuid") and (st.st_uid != os.geteuid() or st.st_mode & 0o022):
            raise error(f"{what}: owned by another user or writable by others")
        data = _read_bounded(fd, limit, st.st_size)
        if data is None:
            raise error(f"{what}: over the {limit:,}-byte limit of such a file")
        if stat_after is not None:
            stat_after.append(os.fstat(fd))
        return data
    finally:
        os.close(fd)


def state_path_in(folder: Path, input_path: Path, beside: Path) -> Path:
    """The state of ``input_path`` in ``folder`` (``--state-dir``), given ``beside``, the state's default
    path beside the input (``<input><suffix>``, state/store.py owns the suffix):
    ``<folder>/<input name>.<digest><suffix>``. The digest is of the input's real path (links resolved,
    made absolute), so ``a/log.jsonl`` and ``b/log.jsonl`` get two states and a link to a file shares the
    file's. Moving the input to another folder starts a new state."""
    name = input_path.name
    suffix = beside.name[len(name):] if beside.name.startswith(name) else beside.name
    digest = hashlib.blake2b(os.fsencode(os.path.realpath(input_path)), digest_size=6).hexdigest()
    return folder / f"{name}.{digest}{suffix}"


def read_side_file(path: str | os.PathLike[str], what: str, limit: int = SIDE_FILE_LIMIT) -> bytes:
    """The bytes of a small side file (``--todos x.md``, ``--probes``, the config): :func:`read_regular`
    with a UsageError (exit 2)."""
    return read_regular(path, what, limit)


def _read_bounded(fd: int, limit: int, size: int = 0) -> bytes | None:
    """Everything ``fd`` gives, or None once it gives more than ``limit`` bytes (never reads past that).
    ``size``: what it is expected to give (a regular file's), read in one call: a file read whole is the
    bytes ``os.read`` made, not copied (a 5 MB rank table: 14 → 5 ms in a fresh process)."""
    chunks: list[bytes] = []
    total = 0
    while total <= limit:  # the file may grow while we read: never read past the limit
        want = size + 1 - total if total <= size else 1 << 20  # then 1: the end costs no 1 MB buffer
        chunk = os.read(fd, min(want, limit + 1 - total))
        if not chunk:
            return b"".join(chunks)  # one bytes object is returned as it is
        chunks.append(chunk)
        total += len(chunk)
    return None


def _open_without_waiting(path: str | os.PathLike[str]) -> int:
    """``path`` opened read-only without waiting in ``open()`` itself (a FIFO with no writer would wait
    forever: O_NONBLOCK), then set to blocking reads, so a writer slower than we are is waited for. A
    regular file behaves as if opened plainly."""
    fd = os.open(path, os.O_RDONLY | _NONBLOCK)
    if _NONBLOCK:
        try:
            os.set_blocking(fd, True)
        except OSError:
            os.close(fd)
            raise
    return fd


def open_input(path: str | os.PathLike[str]) -> BinaryIO:
    """The transcript at ``path`` as a binary stream, for a reader that goes line by line (``validate``): a
    regular file is streamed from disk; a FIFO or a device is read first, within the bound of
    :func:`read_input`, so opening a FIFO with no writer never blocks. Opening errors propagate."""
    fd = _open_without_waiting(path)
    try:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode):
            stream = os.fdopen(fd, "rb")
            fd = -1  # owned by the stream now
            return stream
    finally:
        if fd >= 0:
            os.close(fd)
    return io.BytesIO(read_input(Path(path)))


def read_input(path: Path) -> bytes:
    """The transcript at ``path``: a regular file whole; a FIFO or a device up to
    :data:`STREAM_INPUT_LIMIT` bytes (UsageError past it); a FIFO nobody writes to reads as empty. Opening
    errors propagate as ``OSError``."""
    fd = _open_without_waiting(path)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(21, "Is a directory", str(path))
        if stat.S_ISREG(st.st_mode):
            with os.fdopen(os.dup(fd), "rb") as f:
                return f.read()
        data = _read_bounded(fd, STREAM_INPUT_LIMIT)
        if data is None:
            raise _too_long(path, st.st_mode)
        return data
    finally:
        os.close(fd)


def _too_long(path: Path, mode: int) -> UsageError:
    return UsageError(f"{path} is {_kind(mode)} that gave more than {STREAM_INPUT_LIMIT:,} bytes; "
                      "ctxcompact reads at most that from one (save the transcript to a file, or pipe it on "
                      "stdin)")


def is_fifo(path: Path) -> bool:
    """``path`` is a FIFO (a named pipe, ``<(cmd)``'s ``/dev/fd/N``): nothing is opened or read."""
    try:
        return stat.S_ISFIFO(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


class _Bounded:
    """A FIFO read as :func:`read_input` reads one: the error of a FIFO over :data:`STREAM_INPUT_LIMIT` once
    it gives more, never reading more than one byte past the limit."""

    def __init__(self, stream: BinaryIO, path: Path) -> None:
        self.stream, self.path, self.total = stream, path, 0

    def read(self, n: int | None = -1) -> bytes:
        if n is None or n < 0:
            return b"".join(iter(lambda: self.read(SPOOL_CHUNK), b""))
        chunk = self.stream.read(min(n, STREAM_INPUT_LIMIT + 1 - self.total))
        self.total += len(chunk)
        if self.total > STREAM_INPUT_LIMIT:
            raise _too_long(self.path, stat.S_IFIFO)
        return chunk


@contextmanager
def spooled_fifo(path: Path, *, hold_below: int = 0) -> Iterator[Path | bytes]:
    """The FIFO at ``path`` as :func:`spooled` gives stdin: read once, as :func:`read_input` reads it (a FIFO
    nobody writes to is empty, never a hang; more than :data:`STREAM_INPUT_LIMIT` bytes a UsageError),
    into a spool file of our own; the FIFO itself is only read."""
    fd = _open_without_waiting(path)
    with os.fdopen(fd, "rb") as stream, \
            spooled(_Bounded(stream, path), hold_below=hold_below,  # type: ignore[arg-type]
                    prefix="ctxcompact-fifo-") as got:
        yield got


@contextmanager
def spooled(stream: BinaryIO, *, hold_below: int = 0,
            prefix: str = "ctxcompact-stdin-") -> Iterator[Path | bytes]:
    """``stream`` (stdin) as a file the streamed routes read by offset, twice: copied in bounded chunks to
    a private temporary file (``tempfile.mkstemp``: O_EXCL, mode 0600, in ``$TMPDIR``), removed on leaving
    whatever happens (an error, KeyboardInterrupt). Gives the bytes instead, the held route's input, when
    the stream ends within ``hold_below`` bytes (nothing written) or the temporary folder cannot take it
    (full, read-only: stdin is then read whole, as it always was)."""
    head = stream.read(hold_below + 1) if hold_below else b""
    if hold_below and len(head) <= hold_below:
        yield head
        return
    import tempfile  # (only here: it loads shutil, random and the compression modules, ~5 ms a call)

    try:
        fd, name = tempfile.mkstemp(prefix=prefix, suffix=".jsonl")
    except OSError:
        yield head + stream.read()
        return
    try:
        held = _spill(fd, name, head, stream)
        yield Path(name) if held is None else held
    finally:
        with suppress(FileNotFoundError):
            os.unlink(name)


def _spill(fd: int, name: str, chunk: bytes, stream: BinaryIO) -> bytes | None:
    """``chunk`` then the rest of ``stream`` written to ``fd`` (closed after); None, or all the bytes if a
    write failed (those written read back, then the rest of the stream)."""
    written = 0
    with os.fdopen(fd, "wb", buffering=0) as spool:
        while True:
            if chunk:
                try:
                    view = memoryview(chunk)
                    while view:  # (an unbuffered write may take part of it)
                        view = view[spool.write(view):]
                except OSError:
                    break
                written += len(chunk)
            chunk = stream.read(SPOOL_CHUNK)
            if not chunk:
                return None
    with open(name, "rb") as back:
        return back.read(written) + chunk + stream.read()
