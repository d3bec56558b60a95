"""The resume point of an agent's own log (docs/concepts/state.md#where-the-next-read-starts): Codex rollouts
and ADK event logs are read record by record too, their readers carrying over the resume point what they
carry from line to line (Codex: the totals of the last usage report, whose repeat is dropped, and the
response a report's usage goes on; genai: the ids given to calls and responses that have none). Each call
as in a new process, any split of appends gives what a call from scratch gives; a second call parses no
line before the point. A line that hides the lines before it (a Codex ``compacted`` line, an ADK
compaction) after the point reads the file again from the start."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_resume import (
    _drawn_cuts,
    _resume_at,
    _resumed_as_from_scratch,
    _run,
    _second_call_from_the_resume_point,
    _sequence,
    _streamed_lines,
    gen,
)


def _codex_lines(lines: list[bytes] | None = None) -> list[bytes]:
    """A rollout: session_meta, then the items, a ``token_count`` after each response (the usage goes on
    its first model-output item), every other one repeated after a turn_context (the repeat is dropped)."""
    items = _streamed_lines("codex") if lines is None else _streamed_lines("codex", lines)
    stamp = "2026-01-01T00:00:00.000Z"
    out = [orjson.dumps({"timestamp": stamp, "type": "session_meta",
                         "payload": {"id": "s-1", "instructions": "be careful"}}) + b"\n"]
    was_output, total, reports = False, 0, 0
    for i, line in enumerate(items):
        p = orjson.loads(line)["payload"]
        output = p.get("role") == "assistant" or p.get("type") in ("function_call", "reasoning")
        if was_output and not output:
            total += 1_000 + 37 * i
            last = {"input_tokens": total, "output_tokens": 20, "total_tokens": total + 20}
            info = {"last_token_usage": last, "total_token_usage": {"total_tokens": 3 * total},
                    "model_context_window": 200_000}
            count = orjson.dumps({"timestamp": stamp, "type": "event_msg",
                                  "payload": {"type": "token_count", "info": info}}) + b"\n"
            out.append(count)
            reports += 1
            if reports % 2 == 0:
                out.append(orjson.dumps({"timestamp": stamp, "type": "turn_context",
                                         "payload": {"model": "gpt-5"}}) + b"\n")
                out.append(count)
        out.append(line)
        was_output = output
    return out


def _genai_lines(lines: list[bytes] | None = None) -> list[bytes]:
    """ADK events whose calls and responses have no id (paired by name, in order, by the reader)."""
    contents = _streamed_lines("genai") if lines is None else _streamed_lines("genai", lines)
    out = []
    for i, line in enumerate(contents):
        content = orjson.loads(line)
        for part in content["parts"]:
            for key in ("functionCall", "functionResponse"):
                if key in part:
                    part[key].pop("id", None)
        event = {"author": "model" if content["role"] == "model" else "user", "invocationId": f"e-{i // 4}",
                 "id": f"ev-{i}", "timestamp": 1_700_000_000 + i, "content": content, "actions": {}}
        if content["role"] == "model":
            event["usageMetadata"] = {"promptTokenCount": 2_000 + 300 * i, "candidatesTokenCount": 40}
        out.append(orjson.dumps(event) + b"\n")
    return out


AGENT_LINES = {"codex": _codex_lines, "genai": _genai_lines}


def test_the_logs_carry_what_the_resume_point_must() -> None:
    """The test inputs have what the readers carry: repeated usage reports, calls without ids."""
    codex = b"".join(_codex_lines())
    assert codex.count(b'"token_count"') > codex.count(b'"turn_context"') > 3
    genai = b"".join(_genai_lines())
    assert b'"functionCall"' in genai and b'"id":"call_' not in genai


@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fmt=st.sampled_from(["codex", "genai"]), data=st.data(),
       exact_opt=st.sampled_from(["tiktoken", "none"]), window=st.sampled_from([400_000, 30_000]),
       first_try=st.sampled_from([2, 5, 64]))
def test_any_split_of_appends_to_an_agent_log_gives_the_cold_answer(
        tmp_path, new_process, monkeypatch, fmt, data, exact_opt, window, first_try):
    """Each call a new ``run`` (as a new process), streamed from the resume point, against the held route
    from scratch: outputs, states, reports, repairs and warnings, below the threshold and across
    compactions, with the format given or detected."""
    from ctxcompact.clean import Cleaner

    monkeypatch.setattr(Cleaner, "FIRST_TRY", first_try)
    lines = AGENT_LINES[fmt]()
    _resumed_as_from_scratch(tmp_path, lines, _drawn_cuts(data, len(lines)), hold=False, cold_hold=True,
                             exact=exact_opt, window=window, format=data.draw(st.sampled_from([fmt, "auto"])))


@pytest.mark.parametrize("fmt", ["codex", "genai"])
def test_a_second_call_on_an_agent_log_parses_only_what_follows_the_resume_point(
        tmp_path, new_process, parsed, fmt):
    lines = AGENT_LINES[fmt]([orjson.dumps(m) + b"\n" for m in gen.messages(11, 400_000)])
    first, got, _ = _second_call_from_the_resume_point(tmp_path, lines, new_process, parsed)
    # the held route from scratch, with the state the first call left (the usage it recorded is kept)
    assert [first, got] == _sequence(tmp_path, lines, [len(lines) - 5, len(lines)], cold=True, hold=True)


@pytest.mark.parametrize("fmt", ["codex", "genai"])
def test_a_line_that_hides_the_lines_before_it_reads_again_from_the_start(tmp_path, monkeypatch, parsed, fmt):
    """A compaction recorded in the log after the resume point (Codex's ``compacted`` line, an ADK compaction
    event) hides lines the first call counted: the second reads the file again from the start, streamed,
    and answers as the held route does (tests/state/test_resume_compaction_lines.py: more)."""
    from ctxcompact.clean import Cleaner

    monkeypatch.setattr(Cleaner, "FIRST_TRY", 4)
    lines = AGENT_LINES[fmt]()
    if fmt == "codex":
        hide = {"timestamp": "2026-01-01T00:00:00.000Z", "type": "compacted",
                "payload": {"message": "what happened so far"}}
    else:
        hide = {"author": "user", "invocationId": "e-c", "id": "ev-c", "timestamp": 1_700_000_100.5,
                "actions": {"compaction": {"startTimestamp": 1_700_000_000, "endTimestamp": 1_700_000_009,
                                           "compactedContent": {"role": "model",
                                                                "parts": [{"text": "so far"}]}}}}
    path, out = tmp_path / "t.jsonl", tmp_path / "out.jsonl"
    both = [*lines[:30], orjson.dumps(hide) + b"\n", *lines[30:40]]
    path.write_bytes(b"".join(both[:30]))
    first = _run(path, out, hold=False)
    assert _resume_at(path) > 0
    path.write_bytes(b"".join(both))
    from ctxcompact import engine

    loaded: list[Path] = []
    real = engine.InputData.load
    monkeypatch.setattr(engine.InputData, "load", lambda source: loaded.append(source) or real(source))
    parsed.clear()
    got = _run(path, out, hold=False)
    assert loaded == [] and min(parsed) == 0  # pass 1 met the line and read again from the start
    assert [first, got] == _sequence(tmp_path, both, [30, len(both)], cold=True, hold=True)
