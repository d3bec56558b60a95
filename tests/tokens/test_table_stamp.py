"""A cached rank table's SHA-256 is taken once per table, not per process: a stamp beside it records the
file's inode, size and times when it was hashed whole. A table whose status differs from its stamp's (edited
in place, its times set back, replaced, truncated) is hashed again, and a damaged one is still never used;
a table changed too recently for its times to show a later change gets no stamp. The translation table of
the classified copy maps ASCII to itself (str.translate's fast lookups) and classifies as before."""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from ctxcompact.tokens import bpe, exact

_NAME = "cl100k_base"
_SHA = exact.EXPECTED_SHA256[_NAME]


@pytest.fixture(scope="module")
def ranks() -> dict[bytes, int]:
    return exact.parse_ranks(exact._read_ranks_file(_NAME))


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of each payload bpe.py hashes."""
    calls: list[int] = []
    real = bpe.hashlib.sha256

    def sha256(data: bytes | memoryview = b"") -> object:
        calls.append(len(data))
        return real(data)

    monkeypatch.setattr(bpe, "hashlib", SimpleNamespace(sha256=sha256))
    return calls


def _later(monkeypatch: pytest.MonkeyPatch) -> None:
    """The clock as if the table had been written more than SETTLED_NS ago."""
    real = time.time_ns
    monkeypatch.setattr(bpe.time, "time_ns", lambda: real() + bpe.SETTLED_NS + 10**9)


def _table(tmp_path: Path, ranks: dict[bytes, int], hashed: list[int]) -> Path:
    path = tmp_path / "t.ranks"
    path.write_bytes(bpe.build_table(ranks, _SHA))
    hashed.clear()  # (building it hashed its payload)
    return path


def test_a_settled_table_is_hashed_once_then_its_stamp_vouches_for_it(
        tmp_path: Path, ranks: dict[bytes, int], hashed: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    path = _table(tmp_path, ranks, hashed)
    _later(monkeypatch)
    first = bpe.load_table(path, _SHA)
    assert first is not None and len(hashed) == 1 and bpe.stamp_path(path).is_file()
    second = bpe.load_table(path, _SHA)
    assert second is not None and len(hashed) == 1  # not hashed again
    assert second.get(b"hello") == ranks[b"hello"] and second.get(b"\xff\xfe\xfd") is None


def test_a_table_changed_just_now_gets_no_stamp(tmp_path: Path, ranks: dict[bytes, int],
                                                hashed: list[int]) -> None:
    """Written within SETTLED_NS: a change in the same timestamp tick could keep the times a stamp records."""
    path = _table(tmp_path, ranks, hashed)
    for _ in range(2):
        assert bpe.load_table(path, _SHA) is not None
    assert len(hashed) == 2 and not bpe.stamp_path(path).exists()


@pytest.mark.parametrize("how", ["edited in place, times set back", "replaced, times set back", "truncated",
                                 "one byte more"])
def test_a_table_changed_after_its_stamp_is_hashed_again_and_refused(
        tmp_path: Path, ranks: dict[bytes, int], hashed: list[int], monkeypatch: pytest.MonkeyPatch,
        how: str) -> None:
    path = _table(tmp_path, ranks, hashed)
    _later(monkeypatch)
    assert bpe.load_table(path, _SHA) is not None and len(hashed) == 1
    before = path.stat()
    time.sleep(0.05)  # past any file system's timestamp tick
    data = bytearray(path.read_bytes())
    data[-5] ^= 1  # the same size, a payload byte changed: only the SHA-256 can tell
    if how.startswith("edited"):
        with open(path, "r+b") as f:
            f.write(data)
    elif how.startswith("replaced"):
        other = tmp_path / "other"
        other.write_bytes(data)
        os.replace(other, path)
    elif how == "truncated":
        os.truncate(path, len(data) - 1)
    else:
        with open(path, "ab") as f:
            f.write(b"\0")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # mtime as it was: ctime cannot be set back
    assert bpe.load_table(path, _SHA) is None
    assert len(hashed) == (2 if how.endswith("set back") else 1)  # a wrong size fails before the hash


def test_a_damaged_or_foreign_stamp_only_costs_a_hash(
        tmp_path: Path, ranks: dict[bytes, int], hashed: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    path = _table(tmp_path, ranks, hashed)
    _later(monkeypatch)
    assert bpe.load_table(path, _SHA) is not None
    stamp = bpe.stamp_path(path)
    good = stamp.read_bytes()
    for bad in (b"", good[:-1], good.replace(b" ", b"  ", 1), b"x" * 300):
        stamp.write_bytes(bad)
        n = len(hashed)
        assert bpe.load_table(path, _SHA) is not None and len(hashed) == n + 1
        assert stamp.read_bytes() == good  # written again
    stamp.unlink()
    os.mkfifo(stamp)  # never blocks the read
    assert bpe.load_table(path, _SHA) is not None


def test_the_stand_ins_map_ascii_to_itself_and_classify_as_before() -> None:
    text = "plain ASCII, then wörld ΔΣ 中文 \u00a0 ſ 😀 \ue000 \x80\x85 and 12 ٣"
    got = bpe.classify(text)
    assert got is not None and len(got) == len(text)
    table = bpe._stand_in
    assert all(table[i] == i for i in range(128))
    stand_ins = "".join(map(chr, range(0x80, 0x89)))
    for a, b in zip(text, got, strict=True):
        assert b == a if a.isascii() or a == "ſ" else b in stand_ins
    assert got[text.index("ö")] == "\x81" and got[text.index("Δ")] == "\x80"
    assert got[text.index("\u00a0")] == "\x87" and got[text.index("٣")] == "\x86"
    assert got[text.index("\ue000")] == "\x88"  # private use: other
