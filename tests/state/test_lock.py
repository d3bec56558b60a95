"""The state's lock where the system has flock (taken without importing filelock) and where it has not
(filelock's lock on the same file); tests/state/test_state.py has the behaviour every lock keeps."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxcompact.errors import StateError
from ctxcompact.state import lock as lock_mod
from ctxcompact.state import state_lock

pytestmark = pytest.mark.skipif(lock_mod.fcntl is None, reason="flock: POSIX")

_HOLDER = textwrap.dedent("""
    import sys
    from ctxcompact.state import state_lock
    with state_lock(sys.argv[1], timeout=5):
        print("locked", flush=True)
        sys.stdin.readline()
""")


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[Path]:
    """Another process holding the lock of the state ``tmp_path/s.json`` (with flock, as every run here)."""
    path = tmp_path / "s.json"
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    try:
        yield path
    finally:
        proc.kill()
        proc.wait()


class _NoFlock:
    """fcntl on a file system without flock."""

    LOCK_EX, LOCK_NB, LOCK_UN = 2, 4, 8

    def __init__(self, code: int) -> None:
        self.code = code

    def flock(self, fd: int, op: int) -> None:
        raise OSError(self.code, os.strerror(self.code))


def test_a_call_with_a_state_takes_the_lock_without_filelock_or_logging(tmp_path: Path) -> None:
    code = ("import sys\nfrom ctxcompact.state import state_lock\n"
            "with state_lock(sys.argv[1], timeout=1):\n    pass\n"
            "print('filelock' in sys.modules, 'logging' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "s.json")], capture_output=True,
                         text=True, check=True).stdout
    assert out.split() == ["False", "False"]
    assert (tmp_path / "s.json.lock").is_file()  # left for the next run


@pytest.mark.parametrize("how", ["no fcntl", "ENOSYS", "EOPNOTSUPP"])
def test_without_flock_filelock_takes_the_same_file(holder: Path, monkeypatch: pytest.MonkeyPatch,
                                                     how: str) -> None:
    """No fcntl (Windows) or a file system that refuses flock: filelock's lock, which still waits for a
    holder of the same file and times out like ours."""
    used: list[str] = []
    real = lock_mod._filelock

    def spy(path, lock_path, timeout):  # type: ignore[no-untyped-def]
        used.append(lock_path)
        return real(path, lock_path, timeout)

    monkeypatch.setattr(lock_mod, "_filelock", spy)
    monkeypatch.setattr(lock_mod, "fcntl", None if how == "no fcntl" else _NoFlock(getattr(errno, how)))
    locked = "is locked by another ctxcompact run"
    with pytest.raises(StateError, match=locked), state_lock(holder, timeout=0.2):
        pass
    assert used == [f"{holder}.lock"]
    free = holder.with_name("free.json")
    with state_lock(free, timeout=0.2):
        assert f"{free}.lock" in used


def test_another_flock_error_is_a_state_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lock_mod, "fcntl", _NoFlock(errno.EIO))
    with pytest.raises(StateError, match="cannot lock state file"), state_lock(tmp_path / "s.json"):
        pass
    assert os.listdir(tmp_path) == ["s.json.lock"]


def test_a_lock_file_replaced_while_waiting_is_not_held(tmp_path: Path) -> None:
    """A lock taken on a file since removed or replaced locks nothing the next run would see."""
    path = tmp_path / "s.json.lock"
    path.write_bytes(b"")
    fd = os.open(path, os.O_RDWR)
    try:
        assert lock_mod._still_named(fd, str(path))
        (tmp_path / "new").write_bytes(b"")
        os.replace(tmp_path / "new", path)
        assert not lock_mod._still_named(fd, str(path))
        path.unlink()
        assert not lock_mod._still_named(fd, str(path))
    finally:
        os.close(fd)


def test_two_locks_in_one_process_exclude_each_other(tmp_path: Path) -> None:
    """flock is per open file: a second call in the same process (another thread, another Session) waits."""
    with state_lock(tmp_path / "s.json", timeout=1), pytest.raises(StateError, match="locked"), \
            state_lock(tmp_path / "s.json", timeout=0):
        pass
    with state_lock(tmp_path / "s.json", timeout=0):  # released by both
        pass


def test_every_entry_that_locks_a_state_waits_as_long_as_run() -> None:
    """``calibrate``, ``state reset`` and a file ``Session`` take no ``Options``: they wait the same
    ``Options.lock_timeout`` default (one constant, ``options.LOCK_TIMEOUT``)."""
    import inspect

    from ctxcompact import api, engine, messages
    from ctxcompact.options import Options

    def default(fn: object, name: str) -> object:
        return inspect.signature(fn).parameters[name].default  # type: ignore[arg-type]

    waits = {default(state_lock, "timeout"), default(api.reset_state, "lock_timeout"),
             default(engine.record_real_tokens, "lock_timeout"), default(messages.Session, "lock_timeout")}
    assert waits == {Options().lock_timeout}
