"""The registry, detection, reading/writing transcripts, and the openai and anthropic formats."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcompact.errors import InputError, LineError, UsageError
from ctxcompact.formats import (
    FORMATS,
    MAX_PROBLEMS,
    detect,
    get_format,
    read_transcript,
    write_transcript,
)
from ctxcompact.model import (
    ImageBlock,
    Message,
    OpaqueBlock,
    Record,
    Role,
    TextBlock,
    ThinkingBlock,
    Transcript,
)

DATA = Path(__file__).parent.parent / "data"
GOLDEN = sorted((DATA / "openai").glob("*.jsonl")) + sorted((DATA / "anthropic").glob("*.jsonl"))
OPENAI = get_format("openai")
ANTHROPIC = get_format("anthropic")


def jl(*objs: Any) -> bytes:
    return b"".join(orjson.dumps(o) + b"\n" for o in objs)


def written(t: Transcript, fmt: str | None = None) -> bytes:
    return b"".join(write_transcript(t, fmt))


# -- registry ---------------------------------------------------------------------------------------------


def test_registry_has_both_formats_under_their_names() -> None:
    assert FORMATS["openai"] is OPENAI and OPENAI.name == "openai"
    assert FORMATS["anthropic"] is ANTHROPIC and ANTHROPIC.name == "anthropic"
    assert OPENAI.layout.results_per_message and OPENAI.layout.result_role is Role.TOOL
    assert not OPENAI.layout.alternate
    assert not ANTHROPIC.layout.results_per_message and ANTHROPIC.layout.result_role is Role.USER
    assert ANTHROPIC.layout.alternate


def test_unknown_format_name_lists_the_known_ones() -> None:
    with pytest.raises(UsageError) as exc:
        get_format("gemini-pro")
    assert "openai" in str(exc.value) and "anthropic" in str(exc.value)


def test_importing_formats_does_not_import_jsonschema() -> None:
    code = "import sys, ctxcompact.formats; print('jsonschema' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- detection --------------------------------------------------------------------------------------------


def test_detect_golden_files() -> None:
    for path in GOLDEN:
        objs = [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
        assert detect(objs) == path.parent.name, path


def test_plain_text_messages_default_to_openai() -> None:
    objs = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
    ]
    assert detect(objs) == "openai"


def test_detection_reads_past_the_first_lines_while_undecided() -> None:
    plain = [{"role": "user", "content": f"m{i}"} for i in range(70)]
    tool_use = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}]}
    assert detect([*plain, tool_use]) == "anthropic"


def test_a_single_decisive_line_decides() -> None:
    assert detect([{"role": "user", "content": "hi"}, {"role": "developer", "content": "x"}]) == "openai"
    assert (
        detect([{"role": "user", "content": "hi"}, {"type": "message", "role": "assistant", "content": []}])
        == "anthropic"
    )


def test_unknown_input_names_the_first_line() -> None:
    with pytest.raises(InputError) as exc:
        detect([{"event": "a"}, {"event": "b"}], lines=[3, 5])
    assert "line 3" in str(exc.value)
    assert exc.value.problems[0].line == 3


def test_mixed_formats_name_the_line() -> None:
    with pytest.raises(InputError) as exc:
        read_transcript(DATA / "broken" / "mixed.jsonl")
    assert exc.value.problems[0].line == 3
    assert "mixed formats" in str(exc.value) and "anthropic" in str(exc.value)


def test_detect_on_no_lines_is_the_default() -> None:
    assert detect([]) == "openai"


# -- reading ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["empty.jsonl", "blank_only.jsonl"])
def test_empty_input_is_an_empty_transcript(name: str) -> None:
    res = read_transcript(DATA / "broken" / name)
    assert res.transcript.records == [] and res.transcript.format == "openai"
    assert res.problems == [] and res.dropped == 0
    assert read_transcript(DATA / "broken" / name, "anthropic").transcript.format == "anthropic"
    assert written(res.transcript) == b""


def test_crlf_and_bom_input_reads_and_writes_lf_without_bom() -> None:
    crlf = read_transcript(DATA / "broken" / "crlf.jsonl").transcript
    assert [r.line for r in crlf.records] == [1, 3]
    assert written(crlf) == b'{"role": "user", "content": "one"}\n{"role": "assistant", "content": "two"}\n'
    bom = read_transcript(DATA / "broken" / "bom.jsonl").transcript
    assert bom.records[0].message is not None and bom.records[0].message.text() == "with BOM"
    assert written(bom).startswith(b'{"role": "user"')


def test_sources_path_str_bytes_and_stream_agree(tmp_path: Path) -> None:
    data = jl({"role": "user", "content": "a"}, {"role": "assistant", "content": "b"})
    p = tmp_path / "t.jsonl"
    p.write_bytes(data)
    results = [read_transcript(s).transcript for s in (p, str(p), data)]
    with p.open("rb") as fh:
        results.append(read_transcript(fh).transcript)
    assert {len(t.records) for t in results} == {2}
    assert results[0].source == str(p) and results[2].source == "-"


def test_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as exc:
        read_transcript(tmp_path / "nope.jsonl")
    assert "nope.jsonl" in str(exc.value)


def test_strict_collects_every_bad_line() -> None:
    with pytest.raises(InputError) as exc:
        read_transcript(DATA / "broken" / "wrong_types_openai.jsonl", "openai")
    got = [(p.line, p.path) for p in exc.value.problems]
    assert got == [
        (1, "$.role"),
        (2, "$.tool_calls[0].function.arguments"),
        (3, "$.tool_call_id"),
        (4, "$.usage.prompt_tokens"),
    ]
    assert "4 bad lines" in str(exc.value)
    assert "expected a JSON string, got object" in exc.value.problems[1].message


def test_lenient_drops_bad_lines_as_warnings() -> None:
    res = read_transcript(DATA / "broken" / "non_object.jsonl", lenient=True)
    assert [r.line for r in res.transcript.records] == [1]
    assert res.dropped == 3
    assert [(p.line, p.severity) for p in res.problems] == [(2, "warning"), (3, "warning"), (4, "warning")]
    # kept records are numbered among kept records
    assert [r.index for r in res.transcript.records] == [0]


def test_problem_list_is_capped_with_a_note() -> None:
    data = b"[1]\n" * (MAX_PROBLEMS + 500)
    with pytest.raises(InputError) as exc:
        read_transcript(data, "openai")
    problems = exc.value.problems
    assert len(problems) == MAX_PROBLEMS + 1
    assert problems[-1].line == 0 and "500 more" in problems[-1].message
    assert str(MAX_PROBLEMS + 500) in str(exc.value)


def test_schema_catches_what_the_parser_tolerates() -> None:
    data = jl(
        {"role": "user", "content": "x", "name": 5},
        {"role": "assistant", "content": "y", "usage": {"input_tokens": -1}},
    )
    with pytest.raises(InputError) as exc:
        read_transcript(data, "openai")
    assert [(p.line, p.path) for p in exc.value.problems] == [(1, "$.name")]
    assert exc.value.problems[0].message == "expected a string, got number 5"
    assert len(read_transcript(data, "openai", schema=False).transcript.records) == 2
    with pytest.raises(InputError) as exc2:
        read_transcript(data[data.index(b"\n") + 1 :], "anthropic")
    assert exc2.value.problems[0].path == "$.usage.input_tokens"
    assert "at least 0" in exc2.value.problems[0].message


def test_a_fifty_megabyte_line_parses(tmp_path: Path) -> None:
    big = "x" * (50 * 1024 * 1024)
    p = tmp_path / "big.jsonl"
    with p.open("wb") as fh:
        fh.write(b'{"role": "user", "content": "small"}\n')
        fh.write(b'{"role": "tool", "tool_call_id": "c", "content": "' + big.encode() + b'"}\n')
    t = read_transcript(p, "openai", schema=True).transcript
    res = t.records[1].message.tool_results()[0]  # type: ignore[union-attr]
    assert len(res.text()) == len(big)
    assert t.records[1].raw is not None and len(t.records[1].raw) > 50 * 1024 * 1024


def test_deep_nesting_line_is_reported_not_crashing() -> None:
    data = jl({"role": "user", "content": "a"}) + b"[" * 10_000 + b"]" * 10_000 + b"\n"
    with pytest.raises(InputError) as exc:
        read_transcript(data)
    assert exc.value.problems[0].line == 2 and "nesting too deep" in exc.value.problems[0].message


# -- golden round trips -----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_golden_files_round_trip_byte_identical(path: Path) -> None:
    t = read_transcript(path).transcript
    assert t.format == path.parent.name
    assert written(t) == path.read_bytes()


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_golden_records_dump_to_the_same_object(path: Path) -> None:
    t = read_transcript(path).transcript
    fmt = get_format(t.format)
    for rec in t.records:
        assert rec.message is not None
        assert fmt.dump_message(rec.message, rec) == rec.data, rec.line
    # rewritten from the model (as after a change), every line is the same JSON object, in key order
    dirty = dataclasses.replace(t, records=[dataclasses.replace(r, dirty=True) for r in t.records])
    out = written(dirty).splitlines()
    assert [orjson.loads(line) for line in out] == [r.data for r in t.records]
    assert [list(orjson.loads(line)) for line in out] == [list(r.data) for r in t.records]


def test_openai_golden_model() -> None:
    t = read_transcript(DATA / "openai" / "agent_session.jsonl").transcript
    recs = t.records
    assert recs[0].message is not None and recs[0].message.role is Role.SYSTEM
    calls = recs[2].message.tool_calls()  # type: ignore[union-attr]
    assert [c.id for c in calls] == ["call_7fQ1x", "call_9ZpLm"]
    assert calls[0].arguments == '{"cmd": "make test 2>&1 | tail -n 20"}'
    assert calls[0].input == {"cmd": "make test 2>&1 | tail -n 20"}
    assert recs[2].usage is not None and recs[2].usage.prompt_tokens == 1834
    assert recs[2].usage.output_tokens == 61 and recs[2].usage.source == "usage.prompt_tokens"
    assert recs[2].message.extra["refusal"] is None  # type: ignore[union-attr]
    # results come in the other order and are linked by id; names are filled from the calls
    r3, r4 = recs[3].message, recs[4].message
    assert r3 is not None and r4 is not None and r3.role is Role.TOOL
    assert r3.tool_results()[0].call_id == "call_9ZpLm" and r3.tool_results()[0].name == "read_file"
    assert r4.tool_results()[0].text().startswith("/bin/sh:")
    # double-encoded arguments are kept as written and decoded to the inner object
    c3 = recs[5].message.tool_calls()[0]  # type: ignore[union-attr]
    assert c3.arguments.startswith('"{') and c3.input == {"cmd": "chmod +x scripts/run_tests.sh"}
    img = recs[7].message.blocks[1]  # type: ignore[union-attr]
    assert isinstance(img, ImageBlock) and img.media_type == "image/png"
    assert recs[7].message.extra == {"name": "dana"}  # type: ignore[union-attr]
    assert recs[8].message.source_role == "developer" and recs[8].message.role is Role.SYSTEM  # type: ignore[union-attr]
    assert "权限被拒绝" in recs[9].message.text()  # type: ignore[union-attr]


def test_openai_multimodal_parts() -> None:
    t = read_transcript(DATA / "openai" / "multimodal_refusal.jsonl").transcript
    b = t.records[0].message.blocks  # type: ignore[union-attr]
    assert [type(x) for x in b] == [TextBlock, ImageBlock, ImageBlock]
    assert b[1].media_type == "audio/wav" and b[2].media_type == "application/pdf"  # type: ignore[union-attr]
    refusal = t.records[1].message.blocks[0]  # type: ignore[union-attr]
    assert isinstance(refusal, OpaqueBlock) and refusal.kind == "refusal"
    assert refusal.text.startswith("I can't")


def test_anthropic_golden_model() -> None:
    t = read_transcript(DATA / "anthropic" / "agent_session.jsonl").transcript
    recs = t.records
    sys_msg = recs[0].message
    assert sys_msg is not None and sys_msg.role is Role.SYSTEM and sys_msg.text().startswith("You are Claude")
    m = recs[2].message
    assert m is not None and m.role is Role.ASSISTANT
    think = m.blocks[0]
    assert isinstance(think, ThinkingBlock) and think.signature == "EqQBCkYIBxgCKkBx0aR7Zp3vN5yq8uQ=="
    call = m.tool_calls()[1]
    assert call.input == {"command": "pytest -x -q", "timeout": 120000}
    assert call.arguments == '{"command":"pytest -x -q","timeout":120000}'  # compact orjson of input
    # billed prompt = input + cache creation + cache read = 4 + 2120 + 13702
    assert recs[2].usage is not None and recs[2].usage.prompt_tokens == 15826
    assert recs[2].usage.source == "usage.input_tokens+cache" and recs[2].usage.output_tokens == 187
    assert m.extra["model"] == "claude-sonnet-4-5-20250929" and m.extra["type"] == "message"
    results = recs[3].message.tool_results()  # type: ignore[union-attr]
    assert [r.is_error for r in results] == [False, True] and results[0].name == "Bash"
    assert recs[3].message.role is Role.USER  # type: ignore[union-attr]
    blocks = recs[4].message.blocks  # type: ignore[union-attr]
    assert isinstance(blocks[0], ThinkingBlock) and blocks[0].redacted and blocks[0].text.startswith("EmwK")
    assert isinstance(blocks[1], OpaqueBlock) and blocks[1].kind == "server_tool_use"
    assert orjson.loads(blocks[1].text) == blocks[1].raw and " " not in blocks[1].text.split('"query"')[0]
    assert isinstance(blocks[2], OpaqueBlock) and blocks[2].kind == "web_search_tool_result"
    assert [type(b) for b in recs[5].message.blocks] == [TextBlock, ImageBlock, ImageBlock]  # type: ignore[union-attr]
    assert recs[5].message.extra == {"x_client": "ide-plugin"}  # type: ignore[union-attr]


# -- line errors ------------------------------------------------------------------------------------------


def parse_error(fmt: Any, obj: Any) -> LineError:
    with pytest.raises(LineError) as exc:
        fmt.parse_line(obj, 0, 1, None)
    return exc.value


def test_openai_line_errors() -> None:
    e = parse_error(OPENAI, {"messages": [{"role": "user", "content": "x"}]})
    assert e.path == "$" and "one message per line" in e.message
    e = parse_error(OPENAI, {"role": "function", "name": "f", "content": "x"})
    assert e.path == "$.role" and "legacy" in e.message
    e = parse_error(OPENAI, {"role": "assistant", "content": [{"type": "tool_use", "id": "a"}]})
    assert e.path == "$.content[0].type" and "--format anthropic" in e.message
    e = parse_error(
        OPENAI,
        {
            "role": "assistant",
            "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
    )
    assert e.path == "$.tool_calls[0].id" and "missing" in e.message
    e = parse_error(OPENAI, {"role": "user", "content": 3})
    assert e.path == "$.content" and "got number" in e.message
    e = parse_error(OPENAI, {"role": "wizard", "content": "x"})
    assert "unknown role 'wizard'" in e.message


def test_anthropic_line_errors() -> None:
    e = parse_error(
        ANTHROPIC,
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "n", "input": '{"a": 1}'}]},
    )
    assert e.path == "$.content[0].input" and "expected an object, got string" in e.message
    e = parse_error(ANTHROPIC, {"role": "user", "content": [{"type": "tool_result", "content": "x"}]})
    assert e.path == "$.content[0].tool_use_id" and e.message == "missing"
    e = parse_error(ANTHROPIC, {"role": "tool", "content": "x"})
    assert e.path == "$.role" and "tool_result blocks" in e.message
    e = parse_error(ANTHROPIC, {"role": "system", "content": [{"type": "image", "source": {}}]})
    assert e.path == "$.content[0].type" and "only text" in e.message
    e = parse_error(ANTHROPIC, {"role": "user", "content": None})
    assert e.path == "$.content" and "got null" in e.message


def test_openai_arguments_that_do_not_decode_are_kept() -> None:
    rec = OPENAI.parse_line(
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{not json"}}
            ],
        },
        0,
        1,
        None,
    )
    call = rec.message.tool_calls()[0]  # type: ignore[union-attr]
    assert call.arguments == "{not json" and call.input is None


# -- writing to another format ----------------------------------------------------------------------------


def test_openai_to_anthropic() -> None:
    t = read_transcript(DATA / "openai" / "agent_session.jsonl").transcript
    out = written(t, "anthropic")
    back = read_transcript(out, "anthropic").transcript
    assert len(back.records) == len(t.records)
    first_calls = back.records[2].message.tool_calls()  # type: ignore[union-attr]
    assert [(c.id, c.input) for c in first_calls] == [
        (c.id, c.input) for c in t.records[2].message.tool_calls()
    ]  # type: ignore[union-attr]
    res = back.records[3].message  # type: ignore[union-attr]
    assert res is not None and res.role is Role.USER and res.tool_results()[0].call_id == "call_9ZpLm"
    # the image becomes a base64 image block; unknown openai fields do not travel
    img = orjson.loads(out.splitlines()[7])["content"][1]
    assert img["type"] == "image" and img["source"]["media_type"] == "image/png"
    assert b"x_trace_id" not in out and b"prompt_tokens" not in out


def test_anthropic_to_openai_splits_results_into_tool_messages() -> None:
    t = read_transcript(DATA / "anthropic" / "agent_session.jsonl").transcript
    lines = [orjson.loads(x) for x in written(t, "openai").splitlines()]
    tools = [x for x in lines if x["role"] == "tool"]
    assert [x["tool_call_id"] for x in tools] == ["toolu_01A9s8d7f6g5h4j3k2l1", "toolu_01Z9x8c7v6b5n4m3q2w1"]
    assert tools[1]["content"] == [
        {"type": "text", "text": "FAILED tests/test_parse.py::test_dates - KeyError: 'tz'"}
    ]
    call = next(x for x in lines if x.get("tool_calls"))
    assert orjson.loads(call["tool_calls"][1]["function"]["arguments"]) == {
        "command": "pytest -x -q",
        "timeout": 120000,
    }
    back = read_transcript(written(t, "openai"), "openai")  # and it reads as valid openai
    assert back.transcript.format == "openai"


def test_records_without_a_message_are_dropped_when_converting() -> None:
    t = Transcript(
        "openai",
        [
            Record(
                0,
                1,
                b'{"role":"user","content":"a"}',
                {"role": "user", "content": "a"},
                Message(Role.USER, [TextBlock("a")], "user", content_was_string=True),
            ),
            Record(1, 2, b'{"progress":1}', {"progress": 1}),
        ],
    )
    assert written(t, "anthropic") == b'{"role":"user","content":"a"}\n'
    assert written(t) == b'{"role":"user","content":"a"}\n{"progress":1}\n'


def test_made_records_are_dumped_from_the_model() -> None:
    msg = OPENAI.make_message(Role.ASSISTANT, "Summary: ok")
    from ctxcompact.formats.base import new_record
    from ctxcompact.model import Origin

    rec = new_record(msg, Origin.SUMMARY)
    for fmt in ("openai", "anthropic"):
        t = Transcript(fmt, [rec])
        assert orjson.loads(written(t)) == {"role": "assistant", "content": "Summary: ok"}


def test_changed_block_is_written_from_the_model_keeping_unknown_keys() -> None:
    t = read_transcript(DATA / "anthropic" / "agent_session.jsonl").transcript
    rec = t.records[0]
    msg = rec.message
    assert msg is not None
    text = msg.blocks[0]
    assert isinstance(text, TextBlock)
    new_msg = dataclasses.replace(msg, blocks=[dataclasses.replace(text, text="Short system.")])
    t.records[0] = dataclasses.replace(rec, message=new_msg, dirty=True)
    first = orjson.loads(written(t).splitlines()[0])
    assert first == {
        "role": "system",
        "content": [{"type": "text", "text": "Short system.", "cache_control": {"type": "ephemeral"}}],
    }


# -- properties -------------------------------------------------------------------------------------------

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
ids = st.text("abcdefghijklmnop0123456789_", min_size=1, max_size=8)
json_obj = st.dictionaries(
    st.text("abcxyz", min_size=1, max_size=4),
    st.one_of(st.none(), st.booleans(), st.integers(-(10**6), 10**6), text),
    max_size=3,
)
extra_fields = st.dictionaries(st.sampled_from(["x_meta", "name_hint", "trace"]), text, max_size=2)


@st.composite
def openai_message(draw: st.DrawFn) -> dict[str, Any]:
    role = draw(st.sampled_from(["system", "developer", "user", "assistant", "tool"]))
    parts = st.lists(
        st.one_of(
            st.builds(lambda t: {"type": "text", "text": t}, text),
            st.builds(lambda u: {"type": "image_url", "image_url": {"url": u}}, text),
        ),
        max_size=3,
    )
    if role == "assistant":
        content = draw(st.one_of(text, parts, st.none()))
    elif role == "tool":  # an empty tool content is written as "" (the API needs content): not the same model
        content = draw(st.one_of(text, parts.filter(bool)))
    else:
        content = draw(st.one_of(text, parts))
    msg: dict[str, Any] = {"role": role, "content": content}
    if role == "tool":
        msg["tool_call_id"] = draw(ids)
    if role == "assistant" and draw(st.booleans()):
        msg["tool_calls"] = [
            {
                "id": i,
                "type": "function",
                "function": {"name": draw(ids), "arguments": orjson.dumps(draw(json_obj)).decode()},
            }
            for i in draw(st.lists(ids, min_size=1, max_size=3, unique=True))
        ]
    msg.update(draw(extra_fields))
    return msg


@st.composite
def anthropic_message(draw: st.DrawFn) -> dict[str, Any]:
    role = draw(st.sampled_from(["user", "assistant"]))
    simple = st.builds(lambda t: {"type": "text", "text": t}, text)
    if role == "assistant":
        block = st.one_of(
            simple,
            st.builds(
                lambda i, n, v: {"type": "tool_use", "id": i, "name": n, "input": v}, ids, ids, json_obj
            ),
            st.builds(lambda t, s: {"type": "thinking", "thinking": t, "signature": s}, text, ids),
        )
    else:
        block = st.one_of(
            simple,
            st.builds(
                lambda i, c, e: {"type": "tool_result", "tool_use_id": i, "content": c, "is_error": e},
                ids,
                st.one_of(text, st.lists(simple, max_size=2)),
                st.booleans(),
            ),
            st.builds(
                lambda d: {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": d},
                },
                ids,
            ),
        )
    content = draw(st.one_of(text, st.lists(block, max_size=4)))
    msg: dict[str, Any] = {"role": role, "content": content}
    msg.update(draw(extra_fields))
    return msg


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        openai_message().map(lambda m: ("openai", m)), anthropic_message().map(lambda m: ("anthropic", m))
    )
)
def test_parse_dump_parse_is_stable(case: tuple[str, dict[str, Any]]) -> None:
    name, obj = case
    fmt = get_format(name)
    rec = fmt.parse_line(obj, 0, 1, None)
    assert rec.message is not None
    dumped = fmt.dump_message(rec.message, rec)
    assert dumped == obj
    again = fmt.parse_line(orjson.loads(orjson.dumps(dumped)), 0, 1, None)
    assert again.message == rec.message
    # without the record as a template (a message made elsewhere) the model still survives
    fresh = fmt.dump_message(rec.message)
    assert fmt.parse_line(fresh, 0, 1, None).message == rec.message


def _style(obj: Any, spaced: bool) -> bytes:
    return (json.dumps(obj, ensure_ascii=False) if spaced else orjson.dumps(obj).decode()).encode()


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["openai", "anthropic"]).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(
                st.tuples(
                    openai_message() if n == "openai" else anthropic_message(),
                    st.booleans(),
                    st.sampled_from([b"\n", b"\r\n"]),
                    st.sampled_from([b"", b"\n", b"  \n"]),
                ),
                max_size=6,
            ),
        )
    )
)
def test_unmodified_transcript_writes_the_input_bytes(case: tuple[str, list[Any]]) -> None:
    """Output = input with blank lines removed, every line ending made LF (the definition of "same")."""
    name, rows = case
    data = b"".join(_style(o, spaced) + end + blank for o, spaced, end, blank in rows)
    expected = b"".join(_style(o, spaced) + b"\n" for o, spaced, _, _ in rows)
    t = read_transcript(data, name, schema=False).transcript
    assert written(t) == expected


def test_offsets_point_at_each_line_and_a_prefix_can_be_skipped() -> None:
    import io

    data = (
        b'\xef\xbb\xbf{"role":"user","content":"a"}\r\n\n'
        b'{"role":"assistant","content":"b"}\n{"role":"user","content":"c"}\n'
    )
    recs = read_transcript(data).transcript.records
    assert [r.line for r in recs] == [1, 3, 4]
    for r in recs:
        assert r.raw is not None and data[r.offset : r.offset + len(r.raw)] == r.raw
    # read only the part after the first two lines, as the pipeline does after a covered prefix
    prefix = data.index(b'{"role":"assistant"')
    stream = io.BytesIO(data)
    stream.seek(prefix)
    rest = read_transcript(
        stream, "openai", first_line=3, first_index=1, base_offset=prefix
    ).transcript.records
    assert [(r.line, r.index, r.offset) for r in rest] == [(r.line, r.index, r.offset) for r in recs[1:]]
