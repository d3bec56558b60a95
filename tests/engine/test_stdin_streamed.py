"""Stdin on the streamed route (issue 25): ``run -`` (with an output) and ``estimate -`` (from the size a file
streams at) copy stdin in bounded chunks to a private temporary file (``paths.spooled``) and read it as the
file route reads a file, named as stdin wherever the run names its input. What a caller sees is what the
held route gives, byte for byte: the output, the state, the warnings, the errors, the ``--json`` report (but
``maskable_tokens``, null when streamed); the spool file is gone whatever happens."""

from __future__ import annotations

import errno
import io
import os
import re
import sys
import tempfile
import tracemalloc
from collections.abc import Iterator
from itertools import chain
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import SAMPLES, coding_session, grown_session, jsonl, sys_msg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcompact import engine, paths, route_estimate, route_file, stream_totals, streaming
from ctxcompact.cli.render import run_json
from ctxcompact.errors import CtxCompactError, InputError
from ctxcompact.options import Options

DATA = Path(__file__).parent.parent / "data"
FILES = [*sorted(SAMPLES.glob("*.jsonl")), DATA / "openai/agent_session.jsonl",
         DATA / "anthropic/agent_session.jsonl", DATA / "codex/agentlogs-codex-crud.jsonl",
         DATA / "claude-code/spotter-short.jsonl", DATA / "genai/adk-docs-session-export.json",
         DATA / "broken/truncated.jsonl", DATA / "broken/mixed.jsonl", DATA / "broken/empty.jsonl"]
MASKABLE = ("maskable_tokens", "maskable_results")


@pytest.fixture(autouse=True)
def spool_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temporary folder the spool files go to, watched: none may be left in it."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder
    assert list(folder.iterdir()) == []


def _stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


def _state(path: Path) -> Any:
    if not path.exists():
        return None
    state = orjson.loads(path.read_bytes())
    state["calibration"].pop("updated_at", None)
    for part in [*state.get("compactions", []), state.get("summary") or {}]:
        for stamp in ("time", "duration_s", "created_at"):  # when, and how long: not what
            part.pop(stamp, None)
    return state


def _call(data: bytes, work: Path, hold: bool, opts: Options,
          monkeypatch: pytest.MonkeyPatch) -> tuple[Any, ...]:
    """``run -`` on ``data`` as the CLI calls it (an output given), with the state ``work/s.json``."""
    _stdin(monkeypatch, data)
    out = work / "out.jsonl"
    said: list[str] = []
    try:
        r = engine.run("-", opts, output=out, warn=said.append, hold=hold)
    except CtxCompactError as exc:
        return "error", type(exc).__name__, exc.exit_code, str(exc).replace(str(work), "W")
    written = re.sub(rb'"timestamp":"[^"]*"', b'"timestamp":""', out.read_bytes())
    report = run_json(r, dry_run=False, output="o.jsonl")
    for k in MASKABLE:
        report["estimate"].pop(k)
    report = orjson.loads(orjson.dumps(report).replace(str(work).encode(), b"W"))
    return written, _state(work / "s.json"), said, report


def _calls(datas: list[bytes], work: Path, hold: bool, window: int, monkeypatch: pytest.MonkeyPatch,
           **options: Any) -> list[tuple[Any, ...]]:
    work.mkdir()
    opts = Options(window=window, state_path=work / "s.json", **options)
    return [_call(data, work, hold, opts, monkeypatch) for data in datas]


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.name}" for p in FILES])
def test_stdin_streamed_is_the_held_route(path: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Each sample and a few real fixtures (and broken ones: the same error, exit code and message) at a
    window it passes through and one it compacts at, a second call on it grown, with a state."""
    lines = path.read_bytes().splitlines(keepends=True)
    datas = [b"".join(lines[: len(lines) // 2]), b"".join(lines)]
    for i, window in enumerate((1_000_000, 3_000)):
        held = _calls(datas, tmp_path / f"held{i}", True, window, monkeypatch)
        assert _calls(datas, tmp_path / f"streamed{i}", False, window, monkeypatch) == held, window


def test_a_summary_names_stdin_as_the_held_route_does(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """``cite_source`` names the input in the summary: stdin has none to name, on either route (never the
    spool file)."""
    data = (SAMPLES / "openai-long.jsonl").read_bytes()
    streamed = _calls([data], tmp_path / "s", False, 3_000, monkeypatch, cite_source=True)
    assert streamed == _calls([data], tmp_path / "h", True, 3_000, monkeypatch, cite_source=True)
    assert b"ctxcompact-stdin" not in streamed[0][0]


@pytest.mark.parametrize("data", [b"", b"\n\n", jsonl([sys_msg("one record")])],
                         ids=["empty", "blank", "one"])
def test_empty_and_one_record_stdin(data: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _calls([data], tmp_path / "s", False, 8000, monkeypatch) == \
        _calls([data], tmp_path / "h", True, 8000, monkeypatch)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=4),
       st.sampled_from([2_500, 1_000_000]))
def test_any_split_of_appends_on_stdin_gives_the_held_run(tmp_path_factory: Any,
                                                          monkeypatch: pytest.MonkeyPatch, splits: list[int],
                                                          window: int) -> None:
    """A session grown by appends of any sizes, each call a new ``run -`` with the state the last one left:
    the same outputs, states, warnings and reports on both routes."""
    datas = grown_session(splits)
    work = tmp_path_factory.mktemp("split")
    assert _calls(datas, work / "s", False, window, monkeypatch) == \
        _calls(datas, work / "h", True, window, monkeypatch)



def _session(turns: int) -> bytes:
    return jsonl([sys_msg("You are a coding agent."), *coding_session(turns, tool_chars=900)])


@pytest.mark.parametrize("window", [1_000_000, 3_000], ids=["pass", "compact"])
def test_run_stdin_does_not_hold_it(window: int, tmp_path: Path, loads: list[Any],
                                    monkeypatch: pytest.MonkeyPatch, spool_dir: Path) -> None:
    spools: list[Path] = []
    real_count = streaming.count_file
    monkeypatch.setattr(route_file, "count_file",
                        lambda p, *a, **k: spools.append(p) or real_count(p, *a, **k))
    _stdin(monkeypatch, _session(12))
    out = tmp_path / "o.jsonl"
    opts = Options(window=window, state_path=tmp_path / "s.json")
    r = engine.run("-", opts, output=out, warn=lambda m: None)
    assert loads == [] and r.compacted == (window == 3_000)
    assert len(spools) == 1 and spools[0].parent == spool_dir and not spools[0].exists()
    assert orjson.loads((tmp_path / "s.json").read_bytes())["input"]["path"] is None  # stdin has no path
    if r.compacted:
        assert b"".join(r.lines()) == out.read_bytes()  # (a compaction's records are held)
    else:
        with pytest.raises(InputError, match="stdin was read through a temporary copy"):
            r.lines()  # the copy is gone: said, never an empty or wrong transcript
    for _ in range(2):
        with pytest.raises(InputError, match="stdin was read through a temporary copy"):
            r.transcript  # noqa: B018


def test_estimate_stdin_streams_from_the_files_size(tmp_path: Path, loads: list[Any],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    data = _session(12)
    opts = Options(window=3_000, state_path=tmp_path / "s.json")
    _stdin(monkeypatch, data)
    held = engine.estimate("-", opts).to_json()  # below the size: held, as before
    assert len(loads) == 1
    monkeypatch.setattr(route_estimate, "STREAMING_FROM_BYTES", len(data))
    _stdin(monkeypatch, data)
    streamed = engine.estimate("-", opts).to_json()
    assert len(loads) == 1  # not held
    assert [streamed.pop(k) for k in MASKABLE] == [None, None]
    assert streamed == {k: v for k, v in held.items() if k not in MASKABLE}
    monkeypatch.setattr(route_estimate, "STREAMING_FROM_BYTES", len(data) + 1)
    _stdin(monkeypatch, data)
    assert engine.estimate("-", opts).to_json() == held and len(loads) == 2


class _Pipe:
    """Stdin giving ``parts`` in turn, recording the size each read asks for; KeyboardInterrupt at its end
    if asked."""

    def __init__(self, parts: Iterator[bytes], interrupt: bool = False) -> None:
        self.parts, self.left, self.interrupt, self.asked = parts, b"", interrupt, []  # type: ignore[var-annotated]
        self.buffer = self

    def read(self, n: int | None = -1) -> bytes:
        self.asked.append(n)
        want = n if n is not None and n >= 0 else 1 << 62
        got = []
        while want > 0:
            if not self.left:
                self.left = next(self.parts, b"")
                if not self.left:
                    if self.interrupt:
                        raise KeyboardInterrupt
                    break
            got.append(self.left[:want])
            want -= len(got[-1])
            self.left = self.left[len(got[-1]):]
        return b"".join(got)


def test_stdin_is_read_in_bounded_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A few MB piped: read a chunk at a time, never whole, and the run's traced peak is a fraction of the
    input (the held route holds its bytes and every record)."""
    monkeypatch.setattr(paths, "SPOOL_CHUNK", 64 * 1024)
    monkeypatch.setattr(stream_totals.Totals, "BATCH_BYTES", 64 * 1024)  # (counted in batches of 1 MB)
    opts = Options(window=100_000_000, use_state=False, exact="none")
    _stdin(monkeypatch, _session(20))
    engine.run("-", opts, output=tmp_path / "warm.jsonl")  # (what a run imports is not what it holds)
    turns = (jsonl(coding_session(1, tool_chars=900, start=t)) for t in range(1_600))  # ~2.1 MB
    pipe = _Pipe(chain([jsonl([sys_msg("You are a coding agent.")])], turns))
    monkeypatch.setattr(sys, "stdin", pipe)
    out = tmp_path / "o.jsonl"
    tracemalloc.start()
    try:
        r = engine.run("-", opts, output=out, warn=lambda m: None)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    size = out.stat().st_size
    assert not r.compacted and size > 2_000_000
    assert all(n is not None and 0 < n <= 64 * 1024 for n in pipe.asked), set(pipe.asked)
    assert peak < size // 2, (peak, size)  # ~0.7 MB (held: ~12 MB)


def test_the_spool_is_removed_on_interrupt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", _Pipe(iter([_session(3)]), interrupt=True))
    with pytest.raises(KeyboardInterrupt):
        engine.run("-", Options(window=8000, use_state=False), output=tmp_path / "o.jsonl")
    assert not (tmp_path / "o.jsonl").exists()  # (spool_dir checks the spool is gone)


class _Full(io.RawIOBase):
    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("window", [1_000_000, 3_000], ids=["pass", "compact"])
def test_a_write_error_is_the_held_routes(window: int, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The output cannot be written: the same error on both routes, nothing written, the spool gone."""
    got = []
    for hold in (True, False):
        _stdin(monkeypatch, _session(12))
        with pytest.raises(CtxCompactError) as err:
            engine.run("-", Options(window=window, state_path=tmp_path / "s.json"),
                       output=io.BufferedWriter(_Full()), warn=lambda m: None, hold=hold)
        got.append((type(err.value), err.value.exit_code, str(err.value)))
        assert not (tmp_path / "s.json").exists()
    assert got[0] == got[1]


def test_a_full_temporary_folder_holds_stdin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The spool cannot be written (a full $TMPDIR) after two chunks, the second written in part: stdin is
    held as it always was, the same output and state, and what was written removed."""
    data = _session(40)
    monkeypatch.setattr(paths, "SPOOL_CHUNK", 4096)
    real = os.fdopen
    writes = []

    class Filling(io.FileIO):
        def write(self, b: Any) -> int:
            writes.append(len(b))
            if len(writes) == 2:
                return super().write(bytes(b)[:100])
            if len(writes) > 2:
                raise OSError(errno.ENOSPC, "No space left on device")
            return super().write(b)

    def fdopen(fd: int, mode: str = "r", buffering: int = -1) -> Any:
        return Filling(fd, "wb") if (mode, buffering) == ("wb", 0) else real(fd, mode, buffering)

    monkeypatch.setattr(os, "fdopen", fdopen)
    assert _calls([data], tmp_path / "s", False, 3_000, monkeypatch) == \
        _calls([data], tmp_path / "h", True, 3_000, monkeypatch)
    assert len(writes) == 3
