"""What the next call sees after a compaction (docs/concepts/handoff.md): the continuation by request status,
the work in flight kept verbatim, earlier summaries carried forward, instructions in force, and a person's
words that look like a marker. Each class on a real log of tests/data and on a minimal synthetic case."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import summary_and_continuation

from ctxcompact import api
from ctxcompact.facts.earlier import carried_text, earlier_summaries
from ctxcompact.facts.handoff import in_flight_start, request_status
from ctxcompact.facts.text import (
    ANSWERED,
    CONTINUATION_HEAD,
    IN_PROGRESS,
    INTERRUPTED_STATUS,
    SUMMARY_MARKER,
    continuation_text,
    latest_request,
)
from ctxcompact.formats import read_transcript
from ctxcompact.model import Origin, Record, Role, ToolResult

DATA = Path(__file__).resolve().parent.parent / "data"
CC = DATA / "claude-code"
CODEX = DATA / "codex"


def jsonl(objs: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(o) + b"\n" for o in objs)


def records(data: bytes | Path, fmt: str = "auto") -> list[Record]:
    import io

    raw = data.read_bytes() if isinstance(data, Path) else data
    return read_transcript(io.BytesIO(raw), fmt).transcript.records


def run(source: Path | bytes, **opts: Any) -> api.RunResult:
    """A dry run whose low threshold makes it compact."""
    res = api.run(source, api.Options(window=400_000, threshold="200", **opts), dry_run=True,
                  warn=lambda _m: None)
    assert res.compacted and res.outcome is not None
    return res


def section(summary: str, title: str) -> str:
    _, sep, rest = summary.partition(f"## {title}\n")
    return rest.split("\n## ", 1)[0].strip() if sep else ""


SYSTEM = {"role": "system", "content": "You are a coding agent."}
ANTHROPIC_PAD = [
    {"role": "assistant",
     "content": [{"type": "tool_use", "id": "t1", "name": "cat", "input": {"f": "log"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "w" * 20_000}]},
    {"role": "assistant", "content": "Read it."}]


def call(cid: str, cmd: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": cid, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"cmd": cmd})}}]}


def result(cid: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": text}


def session(tail: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An earlier answered request (long enough to be worth compacting), then the latest request."""
    return [SYSTEM,
            {"role": "user", "content": "Set up the project; never push to main."},
            call("c0", "git init"), result("c0", "Initialized empty Git repository " + "x" * 20_000),
            {"role": "assistant", "content": "Done: the repository is initialised. " + "y" * 400},
            {"role": "user", "content": "Now run the tests and fix what fails."},
            *tail]


# ---------------------------------------------------------------------------------- request status


@pytest.mark.parametrize(("tail", "status", "answer"), [
    ([], IN_PROGRESS, None),  # no reply yet
    ([{"role": "assistant", "content": "All 12 tests pass."}], ANSWERED, "All 12 tests pass."),
    ([call("c1", "pytest")], IN_PROGRESS, None),  # a call pending
    ([call("c1", "pytest"), result("c1", "12 passed")], IN_PROGRESS, None),  # a result not yet answered
    ([call("c1", "pytest"), result("c1", "12 passed"), {"role": "assistant", "content": "They pass."}],
     ANSWERED, "They pass."),
    ([call("c1", "pytest"), {"role": "user", "content": "[Request interrupted by user for tool use]"}],
     INTERRUPTED_STATUS, None),
    ([{"role": "assistant", "content": "Running them."},
      {"role": "user", "content": "<system-reminder>the date changed</system-reminder>"}],
     ANSWERED, "Running them."),  # injected text after the reply changes nothing
])
def test_request_status_synthetic(tail: list[dict[str, Any]], status: str, answer: str | None) -> None:
    got = request_status(records(jsonl(session(tail)), "openai"))
    assert (got.status, got.answer) == (status, answer)


def test_request_status_empty_and_one_record() -> None:
    assert request_status([]).status == IN_PROGRESS
    assert request_status(records(jsonl([{"role": "user", "content": "hi"}]), "openai")).status == IN_PROGRESS
    assert in_flight_start([]) is None


@pytest.mark.parametrize(("path", "status"), [
    (CC / "agtrace-claude-session.jsonl", ANSWERED),  # "Perfect! The script executed successfully…"
    (CC / "spotter-compact-excerpt.jsonl", IN_PROGRESS),  # ends on a live Bash call
    (CODEX / "localpush-rollout-interrupted.jsonl", IN_PROGRESS),  # ends on a call with no output yet
    (CC / "spotter-subagent-command.jsonl", ANSWERED),
])
def test_request_status_real(path: Path, status: str) -> None:
    res = api.run(path, api.Options(window=400_000), dry_run=True, warn=lambda _m: None)
    assert request_status(res.context.records).status == status


def test_answered_real_log_says_wait_and_quotes_the_answer() -> None:
    _, continuation = summary_and_continuation(run(CC / "agtrace-claude-session.jsonl"))
    assert "The assistant already answered it" in continuation
    assert "Perfect! The script executed successfully" in continuation
    assert "Wait for the user's next message" in continuation
    assert "Continue working on this request" not in continuation


def test_continuation_wording_per_status() -> None:
    assert "Continue working on this request" in continuation_text("fix it")
    done = continuation_text("fix it", status=ANSWERED, answer="Fixed in a.py.")
    assert "quoted verbatim:\n\nfix it" in done and "Fixed in a.py." in done and "do not redo it" in done
    stopped = continuation_text("fix it", status=INTERRUPTED_STATUS)
    assert "interrupted" in stopped and "Do not resume it on your own" in stopped
    assert "follows this message verbatim" in continuation_text("fix it", in_flight=True)
    for text in (done, stopped):
        assert text.startswith(CONTINUATION_HEAD)


def test_a_long_answer_is_quoted_head_and_end() -> None:
    answer = "Plan A: " + "a" * 30_000 + " Plan D: the end."
    res = run(jsonl(session([{"role": "assistant", "content": answer}])))
    _, continuation = summary_and_continuation(res)
    assert "Plan A: " in continuation and "Plan D: the end." in continuation
    assert "characters of the answer left out" in continuation and len(continuation) < len(answer)


# ---------------------------------------------------------------------------------- the work in flight


def test_in_flight_tail_kept_after_the_continuation(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(jsonl(session([call("c1", "pytest -q"),
                                    result("c1", "3 failed: test_dates.py::test_tz")])))
    res = api.run(path, api.Options(window=400_000, threshold="200"), output=tmp_path / "out.jsonl",
                  warn=lambda _m: None)
    assert res.compacted
    out = [orjson.loads(x) for x in (tmp_path / "out.jsonl").read_bytes().splitlines()]
    cont = next(i for i, o in enumerate(out) if CONTINUATION_HEAD in (o.get("content") or ""))
    assert "follows this message verbatim" in out[cont]["content"]
    assert out[cont + 1]["tool_calls"][0]["id"] == "c1"
    assert out[cont + 2] == result("c1", "3 failed: test_dates.py::test_tz")
    # the watermark stops at the tail: the next run reads it from the input again, verbatim
    state = json.loads((tmp_path / "t.jsonl.ctxstate.json").read_text())
    assert state["watermark"] == 6
    with path.open("ab") as f:
        f.write(jsonl([{"role": "assistant", "content": "Fixing the timezone test."}]))
    again = api.run(path, api.Options(window=400_000), dry_run=True, warn=lambda _m: None)
    kept = [r for r in again.context.records if r.origin is Origin.INPUT and r.message is not None
            and r.message.role is not Role.SYSTEM]
    assert [r.index for r in kept] == [6, 7, 8]


def test_oversized_result_trimmed_with_where_the_full_text_is(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    huge = "line of output\n" * 20_000
    path.write_bytes(jsonl(session([call("c1", "cat big.log"), result("c1", huge)])))
    opts = api.Options(window=32_000)
    res = api.run(path, opts, output=tmp_path / "out.jsonl", warn=lambda _m: None)
    assert res.compacted
    out = [orjson.loads(x) for x in (tmp_path / "out.jsonl").read_bytes().splitlines()]
    last = next(o for o in out if o.get("tool_call_id") == "c1")
    assert last["tool_call_id"] == "c1" and len(last["content"]) < len(huge)
    # trimmed only by as much as the threshold needs, counted as the run counts (strategies.tail.fit)
    threshold = res.estimate.budget.threshold
    assert threshold is not None and threshold * 0.97 <= res.tokens_after < threshold
    assert f"the full text is in {path} line 8]" in last["content"]
    assert last["content"].startswith("line of output\n")
    # the next run keeps it trimmed (the state re-applies it) and does not compact again
    again = api.run(path, opts, dry_run=True, warn=lambda _m: None)
    assert not again.compacted
    results = [b for r in again.context.records if r.message is not None for b in r.message.blocks
               if isinstance(b, ToolResult) and b.call_id == "c1"]
    assert results and "the full text is in" in results[0].text()


def test_real_codex_pending_call_is_the_work_in_flight() -> None:
    # the rollout ends on a call with no output yet (its hidden prompt is too large for any compaction to
    # help, so the tail is read here, where every strategy reads it)
    res = api.run(CODEX / "localpush-rollout-interrupted.jsonl", api.Options(window=400_000), dry_run=True,
                  warn=lambda _m: None)
    recs = res.context.records
    start = in_flight_start(recs)
    assert start is not None
    assert recs[start].meta.get("item") == "reasoning"  # the turn begins with its reasoning item
    assert any(r.message is not None and r.message.text().startswith("[REDACTED_TEXT len=124")
               for r in recs[start:])  # then its commentary
    calls = [b.id for r in recs[start:] if r.message is not None for b in r.message.tool_calls()]
    assert calls == ["call_UtYwHmwWekzvq83m8Rb9K8jJ"]


def test_real_claude_code_live_call_stays_after_the_continuation() -> None:
    res = run(CC / "spotter-compact-excerpt.jsonl")
    assert res.outcome is not None
    tail = [b for r in res.transcript.records if r.message is not None and r.meta.get("copy")
            for b in r.message.tool_calls()]
    assert [b.name for b in tail] == ["Bash"]
    assert tail[0].input["command"] == "git status --short"


def test_mask_never_clears_the_results_in_flight() -> None:
    data = jsonl(session([call("c1", "cat a"), result("c1", "A" * 4000), call("c2", "cat b"),
                          result("c2", "B" * 4000)]))
    res = api.run(data, api.Options(window=400_000, threshold="200", strategy="mask", keep_results=0,
                                    protect_tokens=0, min_savings=0), dry_run=True, warn=lambda _m: None)
    blocks = {b.call_id: b.text() for r in res.transcript.records if r.message is not None
              for b in r.message.blocks if isinstance(b, ToolResult)}
    assert blocks["c2"] == "B" * 4000  # the result the model just asked for
    assert blocks["c1"].startswith("[tool result cleared") and blocks["c0"].startswith("[tool result cleared")


def test_sliding_window_keeps_the_work_in_flight() -> None:
    data = jsonl(session([call("c1", "pytest"), result("c1", "12 passed " * 50)]))
    res = api.run(data, api.Options(window=2_000, strategy="sliding-window", invocation_threshold=1,
                                    overlap=0), dry_run=True, warn=lambda _m: None)
    assert res.compacted
    ids = [b.call_id for r in res.transcript.records if r.message is not None for b in r.message.blocks
           if isinstance(b, ToolResult)]
    assert ids[-1] == "c1"


# ---------------------------------------------------------------------------------- earlier summaries


def test_real_claude_code_compact_summary_is_carried() -> None:
    """The real spotter compact log compacted again keeps the earlier summary's content (it used to become
    a 132-token summary with nothing of it)."""
    path = CC / "spotter-compact-excerpt.jsonl"
    found = earlier_summaries(records(path))
    assert [s.source for s in found] == ["claude-code"] and len(found[0].text) > 10_000
    summary, _ = summary_and_continuation(run(path))
    earlier = section(summary, "Earlier summary")
    for fact in ("spotter-4te.3", "Dialyzer", "otel_trace_helpers.ex", "Optional Next Step"):
        assert fact in earlier
    assert len(summary) // 4 > 3_000


def test_earlier_summary_survives_the_next_compaction(tmp_path: Path) -> None:
    path = tmp_path / "cc.jsonl"
    path.write_bytes((CC / "spotter-compact-excerpt.jsonl").read_bytes())
    opts = api.Options(window=400_000, threshold="200")
    api.run(path, opts, output=tmp_path / "o1.jsonl", warn=lambda _m: None)
    with path.open("ab") as f:  # the session goes on: one more request and answer
        last = orjson.loads(path.read_bytes().splitlines()[-1])
        contents: list[tuple[str, Any]] = [
            ("user", [{"type": "tool_result", "tool_use_id": "toolu_01McaeUrQrZ8bRR2M4UssBpQ",
                       "content": " M lib/a.ex\n" * 4000}]),
            ("user", [{"type": "text", "text": "now commit it"}]),
            ("assistant", [{"type": "text", "text": "Committed."}])]
        parent = last["uuid"]
        for i, (kind, content) in enumerate(contents):
            line = {**last, "type": kind, "uuid": f"u{i}", "parentUuid": parent,
                    "message": {"role": kind, "content": content}}
            parent = f"u{i}"
            f.write(orjson.dumps(line) + b"\n")
    res = api.run(path, opts, output=tmp_path / "o2.jsonl", warn=lambda _m: None)
    assert res.compacted and res.summary is not None
    assert "Dialyzer" in section(res.summary.text, "Earlier summary")


def test_real_codex_compacted_record_is_carried() -> None:
    path = CODEX / "localpush-rollout-compacted-excerpt.jsonl"
    found = earlier_summaries(records(path))
    assert found and found[-1].source == "codex"
    summary, _ = summary_and_continuation(run(path))
    assert "[REDACTED_TEXT len=7665 sha=49c85161]" in section(summary, "Earlier summary")


def test_adk_compaction_event_is_carried() -> None:
    events = [
        {"id": "e1", "invocationId": "i1", "author": "user", "timestamp": 1.0,
         "content": {"role": "user", "parts": [{"text": "Build the parser."}]}},
        {"id": "e2", "invocationId": "i1", "author": "agent", "timestamp": 2.0,
         "content": {"role": "model", "parts": [{"text": "Built it. " + "z" * 20_000}]}},
        {"id": "e3", "invocationId": "i2", "author": "user", "timestamp": 3.0,
         "actions": {"compaction": {"startTimestamp": 1.0, "endTimestamp": 2.0, "compactedContent": {
             "role": "model",
             "parts": [{"text": "EARLIER: the parser lives in src/parse.rs (port 8443)."}]}}}},
        {"id": "e4", "invocationId": "i3", "author": "user", "timestamp": 4.0,
         "content": {"role": "user", "parts": [{"text": "Now test it."}]}},
        {"id": "e5", "invocationId": "i3", "author": "agent", "timestamp": 5.0,
         "content": {"role": "model", "parts": [{"functionCall": {"id": "f1", "name": "run", "args": {}}}]}},
        {"id": "e6", "invocationId": "i3", "author": "user", "timestamp": 6.0,
         "content": {"role": "user", "parts": [
            {"functionResponse": {"id": "f1", "name": "run", "response": {"out": "t" * 20_000}}}]}},
        {"id": "e7", "invocationId": "i3", "author": "agent", "timestamp": 7.0,
         "content": {"role": "model", "parts": [{"text": "Tested."}]}},
    ]
    data = jsonl(events)
    assert [s.source for s in earlier_summaries(records(data))] == ["adk"]
    summary, _ = summary_and_continuation(run(data))
    assert "src/parse.rs (port 8443)" in section(summary, "Earlier summary")


def test_anthropic_compaction_blocks_readable_and_opaque() -> None:
    readable = [{"role": "user", "content": "Start."},
                {"role": "assistant",
                 "content": [{"type": "compaction", "content": "EARLIER: use uv, not pip."}]},
                {"role": "user", "content": "Continue."}, *ANTHROPIC_PAD]
    summary, _ = summary_and_continuation(run(jsonl(readable), format="anthropic"))
    assert "use uv, not pip." in section(summary, "Earlier summary")
    opaque = [{"role": "user", "content": "Start."},
              {"role": "assistant", "content": [{"type": "compaction", "encrypted_content": "gAAAA-blob"}]},
              {"role": "user", "content": "Continue."}, *ANTHROPIC_PAD]
    res = run(jsonl(opaque), format="anthropic")
    kept = [r for r in res.transcript.records if r.origin is Origin.INPUT and r.message is not None]
    assert any("gAAAA-blob" in orjson.dumps(r.data).decode() for r in kept)  # kept as it is, never dropped


def test_codex_compaction_item_is_kept_as_it_is() -> None:
    path = CODEX / "agtrace-codex-session.jsonl"
    lines = path.read_bytes().splitlines()
    item = {"timestamp": "2026-02-23T12:00:00.000Z", "type": "response_item",
            "payload": {"type": "compaction", "encrypted_content": "gAAAA-opaque"}}
    data = b"\n".join([*lines[:3], orjson.dumps(item), *lines[3:]]) + b"\n"
    res = run(data)
    written = b"\n".join(orjson.dumps(r.data) for r in res.transcript.records if r.data is not None)
    compacted = [orjson.loads(x) for x in written.split(b"\n") if b'"compacted"' in x][-1]
    assert {"type": "compaction", "encrypted_content": "gAAAA-opaque"} in compacted["payload"][
        "replacement_history"]


def test_ctxcompact_summary_written_back_by_a_framework_is_carried() -> None:
    ours = (f"{SUMMARY_MARKER}\nExtracted.\n\n## User goals and rules\n"
            "Rules and constraints (verbatim):\n- Port 5433.")
    data = jsonl([SYSTEM, {"role": "user", "content": ours},
                  {"role": "user", "content": f"{CONTINUATION_HEAD}\n\nContinue."},
                  {"role": "user", "content": "next: add the index"},
                  call("p0", "cat log"), result("p0", "v" * 20_000)])
    recs = records(data, "openai")
    assert [s.source for s in earlier_summaries(recs)] == ["ctxcompact"]
    assert latest_request(recs) == "next: add the index"
    summary, _ = summary_and_continuation(run(data))
    assert "- Port 5433." in section(summary, "Earlier summary")
    # the same words typed by a person are a request, not a summary
    typed = f"{SUMMARY_MARKER} was wrong; please redo the test."
    assert carried_text(records(jsonl([{"role": "user", "content": typed}]), "openai")) is None


# ---------------------------------------------------------------------------------- 26.20: who said it


@pytest.mark.parametrize("typed", [
    "[ctxcompact summary of the earlier conversation] was wrong; please redo the test.",
    "[Request interrupted by user] -- sorry, please continue with the test.",
    "[ctxcompact: the conversation was compacted] twice, and it lost my rule",
])
def test_marker_like_words_of_a_person_are_the_latest_request(typed: str) -> None:
    data = jsonl([{"role": "user", "content": "older request"}, {"role": "assistant", "content": "ok"},
                  {"role": "user", "content": typed}])
    assert latest_request(records(data, "openai")) == typed
    grown = data + jsonl([call("p0", "cat log"), result("p0", "p" * 20_000),
                          {"role": "assistant", "content": "Read it."}])
    _, continuation = summary_and_continuation(run(grown))
    assert f"quoted verbatim:\n\n{typed}" in continuation


def test_real_interruption_markers_are_not_requests() -> None:
    recs = records(CC / "spotter-tool-heavy.jsonl")
    markers = [r for r in recs
               if r.message is not None and r.message.text().startswith("[Request interrupted")]
    assert markers and all(r.meta.get("interrupted") for r in markers)
    assert all(not (latest_request([r]) or "") for r in markers)


def test_interrupted_real_log_tells_the_agent_not_to_resume() -> None:
    lines = (CC / "spotter-tool-heavy.jsonl").read_bytes().splitlines()
    cut = max(i for i, x in enumerate(lines) if b"[Request interrupted by user]" in x)
    _, continuation = summary_and_continuation(run(b"\n".join(lines[: cut + 1]) + b"\n"))
    assert "interrupted the work on this request" in continuation


# ---------------------------------------------------------------------------------- instructions in force


def test_synthetic_command_expansion_is_an_instruction_in_force(tmp_path: Path) -> None:
    base = {"sessionId": "s", "isSidechain": False, "userType": "external", "cwd": "/w", "version": "2.1.39"}
    lines = [
        {**base, "type": "user", "uuid": "a", "parentUuid": None, "message": {"role": "user", "content":
            "<command-name>/plan</command-name><command-args>the cache</command-args>"}},
        {**base, "type": "user", "uuid": "b", "parentUuid": "a", "isMeta": True, "message": {
            "role": "user", "content": [{"type": "text", "text": "Plan first.\nNEVER write code before the "
                                                                 "user approves the plan."}]}},
        {**base, "type": "assistant", "uuid": "c", "parentUuid": "b", "message": {
            "role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/w/cache.py"}}]}},
        {**base, "type": "user", "uuid": "d", "parentUuid": "c", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "p" * 20_000}]}},
        {**base, "type": "assistant", "uuid": "e", "parentUuid": "d", "message": {
            "role": "assistant", "content": [{"type": "text", "text": "Here is the plan."}]}},
    ]
    path = tmp_path / "cc.jsonl"
    path.write_bytes(jsonl(lines))
    summary, _ = summary_and_continuation(run(path))
    instructions = section(summary, "Instructions in force (from an active skill or command; not typed by "
                                    "the user)")
    assert instructions == "> Plan first.\n> NEVER write code before the user approves the plan."
    assert "NEVER write code" not in section(summary, "Latest request")


def test_a_skill_longer_than_the_budget_keeps_its_head_and_leaves_room_for_the_rest() -> None:
    """The real /handgemacht:create-beads expansion is longer than a 33k window's summary budget: its head
    (with the rule that matters) is kept within half of the budget, and the goals and answers stay too
    (before, the shrinking dropped everything else to make room for it and then dropped it as well)."""
    res = api.run(CC / "spotter-subagent-command.jsonl", api.Options(window=33_000), dry_run=True,
                  warn=lambda _m: None)
    assert res.compacted
    summary, _ = summary_and_continuation(res)
    instructions = section(summary, "Instructions in force (from an active skill or command; not typed by "
                                    "the user)")
    assert "DO NOT create any beads until the user explicitly approves the plan" in instructions
    assert "/handgemacht:create-beads websearch" in section(summary, "User goals and rules")
    assert "Proposed Beads" in section(summary, "Findings and answers")
    assert len(instructions) < len(summary) * 0.75


def test_the_flight_scan_finds_the_work_in_flight_of_every_prefix_holding_only_the_last_records() -> None:
    """facts.handoff.FlightScan (a streamed masking's in_flight_start): for every prefix of every test
    transcript, what in_flight_start gives on the whole prefix, from the records it kept."""
    from helpers import SAMPLES

    from ctxcompact.context import build_context
    from ctxcompact.facts.handoff import FlightScan, in_flight_start
    from ctxcompact.options import Options
    from ctxcompact.source import InputData

    data = Path(__file__).parent.parent / "data"
    kept_most = 0
    for path in sorted([*data.rglob("*.jsonl"), *SAMPLES.glob("*.jsonl")]):
        if "fuzz" in path.parts or "broken" in path.parts:
            continue
        try:
            records = build_context(InputData.load(path), Options(lenient=True), None,
                                    schema=False).transcript.records
        except Exception:  # (a file the held route refuses: not what this reads)
            continue
        scan = FlightScan()
        for k, rec in enumerate(records, 1):
            scan.add(rec)
            assert scan.start() == in_flight_start(records[:k]), (path.name, k)
        kept_most = max(kept_most, len(records))
        if path.parent.name == "openai":  # (a tool loop or a chat: its last turn)
            assert len(scan.kept) < 20, path.name
    assert kept_most > 100
