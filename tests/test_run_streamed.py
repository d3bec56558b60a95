"""``run`` from the command line does not hold the file (engine.run(hold=False), streaming.py): pass 1 reads,
validates, cleans, counts and decides record by record; a context that passes through is written by pass 2,
which reads the same bytes again; a compaction reads the file held with pass 1's counts. Whatever it takes,
the output, the state, the exit code, the warnings and the repairs are the held route's, byte for byte; and
its memory does not grow with the number of records."""

from __future__ import annotations

import gc
import re
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import SAMPLES

from ctxcompact import engine
from ctxcompact.errors import CtxCompactError
from ctxcompact.options import Options

DATA = Path(__file__).parent / "data"
FILES = sorted([*DATA.rglob("*.jsonl"), *SAMPLES.glob("*.jsonl")])
FILES = [p for p in FILES if "fuzz" not in p.parts]
PENDING = (b'{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function",'
           b'"function":{"name":"ls","arguments":"{}"}}]}')  # never answered: the cleaner makes its result


def _state(path: Path) -> Any:
    if not path.exists():
        return None
    state = orjson.loads(path.read_bytes().replace(str(path.parent).encode(), b"W"))
    state["calibration"].pop("updated_at", None)
    for part in [*state.get("compactions", []), state.get("summary") or {}]:
        for stamp in ("time", "duration_s", "created_at"):  # when, and how long: not what
            part.pop(stamp, None)
    return state


def _run(src: Path, work: Path, hold: bool, window: int, **kw: Any) -> tuple[Any, ...]:
    work.mkdir()
    path = work / "t.jsonl"
    path.write_bytes(src.read_bytes())
    out = work / "out.jsonl"
    said: list[str] = []
    try:
        r = engine.run(path, Options(window=window, **kw), output=out, warn=said.append, hold=hold)
    except CtxCompactError as exc:
        return "error", type(exc).__name__, str(exc).replace(str(work), "W")
    written = re.sub(rb'"timestamp":"[^"]*"', b'"timestamp":""', out.read_bytes())  # made lines say when
    written = written.replace(str(work).encode(), b"W")  # (--cite-source names the input)
    state = _state(Path(f"{path}.ctxstate.json"))
    return (written, state, r.exit_code, r.compacted, r.tokens_before, r.tokens_after, r.warnings, said,
            [str(x) for x in r.repairs], [str(p) for p in r.problems])


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(p.parents[1])) for p in FILES])
def test_every_test_file_gives_the_held_run(path: Path, tmp_path: Path) -> None:
    for i, window in enumerate((1_000_000, 3_000)):  # passes through; compacts (most files)
        held = _run(path, tmp_path / f"held{i}", True, window)
        streamed = _run(path, tmp_path / f"streamed{i}", False, window)
        assert streamed == held, window


def test_the_streamed_route_is_taken_and_writes_without_holding(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The samples that stream: pass 2 writes them (no Transcript with records comes back); a compaction
    is the held route's, with pass 1's counts (each record counted once)."""
    from ctxcompact.tokens import exact

    sizes: list[int] = []
    real = exact.count_messages
    monkeypatch.setattr(exact, "count_messages", lambda m, e=exact.DEFAULT_ENCODING: sizes.append(len(m))
                        or real(m, e))
    for name in ("openai-long", "anthropic-session"):
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes((SAMPLES / f"{name}.jsonl").read_bytes())
        r = engine.run(path, Options(window=1_000_000, use_state=False), output=tmp_path / "o.jsonl",
                       hold=False)
        assert r.streamed is not None and r.transcript.records == [] and not r.compacted
        assert (tmp_path / "o.jsonl").read_bytes() == b"".join(r.lines())  # lines() reads them again
        counted = []
        for hold in (True, False):
            sizes.clear()
            r = engine.run(path, Options(window=3_000, use_state=False), output=tmp_path / "o.jsonl",
                           hold=hold)
            assert r.compacted and r.streamed is None and r.transcript.records
            counted.append(list(sizes))
        assert counted[1] == counted[0], counted  # the held route's counting: the input counted once


def test_a_clean_transcript_is_parsed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing repaired, made or dropped: pass 2 copies the lines (as write_transcript writes them: blank
    lines, CRs and the BOM dropped) without parsing them again; a transcript the cleaner repairs is parsed
    twice and written record by record."""
    from ctxcompact import streaming

    parsed: list[int] = []
    real = streaming.parse_record
    monkeypatch.setattr(streaming, "parse_record", lambda *a: parsed.append(1) or real(*a))
    lines = [b'{"role":"user","content":"hi"}', b'{"role":"assistant","content":"ok"}'] * 100
    for name, data, twice in (("clean", b"\xef\xbb\xbf" + b"\r\n\n".join(lines) + b"\r\n", False),
                              ("repaired", b"\n".join([*lines, PENDING, lines[0]]) + b"\n", True)):
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(data)
        parsed.clear()
        r = engine.run(path, Options(window=1_000_000, use_state=False), output=tmp_path / "o.jsonl",
                       hold=False)
        assert r.streamed is not None
        records = r.estimate.records
        assert len(parsed) == (2 * records if twice else records), name
        assert _run(path, tmp_path / f"{name}h", True, 1_000_000) == \
            _run(path, tmp_path / f"{name}s", False, 1_000_000)


def test_a_file_changed_between_the_passes_is_an_error_not_a_mixed_output(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch
                                                                          ) -> None:
    from ctxcompact import streaming

    path = tmp_path / "t.jsonl"
    path.write_bytes((SAMPLES / "openai-long.jsonl").read_bytes())
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"before\n")
    real = streaming.count_file

    def then_rewrite(*a: Any, **k: Any) -> Any:
        counted = real(*a, **k)
        data = bytearray(path.read_bytes())
        i = data.index(b'"content":"') + 11
        data[i] = ord("Q") if data[i] != ord("Q") else ord("R")  # same length: only the digest tells
        path.write_bytes(bytes(data))
        return counted

    monkeypatch.setattr(engine, "count_file", then_rewrite)
    with pytest.raises(CtxCompactError, match="changed while it was read"):
        engine.run(path, Options(window=1_000_000, use_state=False), output=out, hold=False)
    assert out.read_bytes() == b"before\n"  # left as it was


def _in_flight_log(path: Path) -> Path:
    """A tool loop that ends on a result: a compaction keeps the work in flight, so the state covers less
    than the file (its fingerprint is of a shorter prefix than the passes read)."""
    _agent_log(path, 300)
    call = {"id": "call_x", "type": "function",
            "function": {"name": "bash", "arguments": '{"command": "pytest"}'}}
    with path.open("ab") as f:
        for m in ({"role": "user", "content": "now run the whole suite"},
                  {"role": "assistant", "content": "Running it.", "tool_calls": [call]},
                  {"role": "tool", "tool_call_id": "call_x", "content": "3 failed, 97 passed"}):
            f.write(orjson.dumps(m) + b"\n")
    return path


@pytest.mark.parametrize("after", ["count_file", "read_conversation"], ids=["pass-1", "pass-2"])
def test_a_compaction_of_a_file_changed_while_it_was_read_is_an_error(
        tmp_path: Path, after: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A byte of the covered prefix changed after pass 1 (pass 2's hash is not pass 1's) or after pass 2,
    before the state's fingerprint is taken (the read that takes the fingerprint of the prefix before the
    work in flight proves the bytes both passes hashed): the same error, nothing written."""
    path = _in_flight_log(tmp_path / "t.jsonl")
    out, state = tmp_path / "out.jsonl", tmp_path / "s.json"
    opts = Options(window=8000, state_path=state)
    r = engine.run(path, opts, output=out, hold=False, warn=lambda m: None)
    assert r.compacted and 0 < r.state.fingerprint.nbytes < path.stat().st_size  # the case meant
    passes: list[str] = []
    real = getattr(engine, after)

    def then_rewrite(*a: Any, **k: Any) -> Any:
        got = real(*a, **k)
        passes.append(after)
        data = bytearray(path.read_bytes())
        i = data.index(b'"content":"') + 11
        data[i] = ord("Q") if data[i] != ord("Q") else ord("R")  # same length: only the digest tells
        path.write_bytes(bytes(data))
        return got

    _in_flight_log(path)
    state.unlink()
    out.write_bytes(b"before\n")
    monkeypatch.setattr(engine, after, then_rewrite)
    with pytest.raises(CtxCompactError, match="changed while it was read"):
        engine.run(path, opts, output=out, hold=False, warn=lambda m: None)
    assert passes == [after] and out.read_bytes() == b"before\n" and not state.exists()


def _peak(path: Path, hold: bool) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        engine.run(path, Options(window=1_000_000_000, use_state=False, exact="none"),
                   output=path.with_suffix(".out"), hold=hold)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_number_of_records(tmp_path: Path) -> None:
    """Peak traced memory of a run on N and 4N distinct two-field lines: the streamed run's grows by less
    than 64 bytes per added record (its counts), the held run's by far more (so the test can fail)."""
    def make(n: int) -> Path:
        path = tmp_path / f"{n}.jsonl"
        path.write_bytes(b"".join(orjson.dumps({"role": "user" if i % 2 == 0 else "assistant",
                                                "content": f"line {i}"}) + b"\n" for i in range(n)))
        return path

    n = 5_000
    small, big = make(n), make(4 * n)
    _peak(small, False)  # warm: imports, compiled patterns, caches that do not depend on the file
    streamed = (_peak(big, False) - _peak(small, False)) / (3 * n)
    held = (_peak(big, True) - _peak(small, True)) / (3 * n)
    assert streamed < 64, f"{streamed:.0f} B per record (held: {held:.0f})"
    assert held > 4 * 64, held


@pytest.mark.parametrize("kw", [{"to": "anthropic"}, {"to": "openai"}, {"format": "openai"},
                                {"keep_trailing_results": True}, {"exact": "none"}, {"reset_state": True},
                                {"use_state": False}, {"threshold": "0"}, {"threshold": "50%"}],
                         ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_the_options_give_the_held_run(kw: dict[str, Any], tmp_path: Path) -> None:
    for name in ("openai-long", "anthropic-session", "openai-session"):
        if kw.get("format") == "openai" and name.startswith("anthropic"):
            continue
        for i, window in enumerate((1_000_000, 3_000)):
            held = _run(SAMPLES / f"{name}.jsonl", tmp_path / f"{name}held{i}", True, window, **kw)
            streamed = _run(SAMPLES / f"{name}.jsonl", tmp_path / f"{name}streamed{i}", False, window, **kw)
            assert streamed == held, (name, window)


def test_a_compaction_streams_where_it_may(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default path (threshold, extractive, an openai log, no state beyond a calibration) compacts in
    pass 2 without holding the file (compaction_stream), the held route's output and state byte for byte;
    what it may not take (--prune, another summarizer, an agent's own log) is read held, as before."""
    from ctxcompact import compaction_stream

    read: list[Path] = []
    real = compaction_stream.read_conversation
    monkeypatch.setattr(engine, "read_conversation", lambda p, *a: read.append(p) or real(p, *a))
    src = SAMPLES / "openai-long.jsonl"
    for kw in ({}, {"exact": "none"}, {"cite_source": True}, {"instructions": "keep the ports"}):
        read.clear()
        streamed = _run(src, tmp_path / f"s{len(kw)}{sorted(kw)}", False, 3_000, **kw)
        assert len(read) == 1 and streamed[3], kw  # compacted, in pass 2
        assert streamed == _run(src, tmp_path / f"h{len(kw)}{sorted(kw)}", True, 3_000, **kw)
    read.clear()
    for kw in ({"prune": True}, {"strategy": "sliding-window"}):
        _run(src, tmp_path / f"o{sorted(kw)}", False, 3_000, **kw)
    assert read == []


def _agent_log(path: Path, n: int) -> Path:
    """``n`` lines of a tool loop over a few files and commands (as a real session repeats them)."""
    lines = [orjson.dumps({"role": "system", "content": "be brief"}),
             orjson.dumps({"role": "user", "content": "fix the build; never touch setup.py"})]
    for i in range(n // 3):
        args = orjson.dumps({"command": f"pytest tests/test_m{i % 40}.py -q"}).decode()
        lines += [orjson.dumps({"role": "assistant", "content": f"Running the tests of m{i % 40}.",
                                "tool_calls": [{"id": f"call_{i}", "type": "function",
                                                "function": {"name": "bash", "arguments": args}}]}),
                  orjson.dumps({"role": "tool", "tool_call_id": f"call_{i}",
                                "content": f"{i % 7} passed in 0.{i % 10}s\n" * 8}),
                  orjson.dumps({"role": "assistant", "content": f"Module m{i % 40} is fine."})]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _peak_compacting(path: Path, hold: bool) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        r = engine.run(path, Options(window=20_000, use_state=False, exact="none"),
                       output=path.with_suffix(".out"), hold=hold, warn=lambda m: None)
        assert r.compacted
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_of_a_compaction_does_not_grow_with_the_file(tmp_path: Path) -> None:
    """Peak traced memory of a compacting run on N and 4N lines of a tool loop: the streamed run's grows by
    little per added record (pass 1's counts, the ids of the calls answered), the held run's by the records
    (so the test can fail); and both write the same."""
    n = 5_001
    small, big = _agent_log(tmp_path / "small.jsonl", n), _agent_log(tmp_path / "big.jsonl", 4 * n)
    _peak_compacting(small, False)  # warm: imports, compiled patterns, caches that do not depend on the file
    streamed = (_peak_compacting(big, False) - _peak_compacting(small, False)) / (3 * n)
    held = (_peak_compacting(big, True) - _peak_compacting(small, True)) / (3 * n)
    assert streamed < 128, f"{streamed:.0f} B per record (held: {held:.0f})"
    assert held > 8 * 128, held
    assert _run(big, tmp_path / "s", False, 20_000) == _run(big, tmp_path / "h", True, 20_000)
