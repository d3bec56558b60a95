"""A transcript stored as one JSON document (issue 28): an ADK session export, a JSON array of records
(pretty-printed or not), a request body, is read as the JSONL of its records; a document that holds no
records ctxcompact can read (a Gemini CLI chat file, anything else spread over lines) is refused with one
line that says what it is, instead of an error per line. Real documents: tests/data/genai/SOURCES.md."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from helpers import SAMPLES
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcompact import api
from ctxcompact.cli import main
from ctxcompact.document import split_document
from ctxcompact.errors import InputError

GENAI = Path(__file__).parent / "data" / "genai"
NO_STATE = api.Options(exact="none", use_state=False)


def call(*argv: str) -> tuple[int, bytes, bytes]:
    runner = CliRunner()
    with runner.isolation() as (out, err, _):
        try:
            main(list(argv))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        return code, out.getvalue(), err.getvalue()


def estimate(path: Path) -> dict:
    return api.estimate(str(path), NO_STATE).to_json()


def jsonl_of(objs: list) -> bytes:
    return b"".join(orjson.dumps(o) + b"\n" for o in objs)


# ------------------------------------------------------------------------------------------ real documents


def test_the_adk_run_array_reads_as_its_jsonl() -> None:
    """`POST /run` prints the events as one JSON array (adk-docs, verbatim): the same transcript as the
    events one per line."""
    doc, lines = GENAI / "adk-docs-run.json", GENAI / "adk-docs-run.jsonl"
    assert estimate(doc) == estimate(lines)
    assert api.validate(str(doc)).ok
    code, out, err = call("validate", str(doc))
    assert code == 0 and b"valid: 3 records, format genai" in out and err == b""


def test_an_adk_session_export_reads_as_its_events(tmp_path: Path) -> None:
    doc = GENAI / "adk-docs-session-export.json"
    assert doc.read_bytes().count(b"\n") > 100  # pretty-printed: hundreds of per-line errors before
    events = json.loads(doc.read_bytes())["events"]
    as_lines = tmp_path / "events.jsonl"
    as_lines.write_bytes(jsonl_of(events))
    assert estimate(doc) == estimate(as_lines)
    report = estimate(doc)
    assert report["format"] == "genai" and report["records"] == 6 and report["tool_calls"] == 2
    out = tmp_path / "out.jsonl"
    code, stdout, stderr = call("run", str(doc), "--no-state", "--exact", "none", "-o", str(out), "--json")
    assert code == 0, stderr
    assert b"an ADK session export (6 events), one JSON document" in stderr
    assert out.read_bytes() == as_lines.read_bytes()  # below the threshold: the events, one per line
    assert orjson.loads(stdout)["records_in"] == 6


def test_a_grown_session_export_keeps_its_state(tmp_path: Path) -> None:
    """The JSONL of a document is deterministic: an export that grew by events has the earlier events as
    its prefix, so the state of the earlier run still matches (no exit 3)."""
    long = Path(__file__).parent / "data" / "synthetic" / "adk-long-events.jsonl"
    events = [orjson.loads(x) for x in long.read_bytes().splitlines() if x.strip()]
    session = {"id": "s_1", "appName": "app", "userId": "u", "state": {}, "lastUpdateTime": 1.0}
    doc = tmp_path / "session.json"
    doc.write_text(json.dumps({**session, "events": events[: len(events) // 2]}, indent=2))
    args = ["run", str(doc), "--exact", "none", "--window", "200000", "--threshold", "1%", "-o",
            str(tmp_path / "o.jsonl"), "--json", "-q"]
    code, stdout, stderr = call(*args)
    assert code == 0, stderr
    first = orjson.loads(stdout)
    assert first["decision"] == "summarize"
    doc.write_text(json.dumps({**session, "events": events}, indent=4))  # re-exported, grown, other indent
    code, stdout, stderr = call(*args)
    assert code == 0, stderr  # exit 3 if the state did not match the new export
    assert orjson.loads(stdout)["estimate"]["covered_by_summary"] == first["kept"]["summarized_records"] > 0


# ------------------------------------------------------------------------------------- other documents


def _openai_messages() -> list:
    lines = (SAMPLES / "openai-session.jsonl").read_bytes().splitlines()
    return [orjson.loads(x) for x in lines if x.strip()]


@pytest.mark.parametrize("indent", [None, 2, "\t"])
def test_a_json_array_of_messages_reads_as_jsonl(tmp_path: Path, indent: int | str | None) -> None:
    messages = _openai_messages()
    doc = tmp_path / "messages.json"
    doc.write_text(json.dumps(messages, indent=indent, ensure_ascii=False))
    assert estimate(doc) == estimate(SAMPLES / "openai-session.jsonl")


def test_a_document_with_a_bom_and_crlf(tmp_path: Path) -> None:
    doc = tmp_path / "messages.json"
    doc.write_bytes(b"\xef\xbb\xbf" + json.dumps(_openai_messages(), indent=2).replace("\n", "\r\n").encode())
    assert estimate(doc) == estimate(SAMPLES / "openai-session.jsonl")


def test_request_bodies(tmp_path: Path) -> None:
    messages = _openai_messages()
    body = tmp_path / "request.json"
    body.write_text(json.dumps({"model": "gpt-4o", "messages": messages, "temperature": 0}, indent=2))
    assert estimate(body) == estimate(SAMPLES / "openai-session.jsonl")
    # an Anthropic request: its top-level system prompt becomes the first record
    anthropic = tmp_path / "anthropic.json"
    anthropic.write_text(json.dumps({"model": "claude", "system": "You are terse.", "max_tokens": 10,
                                     "messages": [{"role": "user", "content": "hi"}]}, indent=2))
    records = api.load_transcript(str(anthropic)).records
    assert [r.message.role.value for r in records if r.message] == ["system", "user"]
    # on one line, {"messages": [...]} is a fine-tuning record: a JSONL line, refused as one (line 1)
    finetune = tmp_path / "finetune.jsonl"
    finetune.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    code, out, err = call("validate", str(finetune))
    assert code == 1 and b"line 1: $: this line holds a whole conversation" in out + err
    # a Gemini API request body: contents are Content lines
    gemini = tmp_path / "gemini.json"
    gemini.write_text(json.dumps({"contents": [{"role": "user", "parts": [{"text": "hi"}]},
                                               {"role": "model", "parts": [{"text": "hello"}]}]}, indent=2))
    report = estimate(gemini)
    assert report["format"] == "genai" and report["messages"] == {"assistant": 1, "user": 1}


def test_an_empty_array_is_an_empty_transcript(tmp_path: Path) -> None:
    doc = tmp_path / "empty.json"
    doc.write_text("[\n]\n")
    assert estimate(doc)["records"] == 0
    assert call("validate", str(doc))[0] == 0


# ------------------------------------------------------------------------------------------ refusals


def _one_line_refusal(path: Path, *needles: bytes) -> None:
    for command in (["validate"], ["estimate", "--no-state"], ["run", "--no-state", "-o",
                                                               str(path.with_suffix(".out"))]):
        code, out, err = call(*command, str(path))
        assert code == 1, (command, err)
        lines = err.decode().strip().splitlines() + out.decode().strip().splitlines()
        text = "\n".join(lines).encode()
        assert all(n in text for n in needles), (command, text)
        assert len([x for x in lines if "line " in x]) == 0  # no per-line errors
        assert len(lines) <= 2  # the refusal (validate: and its verdict)
    assert not path.with_suffix(".out").exists()


def test_a_gemini_cli_chat_file_is_refused_in_one_line(tmp_path: Path) -> None:
    # the shape Gemini CLI writes to ~/.gemini/tmp/<project>/chats/session-*.json (see the module docstring)
    chat = {"sessionId": "f86f5318-f47b-4433-85f8-ec9d9a417f8e", "projectHash": "79b6fa86",
            "startTime": "2025-10-18T14:57:28.974Z", "lastUpdated": "2025-10-18T14:58:07.161Z",
            "messages": [{"id": "1", "timestamp": "2025-10-18T14:57:28.974Z", "type": "user",
                          "content": "List the files"},
                         {"id": "2", "timestamp": "2025-10-18T14:57:30.000Z", "type": "gemini",
                          "content": "Here they are.", "toolCalls": [], "thoughts": [],
                          "tokens": {"input": 10, "output": 3, "cached": 0, "total": 13}}]}
    path = tmp_path / "session-2025-10-18T14-57-f86f5318.json"
    path.write_text(json.dumps(chat, indent=2))
    _one_line_refusal(path, b"a Gemini CLI chat file (2 messages", b"does not read the Gemini CLI format")


def test_another_pretty_object_is_refused_with_the_jq_that_helps(tmp_path: Path) -> None:
    path = tmp_path / "thing.json"
    path.write_text(json.dumps({"session": {"id": "x"}, "items": [{"type": "message"}]}, indent=2))
    _one_line_refusal(path, b"one JSON object over", b"keys: session, items", b"jq -c '.items[]'")
    single = tmp_path / "single.json"
    single.write_text(json.dumps({"role": "user", "content": "hi"}, indent=2))
    _one_line_refusal(single, b"jq -c . FILE")


def test_an_array_of_non_objects_names_the_item(tmp_path: Path) -> None:
    path = tmp_path / "strings.json"
    path.write_text(json.dumps([{"role": "user", "content": "hi"}, "oops"], indent=2))
    _one_line_refusal(path, b"a JSON array of 2 items, but item 2 is a string")


def test_broken_json_and_jsonl_are_read_line_by_line_as_before(tmp_path: Path) -> None:
    truncated = tmp_path / "truncated.json"
    truncated.write_text(json.dumps(_openai_messages(), indent=2)[:-20])
    code, out, err = call("validate", str(truncated))
    assert code == 1 and b"line 1: $:" in out + err and b"Traceback" not in out + err
    one = tmp_path / "one.jsonl"  # one JSONL line: a record, not a document
    one.write_bytes(b'{"role": "user", "content": "hi"}\n')
    assert split_document(one.read_bytes()) is None and estimate(one)["records"] == 1
    lines = (SAMPLES / "openai-long.jsonl").read_bytes()
    assert split_document(lines) is None
    assert split_document(b"") is None and split_document(b"  \n") is None


# ------------------------------------------------------------------------------------------ invariants

_JSON = st.recursive(st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(), inner, max_size=3),
                     max_leaves=10)


@settings(max_examples=200, deadline=None)
@given(items=st.lists(st.dictionaries(st.text(), _JSON, min_size=1, max_size=4), max_size=6),
       indent=st.sampled_from([None, 1, 2, 4]), key=st.sampled_from([None, "events", "contents", "history"]))
def test_a_document_splits_into_its_records_one_per_line(items: list, indent: int | None,
                                                          key: str | None) -> None:
    doc = items if key is None else {"id": "s", key: items}
    data = json.dumps(doc, indent=indent, ensure_ascii=False).encode()
    split = split_document(data)
    if key not in (None, "events") and b"\n" not in data:
        assert split is None  # one line of {"contents": [...]}: a fine-tuning record, JSONL
        return
    assert split is not None
    assert split.lines == jsonl_of(items)  # each record once, in order, compact: line N is record N
    assert [orjson.loads(x) for x in split.lines.splitlines()] == items


def test_refusals_are_input_errors() -> None:
    with pytest.raises(InputError, match="item 1 is a number"):
        split_document(b"[1,\n 2]")
    assert split_document(b"[1, 2]") is None  # one line: a JSONL line that is not an object (line 1: ...)
    with pytest.raises(InputError, match="one JSON object over 3 lines"):
        split_document(b'{\n"a": 1\n}')
