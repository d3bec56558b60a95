"""The compiled schema checks are cached in the user's cache folder (schemacheck.compiled_code): the next
process reads the code instead of compiling it, and a file that is stale, corrupt, another interpreter's,
not a code object or not the user's own is ignored and written again
(docs/measurements/performance-log.md#the-per-call-floor-cached-checks-own-lock-lazy-commands-2026-11-29)."""

from __future__ import annotations

import hashlib
import marshal
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxcompact import schemacheck

SAMPLES = Path(__file__).parents[1] / "samples"
SRC = "def _root(v):\n    return isinstance(v, dict) and v.get('a') == 1\n"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("CTXCOMPACT_CACHE_DIR", str(folder))
    return folder


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The sources compiled from scratch (the module's own ``compile``, spied on)."""
    seen: list[str] = []

    def spy(src: str, *args: Any) -> Any:
        seen.append(src)
        return compile(src, *args)

    monkeypatch.setattr(schemacheck, "compile", spy, raising=False)
    return seen


def _root(code: Any) -> Callable[[Any], bool]:
    ns: dict[str, Any] = {}
    exec(code, ns)
    return ns["_root"]


def test_the_second_compile_reads_the_cache(cache: Path, compiles: list[str]) -> None:
    first = schemacheck.compiled_code(SRC)
    assert compiles == [SRC] and schemacheck.code_path(SRC).is_file()
    second = schemacheck.compiled_code(SRC)
    assert compiles == [SRC]  # not compiled again
    assert _root(second)({"a": 1}) and not _root(second)({"a": 2}) and second.co_code == first.co_code


def test_another_source_is_another_file(cache: Path) -> None:
    """A changed schema (or checker) makes another source: the cache of the old one is never read for it."""
    other = SRC.replace("== 1", "== 2")
    assert schemacheck.code_path(other) != schemacheck.code_path(SRC)
    schemacheck.compiled_code(SRC)
    assert _root(schemacheck.compiled_code(other))({"a": 2})


def _bad_files(good: bytes) -> dict[str, bytes]:
    at = len(schemacheck._CODE_MAGIC)
    not_code = marshal.dumps(42)
    flipped = bytearray(good)
    flipped[-3] ^= 0xFF
    return {
        "empty": b"",
        "truncated": good[:-5],
        "a flipped byte": bytes(flipped),
        "another interpreter": good[:8] + b"\0\0\r\n" + good[12:],  # another bytecode magic number
        "not a code object": good[:at] + hashlib.sha256(not_code).digest() + not_code,
        "garbage with a good hash": good[:at] + hashlib.sha256(b"\xff\x00junk").digest() + b"\xff\x00junk",
    }


@pytest.mark.parametrize("case", ["empty", "truncated", "a flipped byte", "another interpreter",
                                  "not a code object", "garbage with a good hash"])
def test_a_bad_cache_file_is_ignored_and_written_again(cache: Path, compiles: list[str], case: str) -> None:
    schemacheck.compiled_code(SRC)
    path = schemacheck.code_path(SRC)
    good = path.read_bytes()
    path.write_bytes(_bad_files(good)[case])
    code = schemacheck.compiled_code(SRC)
    assert len(compiles) == 2  # compiled again
    assert _root(code)({"a": 1}) and not _root(code)({"a": 2})
    assert path.read_bytes() == good  # and the cache is whole again


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX owners and modes")
def test_a_cache_file_others_may_write_is_ignored(cache: Path, compiles: list[str]) -> None:
    schemacheck.compiled_code(SRC)
    path = schemacheck.code_path(SRC)
    path.chmod(0o666)
    schemacheck.compiled_code(SRC)
    assert len(compiles) == 2
    path.unlink()
    path.symlink_to(cache / "elsewhere.code")  # a link is not followed either
    schemacheck.compiled_code(SRC)
    assert len(compiles) == 3


def test_a_cache_folder_that_cannot_be_written_changes_nothing(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")
    monkeypatch.setenv("CTXCOMPACT_CACHE_DIR", str(blocker / "cache"))  # under a file: no folder can be made
    assert _root(schemacheck.compiled_code(SRC))({"a": 1})


def test_the_checks_from_the_cache_give_the_same_verdicts(cache: Path) -> None:
    """A new process with the cache written by another gives every verdict the compiling one gave."""
    probe = ("import sys, orjson\nfrom ctxcompact import schemacheck as s\n"
             "schema = s.load('openai.schema.json')\n"
             "lines = [orjson.loads(x) for x in open(sys.argv[1], 'rb') if x.strip()]\n"
             "lines += [{**x, 'role': 7} for x in lines] + [{'content': 'no role'}, [], None]\n"
             "print([s.conforms(schema, x) for x in lines])\n")
    env = {**os.environ, "CTXCOMPACT_CACHE_DIR": str(cache)}
    args = [sys.executable, "-c", probe, str(SAMPLES / "openai-long.jsonl")]
    cold = subprocess.run(args, env=env, capture_output=True, text=True, check=True).stdout
    written = sorted(p.name for p in cache.iterdir())
    assert written and all(p.startswith("schemacheck-") for p in written)
    warm = subprocess.run(args, env=env, capture_output=True, text=True, check=True).stdout
    assert warm == cold and "True" in cold and "False" in cold
    assert sorted(p.name for p in cache.iterdir()) == written  # read, not written again
    assert orjson.loads(cold.replace("True", "true").replace("False", "false"))


def _aged(path: Path, days: float) -> None:
    then = time.time() - days * 86400
    os.utime(path, (then, then), follow_symlinks=False)


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX owners and links")
def test_writing_a_new_cache_file_removes_the_stale_ones(cache: Path, tmp_path: Path) -> None:
    """Each changed schema, checker or interpreter writes another file: one no process has read for 30 days
    is removed when a new one is written. A recent one, a link, a file not named as ours, and what a link
    points to are kept."""
    old_src = SRC.replace("== 1", "== 3")
    schemacheck.compiled_code(old_src)
    stale = schemacheck.code_path(old_src)
    recent = cache / ("schemacheck-" + "a" * 32 + ".code")
    recent.write_bytes(b"x")
    target = tmp_path / "target.code"
    target.write_bytes(b"kept")
    link = cache / ("schemacheck-" + "b" * 32 + ".code")
    link.symlink_to(target)
    others = [cache / "schemacheck-notours.code", cache / ("schemacheck-" + "c" * 32 + ".code.tmp"),
              cache / "o200k_base-446a9538cb6c348e.ranks"]
    for p in others:
        p.write_bytes(b"y")
    for p in [stale, target, link, *others]:
        _aged(p, 31)
    _aged(recent, 29)
    schemacheck.compiled_code(SRC)  # a new file
    assert schemacheck.code_path(SRC).is_file() and not stale.exists()
    assert recent.exists() and link.is_symlink() and target.read_bytes() == b"kept"
    assert all(p.exists() for p in others)


def test_a_cache_file_in_use_is_not_stale(cache: Path) -> None:
    """Reading a cache file renews its time (at most once a day): the next new file leaves it."""
    in_use = SRC.replace("== 1", "== 4")
    schemacheck.compiled_code(in_use)
    path = schemacheck.code_path(in_use)
    _aged(path, 40)
    schemacheck.compiled_code(in_use)  # read from the cache
    assert time.time() - path.stat().st_mtime < 60
    mtime = path.stat().st_mtime_ns
    _aged(path, 0.5)
    schemacheck.compiled_code(in_use)  # read again within the day: the file is not touched
    assert path.stat().st_mtime_ns != mtime and time.time() - path.stat().st_mtime > 3600
    _aged(path, 40)
    schemacheck.compiled_code(in_use)
    schemacheck.compiled_code(SRC)  # a new file
    assert path.exists()


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX owners")
def test_another_users_stale_file_is_left(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old_src = SRC.replace("== 1", "== 5")
    schemacheck.compiled_code(old_src)
    stale = schemacheck.code_path(old_src)
    _aged(stale, 60)
    me = os.geteuid()
    monkeypatch.setattr(os, "geteuid", lambda: me + 1)  # the file now belongs to someone else
    assert schemacheck.remove_stale(cache, schemacheck.code_path(SRC)) == []
    monkeypatch.setattr(os, "geteuid", lambda: me)
    assert schemacheck.remove_stale(cache, schemacheck.code_path(SRC)) == [stale]
    assert not stale.exists()
