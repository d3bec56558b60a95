"""A FIFO input path on the streamed route (issue 25): ``run <(cmd)`` (an anonymous pipe named /dev/fd/N) or a
named pipe, with an output, is copied in bounded chunks to a private spool file as stdin is
(``paths.spooled_fifo``), then read as the file route reads a file, named by its path as the held route
names it. What a caller sees is what the held route gives (output, state, warnings, errors, report); the
FIFO itself is only read, and the spool file is gone whatever happens."""

from __future__ import annotations

import os
import re
import stat
import tempfile
import threading
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import SAMPLES, coding_session, comparable_state, jsonl, sys_msg

from ctxcompact import engine, paths, route_estimate, stream_totals
from ctxcompact.cli.render import run_json
from ctxcompact.errors import CtxCompactError, InputError
from ctxcompact.options import Options

DATA = Path(__file__).parent.parent / "data"
MASKABLE = ("maskable_tokens", "maskable_results")


@pytest.fixture(autouse=True)
def spool_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The temporary folder the spool files go to, watched: none may be left in it."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder
    assert list(folder.iterdir()) == []


@contextmanager
def _pipe(data: bytes, named: Path | None) -> Iterator[Path]:
    """A pipe giving ``data``: ``named``, a FIFO made there; else an anonymous pipe as ``<(cmd)`` gives one
    (/dev/fd/N). A reader end stays open in the test, so the data waits in the pipe whenever the run opens
    it; the writer end is open before the run starts, so the run never reads an end before it."""
    if named is None:
        keep, w = os.pipe()
        where = Path(f"/dev/fd/{keep}")
    else:
        os.mkfifo(named)
        keep = os.open(named, os.O_RDONLY | os.O_NONBLOCK)
        w = os.open(named, os.O_WRONLY)
        where = named

    def write() -> None:
        try:
            with os.fdopen(w, "wb") as sink:
                sink.write(data)
        except BrokenPipeError:
            pass  # (the run failed before reading it all)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        yield where
    finally:
        os.close(keep)
        writer.join(10)


def _call(data: bytes, work: Path, hold: bool, opts: Options, named: bool, **kw: Any) -> tuple[Any, ...]:
    out = work / "out.jsonl"
    said: list[str] = []
    with _pipe(data, work / "in.fifo" if named else None) as where:
        try:
            r = engine.run(where, opts, output=out, warn=said.append, hold=hold, **kw)
        except CtxCompactError as exc:
            return "error", type(exc).__name__, exc.exit_code, str(exc).replace(str(where), "P")
        finally:
            if named:
                os.unlink(where)
        text = str(where).encode()
    written = re.sub(rb'"timestamp":"[^"]*"', b'"timestamp":""', out.read_bytes())
    report = run_json(r, dry_run=False, output="o.jsonl")
    for k in MASKABLE:
        report["estimate"].pop(k)
    report = orjson.loads(orjson.dumps(report).replace(text, b"P").replace(str(work).encode(), b"W"))
    state = comparable_state(work / "s.json")
    state = orjson.loads(orjson.dumps(state).replace(text, b"P")) if state is not None else None
    return written.replace(text, b"P"), state, said, report


def _calls(datas: list[bytes], work: Path, hold: bool, window: int, named: bool) -> list[tuple[Any, ...]]:
    work.mkdir()
    opts = Options(window=window, state_path=work / "s.json")
    return [_call(data, work, hold, opts, named) for data in datas]


@pytest.mark.parametrize(("path", "named"), [(SAMPLES / "openai-long.jsonl", False),
                                             (DATA / "openai/agent_session.jsonl", True)],
                         ids=["anonymous", "named"])
def test_a_fifo_streamed_is_the_held_route(path: Path, named: bool, tmp_path: Path,
                                           loads: list[Any]) -> None:
    """Through a pass-through and a compaction, then a second call on the input grown, with a state: the
    same as the held route, and the streamed calls never hold the input."""
    lines = path.read_bytes().splitlines(keepends=True)
    datas = [b"".join(lines[: len(lines) // 2]), b"".join(lines)]
    for i, window in enumerate((1_000_000, 8_000)):
        held = _calls(datas, tmp_path / f"held{i}", True, window, named)
        assert len(loads) == 2
        loads.clear()
        assert _calls(datas, tmp_path / f"streamed{i}", False, window, named) == held, window
        assert loads == []
        # named by its path on both routes, never the spool's
        assert held[1][1]["input"]["path"] == ("W/in.fifo" if named else "P")


@pytest.mark.parametrize("named", [True, False], ids=["named", "anonymous"])
def test_the_fifo_is_only_read(named: bool, tmp_path: Path, spool_dir: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The FIFO is left as it was (still a FIFO, the same inode and mode, nothing else in its folder but the
    output and the state); the spool was ours, in $TMPDIR, and is gone (``spool_dir``)."""
    spools: list[Path] = []
    real = engine._run_file_locked
    monkeypatch.setattr(engine, "_run_file_locked", lambda p, *a: spools.append(p) or real(p, *a))
    data = (SAMPLES / "openai-long.jsonl").read_bytes()
    work = tmp_path / "w"
    work.mkdir()
    fifo = work / "in.fifo"
    with _pipe(data, fifo if named else None) as where:
        before = os.stat(where)
        r = engine.run(where, Options(window=8_000, state_path=work / "s.json"), output=work / "o.jsonl",
                       warn=lambda m: None)
        after = os.stat(where)
        assert stat.S_ISFIFO(after.st_mode)
        assert (after.st_ino, after.st_dev, after.st_mode, after.st_uid) == \
            (before.st_ino, before.st_dev, before.st_mode, before.st_uid)
    assert r.compacted and len(spools) == 1 and spools[0].parent == spool_dir and not spools[0].exists()
    assert spools[0].name.startswith("ctxcompact-fifo-")  # (a spool left by a crash says what it held)
    assert sorted(p.name for p in work.iterdir()) == sorted(
        ["in.fifo"] * named + ["o.jsonl", "s.json", "s.json.counts", "s.json.lock"])
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) if named else not fifo.exists()
    with pytest.raises(InputError, match=r"(/dev/fd/\d+|in.fifo) was read through a temporary copy"):
        r.transcript  # noqa: B018  (the copy is gone: said, never an empty or wrong transcript)


@pytest.mark.parametrize("data", [None, b"\n", b"x" * 5_000], ids=["no-writer", "blank", "over-the-limit"])
def test_edges_are_the_held_routes(data: bytes | None, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A FIFO nobody writes to (empty, never a hang), a blank one, one over the bound a FIFO is read to
    (``paths.STREAM_INPUT_LIMIT``, a usage error): the same on both routes, and the spool gone."""
    monkeypatch.setattr(paths, "STREAM_INPUT_LIMIT", 4_096)
    got = []
    for hold in (True, False):
        work = tmp_path / str(hold)
        work.mkdir()
        opts = Options(window=8_000, state_path=work / "s.json")
        if data is not None:
            got.append(_call(data, work, hold, opts, named=True))
            continue
        fifo = work / "in.fifo"
        os.mkfifo(fifo)
        r = engine.run(fifo, opts, output=work / "o.jsonl", warn=lambda m: None, hold=hold)
        got.append((r.exit_code, (work / "o.jsonl").read_bytes(), comparable_state(work / "s.json")))
    assert got[0] == got[1]
    if data is not None and len(data) > 4_096:
        assert got[0][:3] == ("error", "UsageError", 2) and "more than 4,096 bytes" in got[0][3]


def test_a_fifo_is_read_in_bounded_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A few MB through a pipe: the run's traced peak is a fraction of the input (held: the input's bytes
    and every record, ~12 MB)."""
    monkeypatch.setattr(paths, "SPOOL_CHUNK", 64 * 1024)
    monkeypatch.setattr(stream_totals.Totals, "BATCH_BYTES", 64 * 1024)  # (counted in batches of 1 MB)
    opts = Options(window=100_000_000, use_state=False, exact="none")
    with _pipe(jsonl([sys_msg("You are a coding agent."), *coding_session(20, tool_chars=900)]), None) as p:
        engine.run(p, opts, output=tmp_path / "warm.jsonl")  # (what a run imports is not what it holds)
    data = jsonl([sys_msg("You are a coding agent."),
                  *(m for t in range(1_600) for m in coding_session(1, tool_chars=900, start=t))])  # ~2.1 MB
    out = tmp_path / "o.jsonl"
    with _pipe(data, None) as where:
        tracemalloc.start()
        try:
            r = engine.run(where, opts, output=out, warn=lambda m: None)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    size = out.stat().st_size
    assert not r.compacted and size == len(data) > 2_000_000
    assert peak < size // 2, (peak, size)


def test_estimate_of_a_fifo_streams_from_the_files_size(tmp_path: Path, loads: list[Any],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    data = (SAMPLES / "openai-long.jsonl").read_bytes()
    opts = Options(window=3_000, use_state=False)
    with _pipe(data, None) as where:
        held = engine.estimate(where, opts).to_json()  # below the size a file streams at: held
    assert len(loads) == 1
    monkeypatch.setattr(route_estimate, "STREAMING_FROM_BYTES", len(data))
    with _pipe(data, None) as where:
        streamed = engine.estimate(where, opts).to_json()
    assert len(loads) == 1  # not held
    assert [streamed.pop(k) for k in MASKABLE] == [None, None]
    assert streamed == {k: v for k, v in held.items() if k not in MASKABLE}
