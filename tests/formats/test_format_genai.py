"""genai format: ADK events (camelCase, snake_case), Content lines, parallel calls, compaction."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcompact.formats import detect, read_transcript, write_transcript
from ctxcompact.formats.genai import FORMAT
from ctxcompact.model import ImageBlock, Record, Role, ThinkingBlock, ToolResult

REAL = Path(__file__).parent.parent / "data" / "genai" / "adk-docs-run.jsonl"
SAMPLE = Path(__file__).parent.parent.parent / "samples" / "genai-session.jsonl"


def load(lines: list[Any]) -> list[Record]:
    return FORMAT.finish([FORMAT.parse_line(o, i, i + 1, orjson.dumps(o)) for i, o in enumerate(lines)])


def snake(obj: Any) -> Any:
    """The same event as plain ``model_dump()`` spells it."""
    if isinstance(obj, dict):
        return {re.sub(r"(?<!^)([A-Z])", r"_\1", k).lower(): snake(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [snake(v) for v in obj]
    return obj


def test_adk_run_output_counts_meta_and_link() -> None:
    t = read_transcript(REAL).transcript
    assert t.format == "genai"
    assert [r.role for r in t.records] == [Role.ASSISTANT, Role.USER, Role.ASSISTANT]
    call = t.records[0].message.tool_calls()[0]  # type: ignore[union-attr]
    res = t.records[1].message.tool_results()[0]  # type: ignore[union-attr]
    assert call.id == res.call_id == "af-e75e946d-c02a-4aad-931e-49e4ab859838"
    assert call.input == {"city": "new york"} and res.name == "get_weather"
    assert t.records[0].meta["invocation_id"] == "e-71353f1e-aea1-4821-aa4b-46874a766853"
    assert t.records[0].meta["timestamp"] == 1743712220.385936


def test_snake_case_spelling_reads_the_same() -> None:
    camel = load([orjson.loads(x) for x in REAL.read_bytes().splitlines()])
    snaked = load([snake(orjson.loads(x)) for x in REAL.read_bytes().splitlines()])
    assert [r.meta["invocation_id"] for r in snaked] == [r.meta["invocation_id"] for r in camel]
    assert [r.message.tool_calls() and r.message.tool_calls()[0].id for r in snaked] == [
        r.message.tool_calls() and r.message.tool_calls()[0].id for r in camel
    ]  # type: ignore[union-attr]
    for rec in snaked:
        assert FORMAT.dump_record(rec) == rec.data  # written back in its own spelling


def test_golden_round_trip_and_detection() -> None:
    for path in (REAL, SAMPLE):
        t = read_transcript(path).transcript
        assert b"".join(write_transcript(t)) == path.read_bytes()
        assert detect([orjson.loads(x) for x in path.read_bytes().splitlines()]) == "genai"


def test_sample_parallel_calls_merged_responses_thought_usage() -> None:
    t = read_transcript(SAMPLE).transcript
    model = t.records[1].message
    assert model is not None and isinstance(model.blocks[0], ThinkingBlock)
    assert [c.input for c in model.tool_calls()] == [{"city": "Paris"}, {"city": "Berlin"}]
    merged = t.records[2].message
    assert merged is not None and merged.is_tool_result_only and len(merged.tool_results()) == 2
    assert [r.usage.prompt_tokens for r in t.records if r.usage] == [412, 503, 541, 590]
    assert len({r.meta["invocation_id"] for r in t.records}) == 2


def test_compaction_event_hides_its_range() -> None:
    def ev(ts: float, text: str, role: str = "user") -> dict[str, Any]:
        return {
            "content": {"role": role, "parts": [{"text": text}]},
            "invocationId": f"e-{ts}",
            "author": "user",
            "actions": {},
            "id": str(ts),
            "timestamp": ts,
        }

    comp = {
        "author": "user",
        "invocationId": "e-c",
        "id": "c",
        "timestamp": 5.0,
        "actions": {
            "compaction": {
                "startTimestamp": 1.0,
                "endTimestamp": 2.0,
                "compactedContent": {"role": "model", "parts": [{"text": "summary"}]},
            }
        },
    }
    recs = load([ev(1.0, "a"), ev(2.0, "b", "model"), ev(3.0, "c"), comp])
    assert [r.message is None for r in recs] == [True, True, False, False]
    assert recs[3].message is not None and recs[3].message.text() == "summary" and recs[3].meta["injected"]
    assert FORMAT.dump_record(recs[3]) == comp


def test_plain_content_lines_without_ids_pair_by_name() -> None:
    recs = load(
        [
            {
                "role": "user",
                "parts": [{"text": "hi"}, {"inlineData": {"mimeType": "image/png", "data": "AAAA"}}],
            },
            {
                "role": "model",
                "parts": [
                    {"functionCall": {"name": "f", "args": {}}},
                    {"functionCall": {"name": "g", "args": {"x": 1}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": "g", "response": {"ok": 1}}},
                    {"functionResponse": {"name": "f", "response": {"ok": 2}}},
                ],
            },
        ]
    )
    assert isinstance(recs[0].message.blocks[1], ImageBlock)  # type: ignore[union-attr]
    calls = {c.name: c.id for c in recs[1].message.tool_calls()}  # type: ignore[union-attr]
    results = {r.name: r.call_id for r in recs[2].message.tool_results()}  # type: ignore[union-attr]
    assert calls == results and len(set(calls.values())) == 2
    assert [FORMAT.dump_record(r) for r in recs] == [r.data for r in recs]  # synthetic ids never written


def test_changed_result_is_written_as_result_object() -> None:
    rec = load([orjson.loads(x) for x in REAL.read_bytes().splitlines()])[1]
    res = rec.message.blocks[0]  # type: ignore[union-attr]
    assert isinstance(res, ToolResult)
    res.content[0].text = "[masked]"  # type: ignore[union-attr]
    part = FORMAT.dump_record(rec)["content"]["parts"][0]["functionResponse"]
    assert part["response"] == {"result": "[masked]"} and part["id"] == res.call_id


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["user", "model"]), _text, st.booleans()), min_size=1, max_size=8))
def test_property_content_lines_round_trip(spec: list[tuple[str, str, bool]]) -> None:
    lines = [
        {
            "role": role,
            "parts": [{"text": text, "thought": True} if thought and role == "model" else {"text": text}],
        }
        for role, text, thought in spec
    ]
    recs = load(lines)
    assert [FORMAT.dump_record(r) for r in recs] == lines
    assert [r.role for r in recs] == [Role.ASSISTANT if role == "model" else Role.USER for role, _, _ in spec]
