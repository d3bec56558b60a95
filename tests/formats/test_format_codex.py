"""codex format: the real rollout (tests/data/codex/SOURCES.md), usage placement, compaction."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcompact.formats import detect, read_transcript, write_transcript
from ctxcompact.formats.codex import FORMAT
from ctxcompact.model import Record, Role, TextBlock, ThinkingBlock, ToolResult

REAL = Path(__file__).parent.parent / "data" / "codex" / "agtrace-codex-session.jsonl"
SAMPLE = Path(__file__).parent.parent.parent / "samples" / "codex-session.jsonl"


def load(lines: list[dict[str, Any]]) -> list[Record]:
    return FORMAT.finish([FORMAT.parse_line(o, i, i + 1, orjson.dumps(o)) for i, o in enumerate(lines)])


def item(payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": "2026-01-01T00:00:00.000Z", "type": "response_item", "payload": payload}


def test_real_rollout_counts() -> None:
    t = read_transcript(REAL).transcript
    assert t.format == "codex" and len(t.records) == 55
    roles = [r.role for r in t.message_records()]
    assert roles.count(Role.SYSTEM) == 1 and roles.count(Role.USER) == 3 and roles.count(Role.TOOL) == 5
    calls = [c for r in t.message_records() for c in r.message.tool_calls()]  # type: ignore[union-attr]
    assert [c.name for c in calls] == [
        "shell_command",
        "apply_patch",
        "shell_command",
        "shell_command",
        "shell_command",
    ]
    assert calls[0].input == {"command": "mkdir -p myapp", "workdir": "/Users/test_user/agent-sample"}
    # event_msg lines duplicate what response_item lines say: they carry no message.
    assert all(r.message is None for r in t.records if r.meta["type"] == "event_msg")


def test_token_count_becomes_usage_on_the_record_the_request_produced() -> None:
    t = read_transcript(REAL).transcript
    used = [r for r in t.records if r.usage]
    first = used[0]
    # token_count on line 11 reports the request whose output starts with the reasoning on line 9.
    assert first.line == 9 and first.meta["item"] == "reasoning"
    assert (
        first.usage is not None and first.usage.prompt_tokens == 3505 and first.usage.context_window == 258400
    )
    assert len(used) == 7  # each request once: the repeat after every turn_context is ignored
    assert all(r.message is not None and r.message.role is Role.ASSISTANT for r in used)


def test_environment_context_is_injected_and_reasoning_counted_by_summary() -> None:
    t = read_transcript(REAL).transcript
    assert [r.line for r in t.records if r.meta.get("injected")] == [2]
    think = next(r.message.blocks[0] for r in t.records if r.line == 9)  # type: ignore[union-attr]
    assert isinstance(think, ThinkingBlock)
    assert think.text == "**Creating directory and file using shell and patch**"
    assert think.signature is not None and think.signature.startswith("gAAAA")  # kept, not counted


def test_golden_round_trip_is_byte_identical() -> None:
    for path in (REAL, SAMPLE):
        t = read_transcript(path).transcript
        assert b"".join(write_transcript(t)) == path.read_bytes()


def test_model_dump_equals_every_message_line() -> None:
    for raw in REAL.read_bytes().splitlines():
        obj = orjson.loads(raw)
        rec = FORMAT.parse_line(obj, 0, 1, raw)
        if rec.message is not None:
            assert FORMAT.dump_record(rec) == obj, raw[:80]


def test_detect_real_and_sample() -> None:
    for path in (REAL, SAMPLE):
        assert detect([orjson.loads(x) for x in path.read_bytes().splitlines()]) == "codex"


def test_compacted_line_replaces_earlier_history() -> None:
    recs = load(
        [
            {"timestamp": "t", "type": "session_meta", "payload": {"id": "x", "instructions": None}},
            item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "old"}]}),
            {
                "timestamp": "t",
                "type": "compacted",
                "payload": {
                    "message": "summary",
                    "replacement_history": [
                        {
                            "type": "message",
                            "role": "user",
                            "content": [{"type": "input_text", "text": "handoff"}],
                        }
                    ],
                },
            },
            item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "new"}]}),
        ]
    )
    assert recs[0].message is not None  # the session header stays (Codex needs it to resume)
    assert recs[1].message is None and recs[1].meta["inactive"] == "compacted"
    # Codex rebuilds from replacement_history when present (message is its fallback only)
    assert recs[2].message is not None and recs[2].message.text() == "handoff"
    assert recs[2].meta["injected"] is True
    assert recs[3].message is not None and not recs[3].meta.get("injected")


def test_custom_tool_output_and_legacy_success_flag() -> None:
    recs = load(
        [
            item(
                {
                    "type": "custom_tool_call",
                    "call_id": "c1",
                    "name": "apply_patch",
                    "input": "*** Begin Patch",
                }
            ),
            item(
                {
                    "type": "function_call_output",
                    "call_id": "c1",
                    "output": {"content": "boom", "success": False},
                }
            ),
        ]
    )
    assert recs[0].message.tool_calls()[0].arguments == "*** Begin Patch"  # type: ignore[union-attr]
    res = recs[1].message.blocks[0]  # type: ignore[union-attr]
    assert isinstance(res, ToolResult) and res.is_error and res.text() == "boom"


def test_made_records_are_response_items() -> None:
    msg = FORMAT.make_message(Role.USER, "continue please")
    out = FORMAT.dump_message(msg)
    assert out["type"] == "response_item"
    assert out["payload"] == {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "continue please"}],
    }
    again = FORMAT.parse_line(out, 0, 1, None)
    assert again.message is not None and again.message.blocks == [
        TextBlock("continue please", raw=out["payload"]["content"][0])
    ]


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(_text, st.dictionaries(st.text(max_size=5), st.integers(-(2**53), 2**53), max_size=3)),
        min_size=1,
        max_size=6,
    )
)
def test_property_calls_and_outputs_round_trip(spec: list[tuple[str, dict[str, int]]]) -> None:
    lines = []
    for i, (text, args) in enumerate(spec):
        lines.append(
            item(
                {
                    "type": "function_call",
                    "name": "shell",
                    "arguments": orjson.dumps(args).decode(),
                    "call_id": f"call_{i}",
                }
            )
        )
        lines.append(item({"type": "function_call_output", "call_id": f"call_{i}", "output": text}))
    recs = load(lines)
    assert [FORMAT.dump_record(r) for r in recs] == lines
    assert [r.message.tool_calls()[0].input for r in recs[::2]] == [a for _, a in spec]  # type: ignore[union-attr]
