"""`--to FORMAT` between every sample and every writable format: what is written validates as that format
(schema and cross-record rules), needs no further repair, and keeps every tool call with its result."""

from __future__ import annotations

import pytest
from helpers import SAMPLES

from ctxcompact import api
from ctxcompact.formats import read_transcript
from ctxcompact.model import ToolCall, ToolResult
from ctxcompact.validate import validate

SOURCES = sorted(p.name for p in SAMPLES.glob("*.jsonl"))
TARGETS = ["openai", "anthropic", "genai", "codex"]


def quiet(_message: str) -> None:
    pass


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("source", SOURCES)
def test_conversion_validates_and_needs_no_repair(source: str, target: str) -> None:
    original = api.clean_file(SAMPLES / source, warn=quiet).transcript
    converted = api.clean_file(SAMPLES / source, to=target, warn=quiet)
    data = b"".join(converted.lines())
    report = validate(data, target)
    assert report.ok, [str(p) for p in report.problems]
    assert api.clean_file(data, fmt=target, warn=quiet).repairs == []
    out = read_transcript(data, target).transcript
    out_calls = [b for m in out.messages() for b in m.blocks if isinstance(b, ToolCall)]
    out_results = {b.call_id for m in out.messages() for b in m.blocks if isinstance(b, ToolResult)}
    src_calls = [b for m in original.messages() for b in m.blocks if isinstance(b, ToolCall)]
    assert sorted(c.name for c in out_calls) == sorted(c.name for c in src_calls)
    assert {c.id for c in out_calls} <= out_results


@pytest.mark.parametrize(("source", "part", "target", "text"), [
    ("openai", {"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}}, "anthropic",
     "[input_audio content omitted: audio/wav]"),
    ("anthropic", {"type": "document", "source": {"type": "file", "file_id": "file_01"}}, "openai",
     "[document content omitted: unknown type]"),
])
def test_a_part_the_target_cannot_hold_is_named_in_its_place(source: str, part: dict, target: str,
                                                              text: str) -> None:
    import orjson

    line = orjson.dumps({"role": "user", "content": [{"type": "text", "text": "hear this"}, part]}) + b"\n"
    converted = b"".join(api.clean_file(line, fmt=source, to=target, warn=quiet).lines())
    parts = orjson.loads(converted.splitlines()[-1])["content"]
    assert {"type": "text", "text": text} in parts
    assert validate(converted, target).ok
