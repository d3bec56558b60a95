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
from helpers import SAMPLES, comparable_state, flip_a_content_byte, tool_loop_log

from ctxcompact import engine, route_file
from ctxcompact.errors import CtxCompactError
from ctxcompact.options import Options

DATA = Path(__file__).parent.parent / "data"
FILES = sorted([*DATA.rglob("*.jsonl"), *SAMPLES.glob("*.jsonl")])
FILES = [p for p in FILES if "fuzz" not in p.parts]
PENDING = (b'{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function",'
           b'"function":{"name":"ls","arguments":"{}"}}]}')  # never answered: the cleaner makes its result


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
    state = comparable_state(Path(f"{path}.ctxstate.json"))
    return (written, state, r.exit_code, r.compacted, r.tokens_before, r.tokens_after, r.warnings, said,
            [str(x) for x in r.repairs], [str(p) for p in r.problems])


#: the real agent logs (tests/data/codex, claude-code, genai) compact at windows of their own size: at 3,000
#: most of them pass through or do not fit (the work in flight alone is over it)
AGENT_LOGS = ("codex", "claude-code", "genai")
AGENT_WINDOWS = (8_000, 20_000, 50_000, 120_000)


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(p.parents[1])) for p in FILES])
def test_every_test_file_gives_the_held_run(path: Path, tmp_path: Path) -> None:
    agent = path.parent.name in AGENT_LOGS
    for i, window in enumerate((1_000_000, 3_000, *(AGENT_WINDOWS if agent else ()))):
        held = _run(path, tmp_path / f"held{i}", True, window)
        streamed = _run(path, tmp_path / f"streamed{i}", False, window)
        assert streamed == held, window


AGENT_FILES = [p for p in FILES if p.parent.name in AGENT_LOGS]


def _calls(src: Path, work: Path, hold: bool, window: int) -> list[tuple[Any, ...]]:
    """A first call on the first half of ``src``'s lines, then a second on all of them, with the state and
    count cache the first left (the hook's calls as the log grows)."""
    lines = src.read_bytes().splitlines(keepends=True)
    work.mkdir()
    path = work / "t.jsonl"
    got = []
    for end in (len(lines) // 2, len(lines)):
        path.write_bytes(b"".join(lines[:end]))
        out = work / "out.jsonl"
        said: list[str] = []
        try:
            r = engine.run(path, Options(window=window), output=out, warn=said.append, hold=hold)
        except CtxCompactError as exc:
            got.append(("error", type(exc).__name__, str(exc).replace(str(work), "W")))
            continue
        written = re.sub(rb'"timestamp":"[^"]*"', b'"timestamp":""', out.read_bytes())
        state = comparable_state(Path(f"{path}.ctxstate.json"))
        got.append((written, state, r.exit_code, r.compacted, r.tokens_before,
                    r.tokens_after, r.warnings, said, [str(x) for x in r.repairs]))
    return got


@pytest.mark.parametrize("path", AGENT_FILES, ids=[str(p.relative_to(p.parents[1])) for p in AGENT_FILES])
def test_a_second_call_on_a_real_agent_log_gives_the_held_run(path: Path, tmp_path: Path) -> None:
    """The second call starts at the first's resume point (codex, genai) and compacts in pass 2 (codex):
    what the held route writes and keeps, call after call."""
    for i, window in enumerate((1_000_000, *AGENT_WINDOWS)):
        held = _calls(path, tmp_path / f"held{i}", True, window)
        assert _calls(path, tmp_path / f"streamed{i}", False, window) == held, window


def test_the_streamed_route_is_taken_and_writes_without_holding(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The samples that stream: pass 2 writes them (the records are made only when read); a compaction
    is the held route's, with pass 1's counts (each record counted once)."""
    from ctxcompact.tokens import exact

    sizes: list[int] = []
    real = exact.count_token_texts
    monkeypatch.setattr(exact, "count_token_texts", lambda m, e=exact.DEFAULT_ENCODING: sizes.append(len(m))
                        or real(m, e))
    for name in ("openai-long", "anthropic-session"):
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes((SAMPLES / f"{name}.jsonl").read_bytes())
        r = engine.run(path, Options(window=1_000_000, use_state=False), output=tmp_path / "o.jsonl",
                       hold=False)
        assert r.streamed is not None and not r.compacted
        assert (tmp_path / "o.jsonl").read_bytes() == b"".join(r.lines())  # lines() reads them again
        held = engine.run(path, Options(window=1_000_000, use_state=False), output=None, hold=True)
        assert r.transcript.records == held.transcript.records  # made when read, as the held route makes it
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
        flip_a_content_byte(path)
        return counted

    monkeypatch.setattr(route_file, "count_file", then_rewrite)
    with pytest.raises(CtxCompactError, match="changed while it was read"):
        engine.run(path, Options(window=1_000_000, use_state=False), output=out, hold=False)
    assert out.read_bytes() == b"before\n"  # left as it was


def _in_flight_log(path: Path) -> Path:
    """A tool loop that ends on a result: a compaction keeps the work in flight, so the state covers less
    than the file (its fingerprint is of a shorter prefix than the passes read)."""
    tool_loop_log(path, 300)
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
    real = getattr(route_file, after)

    def then_rewrite(*a: Any, **k: Any) -> Any:
        got = real(*a, **k)
        passes.append(after)
        flip_a_content_byte(path)
        return got

    _in_flight_log(path)
    state.unlink()
    out.write_bytes(b"before\n")
    monkeypatch.setattr(route_file, after, then_rewrite)
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


def test_memory_does_not_grow_with_the_number_of_records(tmp_path: Path, small_batches: int) -> None:
    """Peak traced memory of a run on N and 4N distinct two-field lines: the streamed run's grows by less
    than 200 bytes per added record (its counts; ~2 measured), the held run's by far more (~1,400: so the
    test can fail)."""
    def make(n: int) -> Path:
        path = tmp_path / f"{n}.jsonl"
        path.write_bytes(b"".join(orjson.dumps({"role": "user" if i % 2 == 0 else "assistant",
                                                "content": f"line {i}"}) + b"\n" for i in range(n)))
        return path

    n = small_batches
    small, big = make(n), make(4 * n)
    _peak(small, False)  # warm: imports, compiled patterns, caches that do not depend on the file
    streamed = (_peak(big, False) - _peak(small, False)) / (3 * n)
    held = (_peak(big, True) - _peak(small, True)) / (3 * n)
    assert streamed < 200, f"{streamed:.0f} B per record (held: {held:.0f})"
    assert held > 4 * streamed, (held, streamed)


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
    monkeypatch.setattr(route_file, "read_conversation", lambda p, *a: read.append(p) or real(p, *a))
    src = SAMPLES / "openai-long.jsonl"
    for kw in ({}, {"exact": "none"}, {"cite_source": True}, {"instructions": "keep the ports"}):
        read.clear()
        streamed = _run(src, tmp_path / f"s{len(kw)}{sorted(kw)}", False, 3_000, **kw)
        assert len(read) == 1 and streamed[3], kw  # compacted, in pass 2
        assert streamed == _run(src, tmp_path / f"h{len(kw)}{sorted(kw)}", True, 3_000, **kw)
    read.clear()
    _run(src, tmp_path / "o-prune", False, 3_000, prune=True)
    assert read == []
    # (the sliding window's events: made in pass 2 too, tests/strategies/test_sliding_streamed.py)
    _run(src, tmp_path / "o-sw", False, 3_000, strategy="sliding-window")
    assert read == [tmp_path / "o-sw" / "t.jsonl"]
    read.clear()
    # a Codex rollout: its lines copied, then the compacted line (CodexFormat.compaction_appended)
    codex = DATA / "codex" / "agentlogs-codex-crud.jsonl"
    streamed = _run(codex, tmp_path / "codex-s", False, 8_000)
    assert read == [tmp_path / "codex-s" / "t.jsonl"] and streamed[3]
    lines = re.sub(rb'"timestamp":"[^"]*"', b'"timestamp":""', codex.read_bytes())  # (as _run writes them)
    assert streamed[0].startswith(lines) and b'"type":"compacted"' in streamed[0][len(lines):]
    assert streamed == _run(codex, tmp_path / "codex-h", True, 8_000)


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


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> int:
    """Pass 1 counts settled records in batches of at most 256 (not 4,096): a batch is held while counted,
    so the memory tests' smaller file (N records) need only be over 256, not 4,096, for its peak to hold a
    whole batch as the larger one's does; they then run on 2,001 records, not 5,001."""
    from ctxcompact import stream_totals

    monkeypatch.setattr(stream_totals.Totals, "BATCH_RECORDS", 256)
    return 2_001


def test_memory_of_a_compaction_does_not_grow_with_the_file(tmp_path: Path, small_batches: int) -> None:
    """Peak traced memory of a compacting run on N and 4N lines of a tool loop: the streamed run's grows by
    little per added record (pass 1's counts, the ids of the calls answered), the held run's by the records
    (so the test can fail); and both write the same."""
    n = small_batches
    small, big = tool_loop_log(tmp_path / "small.jsonl", n), tool_loop_log(tmp_path / "big.jsonl", 4 * n)
    fewer = tool_loop_log(tmp_path / "fewer.jsonl", n // 3)
    _peak_compacting(fewer, False)  # warm: imports, compiled patterns, caches that do not depend on the file
    streamed = (_peak_compacting(big, False) - _peak_compacting(small, False)) / (3 * n)
    # the held run (which grows by its records from the first) on N/3 and N: that the measure sees growth
    held = (_peak_compacting(small, True) - _peak_compacting(fewer, True)) / (n - n // 3)
    assert streamed < 128, f"{streamed:.0f} B per record (held: {held:.0f})"
    assert held > 8 * 128, held
    assert _run(small, tmp_path / "s", False, 20_000) == _run(small, tmp_path / "h", True, 20_000)


# -------------------------------------------------------------------------- after a compaction (covered)
# A state with a covered prefix (a summary's watermark) streams too (covered.py): pass 1 proves the prefix
# and reads its lead (the system lines by their spans, the summary), both passes read only after it.

def _gen_lines(seed: int, chars: int) -> list[bytes]:
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_openai", Path(__file__).parent.parent.parent / "bench"
                                                  / "gen_openai.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    return [orjson.dumps(m) + b"\n" for m in gen.messages(seed, chars)]


LONG = _gen_lines(7, 600_000)


def _hook_calls(work: Path, hold: bool, datas: list[bytes], window: int = 60_000, edit: Any = None,
           last: dict[str, Any] | None = None, **kw: Any) -> list[tuple[Any, ...]]:
    """One ``run`` per input in ``datas`` (the file rewritten with it, the state kept), as the hook calls;
    ``edit(state_dict)`` changes the state before the last call (a corrupt state), ``last`` its options."""
    work.mkdir()
    path, out, got = work / "t.jsonl", work / "out.jsonl", []
    for i, data in enumerate(datas):
        path.write_bytes(data)
        state = Path(f"{path}.ctxstate.json")
        if edit is not None and i == len(datas) - 1 and state.exists():
            kept = orjson.loads(state.read_bytes())
            edit(kept)
            state.write_bytes(orjson.dumps(kept))
        said: list[str] = []
        try:
            opts = Options(window=window, **({**kw, **(last or {})} if i == len(datas) - 1 else kw))
            r = engine.run(path, opts, output=out, warn=said.append, hold=hold)
        except CtxCompactError as exc:
            got.append(("error", type(exc).__name__, exc.exit_code, str(exc).replace(str(work), "W")))
            continue
        written = re.sub(rb'"timestamp":"[^"]*"', b'"timestamp":""', out.read_bytes())
        got.append((written.replace(str(work).encode(), b"W"), comparable_state(state), r.exit_code,
                    r.compacted, r.tokens_before, r.tokens_after, r.warnings, said,
                    [str(x) for x in r.repairs], r.estimate.records, r.estimate.covered))
    return got



def test_calls_after_compactions_stream_and_give_the_held_run(tmp_path: Path, loads: list[Any]) -> None:
    """A growing transcript compacted, passed through, compacted again (the earlier summary carried into
    the next), each call a new ``run``: the streamed calls never hold the file and give the held calls'
    outputs, states, reports and warnings byte for byte."""
    cuts = [60, 70, 75, 90, 100, 120, 150, 155, 160, len(LONG)]
    datas = [b"".join(LONG[:n]) for n in cuts]
    for kw in ({}, {"exact": "none"}, {"cite_source": True}, {"format": "openai"}):
        loads.clear()
        streamed = _hook_calls(tmp_path / f"s{sorted(kw)}", False, datas, **kw)
        assert loads == [], kw  # every call streamed: the compactions and the calls after them
        held = _hook_calls(tmp_path / f"h{sorted(kw)}", True, datas, **kw)
        assert streamed == held, kw
        assert sum(1 for s in streamed if s[3]) >= 3 and streamed[2][10] > 0  # compacted thrice, covered


def test_an_anthropic_log_after_a_compaction_streams(tmp_path: Path, loads: list[Any]) -> None:
    from ctxcompact.formats.jsonl import read_transcript, write_transcript

    lines = list(write_transcript(read_transcript(b"".join(LONG), "openai").transcript, "anthropic"))
    datas = [b"".join(lines[:n]) for n in (len(lines) // 3, len(lines) // 2, 2 * len(lines) // 3, len(lines))]
    streamed = _hook_calls(tmp_path / "s", False, datas, window=40_000)
    held_loads = len(loads)
    assert _hook_calls(tmp_path / "h", True, datas, window=40_000) == streamed
    assert held_loads == 0 and streamed[0][3] and streamed[1][10] > 0


@pytest.mark.parametrize("case", ["edited prefix", "truncated", "glued to the prefix", "newline then more",
                                  "system span not a line", "system span past the file",
                                  "system span a user line", "another format given"])
def test_a_covered_prefix_in_error_is_the_held_routes_error(tmp_path: Path, case: str) -> None:
    """What is wrong with the covered prefix: the held route's error, message and exit code (3 for the
    state; the input's own error for text glued to the prefix's unterminated last line)."""
    n = next(i for i in range(60, len(LONG)) if b'"role":"assistant"' in LONG[i - 1]
             and b'"tool_calls"' not in LONG[i - 1])  # a turn answered: no work in flight kept after it
    head = b"".join(LONG[:n])
    first = head[:-1]  # the compaction covers the whole file, which ends on a line without its newline
    later, edit, last = first + b"".join(LONG[n:n + 10]), None, {}
    if case == "edited prefix":
        i = first.index(b'"content":"') + 11
        later = first[:i] + (b"Q" if first[i:i + 1] != b"Q" else b"R") + first[i + 1:]
    elif case == "truncated":
        later = first[:len(first) // 2]
    elif case == "glued to the prefix":
        later = first + LONG[n]
    elif case == "newline then more":
        later = first + b"\n" + b"".join(LONG[n:n + 10])
    elif case.startswith("system span"):
        later = head + b"".join(LONG[n:n + 10])
        span = {"not a line": [1, 10], "past the file": [0, 10**9], "a user line": None}[case[12:]]

        def edit(state: dict[str, Any]) -> None:
            user = next(i for i, line in enumerate(LONG) if b'"role":"user"' in line)
            at = len(b"".join(LONG[:user]))
            state["fingerprint"]["system_lines"] = [span or [at, len(LONG[user]) - 1]]
    else:
        last = {"format": "anthropic"}
    datas = [first, later]
    streamed = _hook_calls(tmp_path / "s", False, datas, window=20_000, edit=edit, last=last)
    held = _hook_calls(tmp_path / "h", True, datas, window=20_000, edit=edit, last=last)
    assert streamed == held
    assert streamed[0][3] and streamed[0][1]["fingerprint"]["bytes"] == len(first)  # all of it covered
    if case != "newline then more":
        assert streamed[1][0] == "error", streamed[1][:3]
        want = {"glued to the prefix": 1, "another format given": 2}.get(case, 3)  # input, usage, state
        assert streamed[1][2] == want, streamed[1]


def _peak_after_a_compaction(work: Path, more: int, hold: bool) -> int:
    """Peak traced memory of the call after a compaction, ``more`` two-field lines appended since."""
    work.mkdir(exist_ok=True)
    path = work / "t.jsonl"
    for side in (Path(f"{path}.ctxstate.json"), Path(f"{path}.ctxstate.json.counts")):
        side.unlink(missing_ok=True)
    base = b"".join(LONG[:90])
    path.write_bytes(base)
    assert engine.run(path, Options(window=20_000, exact="none"), output=work / "o", hold=False).compacted
    path.write_bytes(base + b"".join(orjson.dumps({"role": "user" if i % 2 == 0 else "assistant",
                                                   "content": f"line {i}"}) + b"\n" for i in range(more)))
    gc.collect()
    tracemalloc.start()
    try:
        r = engine.run(path, Options(window=1_000_000_000, exact="none"), output=work / "o", hold=hold)
        assert not r.compacted and r.estimate.covered > 0
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_after_a_compaction_does_not_grow_with_the_records(tmp_path: Path, loads: list[Any],
                                                                  small_batches: int) -> None:
    """The call after a compaction (the hook's usual call) does not hold the file: its peak grows by less
    than 200 bytes per record appended since (~19 B measured: what the count cache and the call ids keep a
    record, as on any streamed call with a state), the held run's by far more (so the test can fail)."""
    n = small_batches
    _peak_after_a_compaction(tmp_path / "w", n, False)  # warm: imports, patterns, caches
    loads.clear()
    streamed = (_peak_after_a_compaction(tmp_path / "w", 4 * n, False)
                - _peak_after_a_compaction(tmp_path / "w", n, False)) / (3 * n)
    assert loads == []  # InputData.load: never, on the streamed calls
    held = (_peak_after_a_compaction(tmp_path / "w", 4 * n, True)
            - _peak_after_a_compaction(tmp_path / "w", n, True)) / (3 * n)
    assert streamed < 200, f"{streamed:.0f} B per record (held: {held:.0f})"
    assert held > 4 * streamed, (held, streamed)


def _codex_log(path: Path, n: int) -> Path:
    """A Codex rollout of ``n`` items of a tool loop (``helpers.tool_loop_log``'s, as rollout items)."""
    def item(payload: dict[str, Any]) -> bytes:
        return orjson.dumps({"timestamp": "2026-01-01T00:00:00.000Z", "type": "response_item",
                             "payload": payload})

    def text(role: str, words: str) -> dict[str, Any]:
        kind = "output_text" if role == "assistant" else "input_text"
        return {"type": "message", "role": role, "content": [{"type": kind, "text": words}]}

    lines = [orjson.dumps({"timestamp": "2026-01-01T00:00:00.000Z", "type": "session_meta",
                           "payload": {"id": "s-1", "instructions": "be brief"}}),
             item(text("user", "fix the build; never touch setup.py"))]
    for i in range(n // 3):
        args = orjson.dumps({"command": f"pytest tests/test_m{i % 40}.py -q"}).decode()
        lines += [item({"type": "function_call", "name": "shell", "arguments": args, "call_id": f"call_{i}"}),
                  item({"type": "function_call_output", "call_id": f"call_{i}",
                        "output": f"{i % 7} passed in 0.{i % 10}s\n" * 8}),
                  item(text("assistant", f"Module m{i % 40} is fine."))]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _adk_log(path: Path, n: int) -> Path:
    """ADK events of ``n`` records of a tool loop (``helpers.tool_loop_log``'s, as events with timestamps)."""
    def event(i: int, role: str, parts: list[dict[str, Any]]) -> bytes:
        return orjson.dumps({"author": "agent" if role == "model" else "user", "invocationId": f"e-{i // 3}",
                             "id": f"ev-{i}", "timestamp": 1_700_000_000 + i, "actions": {},
                             "content": {"role": role, "parts": parts}})

    lines = [event(0, "user", [{"text": "fix the build; never touch setup.py"}])]
    for i in range(n // 3):
        call = {"name": "bash", "args": {"command": f"pytest tests/test_m{i % 40}.py -q"}, "id": f"call_{i}"}
        result = {"output": f"{i % 7} passed in 0.{i % 10}s\n" * 8}
        out = {"name": "bash", "id": f"call_{i}", "response": result}
        lines += [event(3 * i + 1, "model", [{"functionCall": call}]),
                  event(3 * i + 2, "user", [{"functionResponse": out}]),
                  event(3 * i + 3, "model", [{"text": f"Module m{i % 40} is fine."}])]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


@pytest.mark.parametrize("make", [_codex_log, _adk_log], ids=["codex", "adk-events"])
def test_memory_of_an_agent_log_compaction_does_not_grow_with_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_batches: int, make: Any) -> None:
    """An append-only log's compaction (its lines copied, then the compaction: Codex's compacted line,
    ADK's compaction event) is made in pass 2 too: peak traced memory on N and 4N items grows by little per
    added record on the streamed route, by the records on the held one (so the test can fail); and both
    write the same."""
    from ctxcompact import compaction_stream
    from ctxcompact.formats import base

    read: list[Path] = []
    real = compaction_stream.read_conversation
    monkeypatch.setattr(route_file, "read_conversation", lambda p, *a: read.append(p) or real(p, *a))
    # the scan for compaction lines reads 64 KiB at a time, not 1 MiB: a buffer the smaller file (~450 KB)
    # fills as the larger one does, so it cancels out
    monkeypatch.setattr(base.marked_lines, "__defaults__", (1 << 16,))
    n = small_batches
    small, big = make(tmp_path / "small.jsonl", n), make(tmp_path / "big.jsonl", 4 * n)
    fewer = make(tmp_path / "fewer.jsonl", n // 3)
    _peak_compacting(fewer, False)  # warm: imports, compiled patterns, caches that do not depend on the file
    read.clear()
    streamed = (_peak_compacting(big, False) - _peak_compacting(small, False)) / (3 * n)
    assert set(read) == {small, big}  # every streamed run compacted in pass 2
    # the held run (which grows by its records from the first) on N/3 and N: that the measure sees growth
    held = (_peak_compacting(small, True) - _peak_compacting(fewer, True)) / (n - n // 3)
    assert streamed < 128, f"{streamed:.0f} B per record (held: {held:.0f})"
    assert held > 8 * 128, held
    assert _run(small, tmp_path / "s", False, 20_000) == _run(small, tmp_path / "h", True, 20_000)


# -------------------------------------------------------------------------- one read for a compaction
# Pass 1 gathers the conversation as it counts when the file will most likely compact
# (compaction_stream.gathering: GATHER_BYTES_PER_TOKEN bytes a token of the threshold), so pass 2 does not
# read the file again; what it gathers is what pass 2 reads.

@pytest.fixture
def compactions(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool, bool]]:
    """Every streamed compaction: (format, whether pass 1 gathered it, whether after a covered prefix)."""
    from ctxcompact import compaction_stream

    seen: list[tuple[str, bool, bool]] = []
    real = compaction_stream.read_conversation

    def spy(path: Path, counted: Any, *a: Any) -> Any:
        seen.append((counted.format, counted.gathered is not None, counted.covered is not None))
        return real(path, counted, *a)

    monkeypatch.setattr(route_file, "read_conversation", spy)
    return seen


def test_a_compaction_gathered_in_pass_1_gives_the_held_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compactions: list[tuple[str, bool, bool]]) -> None:
    """Every test file compacted with the conversation gathered in pass 1 gives the held run byte for byte
    (test_every_test_file_gives_the_held_run reads most of them in pass 2: they are under the ratio);
    gathered for every context format's compaction, not for an append-only log's (which copies its lines in
    pass 2)."""
    from ctxcompact import compaction_stream
    from ctxcompact.formats import get_format

    monkeypatch.setattr(compaction_stream, "GATHER_BYTES_PER_TOKEN", 0)
    for path in FILES:
        agent = path.parent.name in AGENT_LOGS
        for i, window in enumerate((3_000, *(AGENT_WINDOWS if agent else ()))):
            held = _run(path, tmp_path / f"{path.parent.name}-{path.stem}-held{i}", True, window)
            streamed = _run(path, tmp_path / f"{path.parent.name}-{path.stem}-streamed{i}", False, window)
            assert streamed == held, (path, window)
    assert len(compactions) > 20
    for fmt, gathered, _ in compactions:
        assert gathered == (get_format(fmt).compaction_seen() is None), fmt


def test_the_calls_after_a_compaction_gathered_in_pass_1_give_the_held_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compactions: list[tuple[str, bool, bool]]) -> None:
    """A growing transcript's calls (a covered prefix read first, resume points), the conversation gathered
    in pass 1 wherever pass 1 reads from the start or the covered prefix: the held calls' outputs, states
    and reports; a compaction after a covered prefix among them was gathered."""
    from ctxcompact import compaction_stream

    monkeypatch.setattr(compaction_stream, "GATHER_BYTES_PER_TOKEN", 0)
    datas = [b"".join(LONG[:n]) for n in (60, 70, 75, 90, 100, 120, 150, 155, 160, len(LONG))]
    for kw in ({}, {"exact": "none"}):
        compactions.clear()
        streamed = _hook_calls(tmp_path / f"s{sorted(kw)}", False, datas, **kw)
        assert streamed == _hook_calls(tmp_path / f"h{sorted(kw)}", True, datas, **kw)
        assert sum(1 for s in streamed if s[3]) >= 3
        assert compactions[0][1:] == (True, False), compactions  # the first: from the start
        assert any(c[1:] == (True, True) for c in compactions), compactions  # one after a covered prefix


def test_a_file_that_will_hardly_compact_is_not_gathered(tmp_path: Path,
                                                         compactions: list[tuple[str, bool, bool]]) -> None:
    """Under GATHER_BYTES_PER_TOKEN bytes a token of the threshold, pass 1 does not gather (a run that
    passes through would have paid for it): pass 2 reads the compaction; over it, pass 1 gathers."""
    from ctxcompact import compaction_stream

    path = SAMPLES / "openai-long.jsonl"
    size = path.stat().st_size
    over = size // compaction_stream.GATHER_BYTES_PER_TOKEN  # the file is just that many bytes a token
    for threshold, gathered in ((over + 1, False), (over, True)):
        compactions.clear()
        r = _run(path, tmp_path / f"t{threshold}", False, 1_000_000, threshold=str(threshold))
        assert r[3] and compactions == [("openai", gathered, False)], (threshold, compactions)


def test_the_call_after_a_compaction_gathers_by_what_follows_the_covered_prefix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a compaction pass 1 reads only what follows the covered prefix: whether it gathers is decided on
    those bytes, not on the file's size (a hook's call after a compaction of a large file gathered, loading
    and feeding the fact store on every call: ~0.1 CPU-s on a 10 MB session)."""
    from ctxcompact import compaction_stream

    made: list[int] = []
    real = compaction_stream.Gathering.__init__

    def counted(self: Any, *a: Any, **kw: Any) -> None:
        made.append(1)
        real(self, *a, **kw)

    monkeypatch.setattr(compaction_stream.Gathering, "__init__", counted)
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(LONG[:150]))
    threshold = str(path.stat().st_size // compaction_stream.GATHER_BYTES_PER_TOKEN)
    opts = Options(window=1_000_000, threshold=threshold)
    assert engine.run(path, opts, output=tmp_path / "out.jsonl", hold=False).compacted
    assert made == [1]  # the whole file read: at the ratio, gathered
    with path.open("ab") as f:
        f.write(b"".join(LONG[150:155]))
    made.clear()
    engine.run(path, opts, output=tmp_path / "out.jsonl", hold=False)
    assert orjson.loads(Path(f"{path}.ctxstate.json").read_bytes())["watermark"] > 0
    assert made == []  # what follows the covered prefix is far under the ratio
