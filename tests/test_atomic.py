"""atomic_write / atomic_writer: all-or-nothing replacement, no temp files left, permissions kept."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcompact import atomic
from ctxcompact.atomic import atomic_write, atomic_writer


def _names(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


def test_creates_new_file_with_exact_bytes(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    atomic_write(target, b'{"a":1}\n')
    assert target.read_bytes() == b'{"a":1}\n'
    assert _names(tmp_path) == ["out.jsonl"]


def test_replaces_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    target.write_bytes(b"old content that is longer than the new one\n")
    atomic_write(target, b"new\n")
    assert target.read_bytes() == b"new\n"
    assert _names(tmp_path) == ["out.jsonl"]


def test_empty_bytes_and_empty_iterable_give_empty_file(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"x")
    atomic_write(a, b"")
    atomic_write(b, iter(()))
    assert a.read_bytes() == b"" and b.read_bytes() == b""


def test_iterable_of_chunks_is_concatenated(tmp_path: Path) -> None:
    target = tmp_path / "out"
    lines = (f"line {i} é\n".encode() for i in range(1000))
    atomic_write(target, lines)
    text = target.read_text(encoding="utf-8")
    assert text.count("\n") == 1000
    assert text.startswith("line 0 é\nline 1 é\n") and text.endswith("line 999 é\n")


def test_bytearray_and_memoryview_accepted(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    atomic_write(a, bytearray(b"abc"))
    atomic_write(b, memoryview(b"xyz123")[2:])
    assert a.read_bytes() == b"abc" and b.read_bytes() == b"z123"


def test_large_streamed_output(tmp_path: Path) -> None:
    target = tmp_path / "big"
    chunk = bytes(range(256)) * 4096  # 1 MiB
    with atomic_writer(target) as f:
        for _ in range(6):
            f.write(chunk)
    assert target.stat().st_size == 6 * len(chunk)
    assert target.read_bytes()[len(chunk) * 5 :] == chunk


def test_error_inside_writer_leaves_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.write_bytes(b"OLD")
    with pytest.raises(RuntimeError, match="boom"), atomic_writer(target) as f:
        f.write(b"half of the new cont")
        f.flush()
        raise RuntimeError("boom")
    assert target.read_bytes() == b"OLD"
    assert _names(tmp_path) == ["state.json"]


def test_error_inside_writer_on_new_file_creates_nothing(tmp_path: Path) -> None:
    target = tmp_path / "new.json"
    with pytest.raises(ValueError), atomic_writer(target) as f:
        f.write(b"partial")
        raise ValueError("stop")
    assert _names(tmp_path) == []


def test_keyboard_interrupt_also_cleans_up(tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.write_bytes(b"keep")
    with pytest.raises(KeyboardInterrupt), atomic_writer(target) as f:
        f.write(b"x")
        raise KeyboardInterrupt
    assert target.read_bytes() == b"keep"
    assert _names(tmp_path) == ["out"]


def test_generator_failing_midway_leaves_old_file(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    target.write_bytes(b"original\n")

    def lines() -> Iterator[bytes]:
        yield b"first\n"
        yield b"second\n"
        raise OSError("disk went away")

    with pytest.raises(OSError, match="disk went away"):
        atomic_write(target, lines())
    assert target.read_bytes() == b"original\n"
    assert _names(tmp_path) == ["out.jsonl"]


def test_failed_rename_leaves_target_and_no_temp(tmp_path: Path) -> None:
    # A directory cannot be replaced by a file: os.replace fails after the data was written.
    target = tmp_path / "adir"
    target.mkdir()
    (target / "inside").write_bytes(b"x")
    with pytest.raises(OSError):
        atomic_write(target, b"data")
    assert target.is_dir() and (target / "inside").read_bytes() == b"x"
    assert _names(tmp_path) == ["adir"]


def test_failed_fsync_leaves_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "out"
    target.write_bytes(b"old")

    def broken_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(atomic.os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="Input/output"):
        atomic_write(target, b"new")
    assert target.read_bytes() == b"old"
    assert _names(tmp_path) == ["out"]


def test_missing_directory_raises_and_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        atomic_write(tmp_path / "nope" / "out", b"x")
    assert _names(tmp_path) == []


def test_file_and_directory_are_fsynced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[bool] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        synced.append(stat.S_ISDIR(os.fstat(fd).st_mode))
        real_fsync(fd)

    monkeypatch.setattr(atomic.os, "fsync", spy)
    atomic_write(tmp_path / "out", b"data")
    # first the file's data, then the directory entry of the rename
    assert synced == [False, True]


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o644, 0o755])
def test_existing_permission_bits_are_kept(tmp_path: Path, mode: int) -> None:
    target = tmp_path / "out"
    target.write_bytes(b"old")
    target.chmod(mode)
    atomic_write(target, b"new")
    assert stat.S_IMODE(target.stat().st_mode) == mode
    assert target.read_bytes() == b"new"


def test_new_file_follows_umask(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        atomic_write(tmp_path / "out", b"x")
    finally:
        os.umask(old)
    # 0o666 & ~0o027 = 0o640, as open() would create it (not mkstemp's 0o600)
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o640


def test_symlink_is_followed_and_kept(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_bytes(b"old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    atomic_write(link, b"new")
    assert link.is_symlink()
    assert real.read_bytes() == b"new"
    assert _names(tmp_path) == ["link.json", "real.json"]


def test_unicode_file_name(tmp_path: Path) -> None:
    target = tmp_path / "sessión 日本.jsonl"
    atomic_write(str(target), b"ok")
    assert target.read_bytes() == b"ok"


@settings(max_examples=40, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=20))
def test_content_is_exactly_the_chunks(tmp_path_factory: pytest.TempPathFactory, chunks: list[bytes]) -> None:
    d = tmp_path_factory.mktemp("hyp")
    target = d / "out"
    target.write_bytes(b"previous")
    atomic_write(target, chunks)
    assert target.read_bytes() == b"".join(chunks)
    assert _names(d) == ["out"]


def test_a_temporary_name_taken_is_not_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The temporary file is new (O_EXCL): a name that exists, even as a link, is passed over for the next
    random one, and the file is created 0600 in the target's folder with the sweep's name pattern."""
    target = tmp_path / "out.jsonl"
    draws = iter([b"\x00" * 4, b"\x00" * 4, b"\x01" * 4])
    monkeypatch.setattr(atomic.os, "urandom", lambda n: next(draws))
    (tmp_path / ".out.jsonl.00000000.tmp").symlink_to(tmp_path / "elsewhere")
    fd, name = atomic._mkstemp(target)
    os.close(fd)
    assert name == str(tmp_path / ".out.jsonl.01010101.tmp")
    assert stat.S_IMODE(os.stat(name).st_mode) == 0o600
    assert not (tmp_path / "elsewhere").exists()


def test_no_free_temporary_name_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "out.jsonl"
    monkeypatch.setattr(atomic.os, "urandom", lambda n: b"\x07" * n)
    (tmp_path / ".out.jsonl.07070707.tmp").write_bytes(b"taken")
    with pytest.raises(FileExistsError):
        atomic._mkstemp(target)
    with pytest.raises(FileExistsError):
        atomic_write(target, b"x")
    assert not target.exists()


_NAMES = st.text(alphabet="ab.Z9_-é\n", max_size=24)


@settings(max_examples=400)
@given(target=_NAMES, middle=_NAMES, name=_NAMES, made=st.booleans())
def test_a_temp_name_is_recognised_as_the_pattern_does(target: str, middle: str, name: str,
                                                        made: bool) -> None:
    """``atomic.is_temp_of`` (the sweep's test of a name) says what ``\\.<target>\\.[A-Za-z0-9_]{8}\\.tmp``
    matched in full, on names made the temporary files' way and on any other."""
    from ctxcompact.atomic import is_temp_of

    if made:
        name = f".{target}.{middle}.tmp"
    pattern = re.compile(rf"\.{re.escape(target)}\.[A-Za-z0-9_]{{8}}\.tmp")
    assert is_temp_of(name, target) == (pattern.fullmatch(name) is not None)
    assert is_temp_of(f".{target}.{middle[:8].ljust(8, '_')}.tmp", target) == \
        (pattern.fullmatch(f".{target}.{middle[:8].ljust(8, '_')}.tmp") is not None)


def test_a_temp_name_needs_each_of_its_parts() -> None:
    from ctxcompact.atomic import is_temp_of

    assert is_temp_of(".out.jsonl.ab12CD_9.tmp", "out.jsonl")
    for name in (".out.jsonlXab12CD_9.tmp", "Xout.jsonl.ab12CD_9.tmp", ".out.jsonl.ab12CD_9Xtmp",
                 ".out.jsonl.ab12CD-9.tmp", ".out.jsonl.ab12CD_.tmp", ".out.json.ab12CD_9.tmp", "out.jsonl"):
        assert not is_temp_of(name, "out.jsonl"), name
