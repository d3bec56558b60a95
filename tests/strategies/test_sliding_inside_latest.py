"""Sliding-window compacts the older part of the latest request's own invocation when it alone does not fit
(issue 23, left open after the handoff work; docs/guides/strategies.md#sliding-window): the request stays
verbatim, then the summary, then the rest with the work in flight; a split never separates a call from its
result. A Codex session is often one request and hours of tool calls: every call of such a replay used to exit
5."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from helpers import assistant, jsonl, sys_msg, tool, user
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcompact import api
from ctxcompact.errors import ExitCode
from ctxcompact.evaluate.core import original_records, read_input
from ctxcompact.facts.text import latest_request_record
from ctxcompact.formats import read_transcript
from ctxcompact.model import Origin, Record, Role, ToolCall, ToolResult
from ctxcompact.options import Options
from ctxcompact.state import State
from ctxcompact.strategies.invocations import unsafe_splits
from ctxcompact.strategies.sliding_window_state import Event, WindowEvents

DATA = Path(__file__).resolve().parent.parent / "data"
REQUEST = "Port the loader to tomllib and keep the public API."


def events_of(state: State | None) -> list[Event]:
    own = state.section(WindowEvents) if state is not None else None
    return own.events if own is not None else []


def one_request(steps: int, first: int = 0, request: bool = True) -> list[dict[str, Any]]:
    """One request and ``steps`` tool calls, each with a large result (no answer yet: in progress)."""
    out: list[dict[str, Any]] = [sys_msg("You are a coding agent."), user(REQUEST)] if request else []
    for k in range(first, first + steps):
        out += [assistant(None, [(f"c{k}", "read", {"path": f"src/m{k}.py"})]),
                tool(f"c{k}", f"def f{k}():\n    return {k}\n" * 120)]
    return out


def sw(**kw: Any) -> Options:
    return Options(**{"strategy": "sliding-window", "window": 8_000, "exact": "none", "default_factor": 1.0,
                      **kw})


def pairs(records: list[Record]) -> tuple[set[str], set[str]]:
    calls = {b.id for r in records if r.message for b in r.message.blocks if isinstance(b, ToolCall)}
    results = {b.call_id for r in records if r.message for b in r.message.blocks if isinstance(b, ToolResult)}
    return calls, results


def test_synthetic_latest_invocation_is_compacted_from_its_oldest_calls(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(jsonl(one_request(20)))
    r = api.run(path, sw(), output=tmp_path / "o.jsonl", warn=lambda _m: None)
    assert r.compacted and r.exit_code == ExitCode.OK and r.tokens_after <= 8_000
    (ev,) = events_of(r.state)
    assert ev.start == 2 and 2 < ev.end <= 40 and ev.end % 2 == 0  # after the request, on a pair boundary
    recs = [x for x in r.transcript.records if x.message is not None and x.origin is not Origin.SYNTHETIC]
    assert recs[1].message.role is Role.USER and recs[1].message.text() == REQUEST  # verbatim, first
    assert recs[2].origin is Origin.SUMMARY  # then the summary of the older calls
    assert recs[-2].message.tool_calls()[0].id == "c19"  # the work in flight, last
    assert recs[-1].message.tool_results()[0].call_id == "c19"
    calls, results = pairs(r.transcript.records)
    assert calls == results and "c0" not in calls
    # the session goes on inside the same request: the next event replaces the earlier one, still fitting
    with path.open("ab") as f:
        f.write(jsonl(one_request(12, first=20, request=False)))
    again = api.run(path, sw(), output=tmp_path / "o.jsonl", warn=lambda _m: None)
    assert again.compacted and again.exit_code == ExitCode.OK and again.tokens_after <= 8_000
    latest = events_of(again.state)[-1]
    assert latest.start == 2 and latest.end > ev.end
    summaries = [x for x in again.transcript.records if x.origin is Origin.SUMMARY]
    assert len(summaries) == 1  # the earlier event lies inside the new one: hidden
    texts = [x.message.text() for x in again.transcript.records if x.message is not None]
    assert texts[1] == REQUEST
    calls, results = pairs(again.transcript.records)
    assert calls == results and "c31" in calls


def test_one_record_after_the_request_is_not_compacted(tmp_path: Path) -> None:
    # nothing older than the work in flight: the in-flight result is trimmed instead (exit 0), no event
    path = tmp_path / "s.jsonl"
    path.write_bytes(jsonl([sys_msg("s"), user(REQUEST), assistant(None, [("big", "read", {"path": "x"})]),
                            tool("big", "z" * 60_000)]))
    r = api.run(path, sw(), output=tmp_path / "o.jsonl", warn=lambda _m: None)
    assert r.exit_code == ExitCode.OK and not events_of(r.state)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(1, 3), st.booleans(), st.integers(50, 400)), min_size=2, max_size=10))
def test_a_split_inside_the_latest_invocation_never_separates_a_call_from_its_result(
        tmp_path_factory: pytest.TempPathFactory, shape: list[tuple[int, bool, int]]) -> None:
    """One request, then steps of k parallel calls (their results in one message each, or the last one still
    pending when ``answered`` is false), of random sizes, in a small window."""
    objs: list[dict[str, Any]] = [sys_msg("s"), user(REQUEST)]
    for i, (k, answered, size) in enumerate(shape):
        objs.append(assistant(f"step {i}" if i % 2 else None,
                              [(f"c{i}_{j}", "read", {"path": f"f{i}_{j}"}) for j in range(k)]))
        for j in range(k):
            if j < k - 1 or answered or i == len(shape) - 1:
                objs.append(tool(f"c{i}_{j}", f"line {i} {j}\n" * size))
    d = tmp_path_factory.mktemp("inside")
    p = d / "t.jsonl"
    p.write_bytes(jsonl(objs))
    r = api.run(p, sw(window=3_000), output=d / "o.jsonl", warn=lambda _m: None)
    calls, results = pairs(r.transcript.records)
    assert calls == results
    assert not any("no matching call" in x.message.text() for x in r.transcript.records if x.message)
    texts = [x.message.text() for x in r.transcript.records if x.message is not None]
    assert texts[1] == REQUEST
    bad = unsafe_splits(read_transcript(io.BytesIO(p.read_bytes()), "openai").transcript.records)
    for e in events_of(r.state):
        assert e.start not in bad and e.end not in bad


def test_real_codex_session_inside_one_request_fits_instead_of_exit_5(tmp_path: Path) -> None:
    # codemie-rollout: one request ("let's update the default context compact to 90 …") and 380 records of
    # tool calls; each prefix used to exit 5 at 55,000 tokens with sliding-window (78,965 → 77,707 at 150)
    src = DATA / "codex" / "codemie-rollout-compaction-threshold.jsonl"
    data = src.read_bytes()
    _, _, fmt = read_input(src, Options(window=55_000))
    original = original_records(data, fmt, Options(window=55_000))
    for cut in (150, 350):
        log = tmp_path / f"rollout-{cut}.jsonl"
        log.write_bytes(data[: original[cut].offset])
        r = api.run(log, Options(window=55_000, strategy="sliding-window"), output=tmp_path / "o.jsonl",
                    warn=lambda _m: None)
        assert r.compacted and r.exit_code == ExitCode.OK and r.tokens_after <= 55_000, cut
        request = latest_request_record(original[:cut])
        assert request is not None
        # the latest event begins right after the request (kept verbatim) and ends on a pair-safe point
        last = max(events_of(r.state), key=lambda e: e.end)
        assert last.start == request.index + 1 and last.end not in unsafe_splits(original[:cut])
        assert (tmp_path / "o.jsonl").read_text(encoding="utf-8").count("update the defailt context compart")
