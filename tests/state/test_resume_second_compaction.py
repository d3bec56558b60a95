"""An append-only log compacted a second time (issue 25): the recipe's rounds
(docs/guides/claude-code-codex.md) with a state: compact, put the output in the input's place, let the
client continue it, compact again. The second compaction covers the state's prefix, whose lines the
compaction copies and takes (``Format.compaction_seen``) with the lines after it; it is made in pass 2
without holding the file (``route_file.compact_streamed``, ``compaction_stream.take_prefix``) where the
state says every line of the prefix is one the compaction copies (``Fingerprint.history``) and a line after
it makes every message before it history only (our compact_boundary, our compacted line; an ADK compaction
event, ours or ADK's own, whose ranges span the prefix's events). Either way the
output, the state, the report, the warnings and the exit code are the held route's, byte for byte, and the
count cache the one the streamed route kept when it left this compaction to the held route."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import adk_sessions
import orjson
import pytest
from helpers import comparable_state
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_resume_claude_code import _session
from test_resume_own_compaction import _continued, _off

from ctxcompact import api, compaction_stream, route_file
from ctxcompact.errors import CtxCompactError
from ctxcompact.state.cache import cache_path

DATA = Path(__file__).parent.parent / "data"
#: real logs (their licences: tests/data/claude-code/SOURCES.md, tests/data/codex/SOURCES.md)
CC_REAL = DATA / "claude-code" / "spotter-tool-heavy.jsonl"
CODEX_REAL = DATA / "codex" / "codemie-rollout-compaction-threshold.jsonl"


def _codex_more(n: int, seed: int = 0) -> list[bytes]:
    """What Codex writes after it resumes a rollout: a turn's context, the request, then ``n`` rounds of a
    call, its output and a short answer, a ``token_count`` after each answer."""
    def line(kind: str, payload: dict[str, Any], i: int) -> bytes:
        return orjson.dumps({"timestamp": f"2026-12-01T10:{i // 60 % 60:02d}:{i % 60:02d}.000Z", "type": kind,
                             "payload": payload}) + b"\n"

    def text(role: str, words: str) -> dict[str, Any]:
        kind = "output_text" if role == "assistant" else "input_text"
        return {"type": "message", "role": role, "content": [{"type": kind, "text": words}]}

    out = [line("turn_context", {"cwd": "/w", "model": "gpt-5"}, 0),
           line("response_item", text("user", f"Carry on from the summary ({seed})."), 1)]
    total = 40_000
    for i in range(n):
        args = orjson.dumps({"cmd": f"pytest tests/test_m{(i + seed) % 40}.py -q"}).decode()
        total += 900
        out += [line("response_item", {"type": "function_call", "name": "exec_command", "arguments": args,
                                       "call_id": f"more_{seed}_{i}"}, 2 + 4 * i),
                line("response_item", {"type": "function_call_output", "call_id": f"more_{seed}_{i}",
                                       "output": f"{i % 7} passed in 0.{i % 10}s\n" * 40}, 3 + 4 * i),
                line("response_item", text("assistant", f"Module m{(i + seed) % 40} is fine."), 4 + 4 * i),
                line("event_msg", {"type": "token_count", "info": {
                    "total_token_usage": {"input_tokens": total, "output_tokens": 20 * i,
                                          "total_tokens": total},
                    "last_token_usage": {"input_tokens": total, "output_tokens": 20, "total_tokens": total},
                    "model_context_window": 400_000}}, 5 + 4 * i)]
    return out


def _adk(n: int, seed: str, at: float = 1_700_000_000) -> list[bytes]:
    """ADK events (as its API server writes them: camelCase, a timestamp each) from ``at`` on, one a
    second: the user's request, then ``n`` rounds of a function call, its response and a short answer, the
    user asking again every third round."""
    def event(i: int, role: str, parts: list[dict[str, Any]]) -> bytes:
        return orjson.dumps({"author": "coder" if role == "model" else "user",
                             "invocationId": f"e-{seed}-{i}", "id": f"ev-{seed}-{i}", "timestamp": at + i,
                             "actions": {},
                             "content": {"role": role, "parts": parts}}) + b"\n"

    out = [event(0, "user", [{"text": f"Fix the build ({seed}); never touch setup.py."}])]
    for k in range(n):
        call = {"name": "bash", "args": {"command": f"pytest tests/test_m{k % 40}.py -q"},
                "id": f"c-{seed}-{k}"}
        response = {"name": "bash", "id": call["id"], "response": {"output": f"{k % 7} passed\n" * 30}}
        i = len(out)
        out += [event(i, "model", [{"functionCall": call}]),
                event(i + 1, "user", [{"functionResponse": response}]),
                event(i + 2, "model", [{"text": f"Module m{k % 40} is fine."}])]
        if k % 3 == 2:
            out.append(event(i + 3, "user", [{"text": f"Next, step {k}."}]))
    return out


def _call(work: Path, hold: bool, window: int, place: bool = True, **kw: Any) -> tuple[Any, ...]:
    """One ``run`` of ``work/t.jsonl`` with its state and count cache; a compaction's output then put in the
    input's place (the recipe's step 4; not if ``place`` is false: the input grows on its own). Everything
    it leaves, comparable across routes."""
    path, out = work / "t.jsonl", work / "out.jsonl"
    said: list[str] = []
    try:
        r = api.run(path, api.Options(window=window, **kw), output=out, warn=said.append, hold=hold)
    except CtxCompactError as exc:
        return "error", type(exc).__name__, exc.exit_code, str(exc).replace(str(work), "W")
    kept = Path(f"{path}.ctxstate.json")
    written = out.read_bytes()
    if r.compacted and place:
        path.write_bytes(written)
    rep = r.estimate
    return (re.sub(rb'"timestamp":"[^"]*"', b'"timestamp":""', written), comparable_state(kept), r.exit_code,
            r.compacted, r.tokens_before, r.tokens_after, rep.records, rep.covered, rep.calibrated.tokens,
            r.warnings, said, [str(x) for x in r.repairs], r.records_written(), cache_path(kept).read_bytes())


def _but_cache(calls: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The calls' results but their count caches: a held call keeps no resume point, a streamed one does (as
    before this route: the caches of the streamed calls are compared with :func:`_as_before`'s)."""
    return [c[:-1] for c in calls]


def _as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    """The streamed calls as they were before the route (pass 1 read after the prefix, then the held route
    with its counts): a compaction after a covered prefix never takes the prefix's lines in pass 2."""
    from ctxcompact.errors import Unstreamable

    def held(*a: Any) -> None:
        raise Unstreamable("as before")

    monkeypatch.setattr(compaction_stream, "take_prefix", held)


def _rounds(work: Path, base: bytes, more: list[bytes], cuts: list[int], hold: bool, window: int,
            routes: list[Any] | None = None, edit: Callable[[dict[str, Any]], None] | None = None,
            **kw: Any) -> list[tuple[Any, ...]]:
    """A call on ``base`` (it compacts), then one on what it left with the first ``cut`` lines of ``more``
    appended, for each cut (a new process each time: nothing kept but the files). ``routes``: the
    :func:`routes` fixture's list, which then holds, for each call, the routes it took. ``edit``: changes
    the state the first call left (as a JSON object)."""
    work.mkdir()
    path = work / "t.jsonl"
    path.write_bytes(base)
    spied: list[Any] = []
    if routes is not None:
        routes.clear()
    got = [_call(work, hold, window, **kw)]
    assert got[0][3], "the first call compacts"
    if edit is not None:
        kept = Path(f"{path}.ctxstate.json")
        state = orjson.loads(kept.read_bytes())
        edit(state)
        kept.write_bytes(orjson.dumps(state))
    log, done = path.read_bytes(), 0
    for cut in [None, *cuts]:
        if cut is not None:
            _append(path, more[done:cut])
            done = cut
            got.append(_call(work, hold, window, **kw))
        if routes is not None:
            spied.append(list(routes))
            routes.clear()
    if routes is not None:
        routes[:] = spied
    assert path.read_bytes().startswith(log)
    return got


def _append(path: Path, lines: list[bytes]) -> None:
    """The client's next lines, after what the last call left: a Claude Code line chained on the line that
    was the log's last when the lines were made is chained on its last line now (the client continues the
    compacted log, from where our compaction left it)."""
    chunk = b"".join(lines)
    first = orjson.loads(lines[0]) if lines else {}
    tip = orjson.loads(path.read_bytes().splitlines()[-1]).get("uuid")
    if isinstance(first.get("parentUuid"), str) and isinstance(tip, str):
        was, now = first["parentUuid"].encode(), tip.encode()
        chunk = chunk.replace(b'"parentUuid":"%s"' % was, b'"parentUuid":"%s"' % now)
    with path.open("ab") as f:
        f.write(chunk)


@pytest.fixture
def routes(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every compaction pass 2 made: (format, after a covered prefix); and every held read is one too
    (``("held", False)``), so that the route each call took is known."""
    from ctxcompact import source

    made: list[Any] = []
    real = compaction_stream.read_conversation
    monkeypatch.setattr(route_file, "read_conversation",
                        lambda p, counted, *a: made.append((counted.format, counted.covered is not None))
                        or real(p, counted, *a))
    load = source.InputData.load.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(source.InputData, "load",
                        classmethod(lambda cls, s: made.append(("held", False)) or load(cls, s)))
    return made


CASES = {
    # (the base, the window: the first call compacts it, the second compacts what follows)
    "claude-code-generated": (lambda: b"".join(_session(turns=40)), 6_000),
    "claude-code-real": (lambda: CC_REAL.read_bytes(), 30_000),
    "codex-real": (lambda: CODEX_REAL.read_bytes(), 60_000),
    "adk-generated": (lambda: b"".join(_adk(100, "a")), 6_000),
    "adk-real": (lambda: b"".join(_adk_real()), 8_000),
}


@functools.cache
def _adk_real() -> tuple[bytes, ...]:
    """A real ADK session's events (tests/adk_sessions.py: ADK's Runner wrote them)."""
    pytest.importorskip("google.adk", reason="the adk extra is not installed")
    return tuple(adk_sessions.session(30))


def _fmt(case_or_log: str | bytes) -> str:
    """The format of a case's log, or of a log."""
    if isinstance(case_or_log, str):
        return {"codex": "codex", "adk": "genai"}.get(case_or_log.split("-")[0], "claude-code")
    return "codex" if b'"session_meta"' in case_or_log else "genai" if b'"invocationId"' in case_or_log \
        else "claude-code"


def _more(fmt: str, log: bytes, seed: int = 3) -> list[bytes]:
    """What the client writes after it resumes ``log`` (the compacted log)."""
    if fmt == "adk-real":  # (ADK continues the session from the compacted log)
        return adk_sessions.session(20, log.splitlines(keepends=True), first=30 + seed)
    if fmt.startswith("adk"):  # (after the last event: ours, written a millisecond after the log's last)
        return _adk(100, f"more{seed}", at=orjson.loads(log.splitlines()[-1])["timestamp"] + 1)
    return _continued(log, 60, seed=seed) if fmt.startswith("claude-code") else _codex_more(30, seed)


def _compacted_once(tmp: Path, case: str) -> bytes:
    make, window = CASES[case]
    work = tmp / f"once-{case}"
    work.mkdir()
    (work / "t.jsonl").write_bytes(make())
    assert _call(work, True, window)[3]
    return (work / "t.jsonl").read_bytes()


def _turn_at(lines: list[bytes], at: int) -> int:
    """The first line from ``at`` where the person speaks (a hook's call between turns, while the session
    rests: a Claude Code tool result parented on its call before the call's compaction would fork)."""
    asks = (b'"Next, step', b'"Explain src/')  # (generated logs, ADK's Runner)
    return next(i for i in range(at, len(lines)) if any(a in lines[i] for a in asks) or (
        b'"role":"user"' not in lines[i] and b'"function_call"' in lines[i]))


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_second_compaction_streams_and_gives_the_held_run(tmp_path: Path, new_process: Any,
                                                            routes: list[Any], case: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Compact, resume, compact again: the streamed calls read no file whole, the second compaction made in
    pass 2 after the covered prefix; the held calls give the same files and reports byte for byte."""
    make, window = CASES[case]
    base = make()
    more = _more(case, _compacted_once(tmp_path, case))
    cuts = [_turn_at(more, len(more) // 2), len(more)]
    routes.clear()
    streamed = _rounds(tmp_path / "s", base, more, cuts, False, window, routes)
    fmt = _fmt(case)
    assert routes[0] == [(fmt, False)] and streamed[0][3]  # the first compaction: in pass 2 too
    again = [i for i, s in enumerate(streamed) if i and s[3]]
    assert again and all(routes[i] == [(fmt, True)] for i in again), (routes, again)  # no file held
    held = _rounds(tmp_path / "h", base, more, cuts, True, window, routes)
    assert all(taken == [("held", False)] for taken in routes), routes
    assert _but_cache(streamed) == _but_cache(held)
    assert (tmp_path / "s" / "t.jsonl").read_bytes() == (tmp_path / "h" / "t.jsonl").read_bytes()
    _as_before(monkeypatch)
    before = _rounds(tmp_path / "b", base, more, cuts, False, window, routes)
    assert all(routes[i] == [(fmt, True), ("held", False)] for i in again), routes  # (it was held)
    assert streamed == before  # the count caches too
    assert (tmp_path / "s" / "t.jsonl").read_bytes() == (tmp_path / "h" / "t.jsonl").read_bytes()


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), case=st.sampled_from(["claude-code-generated", "codex-real", "adk-generated"]),
       exact_opt=st.sampled_from(["tiktoken", "none"]))
def test_any_split_of_appends_through_two_compactions_gives_the_held_run(
        tmp_path_factory: Any, new_process: Any, data: Any, case: str, exact_opt: str) -> None:
    """Whatever the appends after the first compaction (each call a new process, with its count cache): the
    held calls' outputs, states and reports."""
    tmp = tmp_path_factory.mktemp("split")
    make, window = CASES[case]
    more = _more(case, _compacted_once(tmp, case), seed=data.draw(st.integers(0, 3)))
    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(more)), min_size=1, max_size=4))))
    streamed = _rounds(tmp / "s", make(), more, cuts, False, window, exact=exact_opt)
    held = _rounds(tmp / "h", make(), more, cuts, True, window, exact=exact_opt)
    assert _but_cache(streamed) == _but_cache(held)


# -------------------------------------------------------------------------- what the held route still reads
# Each answers as the held route (byte for byte), which the second compaction takes: pass 2 does not take the
# prefix's lines where the state does not say they are all history, or where no line after the prefix makes
# them history only.

def _held_second(tmp: Path, routes: list[Any], base: bytes, more: list[bytes], window: int,
                 **kw: Any) -> list[tuple[Any, ...]]:
    """The calls on both routes: the streamed ones give what the held calls give; returns the streamed calls
    (the caller says which route their compaction after the prefix took)."""
    fmt = _fmt(base)
    streamed = _rounds(tmp / "s", base, more, [len(more)], False, window, routes, **kw)
    assert streamed[1][3] and streamed[1][7], "the second call compacts after a covered prefix"
    assert routes[1] in ([(fmt, True)], [(fmt, True), ("held", False)], [("held", False)]), routes
    assert _but_cache(streamed) == _but_cache(_rounds(tmp / "h", base, more, [len(more)], True, window, **kw))
    return streamed


def _older(state: dict[str, Any]) -> None:
    """A state made before the fingerprint's ``history``: the key is not there."""
    del state["fingerprint"]["history"]


@pytest.mark.parametrize("case", ["claude-code-generated", "codex-real", "adk-generated"])
def test_an_older_state_is_decided_by_its_next_compaction(tmp_path: Path, new_process: Any, routes: list[Any],
                                                          case: str) -> None:
    """A state without the fingerprint's ``history`` (made before it): the next compaction takes the held
    route and decides it from the prefix's lines (``context.copies_history``), so its state is the one the
    calls with the key leave, and the compactions after it stream; the files and reports are theirs too."""
    make, window = CASES[case]
    fmt = _fmt(case)
    base = make()
    more = _more(case, _compacted_once(tmp_path, case))
    cuts = sorted({_turn_at(more, len(more) * k // 4) for k in (1, 2, 3)} | {len(more)})
    older = _rounds(tmp_path / "o", base, more, cuts, False, window, routes, edit=_older)
    compacted = [i for i, c in enumerate(older) if i and c[3]]
    assert len(compacted) >= 2, compacted
    assert routes[compacted[0]] == [("held", False)], routes  # (the prefix's lines not known: held)
    assert all(routes[i] == [(fmt, True)] for i in compacted[1:]), routes  # then known: no file held
    assert older[compacted[0]][1]["fingerprint"]["history"] is True
    with_key = _rounds(tmp_path / "k", base, more, cuts, False, window)
    for call in with_key[1:compacted[0]]:  # (the calls before it keep the state's fingerprint as it was)
        _older(call[1])
    assert _but_cache(older) == _but_cache(with_key)  # the states with them
    held = _rounds(tmp_path / "h", base, more, cuts, True, window, edit=_older)
    assert _but_cache(older) == _but_cache(held)
    assert (tmp_path / "o" / "t.jsonl").read_bytes() == (tmp_path / "k" / "t.jsonl").read_bytes()


SHAPES = ["none", "a bad line (lenient)", "a result without its call"]


def _grown(shape: str) -> tuple[bytes, list[bytes], dict[str, Any]]:
    """A Claude Code log compacted by the client itself (its compact_boundary) in the lines ``more`` after
    ``base``; before it, a line of ``shape`` (and the options it needs)."""
    lines = _session(turns=80, boundary_at=45)
    kw: dict[str, Any] = {}
    if shape == "a bad line (lenient)":
        lines.insert(10, b'{"type": "user", "message": \n')
        kw = {"lenient": True}
    elif shape == "a result without its call":
        at = orjson.loads(lines[9])
        result = {"type": "tool_result", "tool_use_id": "toolu_nowhere", "content": "out"}
        odd = {**at, "parentUuid": at["uuid"], "uuid": "22222222-0000-4000-8000-000000000001", "type": "user",
               "message": {"role": "user", "content": [result]}}
        odd.pop("requestId", None)
        lines.insert(10, orjson.dumps(odd) + b"\n")
        lines[11] = lines[11].replace(b'"parentUuid":"%s"' % at["uuid"].encode(),
                                      b'"parentUuid":"%s"' % odd["uuid"].encode())
    half = next(i for i, line in enumerate(lines) if b'"compact_boundary"' in line) * 2 // 3
    return b"".join(lines[:half]), lines[half:], kw


@pytest.mark.parametrize("shape", SHAPES)
def test_a_prefix_with_a_line_the_compaction_does_not_copy_takes_the_held_route(
        tmp_path: Path, routes: list[Any], shape: str) -> None:
    """The log grown on its own (the output not put in its place) and compacted by the client itself since
    (its compact_boundary after the covered prefix): the next compaction streams, unless the prefix holds a
    line lenient reading dropped or a tool result no line's call answers, which the held route leaves out
    of what it copies (formats.jsonl.history_lines): the state then says ``history`` false, and the
    compaction after the prefix is the held route's."""
    base, more, kw = _grown(shape)
    streamed = _held_second(tmp_path, routes, base, more, 6_000, place=False, **kw)
    assert streamed[0][1]["fingerprint"]["history"] is (shape == "none")
    assert routes[1] == ([("claude-code", True)] if shape == "none" else [("held", False)])


@pytest.mark.parametrize("shape", SHAPES)
def test_an_older_state_says_what_the_prefix_s_lines_say(tmp_path: Path, routes: list[Any],
                                                         shape: str) -> None:
    """The same log with a state made before the fingerprint's ``history``: the compaction after the
    prefix is the held route's, and its state says what the calls with the key leave (false for a line the
    compaction does not copy, true otherwise), the files and reports theirs too."""
    base, more, kw = _grown(shape)
    (tmp_path / "o").mkdir()
    older = _held_second(tmp_path / "o", routes, base, more, 6_000, place=False, edit=_older, **kw)
    assert routes[1] == [("held", False)]
    assert older[1][1]["fingerprint"]["history"] is (shape == "none")
    assert _but_cache(older[1:]) == _but_cache(_rounds(tmp_path / "k", base, more, [len(more)], False, 6_000,
                                                       place=False, **kw)[1:])


@pytest.mark.parametrize("shape", ["fork midway", "fork off the last response"])
def test_a_line_off_the_branch_after_the_prefix_streams(tmp_path: Path, routes: list[Any],
                                                         shape: str) -> None:
    """The client's lines after our compaction, then one off their branch: pass 1 (after the prefix) reads
    again after finding the branch, as for any fork (formats/claude_code_stream.py), and the compaction is
    made in pass 2, the held route's."""
    base = b"".join(_session(turns=40))
    log = _compacted_once(tmp_path, "claude-code-generated")
    more = _more("claude-code", log)
    parent = more[len(more) * 3 // 4] if shape == "fork midway" else more[-4]
    more = [*more, _off(more, orjson.loads(parent)["uuid"])]
    _held_second(tmp_path, routes, base, more, 6_000)
    assert routes[1] == [("claude-code", True)]


@pytest.mark.parametrize("fmt", ["claude-code", "codex"])
def test_a_log_that_grew_without_our_compaction_takes_the_held_route(tmp_path: Path, routes: list[Any],
                                                                     fmt: str) -> None:
    """The output not put in the input's place: the log grows on its own, no line after the covered prefix
    makes it history only (a later fork could make a line of it a result without its call), and pass 2
    leaves the compaction to the held route (``compaction_stream.take_prefix``)."""
    if fmt == "claude-code":
        lines, window = _session(turns=80), 6_000
    else:
        lines, window = CODEX_REAL.read_bytes().splitlines(keepends=True), 60_000
    half = len(lines) // 2
    base, more = b"".join(lines[:half]), lines[half:]
    streamed = _held_second(tmp_path, routes, base, more, window, place=False)
    assert routes[1] == [(fmt, True), ("held", False)]
    assert not streamed[1][0].startswith(streamed[0][0])  # (the output is the input's, not the output's)


@pytest.mark.parametrize("covers", ["every event of the prefix", "a call but not its response"])
def test_adk_s_own_compaction_after_the_prefix(tmp_path: Path, routes: list[Any], covers: str) -> None:
    """An ADK session grown on its own (our output not put in its place), then ADK's own compaction event
    (``LlmEventSummarizer``'s: a range of timestamps and the summary): the next compaction streams where the
    range spans every event of the covered prefix (ADK and the reader then hide each); where it leaves one
    out, the held route's (here a function response whose call the range hides: the held route's copy of
    the lines leaves the response out, ``formats.jsonl.history_lines``)."""
    base = _adk(100, "a")
    stamp = [orjson.loads(line)["timestamp"] for line in base]
    if covers == "every event of the prefix":
        end = stamp[-1]
    else:
        call = next(i for i in range(len(base) // 4, len(base)) if b'"functionCall"' in base[i])
        end = stamp[call]
    more = _adk(40, "more", at=stamp[-1] + 1)
    summary = {"role": "model", "parts": [{"text": "The user is fixing the build; the modules pass."}]}
    adk = orjson.dumps({"author": "user", "invocationId": "e-adk", "id": "ev-adk", "actions": {"compaction": {
        "startTimestamp": stamp[0], "endTimestamp": end, "compactedContent": summary}},
        "timestamp": orjson.loads(more[-1])["timestamp"] + 1}) + b"\n"
    _held_second(tmp_path, routes, b"".join(base), [*more, adk], 6_000, place=False)
    assert routes[1] == ([("genai", True)] if covers == "every event of the prefix"
                         else [("genai", True), ("held", False)])


def test_a_real_adk_session_compacted_by_adk_since(tmp_path: Path, routes: list[Any]) -> None:
    """A session ADK's Runner wrote with its own compaction on (tests/adk_sessions.py), compacted by us, then
    grown on its own (our output not put in its place) with ADK compacting it: ADK's compaction events after
    the covered prefix span it (their ranges start at the session's first event), so the next compaction
    streams, with the held route's answer."""
    pytest.importorskip("google.adk", reason="the adk extra is not installed")
    lines = adk_sessions.session(50, own=True)
    cut = _turn_at(lines, len(lines) * 2 // 5)
    assert any(b'"compaction"' in line for line in lines[cut:])
    _held_second(tmp_path, routes, b"".join(lines[:cut]), lines[cut:], 1_200, place=False)
    assert routes[1] == [("genai", True)]


def test_a_prefix_changed_between_the_passes_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         routes: list[Any]) -> None:
    """The prefix's bytes changed after pass 1 proved them (same length): the second compaction stops with
    the file changed, leaves the output and the state as they were (compaction_stream.take_prefix hashes
    what it reads)."""
    log = _compacted_once(tmp_path, "claude-code-generated")
    work = tmp_path / "once-claude-code-generated"
    _append(work / "t.jsonl", _more("claude-code", log))
    state = Path(f"{work / 't.jsonl'}.ctxstate.json")
    before, out = state.read_bytes(), (work / "out.jsonl").read_bytes()
    real = compaction_stream.take_prefix

    def changed(path: Path, *a: Any) -> None:
        data = path.read_bytes()
        at = data.index(b"Please do task 0")
        path.write_bytes(data[:at] + b"PLEASE" + data[at + 6:])
        real(path, *a)

    monkeypatch.setattr(compaction_stream, "take_prefix", changed)
    summarized: list[Any] = []  # (found before the summary is made: not only when the output is written)
    monkeypatch.setattr(route_file, "apply_strategy", lambda *a, **k: summarized.append(a))
    routes.clear()
    got = _call(work, False, 6_000)
    assert summarized == []
    assert got[:2] == ("error", "InputError") and "changed while it was read" in got[3], got
    assert routes == [("claude-code", True)]
    assert (work / "out.jsonl").read_bytes() == out and state.read_bytes() == before  # (as they were)
