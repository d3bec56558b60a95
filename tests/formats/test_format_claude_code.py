"""claude-code format: real logs (tests/data/claude-code/SOURCES.md), chains, split messages, compaction."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcompact.facts.text import typed_text
from ctxcompact.formats import detect, read_transcript
from ctxcompact.formats.claude_code import FORMAT
from ctxcompact.model import Record, Role

DATA = Path(__file__).parent.parent / "data" / "claude-code"
SAMPLE = Path(__file__).parent.parent.parent / "samples" / "claude-code-session.jsonl"


def load(lines: list[dict[str, Any]]) -> list[Record]:
    recs = [FORMAT.parse_line(o, i, i + 1, orjson.dumps(o)) for i, o in enumerate(lines)]
    return FORMAT.finish(recs)


def line(uuid: str, parent: str | None, kind: str, content: Any, **kw: Any) -> dict[str, Any]:
    d = {
        "parentUuid": parent,
        "isSidechain": False,
        "sessionId": "s1",
        "type": kind,
        "uuid": uuid,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": {"role": kind, "content": content},
    }
    d.update(kw)
    return d


def test_spotter_short_counts_usage_and_interruption() -> None:
    t = read_transcript(DATA / "spotter-short.jsonl").transcript
    assert t.format == "claude-code" and len(t.records) == 15
    msgs = t.message_records()
    assert [r.line for r in msgs if r.role is Role.ASSISTANT] == [5, 6, 7, 8, 10]
    assert sum(len(r.message.tool_calls()) for r in msgs if r.message) == 2
    assert sum(len(r.message.tool_results()) for r in msgs if r.message) == 2
    # One API response over 5 lines: usage once, = 3 input + 13835 cache creation + 11515 cache read.
    assert [(r.line, r.usage.prompt_tokens) for r in t.records if r.usage] == [(5, 3 + 13835 + 11515)]
    assert untyped(t) == [13]  # "[Request interrupted…]"


def untyped(t: Any) -> list[int]:
    """Lines of user messages (not tool results) that hold nothing a person typed as a request."""
    return [r.line for r in t.message_records() if r.role is Role.USER and not r.message.is_tool_result_only
            and typed_text(r) is None]


def test_parallel_results_hanging_off_each_tool_use_line_stay_active() -> None:
    # In this file the second result (line 12) parents on the second tool_use line, the first (line 11)
    # on the first: a plain ancestor walk from the last line would lose line 11.
    t = read_transcript(DATA / "spotter-short.jsonl").transcript
    assert not any(r.meta.get("inactive") for r in t.records)
    assert {r.line for r in t.records if r.message and r.message.is_tool_result_only} == {11, 12}


def test_agtrace_log_split_messages_and_injected_lines() -> None:
    t = read_transcript(DATA / "agtrace-claude-session.jsonl").transcript
    usage_lines = [r.line for r in t.records if r.usage]
    assert usage_lines == [3, 7, 11, 15, 18, 21]  # the first line of each message.id group
    ids = [r.meta.get("message_id") for r in t.records if r.line in (3, 4, 5)]
    assert len(set(ids)) == 1
    assert untyped(t) == [24, 25, 26]  # caveat, /exit, stdout
    assert sum(1 for r in t.records if r.message is None) == 4  # the file-history-snapshot lines


def test_compaction_boundary_hides_everything_before_it() -> None:
    t = read_transcript(DATA / "spotter-compact-excerpt.jsonl").transcript
    boundary = next(r for r in t.records if r.meta.get("compact_boundary"))
    assert boundary.line == 12
    before = [r for r in t.records if r.line < 12 and r.meta.get("inactive") == "compacted"]
    assert {r.line for r in before} == {3, 4}  # the tool_result and the assistant text before /compact
    assert all(r.message is None for r in t.records if r.line < 12)
    summary = next(r for r in t.records if r.line == 13)
    assert summary.message is not None and summary.meta["compact_summary"] and summary.meta["injected"]
    assert untyped(t) == [13, 14, 15, 16]  # the compact summary, caveat, /compact, its stdout
    assert next(r for r in t.records if r.line == 22).message.text() == "continue implementation"


def test_branch_is_followed_and_side_chain_is_inactive() -> None:
    recs = load(
        [
            line("a", None, "user", "first question"),
            line("b", "a", "assistant", [{"type": "text", "text": "answer"}]),
            line("c", "b", "user", "edited away"),  # rewound: a sibling of d
            line("x", "b", "user", "side task", isSidechain=True),
            line("d", "b", "user", "the edit that stayed"),
            line("e", "d", "assistant", [{"type": "text", "text": "ok"}]),
            {"type": "queue-operation", "operation": "enqueue", "timestamp": "t", "sessionId": "s1"},
        ]
    )
    assert [r.meta.get("inactive") for r in recs] == [None, None, "off_branch", "sidechain", None, None, None]
    assert [r.message is not None for r in recs] == [True, True, False, False, True, True, False]


def test_usage_counted_once_per_message_and_request() -> None:
    use = {
        "input_tokens": 5,
        "cache_creation_input_tokens": 100,
        "cache_read_input_tokens": 1000,
        "output_tokens": 7,
    }
    msg = {"id": "msg_1", "usage": use}
    a1 = line(
        "b", "a", "assistant", [{"type": "thinking", "thinking": "hm", "signature": "s"}], requestId="r1"
    )
    a2 = line("c", "b", "assistant", [{"type": "text", "text": "hi"}], requestId="r1")
    a3 = line("d", "c", "assistant", [{"type": "text", "text": "again"}], requestId="r2")
    for a in (a1, a2, a3):
        a["message"].update(msg)
    recs = load([line("a", None, "user", "q"), a1, a2, a3])
    assert [r.usage.prompt_tokens if r.usage else None for r in recs] == [None, 1105, None, 1105]


def test_detect_every_real_log_and_sample() -> None:
    for path in [*DATA.glob("*.jsonl"), SAMPLE]:
        objs = [orjson.loads(x) for x in path.read_bytes().splitlines() if x.strip()]
        assert detect(objs) == "claude-code", path


def test_sample_parallel_calls_thinking_usage() -> None:
    t = read_transcript(SAMPLE).transcript
    calls = [c for r in t.message_records() for c in r.message.tool_calls()]  # type: ignore[union-attr]
    assert [c.name for c in calls] == ["Read", "Grep", "Edit"]
    assert [r.usage.prompt_tokens for r in t.records if r.usage] == [3 + 2210 + 11876, 1 + 1480 + 14086]
    last_typed = [
        r
        for r in t.message_records()
        if r.role is Role.USER and typed_text(r) is not None
    ]  # type: ignore[union-attr]
    assert last_typed[-1].message.text() == "Also add a regression test for a 100% coupon."  # type: ignore


def test_model_round_trip_equals_every_real_line() -> None:
    for path in DATA.glob("*.jsonl"):
        for raw in path.read_bytes().splitlines():
            obj = orjson.loads(raw)
            rec = FORMAT.parse_line(obj, 0, 1, raw)
            assert FORMAT.dump_record(rec) == obj, (path, raw[:80])


def test_writable_as_itself() -> None:
    # docs/reference/formats.md#claude-code-logs: a Claude Code log is written as a Claude Code log (issue 15)
    assert FORMAT.writable is True and FORMAT.fallback == ""


def test_edges_missing_parent_and_unknown_type() -> None:
    recs = load(
        [
            {"type": "brand-new-type", "uuid": "z", "sessionId": "s"},
            line("a", "missing-parent", "user", "héllo 🌍"),
        ]
    )
    assert recs[0].message is None and recs[1].message.text() == "héllo 🌍"  # type: ignore[union-attr]
    assert load([]) == []


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["user", "assistant"]), _text, st.booleans()), min_size=1, max_size=8)
)
def test_property_lines_survive_parse_and_dump(spec: list[tuple[str, str, bool]]) -> None:
    lines, parent = [], None
    for i, (kind, text, as_string) in enumerate(spec):
        content: Any = text if (as_string and kind == "user") else [{"type": "text", "text": text}]
        lines.append(line(f"u{i}", parent, kind, content))
        parent = f"u{i}"
    recs = load(lines)
    assert all(r.message is not None for r in recs)  # one unbroken chain: all active
    assert [FORMAT.dump_record(r) for r in recs] == lines


def test_usage_that_is_not_a_main_prompt_never_calibrates() -> None:
    """Only prompts of the main conversation measure the context: not a subagent's requests, not Claude
    Code's synthetic all-zero messages (after /exit), not the messages it kept across its own compaction."""
    from ctxcompact.pipeline import usage_points

    def assistant(uuid: str, parent: str, text: str, prompt: int, **kw: Any) -> dict[str, Any]:
        a = line(uuid, parent, "assistant", [{"type": "text", "text": text}], requestId=f"req-{uuid}", **kw)
        a["message"].update({"id": f"msg-{uuid}", "usage": {"input_tokens": prompt, "output_tokens": 3}})
        return a

    boundary = {"parentUuid": None, "logicalParentUuid": "b", "isSidechain": False, "type": "system",
                "subtype": "compact_boundary", "uuid": "k", "sessionId": "s1", "timestamp": "t",
                "content": "Conversation compacted",
                "compactMetadata": {"trigger": "auto", "preTokens": 90000}}
    recs = load([
        line("a", None, "user", "old question"),
        assistant("b", "a", "old answer", 90000),  # before the boundary: history only
        boundary,
        line("c", "k", "user", "summary of the old part", isCompactSummary=True),
        line("d", "c", "user", "the next question"),
        assistant("s", "d", "subagent work", 55000, isSidechain=True),
        assistant("e", "d", "main answer", 21000),
        line("f", "e", "user", "/exit"),
        assistant("g", "f", "No response requested.", 0, model="<synthetic>"),
    ])
    points = usage_points(recs)
    assert [(p.line, p.prompt_tokens) for p in points] == [(7, 21000)]
