"""The state's lock: ``<state>.lock`` held for a read-modify-write of the state (docs/concepts/state.md).

Where the system has ``flock`` (Linux, macOS, the BSDs), the lock is an exclusive ``flock`` on the lock
file, taken here: importing ``filelock`` costs every call with a state ~20 ms (its ``_core`` imports
``logging``), more than the rest of a hook's call with a few new records. Where it has not (Windows), or the
file system refuses it (``ENOSYS``, ``EOPNOTSUPP``: some network file systems), ``filelock`` takes the same
file (its Windows lock, or its soft lock), so the lock keeps those platforms. Both are released when the
process ends, even by a crash, so a stale lock file never blocks later runs; the file itself is never
removed (another run may be waiting on it).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

from ..atomic import output_error
from ..errors import StateError
from ..options import LOCK_TIMEOUT
from ..paths import check_side_files

try:
    import fcntl
except ImportError:  # Windows: filelock's own lock
    fcntl = None  # type: ignore[assignment]

_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_POLL_S = 0.05
"""How often a waiting run tries again (filelock's default interval)."""
_NO_FLOCK = frozenset({errno.ENOSYS, errno.EOPNOTSUPP, getattr(errno, "ENOTSUP", errno.EOPNOTSUPP)})
_BUSY = frozenset({errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES})


@contextlib.contextmanager
def state_lock(path: str | os.PathLike[str], timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """Hold ``<state>.lock`` for the duration of a read-modify-write of the state.

    Waits up to ``timeout`` seconds (0: try once), then raises StateError. The lock is advisory and
    released when the process ends, even by a crash, so a stale lock file never blocks later runs."""
    lock_path = os.fspath(path) + ".lock"
    check_side_files(Path(path))  # a link, FIFO or device as a side file: exit 3 before anything opens it
    deadline = time.monotonic() + timeout if timeout >= 0 else float("inf")  # filelock's: < 0 waits on
    while True:
        fd = _open(lock_path)
        try:
            held = _flock(fd, path)
        except BaseException:
            os.close(fd)
            raise
        if held is None:  # no flock here: filelock decides
            os.close(fd)
            with _filelock(path, lock_path, timeout):
                yield
            return
        if held and _still_named(fd, lock_path):
            break
        os.close(fd)  # busy, or the file was replaced while we waited: the lock is on the file named now
        if time.monotonic() >= deadline:
            raise StateError(f"state file {os.fspath(path)} is locked by another ctxcompact run "
                             f"(waited {timeout:g} s for {lock_path})")
        time.sleep(_POLL_S)
    try:
        yield
    finally:
        os.close(fd)  # closing the last descriptor of the file releases the flock


def _open(lock_path: str) -> int:
    try:  # a folder where no file can be made (read-only, /proc) is not "locked by another run"
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | _NOFOLLOW | _NONBLOCK, 0o644)
    except OSError as exc:
        raise output_error(exc, "state lock", lock_path) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped in since the check
            raise StateError(f"the state lock {lock_path} is not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _flock(fd: int, path: str | os.PathLike[str]) -> bool | None:
    """True when this call took the lock, False when another holds it, None when there is no flock."""
    if fcntl is None:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in _BUSY:
            return False
        if exc.errno in _NO_FLOCK:
            return None
        raise StateError(f"cannot lock state file {os.fspath(path)}: {exc.strerror or exc}") from None
    return True


def _still_named(fd: int, lock_path: str) -> bool:
    """Whether the locked file is still the one ``lock_path`` names (not removed or replaced meanwhile)."""
    try:
        st, named = os.fstat(fd), os.stat(lock_path, follow_symlinks=False)
    except OSError:
        return False
    return st.st_nlink > 0 and (st.st_dev, st.st_ino) == (named.st_dev, named.st_ino)


@contextlib.contextmanager
def _filelock(path: str | os.PathLike[str], lock_path: str, timeout: float) -> Iterator[None]:
    from filelock import FileLock, Timeout

    lock = FileLock(lock_path, timeout=timeout)
    try:
        lock.acquire()
    except Timeout:
        raise StateError(f"state file {os.fspath(path)} is locked by another ctxcompact run "
                         f"(waited {timeout:g} s for {lock_path})") from None
    except OSError as exc:
        raise StateError(f"cannot lock state file {os.fspath(path)}: {exc.strerror or exc}") from None
    try:
        yield
    finally:
        lock.release()
