"""The count cache beside the state (docs/concepts/state.md#the-count-cache): a call counts only the records
it has not seen, and gives what a call from scratch gives, whatever the appends (also when the transcript
needs repairs, and in every format); a rewritten line is counted again; a corrupt cache is rebuilt."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import orjson
import pytest
from helpers import SAMPLES, comparable_state
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcompact import api
from ctxcompact.state.cache import cache_path

_GEN = Path(__file__).parent.parent.parent / "bench" / "gen_openai.py"
_spec = importlib.util.spec_from_file_location("gen_openai", _GEN)
assert _spec is not None and _spec.loader is not None
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)

LINES = [orjson.dumps(m) + b"\n" for m in gen.messages(7, 120_000)]
assert len(LINES) >= 50


def _run(path: Path, out: Path, *, window: int = 400_000, hold: bool = True, **kw) -> tuple:
    r = api.run(path, api.Options(window=window, **kw), output=out, hold=hold)
    kept = Path(f"{path}.ctxstate.json")
    state = comparable_state(kept) if kw.get("use_state", True) else None
    rep = r.estimate
    written = re.sub(rb'"timestamp":"[^"]*"', b'"timestamp":""', out.read_bytes())  # made lines say when
    return (written, state, r.exit_code, r.compacted, rep.heuristic, rep.exact,
            rep.calibrated.tokens, rep.would_compact, rep.records, [str(x) for x in r.repairs], r.warnings)


def _sequence(tmp: Path, lines: list[bytes], cuts: list[int], *, cold: bool, **kw) -> list[tuple]:
    path = tmp / "t.jsonl"
    state = Path(f"{path}.ctxstate.json")
    for f in (state, cache_path(state)):
        f.unlink(missing_ok=True)
    results = []
    for end in cuts:
        path.write_bytes(b"".join(lines[:end]))
        if cold:
            cache_path(state).unlink(missing_ok=True)
        results.append(_run(path, tmp / "out.jsonl", **kw))
    return results


def _drawn_cuts(data, n: int, least: int = 2, most: int = 4) -> list[int]:
    """Where hypothesis cuts ``n`` lines into appends (each call sees the lines up to its cut)."""
    return sorted(set(data.draw(st.lists(st.integers(min_value=1, max_value=n), min_size=least,
                                         max_size=most))))


def _resumed_as_from_scratch(tmp: Path, lines: list[bytes], cuts: list[int], *, cold_hold: bool | None = None,
                             **kw) -> None:
    """The calls that resume (the count cache kept) answer as calls from scratch do; ``cold_hold`` the
    route of the calls from scratch (default: the resuming calls' own)."""
    resumed = _sequence(tmp, lines, cuts, cold=False, **kw)
    if cold_hold is not None:
        kw["hold"] = cold_hold
    assert resumed == _sequence(tmp, lines, cuts, cold=True, **kw)


def _second_call_from_the_resume_point(tmp: Path, lines: list[bytes], new_process: dict,
                                       parsed: list[int]) -> tuple[tuple, tuple, Path]:
    """A streamed call on all but the last 5 lines, then one on all of them: the second parses nothing
    before the resume point the first left, only the lines from it (and the 5 new ones), and proves the
    schema of those 5 only. Returns both calls' results and the transcript's path."""
    path, out = tmp / "t.jsonl", tmp / "out.jsonl"
    path.write_bytes(b"".join(lines[:-5]))
    first = _run(path, out, hold=False)
    assert len(set(parsed)) == len(lines) - 5  # every line, the first time
    at = _resume_at(path)
    assert at > 0
    after = sum(1 for n in range(len(lines) - 5) if len(b"".join(lines[:n])) >= at)
    parsed.clear()
    new_process.update(schema=0)
    path.write_bytes(b"".join(lines))
    got = _run(path, out, hold=False)
    assert min(parsed) == at  # nothing before the resume point is parsed, by either pass
    assert len(set(parsed)) == after + 5 < len(lines) // 2
    assert new_process["schema"] == 5  # the lines from the resume point to the settled prefix's end: proven
    assert first[0] != got[0]
    return first, got, path


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.integers(min_value=1, max_value=len(LINES)), min_size=1, max_size=4),
       exact_opt=st.sampled_from(["tiktoken", "none"]), window=st.sampled_from([400_000, 30_000]))
def test_any_split_of_appends_gives_the_cold_answer(tmp_path, cuts, exact_opt, window):
    """Below the threshold and across compactions (the small window), with the cache or without it."""
    cuts = sorted(set(cuts))
    cached = _sequence(tmp_path, LINES, cuts, cold=False, exact=exact_opt, window=window)
    cold = _sequence(tmp_path, LINES, cuts, cold=True, exact=exact_opt, window=window)
    assert cached == cold


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.integers(min_value=1, max_value=len(LINES)), min_size=1, max_size=4),
       exact_opt=st.sampled_from(["tiktoken", "none"]), window=st.sampled_from([400_000, 30_000]))
def test_any_split_of_appends_gives_the_held_answer_when_streamed(tmp_path, cuts, exact_opt, window):
    """The command line's run, which does not hold the file (two passes by offset), with its count cache:
    the same outputs and states as the held route from scratch, whatever the appends."""
    cuts = sorted(set(cuts))
    streamed = _sequence(tmp_path, LINES, cuts, cold=False, exact=exact_opt, window=window, hold=False)
    held = _sequence(tmp_path, LINES, cuts, cold=True, exact=exact_opt, window=window)
    assert streamed == held


@pytest.mark.parametrize("hold", [True, False])
def test_a_second_call_counts_only_the_appended_records(tmp_path, counted, hold):
    path = tmp_path / "t.jsonl"
    out = tmp_path / "out.jsonl"
    path.write_bytes(b"".join(LINES[:40]))
    _run(path, out, hold=hold)
    assert counted == [40]
    counted.clear()
    path.write_bytes(b"".join(LINES[:45]))
    _run(path, out, hold=hold)
    assert counted == [5]  # the five appended records, nothing else
    counted.clear()
    _run(path, out, hold=hold)
    assert counted == []  # nothing new: nothing counted


def test_a_trailing_tool_result_and_a_missing_result_are_repaired_and_cached(tmp_path, counted):
    """Repairs that depend on the end of the transcript (the appended reply, the synthetic result of a
    pending call) are the cleaner's, on every call; only the input lines are cached."""
    calls = [{"role": "user", "content": "go"},
             {"role": "assistant", "content": None, "tool_calls": [
                 {"id": "a", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
                 {"id": "b", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
             {"role": "tool", "tool_call_id": "a", "content": "x" * 400}]
    lines = [orjson.dumps(m) + b"\n" for m in calls]
    more = [orjson.dumps({"role": "user", "content": f"next {i}"}) + b"\n" for i in range(3)]
    warm = _sequence(tmp_path, lines + more, [3, 4, 6], cold=False)
    # the new lines; the records the cleaner makes (the synthetic result, the appended reply) are the same
    # texts on every call: counted once, then kept by what they count
    assert counted == [3 + 2, 1, 2]
    cold = _sequence(tmp_path, lines + more, [3, 4, 6], cold=True)
    assert warm == cold
    kinds = [[k.split(": ")[1] for k in w[9]] for w in warm]
    assert kinds[0] == ["missing_result", "appended_reply"] and kinds[1] == ["missing_result"]


@pytest.mark.parametrize("fmt", ["anthropic", "claude-code", "codex", "genai"])
def test_every_format_takes_the_cache(tmp_path, fmt, counted):
    sample = SAMPLES / f"{fmt}-session.jsonl"
    lines = sample.read_bytes().splitlines(keepends=True)
    lines = [line if line.endswith(b"\n") else line + b"\n" for line in lines if line.strip()]
    cuts = [max(1, len(lines) // 2), len(lines)]
    warm = _sequence(tmp_path, lines, cuts, cold=False, format=fmt)
    second = counted[len(counted) // 2:]
    counted.clear()
    cold = _sequence(tmp_path, lines, cuts, cold=True, format=fmt)
    assert warm == cold
    assert sum(second) < sum(counted[len(counted) // 2:])  # the second call counted less than from scratch


def test_a_rewritten_line_is_counted_again(tmp_path, counted):
    path = tmp_path / "t.jsonl"
    out = tmp_path / "out.jsonl"
    path.write_bytes(b"".join(LINES[:45]))
    _run(path, out)
    data = bytearray(b"".join(LINES[:45]))
    i = data.index(b'"content":"') + 11
    data[i:i + 3] = b"XYZ" if data[i:i + 3] != b"XYZ" else b"ABC"  # same length, same offsets
    path.write_bytes(bytes(data))
    Path(f"{path}.ctxstate.json").unlink()  # the state would (rightly) keep nothing of the old prefix either
    counted.clear()
    got = _run(path, out)
    assert counted == [1]
    cache_path(f"{path}.ctxstate.json").unlink()
    assert _run(path, out) == got


@pytest.mark.parametrize("damage", [b"", b"garbage", None, "unsorted"])
def test_a_corrupt_cache_is_ignored(tmp_path, damage):
    path = tmp_path / "t.jsonl"
    out = tmp_path / "out.jsonl"
    path.write_bytes(b"".join(LINES[:30]))
    _run(path, out)
    cache = cache_path(f"{path}.ctxstate.json")
    raw = cache.read_bytes()
    if damage == "unsorted":
        from ctxcompact.tokens.cache import from_bytes

        loaded = from_bytes(raw, ("openai", "o200k_base"))
        assert loaded is not None and len(loaded.offsets) == 30
        loaded.offsets.reverse()
        raw = loaded.to_bytes()
    cache.write_bytes(raw[:-7] + b"\x00" * 7 if damage is None else raw if damage == "unsorted" else damage)
    path.write_bytes(b"".join(LINES[:38]))
    got = _run(path, out)
    cache.unlink()
    assert got == _run(path, out)


def test_in_process_calls_reuse_the_cache(tmp_path, counted):
    path = tmp_path / "t.jsonl"
    out = tmp_path / "out.jsonl"
    path.write_bytes(b"".join(LINES[:30]))
    api.run(path, api.Options(window=400_000))
    path.write_bytes(b"".join(LINES[:36]))
    counted.clear()
    got = api.run(path, api.Options(window=400_000))  # from the in-process memo, no output written
    assert got.context is not None
    assert counted == [6]  # the cleaner's made records are those of the last call: kept by what they count
    assert any(r.raw is None for r in got.context.records)
    dry = api.run(path, api.Options(window=400_000), dry_run=True)
    want = _run(path, out)
    rep = got.estimate
    assert (rep.heuristic, rep.exact, rep.calibrated.tokens) == want[4:7]
    assert b"".join(got.lines()) == want[0]
    assert [r.raw for r in got.transcript.records] == [r.raw for r in dry.transcript.records]


def test_an_estimate_between_runs_in_one_process_leaves_the_cache_whole(tmp_path, counted):
    """estimate looks the cache up and adds nothing; the next run in the same process (the in-process memo)
    counts what is new since the last run and keeps it all again."""
    path = tmp_path / "t.jsonl"
    out = tmp_path / "out.jsonl"
    path.write_bytes(b"".join(LINES[:30]))
    _run(path, out)
    path.write_bytes(b"".join(LINES[:34]))
    api.estimate(path, api.Options(window=400_000))
    counted.clear()
    _run(path, out)
    again = list(counted)
    dry = api.run(path, api.Options(window=400_000), dry_run=True)
    assert dry.context is not None
    made = sum(1 for r in dry.context.records if r.raw is None)  # the records the cleaner made
    counted.clear()
    _run(path, out)
    assert made and counted == []  # nothing counted again: the cache was kept whole, the made records too
    assert 4 <= sum(again) <= 4 + made  # the four appended lines, once (and made records not seen before)


# ------------------------------------------------------------------------------------ the settled prefix
# (docs/concepts/state.md#the-settled-prefix): what a call read whole and found good is proven unchanged by
# one SHA-256 on the next call, whose lines there are then neither schema-checked nor hashed again. A new
# process is simulated by forgetting the reader's in-process memo of conforming lines.

FORMATS = ["openai", "anthropic", "claude-code", "codex", "genai"]


def _format_lines(fmt: str) -> list[bytes]:
    sample = SAMPLES / f"{fmt}-session.jsonl"
    lines = [line if line.endswith(b"\n") else line + b"\n"
             for line in sample.read_bytes().splitlines(keepends=True) if line.strip()]
    return LINES if fmt == "openai" else lines


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fmt=st.sampled_from(FORMATS), data=st.data(), exact_opt=st.sampled_from(["tiktoken", "none"]),
       window=st.sampled_from([400_000, 30_000]))
def test_any_split_of_appends_through_the_settled_prefix_gives_the_cold_answer(
        tmp_path, new_process, fmt, data, exact_opt, window):
    """Every format, each call in a new process: the route through the proven prefix answers as a cold
    call does (below the threshold and across compactions)."""
    lines = _format_lines(fmt)
    _resumed_as_from_scratch(tmp_path, lines, _drawn_cuts(data, len(lines)), exact=exact_opt, window=window,
                             format=fmt)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_second_call_checks_and_hashes_only_the_appended_lines(tmp_path, new_process, fmt):
    lines = _format_lines(fmt)
    half = len(lines) // 2
    path, out = tmp_path / "t.jsonl", tmp_path / "out.jsonl"
    path.write_bytes(b"".join(lines[:half]))
    _run(path, out, format=fmt)
    assert new_process["schema"] == half
    new_process.update(schema=0, digest=0)
    path.write_bytes(b"".join(lines))
    _run(path, out, format=fmt)
    assert new_process["schema"] == len(lines) - half  # the appended lines only
    # hashed: the appended lines, each once per count (the context, what is written), never a settled one
    assert 0 < new_process["digest"] <= 3 * (len(lines) - half)


@pytest.mark.parametrize("change", ["same length", "shorter", "cache of another format"])
def test_a_changed_prefix_takes_the_full_path(tmp_path, new_process, change):
    path, out = tmp_path / "t.jsonl", tmp_path / "out.jsonl"
    state = Path(f"{path}.ctxstate.json")
    path.write_bytes(b"".join(LINES[:40]))
    _run(path, out)
    data = bytearray(b"".join(LINES[:44]))
    if change == "same length":
        i = data.index(b'"content":"') + 11
        data[i:i + 3] = b"XYZ" if data[i:i + 3] != b"XYZ" else b"ABC"  # same length, same offsets
    elif change == "shorter":
        data = bytearray(b"".join(LINES[:20]))
    path.write_bytes(bytes(data))
    state.unlink()  # the state would (rightly) refuse a rewritten prefix; the cache alone must not trust it
    if change == "cache of another format":
        from ctxcompact.tokens.cache import from_bytes

        kept = from_bytes(cache_path(state).read_bytes(), None)
        assert kept is not None and kept.settled > 0
        kept.key = ("anthropic", *kept.key[1:])  # as if the same bytes had been read as another format
        cache_path(state).write_bytes(kept.to_bytes())
    new_process.update(schema=0)
    got = _run(path, out)
    assert new_process["schema"] == len(LINES[:44] if change != "shorter" else LINES[:20])  # every line
    cache_path(state).unlink()
    assert _run(path, out) == got


def test_a_prefix_with_a_bad_line_is_not_settled(tmp_path, new_process):
    """A lenient call that dropped a line settles nothing: the next call checks every line again and still
    reports the bad one."""
    from ctxcompact.tokens.cache import from_bytes

    path, out = tmp_path / "t.jsonl", tmp_path / "out.jsonl"
    bad = orjson.dumps({"role": "user", "content": 5}) + b"\n"
    path.write_bytes(b"".join(LINES[:10]) + bad + b"".join(LINES[10:20]))
    first = api.run(path, api.Options(window=400_000, lenient=True), output=out)
    assert first.problems
    checked = new_process["schema"]
    kept = from_bytes(cache_path(f"{path}.ctxstate.json").read_bytes(), None)
    assert kept is not None and kept.settled == 0
    new_process.update(schema=0)
    again = api.run(path, api.Options(window=400_000, lenient=True), output=out)
    assert new_process["schema"] == checked >= 20  # every line again, as the first time
    assert [p.line for p in again.problems] == [p.line for p in first.problems] == [11]


def test_an_unterminated_last_line_is_not_settled(tmp_path, new_process):
    """The last line without its newline may still grow: it is read and checked again next time."""
    from ctxcompact.tokens.cache import from_bytes

    path, out = tmp_path / "t.jsonl", tmp_path / "out.jsonl"
    body = b"".join(LINES[:12])
    path.write_bytes(body[:-1])
    _run(path, out)
    kept = from_bytes(cache_path(f"{path}.ctxstate.json").read_bytes(), None)
    assert kept is not None and kept.settled == len(b"".join(LINES[:11]))
    new_process.update(schema=0)
    path.write_bytes(body + b"".join(LINES[12:14]))
    got = _run(path, out)
    assert new_process["schema"] == 3
    cache_path(f"{path}.ctxstate.json").unlink()
    assert _run(path, out) == got



# ------------------------------------------------------------------- the resume point (the streamed route)
# (docs/concepts/state.md#the-settled-prefix): run from the command line reads a file in two passes; its
# first pass starts where the last call's cleaner settled its last part, after the bytes before it are
# proven unchanged, carrying what the read carries over them. Each call as in a new process.

def _streamed_lines(fmt: str, lines: list[bytes] = LINES) -> list[bytes]:
    """``lines`` (openai) written in ``fmt`` and cleaned there (nothing left to repair), one record a line."""
    from ctxcompact.clean import clean
    from ctxcompact.formats.jsonl import read_transcript, write_transcript

    if fmt == "openai":
        return lines
    written = b"".join(write_transcript(read_transcript(b"".join(lines), "openai").transcript, fmt))
    return list(write_transcript(clean(read_transcript(written, fmt).transcript).transcript))


def _resume_at(path: Path) -> int:
    from ctxcompact.tokens.cache import from_bytes

    kept = from_bytes(cache_path(f"{path}.ctxstate.json").read_bytes(), None)
    assert kept is not None
    return kept.resume_at


@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fmt=st.sampled_from(["openai", "anthropic"]), data=st.data(),
       exact_opt=st.sampled_from(["tiktoken", "none"]), window=st.sampled_from([400_000, 30_000]),
       first_try=st.sampled_from([2, 5, 64]))
def test_any_split_of_appends_from_the_resume_point_gives_the_cold_answer(
        tmp_path, new_process, monkeypatch, fmt, data, exact_opt, window, first_try):
    """openai and anthropic (codex, genai: test_resume_agent_logs.py), each call in a new process, the
    cleaner settling parts often (a small first try) or seldom: a call that resumes answers as a call from
    scratch does (outputs, states, reports, repairs), below the threshold and across compactions, with the
    format given or detected."""
    from ctxcompact.clean import Cleaner

    monkeypatch.setattr(Cleaner, "FIRST_TRY", first_try)
    lines = _streamed_lines(fmt)
    _resumed_as_from_scratch(tmp_path, lines, _drawn_cuts(data, len(lines)), exact=exact_opt, window=window,
                             format=data.draw(st.sampled_from([fmt, "auto"])), hold=False)


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_a_second_streamed_call_parses_only_what_follows_the_resume_point(tmp_path, new_process, parsed,
                                                                           fmt):
    lines = _streamed_lines(fmt, [orjson.dumps(m) + b"\n" for m in gen.messages(11, 400_000)])
    _, got, path = _second_call_from_the_resume_point(tmp_path, lines, new_process, parsed)
    cache_path(f"{path}.ctxstate.json").unlink()
    Path(f"{path}.ctxstate.json").unlink()
    assert got == _run(path, tmp_path / "out.jsonl", hold=False)  # a call from scratch


@pytest.mark.parametrize("change", ["edited byte", "truncated", "rewritten, same length",
                                    "cache of another format", "counted without tiktoken"])
def test_a_changed_prefix_is_read_whole_on_the_streamed_route(tmp_path, new_process, parsed, monkeypatch,
                                                               change):
    from ctxcompact.clean import Cleaner
    from ctxcompact.tokens.cache import from_bytes

    monkeypatch.setattr(Cleaner, "FIRST_TRY", 4)
    path, out = tmp_path / "t.jsonl", tmp_path / "out.jsonl"
    state = Path(f"{path}.ctxstate.json")
    path.write_bytes(b"".join(LINES[:40]))
    _run(path, out, hold=False)
    assert _resume_at(path) > 0
    data = bytearray(b"".join(LINES[:44]))
    if change == "edited byte":
        i = data.index(b'"content":"') + 11
        data[i] = ord("Q") if data[i] != ord("Q") else ord("R")  # same length, same offsets
    elif change == "truncated":
        data = bytearray(b"".join(LINES[:20]))
    elif change == "rewritten, same length":  # every text's first character, all through the file
        data = bytearray()
        for line in LINES[:44]:
            at = line.find(b'"content":"') + 11
            first = line[at:at + 1]
            other = b"R" if first == b"Q" else b"Q"
            data += line if at < 11 or not first.isalpha() else line[:at] + other + line[at + 1:]
        assert len(data) == len(b"".join(LINES[:44])) and data != b"".join(LINES[:44])
    path.write_bytes(bytes(data))
    kw = {}
    if change == "cache of another format":
        kept = from_bytes(cache_path(state).read_bytes(), None)
        assert kept is not None and kept.resume is not None
        kept.key = ("anthropic", *kept.key[1:])  # as if the same bytes had been read as another format
        cache_path(state).write_bytes(kept.to_bytes())
    elif change == "counted without tiktoken":
        kw = {"exact": "none"}
    state.unlink()  # the state would (rightly) refuse a rewritten prefix; the cache alone must not trust it
    parsed.clear()
    new_process.update(schema=0)
    got = _run(path, out, hold=False, **kw)
    n = 20 if change == "truncated" else 44
    assert min(parsed) == 0 and len(set(parsed)) == n  # every line, from the start
    assert new_process["schema"] == n
    cache_path(state).unlink()
    assert _run(path, out, hold=False, **kw) == got


def test_the_resume_point_outlives_a_call_that_settles_nothing_new(tmp_path, new_process, parsed):
    """A call whose appends settle no part keeps the point it started at: the next call resumes too."""
    lines = [orjson.dumps(m) + b"\n" for m in gen.messages(11, 400_000)]
    path, out = tmp_path / "t.jsonl", tmp_path / "out.jsonl"
    ends = [len(lines) - 3, len(lines) - 2, len(lines) - 2, len(lines)]
    got, first = [], []
    for end in ends:
        path.write_bytes(b"".join(lines[:end]))
        parsed.clear()
        got.append(_run(path, out, hold=False))
        first.append(min(parsed))
    assert first[0] == 0 and min(first[1:]) > 0  # every call after the first started at a resume point
    assert got == _sequence(tmp_path, lines, ends, cold=True, hold=False)


# ------------------------------------------------------ after a compaction: the covered prefix, streamed
# A state with a covered prefix streams too (covered.py): its resume points are those of reads that began
# after that prefix, with its lead (a point kept under another prefix, or none, is not taken).

@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fmt=st.sampled_from(["openai", "anthropic"]), data=st.data(),
       exact_opt=st.sampled_from(["tiktoken", "none"]), window=st.sampled_from([20_000, 40_000]))
def test_any_split_of_appends_across_compactions_streamed_gives_the_held_answer(
        tmp_path, new_process, fmt, data, exact_opt, window):
    """Each call a new ``run`` (a new process), compacting and passing through in turn: the streamed
    calls (``hold=False``, from their resume points) answer as held calls from scratch do."""
    lines = _streamed_lines(fmt, LONG)
    _resumed_as_from_scratch(tmp_path, lines, _drawn_cuts(data, len(lines), 3, 6), hold=False, cold_hold=True,
                             exact=exact_opt, window=window, format=data.draw(st.sampled_from([fmt, "auto"])))


LONG = [orjson.dumps(m) + b"\n" for m in gen.messages(11, 400_000)]


def test_after_a_compaction_a_call_parses_only_what_follows_its_resume_point(tmp_path, new_process,
                                                                              parsed, monkeypatch):
    """(The cleaner settles its first part after 64 records: a few here, so that parts settle.)"""
    from ctxcompact.clean import Cleaner
    from ctxcompact.tokens.cache import from_bytes

    monkeypatch.setattr(Cleaner, "FIRST_TRY", 4)

    path, out = tmp_path / "t.jsonl", tmp_path / "out.jsonl"
    ends = [41, 46, 51, 56, 61]  # (compacts at 41, then stays below the threshold)
    got, reads = [], []
    for end in ends:
        path.write_bytes(b"".join(LONG[:end]))
        parsed.clear()
        got.append(_run(path, out, window=40_000, hold=False))
        reads.append(sorted(set(parsed)))
    state = orjson.loads(Path(f"{path}.ctxstate.json").read_bytes())
    covered = state["fingerprint"]["bytes"]
    assert got[0][3] and not any(g[3] for g in got[1:]) and covered > 0  # compacted once, then passed
    kept = from_bytes(cache_path(f"{path}.ctxstate.json").read_bytes(), None)
    assert kept is not None and kept.resume_at >= covered
    assert min(reads[1]) == covered  # the first call after it: from the covered prefix's end
    for later in reads[2:]:  # the next: from the resume point (past the prefix), a few lines
        assert min(later) > covered and len(later) < 15, later
    assert got == _sequence(tmp_path, LONG, ends, cold=True, window=40_000)
